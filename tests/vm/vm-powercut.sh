#!/bin/bash
# vm-powercut.sh - host side of the cache power-cut test (CTest vm-powercut).
#
# usage: vm-powercut.sh IMAGE WORK PMC_VM_CACHE_BINARY
#
# Boot 1 (fresh disks): the guest creates the devdax namespace, formats a
# cache on /dev/dax0.0, writes N seeded blocks, prints PMC_WRITTEN and keeps
# overwriting them, printing PMC_ACK k as writes return. The host SIGKILLs
# qemu a random 0..MAX_DELAY ms after PMC_WRITTEN: a power cut while the
# program runs, with its cache never closed. The NVDIMM file keeps what
# reached it. Boot 2, same disks: the guest opens the cache, which must
# report a crash recovery, and checks that the blocks are exactly the state
# after some write at or past the last PMC_ACK the host saw.
#
# The seed is printed; PMC_VM_SEED=S replays one run (the kill instant
# still varies with timing). Env: PMC_VM_BLOCKS (N, default 4096),
# PMC_VM_MAX_DELAY_MS (default 4000).
# Exit: 0 pass, 1 fail, 77 qemu missing.
set -euo pipefail

[ $# -eq 3 ] || {
	echo "usage: vm-powercut.sh IMAGE WORK PMC_VM_CACHE_BINARY" >&2
	exit 2
}
IMAGE=$1 WORK=$2 BIN=$3
SRC=$(cd "$(dirname "$0")" && pwd)
SEED=${PMC_VM_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
N=${PMC_VM_BLOCKS:-4096}
MAX_DELAY=${PMC_VM_MAX_DELAY_MS:-4000}
echo "vm-powercut: seed $SEED (replay: PMC_VM_SEED=$SEED), $N blocks, kill 0..$MAX_DELAY ms after PMC_WRITTEN"

t0=$(date +%s.%N)
rc=0
"$SRC/run-guest.sh" -i "$IMAGE" -w "$WORK" -n write -f -b "$BIN" -k PMC_WRITTEN \
	-d "0:$MAX_DELAY" -r "$SEED" -t 600 -- sh t-cache-write.sh "$SEED" "$N" || rc=$?
[ $rc = 77 ] && exit 77
[ $rc = 0 ] || {
	echo "vm-powercut: FAIL: boot 1 did not end in the planned power cut"
	exit 1
}
if grep -q 'PMC_WRITER_ERROR\|^FAIL' "$WORK/write.log"; then
	echo "vm-powercut: FAIL: the writer reported an error before the cut:"
	grep 'PMC_WRITER_ERROR\|^FAIL' "$WORK/write.log"
	exit 1
fi
acked=$(sed -n 's/^PMC_ACK \([0-9][0-9]*\)\r*$/\1/p' "$WORK/write.log" | tail -n 1)
acked=${acked:--1}
echo "vm-powercut: last acknowledged overwrite seen by the host: $acked"
t1=$(date +%s.%N)

rc=0
"$SRC/run-guest.sh" -i "$IMAGE" -w "$WORK" -n verify -b "$BIN" -t 600 -- \
	sh t-cache-verify.sh "$SEED" "$N" "$acked" || rc=$?
t2=$(date +%s.%N)
awk "BEGIN { printf \"vm-powercut: boot 1 (write + power cut) %.1f s, boot 2 (verify) %.1f s\n\", $t1 - $t0, $t2 - $t1 }"
[ $rc = 0 ] || echo "vm-powercut: FAIL: verification after the power cut (seed $SEED)"
exit $rc
