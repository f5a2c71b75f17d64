#!/bin/bash
# vm-nvmf.sh - host side of CTest vm-nvmf: pmcached in front of an NVMe-oF
# namespace (nvmet over TCP on the guest's loopback).
#
# usage: vm-nvmf.sh IMAGE WORK PMCACHED PMCACHECTL PMC-VM-CACHE
# Boot 1 (fresh disks) runs t-nvmf.sh run: connect and fio verify, the
# target's port removed under load and restored, the controller lost past
# ctrl_loss_tmo and reconnected by pmcached, a SIGKILL with dirty data and
# the port away; then, with dirty data and the port away again, it prints
# PMC_CUTME and the host SIGKILLs qemu 0..1000 ms later. Boot 2 (same
# images) runs t-nvmf.sh verify: another namespace behind the NQN is
# refused; pmcached starts with the target's port removed and serves the
# volume from the pmem without its disk (hits, a failing miss, an absorbed
# write); "pmcachectl volume reconnect" with the other namespace back is
# refused at the rebind naming both identities, with the right one it
# connects through the target's discovery controller and swaps the
# namespace in: every acknowledged region reads back through the cache
# and, after a flush, from the namespace's own disk. Then a second
# subsystem whose namespace has no NGUID: the volume records its UUID; the
# namespace re-created at the same nsid (same serial, another UUID) is
# refused, given its old UUID it is accepted; a record by serial and nsid
# (an older pmcached's, written by pmc-vm-cache set-id) moves to the UUID.
# PMC_VM_SEED=S replays a seed.
set -euo pipefail
[ $# -eq 5 ] || { echo "usage: vm-nvmf.sh IMAGE WORK PMCACHED PMCACHECTL PMC-VM-CACHE" >&2; exit 2; }
IMAGE=$1 WORK=$2 BIN=$3 CTL=$4 VMCACHE=$5
SRC=$(cd "$(dirname "$0")" && pwd)
SEED=${PMC_VM_SEED:-$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')}
echo "vm-nvmf: seed $SEED"
t0=$(date +%s)
rc=0
"$SRC/run-guest.sh" -i "$IMAGE" -w "$WORK" -n run -f -b "$BIN" -b "$CTL" -k PMC_CUTME \
	-d "0:1000" -r "$SEED" -t 600 -- sh t-nvmf.sh run "$SEED" || rc=$?
[ $rc = 77 ] && exit 77
grep -E '^(OK|FAIL|note)' "$WORK/run.log" || true
[ $rc = 0 ] || { echo "vm-nvmf: FAIL: boot 1 did not end in the planned power cut"; exit 1; }
grep -q '^FAIL' "$WORK/run.log" && { echo "vm-nvmf: FAIL: before the power cut"; exit 1; }
acked=$(sed -n 's/^PMC_NVMF_ACKED \([0-9 ]*\)\r*$/\1/p' "$WORK/run.log" | tail -n 1)
[ -n "$acked" ] || { echo "vm-nvmf: FAIL: no PMC_NVMF_ACKED line"; exit 1; }
echo "vm-nvmf: regions acknowledged before the cut: $acked"
t1=$(date +%s)
rc=0
"$SRC/run-guest.sh" -i "$IMAGE" -w "$WORK" -n verify -b "$BIN" -b "$CTL" -b "$VMCACHE" -t 460 -- \
	sh t-nvmf.sh verify "$SEED" "$acked" || rc=$?
grep -E '^(OK|FAIL)' "$WORK/verify.log" || true
t2=$(date +%s)
echo "vm-nvmf: boot 1 $((t1 - t0)) s, boot 2 $((t2 - t1)) s"
[ $rc = 0 ] && echo "vm-nvmf: OK" || echo "vm-nvmf: FAIL (boot 2)"
exit $rc
