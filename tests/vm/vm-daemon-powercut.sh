#!/bin/bash
# vm-daemon-powercut.sh - host side of CTest vm-daemon-powercut: a power
# cut of the guest while pmcached serves file system writes and fio.
#
# usage: vm-daemon-powercut.sh IMAGE WORK PMCACHED
# Boot 1 (fresh disks) runs t-dcut.sh write: it prints PMC_CUTME once the
# file system holds synced files and fio chunks are being acknowledged
# (PMC_ACK i). The host SIGKILLs qemu 0..PMC_VM_MAX_DELAY_MS (3000) ms
# later. Boot 2 (same NVDIMM and NVMe images) runs t-dcut.sh verify with
# the last chunk the host saw acknowledged. PMC_VM_SEED=S replays a seed.
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: vm-daemon-powercut.sh IMAGE WORK PMCACHED" >&2; exit 2; }
IMAGE=$1 WORK=$2 BIN=$3
SRC=$(cd "$(dirname "$0")" && pwd)
SEED=${PMC_VM_SEED:-$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')}
MAX_DELAY=${PMC_VM_MAX_DELAY_MS:-3000}
echo "vm-daemon-powercut: seed $SEED, cut 0..$MAX_DELAY ms after PMC_CUTME"
rc=0
"$SRC/run-guest.sh" -i "$IMAGE" -w "$WORK" -n write -f -b "$BIN" -k PMC_CUTME \
	-d "0:$MAX_DELAY" -r "$SEED" -t 900 -- sh t-dcut.sh write "$SEED" || rc=$?
[ $rc = 77 ] && exit 77
[ $rc = 0 ] || { echo "vm-daemon-powercut: FAIL: boot 1 did not end in the planned power cut"; exit 1; }
grep -q '^FAIL' "$WORK/write.log" && {
	echo "vm-daemon-powercut: FAIL: before the cut:"
	grep '^FAIL' "$WORK/write.log"
	exit 1
}
acked=$(sed -n 's/^PMC_ACK \([0-9][0-9]*\)\r*$/\1/p' "$WORK/write.log" | tail -n 1)
acked=${acked:--1}
echo "vm-daemon-powercut: last chunk acknowledged before the cut: $acked"
# the guest asks for the cut only after chunk 2
[ "$acked" -ge 2 ] || { echo "vm-daemon-powercut: FAIL: no chunk 2 acknowledged before the cut"; exit 1; }
"$SRC/run-guest.sh" -i "$IMAGE" -w "$WORK" -n verify -b "$BIN" -t 900 -- \
	sh t-dcut.sh verify "$SEED" "$acked"
