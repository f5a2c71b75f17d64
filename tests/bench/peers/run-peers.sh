#!/bin/bash
# run-peers.sh - pmcache against dm-writecache, bcache and the raw NVMe disk,
# and against pmc-ublk-ceiling, a RAM-backed ublk target (the ceiling of the
# ublk transport), and the same target forwarding every request to the disk
# (ublkloop: the floor of any ublk server in front of it): one guest boot runs the same fio jobs and the replay job
# on each (tests/vm/guest/t-bench.sh), then the paired runs (the jobs of the
# goals with pmcache, the ceiling and dm-writecache live side by side, run
# in turn round by round), then report.py prints the tables, the ratios and
# the goals of the hit-path issue. See tests/bench/BENCHMARKS.md.
#
# usage: run-peers.sh [-B BUILD] [-o OUT] [--quick|--smoke]
#                     [--disk-delay-ms N [--delay-dev DEV [--delay-qd N]]]
#                     [--systems LIST] [--nvmf-tcp] [--replay-only] [--jobs LIST]
#                     [--pmcache-set KEY=VALUE,...] [--perf] [--replay-cache-mib N]
#                     [--no-plots] [--no-core]
#   -B BUILD    a configured and built build directory (default: build/bench);
#               the guest image is built into it if missing (vm-image)
#   -o OUT      where the results go (default: BUILD/bench-peers/full, quick or smoke,
#               with -delayN appended for --disk-delay-ms N): fio JSON per
#               system and job, env.txt, report.txt, PNG plots, core.txt
#               (pmcache-bench core)
#   --quick     half-size regions, a trace of 20000 requests over 400 MiB at
#               caches of 80 MiB: a shorter run for a loaded host
#   --smoke     1 s per job, small sizes, a small trace (the vm-bench-smoke
#               CTest, which also passes --disk-delay-ms 1)
#   --systems LIST
#               only these systems (comma-separated, pmcache among them; default
#               pmcache,ublkceiling,ublkloop,dmwritecache,bcache,rawnvme), for a shorter run
#   --disk-delay-ms N
#               a slow backing disk for every system: N ms per disk I/O (2: a
#               disk array or a network disk), made by the delay device. A
#               full run with it leaves out the ceiling (it has no disk)
#   --delay-dev dm-delay|nullblk
#               what makes the slow disk: dm-delay (default) over the NVMe
#               disk, whose kernel thread polls while any I/O waits below
#               50 ms and takes about half a vCPU from the systems under
#               test; nullblk (-nullblk appended to OUT) a memory-backed,
#               write-through null_blk device as large as the NVMe disk,
#               each request completed N ms after it came by a timer (the
#               guest then has 6 GiB of RAM to hold its data). See
#               tests/bench/BENCHMARKS.md, "Early morning of 2026-12-07"
#   --delay-qd N
#               with --delay-dev nullblk: at most N requests in flight per
#               hardware queue of the slow disk (two queues; default 1024,
#               as the NVMe disk takes; 8: an array that serves 16 I/Os at
#               once); -qdN appended to OUT
#   --nvmf-tcp  the backing disk is an NVMe/TCP namespace: the guest's nvmet
#               exports the NVMe disk on its loopback, pmcache names it by
#               subsystem NQN in its config, and rawnvme is the raw
#               namespace (-nvmf appended to OUT); with --systems
#               pmcache,rawnvme: what the cache gives in front of a network disk
#   --replay-only
#               the replay job only (-replay appended to OUT): a short run
#               to compare settings or builds under eviction pressure
#   --jobs LIST only these fio jobs (comma-separated names as in the table,
#               "flush" for the write-back test; -jobs appended to OUT), after
#               the warm-up and without the replay: a short run to compare
#               builds on a few jobs; the report then has only their rows
#   --pmcache-set KEY=VALUE,...
#               settings applied to pmcached (pmcachectl set) after each of
#               its set-ups: volume keys (admit_after_misses=2) to its
#               volume, dotted ones (writeback.busy_inflight=32) to the
#               daemon; VALUE is JSON ("4M" needs its quotes)
#   --perf      each replay pass runs under perf record in the guest (perf
#               from the host's linux-perf package; cpu-clock samples of all
#               CPUs, call graphs): flat profiles in OUT/SYSTEM/perf_passP.txt,
#               for pmcache also inclusive ones of its queue and write-back
#               threads (what each function costs with its callees). The pass
#               times then include perf's own cost (pass 1 its start-up too,
#               10-20 s under TCG): a run for profiles, not for times. With
#               --jobs, each of those jobs too (OUT/SYSTEM/perf_JOB.txt)
#   --replay-cache-mib N
#               the replay job's caches are N MiB instead of the mode's (224
#               full, 80 quick and smoke): how the gap moves with pressure
#   --no-plots  no gnuplot PNGs (the smoke run never plots)
#   --no-core   do not run pmcache-bench core on the host (the smoke run never does)
# Env: PMC_BENCH_RUNTIME seconds per timed job of a full run (default 20);
# PMC_BENCH_PMEM_MIB the NVDIMMs' size (default 512); PMC_VM_MEM_MIB the
# guest's RAM (default 2048, 6144 with --delay-dev nullblk).
# Exit: 0 when the guest ran every job and the report has the table and all
# headline ratios; 77 when qemu is missing; 1 otherwise.
set -euo pipefail
SRC=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$SRC/../../.." && pwd)
BUILD=$TOP/build/bench OUT= MODE=full PLOTS=1 CORE=1 DELAY=0 NVMF=0 JOBS=all SETS= PERF=0 RCMIB=
DELAYDEV= DELAYQD=
ALL=pmcache,ublkceiling,ublkloop,dmwritecache,bcache,rawnvme SYSTEMS=
while [ $# -gt 0 ]; do
	case $1 in
	-B) BUILD=$2; shift ;;
	-o) OUT=$2; shift ;;
	--smoke) MODE=smoke PLOTS=0 CORE=0 ;;
	--quick) MODE=quick ;;
	--disk-delay-ms)
		DELAY=${2:-}
		case $DELAY in '' | *[!0-9]*)
			echo "run-peers: --disk-delay-ms needs a whole number of ms, not '$DELAY'" >&2
			exit 1 ;;
		esac
		shift ;;
	--delay-dev)
		DELAYDEV=${2:-}
		case $DELAYDEV in dm-delay | nullblk) ;; *)
			echo "run-peers: --delay-dev dm-delay or nullblk, not '$DELAYDEV'" >&2
			exit 1 ;;
		esac
		shift ;;
	--delay-qd)
		DELAYQD=${2:-}
		case $DELAYQD in '' | *[!0-9]* | 0*)
			echo "run-peers: --delay-qd needs a whole number of requests, not '$DELAYQD'" >&2
			exit 1 ;;
		esac
		[ "$DELAYQD" -le 1024 ] || {
			echo "run-peers: --delay-qd $DELAYQD: null_blk takes at most 1024 per queue" >&2
			exit 1
		}
		shift ;;
	--systems)
		SYSTEMS=${2:-}
		for s in $(echo "$SYSTEMS" | tr ',' ' '); do
			case ,$ALL, in *,$s,*) ;; *)
				echo "run-peers: --systems: unknown system '$s' (of $ALL)" >&2
				exit 1 ;;
			esac
		done
		case ,$SYSTEMS, in *,pmcache,*) ;; *)
			echo "run-peers: --systems must include pmcache" >&2
			exit 1 ;;
		esac
		shift ;;
	--nvmf-tcp) NVMF=1 ;;
	--replay-only) JOBS=replay ;;
	--jobs)
		case ${2:-} in '' | *[!a-z0-9_,]*)
			echo "run-peers: --jobs needs JOB[,JOB...] (fio job names), not '${2:-}'" >&2
			exit 1 ;;
		esac
		JOBS=fio:$2
		shift ;;
	--replay-cache-mib)
		RCMIB=${2:-}
		case $RCMIB in '' | *[!0-9]* | 0*)
			echo "run-peers: --replay-cache-mib needs a whole number of MiB, not '$RCMIB'" >&2
			exit 1 ;;
		esac
		[ "$RCMIB" -le $((${PMC_BENCH_PMEM_MIB:-512} - 2)) ] || {
			echo "run-peers: --replay-cache-mib $RCMIB: the NVDIMMs have ${PMC_BENCH_PMEM_MIB:-512} MiB" >&2
			exit 1
		}
		shift ;;
	--perf)
		PERF=1
		command -v perf >/dev/null ||
			{ echo "run-peers: --perf needs perf (apt-get install linux-perf)" >&2; exit 1; } ;;
	--pmcache-set)
		SETS=${2:-}
		case $SETS in '' | *[!A-Za-z0-9_.,=\"-]*)
			echo "run-peers: --pmcache-set needs KEY=VALUE[,KEY=VALUE...], not '$SETS'" >&2
			exit 1 ;;
		esac
		shift ;;
	--no-plots) PLOTS=0 ;;
	--no-core) CORE=0 ;;
	*) echo "run-peers: unknown argument $1 (see the head of $0)" >&2; exit 1 ;;
	esac
	shift
done
if [ -n "$DELAYDEV" ] && [ "$DELAY" = 0 ]; then
	echo "run-peers: --delay-dev $DELAYDEV needs --disk-delay-ms N (N > 0): without a delay the disk is the NVMe disk" >&2
	exit 1
fi
if [ -n "$DELAYQD" ] && [ "${DELAYDEV:-dm-delay}" != nullblk ]; then
	echo "run-peers: --delay-qd needs --disk-delay-ms N and --delay-dev nullblk" >&2
	exit 1
fi
DELAYDEV=${DELAYDEV:-dm-delay}
# the null_blk disk (--delay-dev nullblk): 1, else 0
NULLBLK=0
[ "$DELAY" -gt 0 ] && [ $DELAYDEV = nullblk ] && NULLBLK=1
BUILD=$(cd "$BUILD" && pwd)
case ${PMC_BENCH_RUNTIME:-20} in '' | *[!0-9]* | 0)
	echo "run-peers: PMC_BENCH_RUNTIME must be a whole number of seconds, not '$PMC_BENCH_RUNTIME'" >&2
	exit 1 ;;
esac
RUN=$MODE
[ "$DELAY" -gt 0 ] && RUN=$MODE-delay$DELAY
[ $NULLBLK = 1 ] && RUN=$RUN-nullblk
[ -n "$DELAYQD" ] && RUN=$RUN-qd$DELAYQD
[ "$NVMF" = 1 ] && RUN=$RUN-nvmf
[ $JOBS = replay ] && RUN=$RUN-replay
ONLY= # --jobs: the fio jobs asked for
case $JOBS in fio:*) ONLY=${JOBS#fio:} RUN=$RUN-jobs ;; esac
OUT=${OUT:-$BUILD/bench-peers/$RUN}
IMAGE=$BUILD/tests/vm/guest
WORK=$BUILD/tests/vm/work/bench-$RUN
PMCACHED=$BUILD/daemon/pmcached
CTL=$BUILD/tests/vm/pmc-vm-ctl
CEIL=$BUILD/tests/bench/pmc-ublk-ceiling
TGEN=$BUILD/tests/bench/pmc-trace-gen
PCTL=$BUILD/cli/pmcachectl
BINS=(-b "$PMCACHED" -b "$CTL" -b "$CEIL" -b "$TGEN" -b "$PCTL")
[ $PERF = 1 ] && BINS+=(-b "$(command -v perf)")
for f in "$PMCACHED" "$CTL" "$CEIL" "$TGEN" "$PCTL"; do
	[ -x "$f" ] || { echo "run-peers: $f not built (cmake --build $BUILD)" >&2; exit 1; }
done
if ! command -v qemu-system-x86_64 >/dev/null; then
	echo "run-peers: SKIP: qemu-system-x86_64 not installed"
	exit 77
fi
[ -f "$IMAGE/initramfs.cpio" ] || bash "$TOP/tests/vm/build-guest.sh" "$IMAGE"

# both NVDIMMs the same size: devdax for pmcache, the pmem block device for the peers
export PMC_VM_PMEM_MIB=${PMC_BENCH_PMEM_MIB:-512} PMC_VM_PEER_PMEM_MIB=${PMC_BENCH_PMEM_MIB:-512}
# a disk of 3 GiB: the paired replay runs on thirds of it, each as large as
# the full trace's footprint (1000 MiB); the jobs use its first GiB
export PMC_VM_NVME_MIB=3072
# written whole on the host first: the host's first write into a hole of
# the sparse image allocates its blocks, which made the disk answer 1.5x
# slower in whichever replay pass first wrote a region (pmcache's pass 1,
# as pmcache replays first)
export PMC_VM_NVME_WRITTEN=1
# the null_blk disk keeps what is written to it in the guest's RAM: up to
# the 3 GiB of the disk beside the 2 GiB the guest has otherwise
[ $NULLBLK = 1 ] && export PMC_VM_MEM_MIB=${PMC_VM_MEM_MIB:-6144}
t0=$(date +%s)
DESC=$(git -C "$TOP" describe --always --dirty 2>/dev/null || echo unknown)
rc=0
# a private copy of the runner and the guest scripts: bash reads a script as
# it runs, so an edit of run-guest.sh during the long run would break it
RUNNER=$(mktemp -d)
cp "$TOP/tests/vm/run-guest.sh" "$RUNNER/"
cp -r "$TOP/tests/vm/guest" "$RUNNER/"
# how loaded the host was: its load average every 30 s during the guest run
(
	while :; do
		echo "$(date -u +%H:%M:%S) $(cut -d' ' -f1-3 /proc/loadavg)"
		sleep 30
	done
) >"$RUNNER/host-load.txt" &
LOADPID=$!
trap 'kill $LOADPID 2>/dev/null || true; rm -rf "$RUNNER"' EXIT
bash "$RUNNER/run-guest.sh" -i "$IMAGE" -w "$WORK" -n bench -f -t 5400 \
	"${BINS[@]}" -- sh t-bench.sh "$MODE" "$DELAY" "${PMC_BENCH_RUNTIME:-20}" \
	"${SYSTEMS:-$ALL}" "$NVMF" "$JOBS" "$SETS" "$PERF" "$RCMIB" "$DELAYDEV" "${DELAYQD:-1024}" || rc=$?
kill $LOADPID 2>/dev/null || true
[ $rc = 77 ] && exit 77
rm -rf "$OUT"
mkdir -p "$OUT"
cp -r "$WORK/share/out/bench/." "$OUT/" 2>/dev/null || true
{
	echo "host: $(nproc) cpus, source $DESC when the run started"
	echo "host load average (1, 5, 15 min) every 30 s during the guest run:"
	cat "$RUNNER/host-load.txt"
} >"$OUT/host-load.txt"
echo "run-peers: guest exit $rc after $(($(date +%s) - t0)) s; results in $OUT"
# what was measured is reported also when the guest run failed (a peer's
# failure, such as bcache's EIO over the delayed disk, loses no other
# system's figures); the run fails all the same
python3 "$SRC/report.py" "$OUT" | tee "$OUT/report.txt"
if [ $rc != 0 ]; then
	grep -h 'FAIL' "$WORK/bench.log" 2>/dev/null | head -n 5
	echo "run-peers: FAIL: the guest run failed"
	exit 1
fi
NEED="pmcache_vs_dmwritecache_randwrite_qd32 pmcache_vs_dmwritecache_randread_warm
	pmcache_vs_bcache_randread_warm pmcache_vs_rawnvme_randwrite_qd32
	pmcache_vs_ublkloop_randread_warm pmcache_vs_ublkloop_randwrite_qd32
	pmcache_vs_dmwritecache_randwrite_qd32_2j pmcache_vs_rawnvme_randread_warm_2j
	replay_pass1_s_pmcache replay_pass2_s_pmcache replay_pass1_s_dmwritecache
	replay_pass2_s_dmwritecache replay_pass1_s_bcache replay_pass2_s_bcache
	replay_pass1_s_rawnvme replay_pass2_s_rawnvme replay_read_hit_pct_pmcache
	replay_read_hit_pct_dmwritecache replay_read_hit_pct_bcache
	replay_pass1_s_ublkloop replay_pass2_s_ublkloop
	replay_pass1_vs_ublkloop_pmcache replay_pass2_vs_ublkloop_pmcache"
# every job and the replay against the ceiling where the guest ran it
# (t-bench.sh leaves it out of a delayed full run, and of a full run's
# replay), as env.txt says
CEIL= CEILJOBS=
case " $(sed -n 's/.* replay_systems="\([^"]*\)".*/\1/p' "$OUT/env.txt") " in
*" ublkceiling "*) CEIL="replay_pass1_s_ublkceiling replay_pass2_s_ublkceiling" ;;
esac
case " $(sed -n 's/^systems="\([^"]*\)".*/\1/p' "$OUT/env.txt") " in
*" ublkceiling "*) CEILJOBS=1 ;;
esac
# the paired replay's medians (t-bench.sh runs it after the replay, with
# pmcache and dm-writecache or the raw disk; not over NVMe/TCP)
PREP=
if [ $NVMF = 0 ]; then
	case ,${SYSTEMS:-$ALL}, in *,dmwritecache,* | *,rawnvme,*)
		PREP="replay_pass1_vs_dmwritecache_pmcache_paired replay_pass2_vs_dmwritecache_pmcache_paired
			replay_pass1_pmcache_over_rawnvme_paired replay_pass2_pmcache_over_rawnvme_paired
			replay_pass2_over_pass1_pmcache_paired" ;;
	esac
fi
NEED="$NEED $PREP"
if [ $JOBS = replay ]; then
	NEED="$(echo $NEED | tr ' ' '\n' | grep '^replay_') $CEIL"
elif [ -n "$ONLY" ]; then
	NEED= # only the jobs asked for: their rows, no headline figure asked
	for j in $(echo $ONLY | tr ',' ' '); do
		[ $j = flush ] || grep -Eq "^\| pmcache \| $j \| [0-9]" "$OUT/report.txt" ||
			{ echo "run-peers: FAIL: no figures of pmcache's job $j"; exit 1; }
	done
else
	# the paired runs' medians (t-bench.sh runs them after the jobs)
	NEED="$NEED pmcache_vs_dmwritecache_randread_warm_paired
		pmcache_vs_dmwritecache_randwrite_qd32_paired"
	[ -n "$CEILJOBS" ] &&
		NEED="$NEED $CEIL pmcache_vs_ublkceiling_randread_warm pmcache_vs_ublkceiling_randwrite_qd32
		pmcache_vs_ublkceiling_randwrite_qd1 pmcache_vs_ublkceiling_randread_warm_2j
		pmcache_vs_ublkceiling_randwrite_qd32_2j pmcache_vs_ublkceiling_randrw70
		pmcache_vs_ublkceiling_seqwrite_1m pmcache_vs_ublkceiling_randread_warm_paired
		pmcache_vs_ublkceiling_randwrite_qd32_paired pmcache_vs_ublkceiling_randwrite_qd1_paired"
fi
for r in $NEED; do
	# figures of systems left out by --systems
	case $r in *ublkceiling* | *ublkloop* | *dmwritecache* | *bcache* | *rawnvme*)
		s=$(echo "$r" | grep -Eo 'ublkceiling|ublkloop|dmwritecache|bcache|rawnvme')
		case ,${SYSTEMS:-$ALL}, in *,$s,*) ;; *) continue ;; esac ;;
	esac
	grep -Eq "^$r: [0-9.]+$" "$OUT/report.txt" || { echo "run-peers: FAIL: no figure $r"; exit 1; }
	# a cache that hit nothing on a trace with reuse did not cache (bcache
	# ran without its cache so until 2026-12-06)
	case $r in replay_read_hit_pct_*)
		grep -Eq "^$r: 0(\.0+)?$" "$OUT/report.txt" &&
			{ echo "run-peers: FAIL: $r is 0: that system cached nothing"; exit 1; } ;;
	esac
done
[ $JOBS != all ] || grep -q '^| pmcache .* randwrite_qd32 ' "$OUT/report.txt" ||
	{ echo "run-peers: FAIL: no table"; exit 1; }
[ -n "$ONLY" ] || grep -Eq '^\| pmcache \| pass 2 \| [0-9]' "$OUT/report.txt" ||
	{ echo "run-peers: FAIL: no replay table"; exit 1; }

if [ $PLOTS = 1 ]; then
	if command -v gnuplot >/dev/null; then
		bash "$SRC/plot.sh" "$OUT" && echo "run-peers: plots $OUT/iops.png $OUT/latency.png $OUT/replay.png"
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
echo "run-peers: OK ($RUN run, $(($(date +%s) - t0)) s)"
