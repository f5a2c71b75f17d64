#!/bin/bash
# run-peers.sh - pmcache against dm-writecache, bcache and the raw NVMe disk:
# one guest boot runs the same fio jobs on each (tests/vm/guest/t-bench.sh),
# then report.py prints the table and the ratios. See tests/bench/BENCHMARKS.md.
#
# usage: run-peers.sh [-B BUILD] [-o OUT] [--smoke] [--no-plots] [--no-core]
#   -B BUILD    a configured and built build directory (default: build/bench);
#               the guest image is built into it if missing (vm-image)
#   -o OUT      where the results go (default: BUILD/bench-peers/full or smoke):
#               fio JSON per system and job, env.txt, report.txt, PNG plots,
#               core.txt (pmcache-bench core)
#   --smoke     2 s per job, small sizes (the vm-bench-smoke CTest, < 3 min)
#   --no-plots  no gnuplot PNGs (the smoke run never plots)
#   --no-core   do not run pmcache-bench core on the host (the smoke run never does)
# Exit: 0 when the guest ran every job and the report has the table and all
# headline ratios; 77 when qemu is missing; 1 otherwise.
set -euo pipefail
SRC=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$SRC/../../.." && pwd)
BUILD=$TOP/build/bench OUT= MODE=full PLOTS=1 CORE=1
while [ $# -gt 0 ]; do
	case $1 in
	-B) BUILD=$2; shift ;;
	-o) OUT=$2; shift ;;
	--smoke) MODE=smoke PLOTS=0 CORE=0 ;;
	--no-plots) PLOTS=0 ;;
	--no-core) CORE=0 ;;
	*) echo "run-peers: unknown argument $1 (see the head of $0)" >&2; exit 1 ;;
	esac
	shift
done
BUILD=$(cd "$BUILD" && pwd)
OUT=${OUT:-$BUILD/bench-peers/$MODE}
IMAGE=$BUILD/tests/vm/guest
WORK=$BUILD/tests/vm/work/bench-$MODE
PMCACHED=$BUILD/daemon/pmcached
CTL=$BUILD/tests/vm/pmc-vm-ctl
for f in "$PMCACHED" "$CTL"; do
	[ -x "$f" ] || { echo "run-peers: $f not built (cmake --build $BUILD)" >&2; exit 1; }
done
if ! command -v qemu-system-x86_64 >/dev/null; then
	echo "run-peers: SKIP: qemu-system-x86_64 not installed"
	exit 77
fi
[ -f "$IMAGE/initramfs.cpio" ] || bash "$TOP/tests/vm/build-guest.sh" "$IMAGE"

# both NVDIMMs the same size: devdax for pmcache, the pmem block device for the peers
export PMC_VM_PMEM_MIB=${PMC_BENCH_PMEM_MIB:-512} PMC_VM_PEER_PMEM_MIB=${PMC_BENCH_PMEM_MIB:-512}
t0=$(date +%s)
rc=0
# a private copy of the runner and the guest scripts: bash reads a script as
# it runs, so an edit of run-guest.sh during the long run would break it
RUNNER=$(mktemp -d)
trap 'rm -rf "$RUNNER"' EXIT
cp "$TOP/tests/vm/run-guest.sh" "$RUNNER/"
cp -r "$TOP/tests/vm/guest" "$RUNNER/"
bash "$RUNNER/run-guest.sh" -i "$IMAGE" -w "$WORK" -n bench -f -t 1500 \
	-b "$PMCACHED" -b "$CTL" -- sh t-bench.sh "$MODE" || rc=$?
[ $rc = 77 ] && exit 77
rm -rf "$OUT"
mkdir -p "$OUT"
cp -r "$WORK/share/out/bench/." "$OUT/" 2>/dev/null || true
echo "run-peers: guest exit $rc after $(($(date +%s) - t0)) s; results in $OUT"
[ $rc = 0 ] || { echo "run-peers: FAIL: the guest run failed"; exit 1; }

python3 "$SRC/report.py" "$OUT" | tee "$OUT/report.txt"
for r in pmcache_vs_dmwritecache_randwrite_qd32 pmcache_vs_dmwritecache_randread_warm \
	pmcache_vs_bcache_randread_warm pmcache_vs_rawnvme_randwrite_qd32; do
	grep -Eq "^$r: [0-9.]+$" "$OUT/report.txt" || { echo "run-peers: FAIL: no ratio $r"; exit 1; }
done
grep -q '^| pmcache .* randwrite_qd32 ' "$OUT/report.txt" || { echo "run-peers: FAIL: no table"; exit 1; }

if [ $PLOTS = 1 ]; then
	if command -v gnuplot >/dev/null; then
		bash "$SRC/plot.sh" "$OUT" && echo "run-peers: plots $OUT/iops.png $OUT/latency.png"
	else
		echo "run-peers: gnuplot not installed (apt-get install gnuplot-nox): no plots"
	fi
fi
if [ $CORE = 1 ]; then
	B=$BUILD/tests/bench/pmcache-bench
	if [ -x "$B" ]; then
		echo "run-peers: host figures: $B core"
		"$B" core | tee "$OUT/core.txt"
	else
		echo "run-peers: $B not built: no host figures"
	fi
fi
echo "run-peers: OK ($MODE run, $(($(date +%s) - t0)) s)"
