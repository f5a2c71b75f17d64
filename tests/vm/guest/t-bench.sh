# t-bench.sh [full|quick|smoke] [DELAY_MS] [RUNTIME_S] [SYSTEMS_LIST] [NVMF] - guest: the same fio jobs on pmcache and
# its peers, one system after the other on the same NVMe disk (serial 1) and
# on pmem of the same size (run-peers.sh sets both NVDIMMs to the same size):
#   pmcache        /dev/ublkb0: pmcached over /dev/dax0.0, one write-back volume
#   ublkceiling    /dev/ublkb1: pmc-ublk-ceiling, a RAM-backed ublk target with
#                  pmcached's queue geometry: the ceiling of the ublk transport
#   ublkloop       /dev/ublkb2: pmc-ublk-ceiling -F, the same target forwarding
#                  every request to the disk (no cache): the floor of any ublk
#                  server in front of it, transport and disk together
#   dmwritecache   /dev/mapper/wc: dm-writecache, pmem mode, over the pmem block device
#   bcache         /dev/bcache0: bcache, writeback, the pmem block device as cache
#   rawnvme        the NVMe disk itself
# With DELAY_MS > 0 the disk under every system is a slow one, DELAY_MS per
# I/O, made by DELAY_DEV: dm-delay (the default) is dm-delay over the NVMe
# disk; below 50 ms its kernel thread polls while any I/O waits (Linux 6.8
# on), which takes about half a vCPU from the systems under test, as no
# disk array does. nullblk is a memory-backed null_blk device of the NVMe
# disk's size whose every request completes DELAY_MS after it came, on a
# timer, with no volatile write cache (as an array with a non-volatile
# one reports): no thread, nothing polled.
# A full run then leaves out ublkceiling (it has no disk).
# With NVMF=1 the disk is an NVMe/TCP namespace: the kernel's target
# (nvmet) exports the NVMe disk (or its dm-delay) on the guest's loopback,
# nvme-cli connects it, and every system uses the fabric namespace; pmcache
# names it in its config by subsystem NQN and nsid (disk = { transport =
# "tcp"; ... }), and rawnvme is the raw NVMe/TCP namespace.
# Jobs (4K unless said, io_uring, O_DIRECT, one job): warm-up (sequential
# write then read of the working set, not reported), randread_warm (QD32 on
# the working set), randread_warm_2j (the same with two jobs, one per CPU,
# so both queues are busy), randrw70 (70/30 mix, QD32, same set),
# randwrite_qd1, randwrite_qd32 (own region), randwrite_qd32_2j (two jobs),
# seqwrite_1m (1 MiB, QD4) and then the time to write back a fixed amount
# of dirty 4K random data (caches only).
# Then the replay job (caches, the raw disk, the loop and the ceiling): both NVDIMMs get a
# namespace of REPLAY_CACHE MiB, about a quarter of the footprint of the
# block trace pmc-trace-gen writes, and each system replays it twice with
# fio --read_iolog --replay_no_stall at QD32, from an empty cache, the
# second pass right after the first. Then the paired replay: pmcache,
# dm-writecache and the raw disk on thirds of the disk, the trace replayed
# twice on each in turn, in rounds (below).
# fio's JSON goes to /host/out/bench/SYSTEM/JOB.json, the flush time to
# /host/out/bench/SYSTEM/flush.txt, the replay's pass times and the
# systems' hit counters and the disks' block-layer counters before and
# after each pass to SYSTEM/replay*.txt;
# tests/bench/peers/report.py reads them.
. /host/lib.sh
PATH=/host/bin:$PATH
MODE=${1:-full}
DELAY=${2:-0}
# DELAY_DEV: what adds DELAY_MS to every disk I/O (above); DELAY_QD: the
# null_blk disk's requests in flight per hardware queue (one per vCPU).
# SLOW: the delay device in use, or none
DELAY_DEV=${10:-dm-delay}
DELAY_QD=${11:-1024}
SLOW=none
[ "$DELAY" -gt 0 ] && SLOW=$DELAY_DEV
OUT=/host/out/bench
SOCK=/tmp/pmcached.sock
# quick: half-size regions and a trace of 20000 requests over 400 MiB
# (267 MiB touched) at caches of 80 MiB, for a loaded host.
# RT/RAMP: seconds per timed job (RUNTIME_S, default 20, full and quick);
# WS/WW/SEQ/FL: region sizes (MiB);
# TRACE: pmc-trace-gen arguments; RC: the replay's cache size (MiB)
case $MODE in
full) RT=${3:-20} RAMP=2 WS=128 WW=128 SEQ=192 FL=64 TRACE= RC=224 ;;
quick) RT=${3:-20} RAMP=2 WS=64 WW=64 SEQ=96 FL=32 TRACE="-f 400 -n 20000" RC=80 ;;
smoke) RT=1 RAMP=0 WS=16 WW=16 SEQ=32 FL=8 TRACE="-f 256 -n 1500" RC=80 ;;
*) echo "t-bench: mode full, quick or smoke, not $MODE"; exit 2 ;;
esac
# regions of the disk (MiB): working set at 0, random writes at 256,
# sequential writes at 512, the flush test at 896 (the disk has 1024)
OFF_WW=256 OFF_SEQ=512 OFF_FL=896
# SYSTEMS_LIST (comma-separated, default all) picks systems; the replay
# runs on those of them that have a disk
SYSTEMS=$(echo "${4:-pmcache,ublkceiling,ublkloop,dmwritecache,bcache,rawnvme}" | tr ',' ' ')
# the replay runs on the ceiling too: a RAM disk behind the ublk
# transport, every request a hit, the floor of any ublk cache's time.
# Not in a full run: its trace touches 867 MiB, which the ceiling holds in
# the guest's 2 GiB of RAM, and the one full run that did so lost the raw
# disk's replay after it to a guest kernel crash (a double fault in
# kmalloc; the cause is not established)
REPLAY_SYSTEMS=$SYSTEMS
[ $MODE = full ] && REPLAY_SYSTEMS=$(echo $SYSTEMS | tr ' ' '\n' | grep -vx ublkceiling | tr '\n' ' ')
# a full run over a delayed disk leaves out the ceiling: it has no disk, so
# it measures the same as without the delay (the smoke run keeps it)
[ "$DELAY" -gt 0 ] && [ $MODE != smoke ] &&
	SYSTEMS=$(echo $SYSTEMS | tr ' ' '\n' | grep -vx ublkceiling | tr '\n' ' ')

# sysblk DEV: the sysfs directory of block device DEV (/dev/mapper names too)
sysblk() {
	echo /sys/dev/block/$((0x$(stat -L -c %t $1))):$((0x$(stat -L -c %T $1)))
}

mkdir -p $OUT
NVME=$(nvme_dev "$(nvme_serial 1)") || { bad "no NVMe disk $(nvme_serial 1)"; exit 1; }
D=$NVME
NULLB=/sys/kernel/config/nullb/slow
# slow_nullblk: D becomes a null_blk device as large as the NVMe disk, its
# data in the guest's RAM (allocated as written), every request completed
# DELAY ms after it came by a timer: no thread, no polling; write-through
# (flushes complete at once). Up to DELAY_QD requests in flight per queue
# (1024 by default: as many as the NVMe disk takes; fewer model an array's
# bounded parallelism), and requests as large as the NVMe disk takes. The
# kernel names the disk after the configfs directory (6.12: /dev/slow),
# older ones nullbINDEX.
slow_nullblk() {
	[ -d /sys/module/null_blk ] || insmod /lib/modules/null_blk.ko nr_devices=0 || return 1
	grep -q ' /sys/kernel/config ' /proc/mounts || mount -t configfs none /sys/kernel/config
	mkdir $NULLB &&
		echo $(($(blockdev --getsize64 $NVME) >> 20)) >$NULLB/size &&
		echo "$(blockdev --getss $NVME)" >$NULLB/blocksize &&
		echo 1 >$NULLB/memory_backed && echo 2 >$NULLB/irqmode &&
		echo $((DELAY * 1000000)) >$NULLB/completion_nsec &&
		echo $DELAY_QD >$NULLB/hw_queue_depth &&
		echo $(($(cat $(sysblk $NVME)/queue/max_sectors_kb) * 2)) >$NULLB/max_sectors &&
		echo 1 >$NULLB/power || return 1
	for _i in $(seq 1 50); do
		for D in /dev/$(basename $NULLB) /dev/nullb$(cat $NULLB/index); do
			[ -b $D ] && return 0
		done
		sleep 0.1
	done
	return 1
}
# DMDELAY_THREAD: /proc/PID of dm-delay's polling thread (cpu_snap), found
# once: the device keeps it for its life
DMDELAY_THREAD=
case $SLOW in
none) ;;
dm-delay)
	dmsetup create --noudevsync slow --table "0 $(blockdev --getsz $NVME) delay $NVME 0 $DELAY" ||
		{ bad "dm-delay over $NVME"; exit 1; }
	dmsetup mknodes slow
	D=/dev/mapper/slow
	dmsetup table slow
	for _p in /proc/[0-9]*; do
		read -r _c <$_p/comm 2>/dev/null || continue
		case $_c in dm-delay-flush*) DMDELAY_THREAD=$_p ;; esac
	done ;;
nullblk)
	slow_nullblk || { bad "null_blk of $DELAY ms as the disk"; exit 1; }
	echo "disk: $D, null_blk, $DELAY ms per request, $(cat $NULLB/size) MiB," \
		"$(cat $NULLB/hw_queue_depth) requests per queue" ;;
*) bad "t-bench: delay device dm-delay or nullblk, not $DELAY_DEV"; exit 2 ;;
esac
NVMF=${5:-0}
# JOBS: all, replay (the replay job only), or fio:JOB,JOB... (only those
# timed fio jobs, "flush" for the write-back test; the warm-up always; no
# replay); PMC_SETS: comma-separated
# KEY=JSON-VALUE settings pmcachectl-style applied to pmcache after each of
# its set-ups (volume keys to vol0, writeback.* and other dotted keys to
# the daemon), for runs that compare settings
JOBS=${6:-all}
PMC_SETS=${7:-}
# PERF=1: each replay pass runs under perf record (all CPUs, cpu-clock: TCG
# has no PMU, call graphs) when perf was handed in, its flat profile (and
# for pmcache the inclusive one of its queue and write-back threads) to
# SYSTEM/perf_passP.txt; in a run of a few fio jobs (fio:LIST) each of them
# too, to SYSTEM/perf_JOB.txt
PERF=${8:-0}
# REPLAY_MIB: the replay's cache size instead of the mode's (MiB, at most
# the NVDIMMs' size less 2 MiB of namespace alignment)
REPLAY_MIB=${9:-}
case $JOBS in all | replay | fio:?*) ;; *) bad "t-bench: jobs all, replay or fio:LIST, not $JOBS"; exit 2 ;; esac
case $JOBS in fio:*) REPLAY_SYSTEMS= ;; esac
# finish [WHY]: the disk's set-up undone, the guest's exit status
finish() {
	[ "$NVMF" = 1 ] && nvme disconnect -n $NQN >/dev/null
	if [ "$NVMF" != 1 ]; then
		case $SLOW in
		dm-delay) dmsetup remove slow ;;
		nullblk) echo 0 >$NULLB/power && rmdir $NULLB ;;
		esac
	fi
	echo "=== done${1:+, $1} ($(up) s)"
	exit $FAIL
}
# want_job NAME: NAME is among the jobs asked for
want_job() {
	case $JOBS in fio:*) case ,${JOBS#fio:}, in *,$1,*) return 0 ;; esac; return 1 ;; esac
	return 0
}
NQN=nqn.2026-12.org.pmcache:bench
if [ "$NVMF" = 1 ]; then
	CFS=/sys/kernel/config/nvmet
	grep -q ' /sys/kernel/config ' /proc/mounts || mount -t configfs none /sys/kernel/config
	ip link set lo up
	mkdir -p $CFS/subsystems/$NQN/namespaces/1 $CFS/ports/1 &&
		echo 1 >$CFS/subsystems/$NQN/attr_allow_any_host &&
		echo "$D" >$CFS/subsystems/$NQN/namespaces/1/device_path &&
		echo 1 >$CFS/subsystems/$NQN/namespaces/1/enable &&
		echo tcp >$CFS/ports/1/addr_trtype && echo ipv4 >$CFS/ports/1/addr_adrfam &&
		echo 127.0.0.1 >$CFS/ports/1/addr_traddr && echo 4420 >$CFS/ports/1/addr_trsvcid &&
		ln -s $CFS/subsystems/$NQN $CFS/ports/1/subsystems/$NQN ||
		{ bad "nvmet tcp target over $D"; exit 1; }
	# the image has /etc/nvme/hostnqn but no hostid: give the NQN's UUID, or
	# the kernel pairs the NQN with its default host's id and refuses
	nvme connect -t tcp -a 127.0.0.1 -s 4420 -n $NQN -I "$(sed 's/.*:uuid://' /etc/nvme/hostnqn)" \
		>/dev/null || { bad "nvme connect"; exit 1; }
	for _i in $(seq 1 100); do
		for _n in /sys/class/nvme-subsystem/*/nvme*n1; do
			[ -e "$_n" ] && grep -qx $NQN "$(dirname "$_n")/subsysnqn" && NVMF_DEV=/dev/$(basename "$_n")
		done
		[ -b "${NVMF_DEV:-/nonexistent}" ] && break
		sleep 0.1
	done
	[ -b "${NVMF_DEV:-/nonexistent}" ] || { bad "no NVMe/TCP namespace"; exit 1; }
	echo "NVMe/TCP: $D exported as $NQN on 127.0.0.1:4420, connected as $NVMF_DEV"
	D=$NVMF_DEV
fi
DAX=$(setup_devdax) || { bad "devdax: $DAX"; exit 1; }

# the peers' pmem block device: the NVDIMM region of the peer size that does
# not hold the devdax namespace (both NVDIMMs have the same size here, so
# lib.sh's setup_peer_pmem, which picks the first region of that size, would
# reset the devdax one)
DAXREG=$(readlink -f /sys/bus/dax/devices/dax0.0 | tr / '\n' | grep '^region' | head -n 1)
PREG=
for _r in /sys/bus/nd/devices/region*; do
	[ "$(cat $_r/size)" = "$PMC_VM_PEER_PMEM_BYTES" ] || continue
	[ "$(basename $_r)" = "$DAXREG" ] && continue
	PREG=$(basename $_r)
	break
done
[ -n "$PREG" ] || { bad "no second NVDIMM region of $PMC_VM_PEER_PMEM_BYTES bytes (devdax on $DAXREG)"; exit 1; }
region_reset "$PREG" && ndctl create-namespace -r "$PREG" --mode=fsdax --map=mem >/dev/null ||
	{ bad "fsdax namespace on $PREG"; exit 1; }
PMEM=/dev/$(basename "$(ls -d /sys/bus/nd/devices/pfn*/block/pmem* 2>/dev/null | head -n 1)")
[ -b "$PMEM" ] || PMEM=/dev/pmem${PREG#region}
[ -b "$PMEM" ] || { bad "no pmem block device on $PREG"; exit 1; }

{
	echo "mode=$MODE runtime_s=$RT ramp_s=$RAMP working_set_mib=$WS randwrite_region_mib=$WW seq_region_mib=$SEQ flush_mib=$FL"
	echo "kernel=$(uname -r) cpus=$(grep -c ^processor /proc/cpuinfo) mem_kib=$(awk '/MemTotal/ {print $2}' /proc/meminfo)"
	echo "fio=$(fio --version)"
	# the emulated CPU, and whether every syscall switches page tables
	# (PTI), which costs a TCG guest its software TLB each time
	echo "cpu_model=\"$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)\"" \
		"meltdown=\"$(cat /sys/devices/system/cpu/vulnerabilities/meltdown 2>/dev/null)\""
	echo "nvme=$NVME bytes=$(blockdev --getsize64 $NVME) disk=$D disk_delay_ms=$DELAY delay_dev=$SLOW$([ $SLOW = nullblk ] && echo " delay_qd=$DELAY_QD") nvmf_tcp=$NVMF"
	echo "disk_write_cache=\"$(cat $(sysblk $D)/queue/write_cache 2>/dev/null)\""
	# what one I/O may carry for the kernel to issue it whole
	echo "disk_max_sectors_kb=$(cat $(sysblk $D)/queue/max_sectors_kb 2>/dev/null)" \
		"disk_max_segments=$(cat $(sysblk $D)/queue/max_segments 2>/dev/null)"
	# what run-peers.sh expects figures of
	echo "systems=\"$(echo $SYSTEMS)\" replay_systems=\"$(echo $REPLAY_SYSTEMS)\""
	echo "devdax=$DAX region=$DAXREG bytes=$PMC_VM_PMEM_BYTES"
	echo "peer_pmem=$PMEM region=$PREG bytes=$(blockdev --getsize64 $PMEM)"
} | tee $OUT/env.txt

# perf_cmd: the perf record prefix of a profiled run (PERF=1), or nothing
perf_cmd() {
	[ "$PERF" = 1 ] && command -v perf >/dev/null &&
		echo "perf record -q -a -g -e cpu-clock -F 500 -o /tmp/perf.data --"
}
# perf_report SYSTEM: the profiles of /tmp/perf.data (then removed)
perf_report() {
	_r="perf report -i /tmp/perf.data --stdio --no-children"
	# flat lists: the data has call graphs (-g), these ask for none
	echo "--- by command"
	$_r --sort comm -g none 2>/dev/null | grep -v '^#' | grep . | head -n 12
	echo "--- by command and object"
	$_r --sort comm,dso -g none 2>/dev/null | grep -v '^#' | grep . | head -n 20
	if [ $1 = pmcache ]; then
		# inclusive: what each function costs with its callees
		echo "--- inclusive, pmcached's queue threads"
		$_r --children --comm ublk0-q0,ublk0-q1 --sort sym -g none 2>/dev/null |
			grep -v '^#' | grep . | head -n 120
		echo "--- inclusive, pmcached's write-back thread"
		$_r --children --comm pmc-writeback --sort sym -g none 2>/dev/null |
			grep -v '^#' | grep . | head -n 60
	fi
	echo "--- by command, object and symbol"
	$_r --sort comm,dso,sym -g none 2>/dev/null | grep -v '^#' | grep . | head -n 300
	rm -f /tmp/perf.data
}
# fio_job SYS NAME ARGS...: one fio run, JSON into OUT/SYS/NAME.json
fio_job() {
	_s=$1 _n=$2 _fperf=
	shift 2
	# the warm-up and the flush test's fill always run; a job of a run of
	# a few (fio:LIST) is profiled too (a full run's jobs are timed, and
	# perf's cost would be in their figures)
	case $_n in
	warm_* | flush_fill | paired_*) ;;
	*)
		want_job $_n || return 0
		case $JOBS in fio:*) _fperf=$(perf_cmd) ;; esac ;;
	esac
	echo "--- $_s $_n: $*"
	$_fperf fio --name="$_n" --filename="$DEV" --ioengine=io_uring --direct=1 --numjobs=1 \
		--lat_percentiles=1 --percentile_list=50:99:99.9 --output-format=json \
		--output="$OUT/$_s/$_n.json" "$@" >/dev/null 2>$OUT/$_s/$_n.err ||
		{ bad "$_s $_n: fio failed: $(tail -n 3 $OUT/$_s/$_n.err)"; return 1; }
	awk -F: '/"iops"/ { gsub(/[ ,]/, "", $2); if ($2 + 0 > 0) printf "    iops %s\n", $2 }' \
		"$OUT/$_s/$_n.json" | head -n 2
	[ -z "$_fperf" ] || perf_report $_s >$OUT/$_s/perf_$_n.txt
}
timed() { # ARGS: fio time-based arguments
	echo --time_based --runtime=$RT --ramp_time=$RAMP
}
# job_args JOB: the fio arguments of a job of the goals, not its timing
job_args() {
	case $1 in
	randread_warm) echo --rw=randread --bs=4k --iodepth=32 --offset=0 --size=${WS}M ;;
	randwrite_qd1) echo --rw=randwrite --bs=4k --iodepth=1 --offset=${OFF_WW}M --size=${WW}M ;;
	randwrite_qd32) echo --rw=randwrite --bs=4k --iodepth=32 --offset=${OFF_WW}M --size=${WW}M ;;
	esac
}
# two jobs, one per CPU (blk-mq maps each CPU to its own ublk queue), one report
two_jobs() {
	echo --numjobs=2 --group_reporting --cpus_allowed=0-1 --cpus_allowed_policy=split
}

# ctl_set KEY JSON-VALUE: set a setting of pmcache's volume vol0, or of the
# daemon for a dotted key (writeback.busy_inflight)
ctl_set() {
	case $1 in
	*.*) _vol= ;;
	*) _vol="\"volume\":\"vol0\"," ;;
	esac
	pmc-vm-ctl $SOCK "{\"cmd\":\"set\",$_vol\"key\":\"$1\",\"value\":$2}" |
		tail -n 1 | grep -q '"ok":true'
}

# pmc_sets: PMC_SETS applied to the running pmcached
pmc_sets() {
	for _kv in $(echo "$PMC_SETS" | tr ',' ' '); do
		ctl_set "${_kv%%=*}" "${_kv#*=}" || { bad "pmcache: set $_kv refused"; return 1; }
		echo "pmcache: set $_kv"
	done
}

# flush_all SYS: write back everything that is dirty and wait for it
flush_all() {
	case $1 in
	pmcache) pmc-vm-ctl $SOCK '{"cmd":"flush"}' | tail -n 1 | grep -q '"ok":true' ;;
	dmwritecache)
		dmsetup message wc 0 flush || return 1
		# the message returns once write-back was issued; wait for it to end
		for _i in $(seq 1 6000); do
			set -- $(dmsetup status wc)
			# 0 SECTORS writecache ERR TOTAL FREE WRITEBACK ...
			[ "$7" = 0 ] && [ "$5" = "$6" ] && return 0
			sleep 0.05
		done
		return 1 ;;
	bcache)
		echo 0 >$BC/writeback_percent
		for _i in $(seq 1 12000); do
			case $(cat $BC/dirty_data) in 0 | 0.0k | 0k | 0.0 | 0.0M) break ;; esac
			sleep 0.05
		done
		_dd=$(cat $BC/dirty_data)
		echo 10 >$BC/writeback_percent
		case $_dd in 0 | 0.0k | 0k | 0.0 | 0.0M) return 0 ;; esac
		return 1 ;;
	esac
}
dirty_of() {
	case $1 in
	pmcache) pmc-vm-ctl $SOCK '{"cmd":"stats"}' | tail -n 1 | tr ',' '\n' | grep -i dirty | head -n 3 | tr '\n' ' ' ;;
	dmwritecache) echo "status $(dmsetup status wc)" ;;
	bcache) echo "dirty_data $(cat $BC/dirty_data)" ;;
	esac
}

# ublk_tool SYS ID ARGS...: pmc-ublk-ceiling ARGS as /dev/ublkbID, PID and
# DEV set once it is ready and serves data
ublk_tool() {
	_sys=$1 _log=$OUT/$1/ceiling.log _id=$2
	shift 2
	# emptied here, not only by the redirection below: the loop could
	# otherwise read the "ready:" of an earlier set-up (the replay's)
	# before the new process truncates the file
	: >$_log
	pmc-ublk-ceiling -d $_id "$@" >>$_log 2>&1 &
	PID=$!
	for _i in $(seq 1 300); do
		grep -q "^ready:" $_log && break
		kill -0 $PID 2>/dev/null || break
		sleep 0.1
	done
	grep "^ready:" $_log || { cat $_log; return 1; }
	DEV=/dev/ublkb$_id
	# it serves data: 4 MiB written at 900 MiB read back equal
	dd if=/dev/urandom of=/tmp/pat bs=1M count=4 2>/dev/null
	dd if=/tmp/pat of=$DEV bs=1M seek=900 oflag=direct 2>/dev/null &&
		dd if=$DEV of=/tmp/back bs=1M skip=900 count=4 iflag=direct 2>/dev/null &&
		cmp /tmp/pat /tmp/back || { bad "$_sys: read-back mismatch"; return 1; }
}

setup() {
	case $1 in
	pmcache)
		DISK="\"$D\""
		[ "$NVMF" = 1 ] && DISK="{ transport = \"tcp\"; traddr = \"127.0.0.1\"; subsysnqn = \"$NQN\"; nsid = 1; }"
		cat >/tmp/pmcached.conf <<EOC
pmem = { path = "$DAX"; };
state_dir = "/tmp/pmcache-state";
control = { socket = "$SOCK"; };
volumes = ( { name = "vol0"; disk = $DISK; mode = "write-back"; ublk_id = 0; } );
EOC
		pmcached_start /tmp/pmcached.conf $OUT/pmcache/pmcached.log || return 1
		pmc_sets || return 1
		DEV=/dev/ublkb0 ;;
	ublkceiling) ublk_tool ublkceiling 1 -s $(($(blockdev --getsize64 $D) >> 20)) ;;
	ublkloop) ublk_tool ublkloop 2 -F $D ;;
	dmwritecache)
		wipe "$PMEM"
		dmsetup create --noudevsync wc --table "0 $(blockdev --getsz $D) writecache p $D $PMEM 4096 0" ||
			return 1
		dmsetup mknodes wc
		dmsetup table wc
		DEV=/dev/mapper/wc ;;
	bcache)
		wipe "$PMEM"
		wipe "$D"
		# bcache refuses a cache device of 512 buckets or fewer (the
		# kernel logs "nbuckets is too small") and then serves the disk
		# alone as /dev/bcache0, caching nothing; with fewer than 1024
		# its allocator keeps a single free bucket in reserve. So buckets
		# of at most 1/1024 of the cache: 256 KiB on the jobs' 510 MiB
		# (the default 512 KiB before 2026-12-06), 128 KiB on the full
		# replay's 224 MiB, 64 KiB on the quick one's 80 MiB
		_bk=512
		while [ $_bk -gt 4 ] && [ $((_bk * 1024 * 1024)) -gt "$(blockdev --getsize64 $PMEM)" ]; do
			_bk=$((_bk / 2))
		done
		make-bcache --bucket ${_bk}k -C "$PMEM" -B "$D" --writeback >/tmp/mb.out 2>&1 ||
			{ cat /tmp/mb.out; return 1; }
		echo "$PMEM" >/sys/fs/bcache/register ||
			{ bad "bcache: $PMEM refused as a cache ($(dmesg | grep 'bcache:.*error' | tail -n 1))"; return 1; }
		echo "$D" >/sys/fs/bcache/register || { bad "bcache: $D refused as a backing device"; return 1; }
		for _i in $(seq 1 100); do [ -b /dev/bcache0 ] && break; sleep 0.1; done
		[ -b /dev/bcache0 ] || return 1
		BC=/sys/block/bcache0/bcache
		# attached to the cache set, or every request goes to the disk
		for _i in $(seq 1 100); do [ -e $BC/cache ] && break; sleep 0.1; done
		[ -e $BC/cache ] || { bad "bcache: /dev/bcache0 has no cache ($(cat $BC/state))"; return 1; }
		echo "bcache: buckets of $_bk KiB, $(cat $BC/state)"
		CSET=$(ls -d /sys/fs/bcache/*-*-*-*-* | head -n 1)
		# under TCG bcache thinks it is congested and bypasses itself;
		# sequential I/O would bypass it too
		echo 0 >$BC/sequential_cutoff
		echo 0 >$CSET/congested_read_threshold_us
		echo 0 >$CSET/congested_write_threshold_us
		grep -q '\[writeback\]' $BC/cache_mode || return 1
		DEV=/dev/bcache0 ;;
	rawnvme) DEV=$D ;;
	esac
}

teardown() {
	case $1 in
	pmcache | ublkceiling | ublkloop)
		kill -TERM $PID
		for _i in $(seq 1 600); do kill -0 $PID 2>/dev/null || break; sleep 0.2; done
		wait $PID || bad "$1: exit $? after SIGTERM" ;;
	dmwritecache) dmsetup remove wc ;;
	bcache)
		echo 1 >$BC/stop
		echo 1 >$CSET/stop
		for _i in $(seq 1 100); do
			[ -b /dev/bcache0 ] || [ -d "$CSET" ] || break
			sleep 0.1
		done
		sleep 0.5 ;;
	esac
	wipe "$D"
}

[ $JOBS = replay ] && SYSTEMS=
# warm_up SYS NAME: the working set written, then read once, as fio jobs
# NAME_write and NAME_read. Sequential, so pmcache's sequential cutoff is
# off for it (as bcache's is for the whole run), or the warm-up would go
# around the cache and the "warm" jobs would measure misses; the jobs after
# it run with the default
warm_up() {
	[ $1 = pmcache ] && { ctl_set seq_cutoff 0 || bad "pmcache: seq_cutoff 0"; }
	fio_job $1 ${2}_write --rw=write --bs=1M --iodepth=8 --offset=0 --size=${WS}M
	fio_job $1 ${2}_read --rw=read --bs=1M --iodepth=8 --offset=0 --size=${WS}M
	[ $1 = pmcache ] && { ctl_set seq_cutoff '"4M"' || bad "pmcache: seq_cutoff 4M"; }
}

for S in $SYSTEMS; do
	echo "=== $S ($(up) s)"
	mkdir -p $OUT/$S
	setup $S || { bad "$S: setup failed"; dmesg | tail -n 5; continue; }
	ok "$S: $DEV ($(blockdev --getsize64 $DEV) bytes)"
	warm_up $S warm
	fio_job $S randread_warm $(job_args randread_warm) $(timed)
	fio_job $S randread_warm_2j --rw=randread --bs=4k --iodepth=32 --offset=0 --size=${WS}M \
		$(timed) $(two_jobs)
	fio_job $S randrw70 --rw=randrw --rwmixread=70 --bs=4k --iodepth=32 --offset=0 --size=${WS}M $(timed)
	fio_job $S randwrite_qd1 $(job_args randwrite_qd1) $(timed)
	fio_job $S randwrite_qd32 $(job_args randwrite_qd32) $(timed)
	fio_job $S randwrite_qd32_2j --rw=randwrite --bs=4k --iodepth=32 --offset=${OFF_WW}M \
		--size=${WW}M $(timed) $(two_jobs)
	fio_job $S seqwrite_1m --rw=write --bs=1M --iodepth=4 --offset=${OFF_SEQ}M --size=${SEQ}M $(timed)
	[ $S = pmcache ] && pmc-vm-ctl $SOCK '{"cmd":"stats"}' >$OUT/pmcache/stats.json
	case $S in rawnvme | ublkceiling | ublkloop) _cache= ;; *) _cache=1 ;; esac
	if [ -n "$_cache" ] && want_job flush; then
		# write-back of FL MiB of dirty 4K blocks, each written once.
		# bcache's writeback thread pauses writeback_delay (30 s) after each
		# pass over its index, and a flush would mostly measure that pause
		[ $S = bcache ] && echo 0 >$BC/writeback_delay
		flush_all $S || bad "$S: flush before the flush test failed"
		fio_job $S flush_fill --rw=randwrite --bs=4k --iodepth=32 --offset=${OFF_FL}M --size=${FL}M
		echo "dirty before the flush: $(dirty_of $S)"
		t0=$(up)
		if flush_all $S; then
			t1=$(up)
			echo "flush_mib=$FL flush_s=$(awk "BEGIN { printf \"%.2f\", $t1 - $t0 }")" | tee $OUT/$S/flush.txt
		else
			bad "$S: flush failed"
		fi
		echo "dirty after the flush: $(dirty_of $S)"
	fi
	teardown $S
done

# --- paired runs of the jobs of the goals: pmcache, the ceiling and
# dm-writecache live side by side, each round running the job once on each
# in turn (the order rotating), so that neighbouring runs share the host's
# state. The runs above give each system a stretch of its own, minutes
# apart, and a TCG guest's speed drifts over minutes by more than the
# goals' margins (one job's IOPS moved 10-40 % between boots of the same
# build); report.py prints each round's ratios and their median
# (pmcache_vs_PEER_JOB_paired). The disk is split in two halves (dm-linear)
# for pmcache and dm-writecache; the ceiling has no disk. Write jobs are
# followed by a flush, outside the timing, so that no write-back runs
# behind another system's job.
# among LIST SET: the systems of LIST that SET names, in LIST's order
among() {
	_l=
	for _s in $1; do
		case " $2 " in *" $_s "*) _l="$_l $_s" ;; esac
	done
	echo "$_l"
}
# part_disk SYS NAME OTHER: the disk SYS runs over when systems share the
# disk: the dm-linear part NAME0 for pmcache, NAME1 for dm-writecache,
# OTHER for the others
part_disk() {
	case $1 in
	pmcache) echo /dev/mapper/${2}0 ;;
	dmwritecache) echo /dev/mapper/${2}1 ;;
	*) echo $3 ;;
	esac
}
# rotate WORD...: the words, the first one last
rotate() {
	_first=$1
	shift
	echo "$* $_first"
}
PAIR_SYS=$(among "pmcache ublkceiling dmwritecache" "$SYSTEMS")
case $MODE in full) ROUNDS=4 ;; quick) ROUNDS=3 ;; *) ROUNDS=1 ;; esac
RTP=$((RT / 4))
[ $RTP -lt 1 ] && RTP=1
# pair_disk SYS: the disk SYS runs over in the paired runs
pair_disk() {
	part_disk $1 half $DISK0
}
paired() {
	DISK0=$D
	# pmcache's cache remembers vol0 over the whole disk and refuses the
	# half (a disk of another size): a new cache
	pmcachectl format "$DAX" --force || { bad "paired: pmcachectl format $DAX"; return 1; }
	rm -rf /tmp/pmcache-state
	_h=$(($(blockdev --getsz $D) / 2 / 8 * 8))
	dmsetup create --noudevsync half0 --table "0 $_h linear $D 0" &&
		dmsetup create --noudevsync half1 --table "0 $_h linear $D $_h" ||
		{ bad "paired: dm-linear halves of $D"; return 1; }
	dmsetup mknodes half0
	dmsetup mknodes half1
	_live=
	for S in $PAIR_SYS; do
		D=$(pair_disk $S) PID=
		setup $S || { bad "paired: $S: setup failed"; break; }
		eval "PDEV_$S=$DEV PPROC_$S=${PID:-}"
		_live="$_live $S"
		warm_up $S warm_paired
	done
	if [ "$_live" = "$PAIR_SYS" ]; then
		for J in randread_warm randwrite_qd32 randwrite_qd1; do
			want_job $J || continue
			_r=1 _order=$PAIR_SYS
			while [ $_r -le $ROUNDS ]; do
				for S in $_order; do
					eval "DEV=\$PDEV_$S"
					fio_job $S paired_${J}_$_r $(job_args $J) --time_based \
						--runtime=$RTP --ramp_time=$RAMP
					case $J in randwrite*)
						[ $S != ublkceiling ] && ! flush_all $S &&
							bad "paired: $S: flush after $J failed" ;;
					esac
				done
				# the next round starts at the next system
				_order=$(rotate $_order)
				_r=$((_r + 1))
			done
		done
	fi
	for S in $_live; do
		D=$(pair_disk $S)
		eval "PID=\$PPROC_$S DEV=\$PDEV_$S"
		teardown $S
	done
	D=$DISK0
	dmsetup remove half0
	dmsetup remove half1
}
_want=
for J in randread_warm randwrite_qd32 randwrite_qd1; do want_job $J && _want=1; done
case $PAIR_SYS in
" pmcache "?*)
	if [ $JOBS != replay ] && [ -n "$_want" ]; then
		echo "=== paired: $PAIR_SYS, $ROUNDS rounds of $RTP s ($(up) s)"
		paired
	fi ;;
esac

# --- the replay job: caches of RC MiB (both NVDIMMs get a namespace of
# that size), the trace replayed twice on each system
[ -z "$REPLAY_SYSTEMS" ] && finish "no replay"
[ -n "$REPLAY_MIB" ] && RC=$REPLAY_MIB
echo "=== replay: trace and caches of $RC MiB ($(up) s)"
pmc-trace-gen $TRACE -o /tmp/trace.log 2>&1 | tee $OUT/trace.txt
# the devdax namespace: first raw, so its head can be zeroed (the first
# phase's cache header lies at the same place, and pmcached formats only a
# blank pmem), then reconfigured in place
region_reset "$DAXREG" &&
	ndctl create-namespace -r "$DAXREG" --mode=raw --size=${RC}M >/dev/null ||
	{ bad "raw namespace of $RC MiB on $DAXREG"; exit 1; }
_b=$(ls -d /sys/bus/nd/devices/$DAXREG/namespace*/block/pmem* | head -n 1)
wipe /dev/$(basename $_b) 16 || { bad "zeroing /dev/$(basename $_b)"; exit 1; }
ndctl create-namespace -f -e "$(basename "$(dirname "$(dirname $_b)")")" --mode=devdax \
	--align=2M >/dev/null || { bad "devdax namespace of $RC MiB on $DAXREG"; exit 1; }
DAX=$(ls /dev/dax* | head -n 1)
[ -c "$DAX" ] || { bad "no devdax device after the reconfiguration"; exit 1; }
rm -rf /tmp/pmcache-state
region_reset "$PREG" &&
	ndctl create-namespace -r "$PREG" --mode=fsdax --map=mem --size=${RC}M >/dev/null ||
	{ bad "fsdax namespace of $RC MiB on $PREG"; exit 1; }
PMEM=/dev/$(basename "$(ls -d /sys/bus/nd/devices/pfn*/block/pmem* 2>/dev/null | head -n 1)")
[ -b "$PMEM" ] || PMEM=/dev/pmem${PREG#region}
echo "replay_cache_mib=$RC devdax=$DAX peer_pmem=$PMEM bytes=$(blockdev --getsize64 $PMEM)" |
	tee -a $OUT/env.txt

# counters SYS: the system's hit counters, raw (report.py parses them)
counters() {
	case $1 in
	pmcache) pmc-vm-ctl $SOCK '{"cmd":"stats"}' | tail -n 1 ;;
	dmwritecache) dmsetup status wc ;;
	bcache)
		for _f in cache_hits cache_misses cache_bypass_hits cache_bypass_misses; do
			echo "$_f=$(cat $BC/stats_total/$_f)"
		done ;;
	rawnvme | ublkloop) echo none ;;
	esac
}

# diskstats: the block layer's counters of the disk under the caches (and
# of the NVMe disk under it when that is a dm-delay or NVMe/TCP device, not
# a null_blk one),
# one line per device: its name, then /sys/block/DEV/stat as it is
diskstats() {
	_under=$NVME # not under a null_blk disk
	[ $SLOW = nullblk ] && _under=
	for _d in $D $_under; do
		_s=$(sysblk $_d)
		echo "$(basename "$(readlink -f $_s)") $(cat $_s/stat)"
		[ $_d = $NVME ] && break
	done
}

# cpu_snap: where the guest's CPU time has gone so far: /proc/stat's cpu
# line (ticks of user nice system idle iowait irq softirq steal ...), then
# for a ublk server (PID set) its process ("proc UTIME STIME", dead
# threads included) and each live thread ("thread NAME UTIME STIME": the
# queue threads, write-back, io_uring workers), in clock ticks; and
# dm-delay's polling thread when there is one ("kthread NAME UTIME STIME")
cpu_snap() {
	head -n 1 /proc/stat
	[ -n "$DMDELAY_THREAD" ] &&
		echo "kthread $(cat $DMDELAY_THREAD/comm) $(stat_ticks $DMDELAY_THREAD/stat)"
	[ -n "${PID:-}" ] && [ -d /proc/$PID ] || return 0
	echo "proc $(stat_ticks /proc/$PID/stat)"
	for _t in /proc/$PID/task/*; do
		_st=$(stat_ticks $_t/stat) && [ -n "$_st" ] &&
			echo "thread $(tr ' ' _ <$_t/comm) $_st"
	done
	return 0
}
# stat_ticks FILE: "UTIME STIME" of a /proc/.../stat file (the fields
# after "(comm) ": state is 1, utime 12, stime 13); nothing if it is gone
stat_ticks() {
	sed 's/.*) //' "$1" 2>/dev/null | cut -d' ' -f12,13
}

# replay_fio S NAME [CMD...]: the trace replayed once on DEV at QD32 (fio
# run under CMD when given), fio's JSON to OUT/S/NAME.json; on failure the
# guest kernel's last messages, and 1
replay_fio() {
	_rs=$1 _rn=$2
	shift 2
	"$@" fio --name=$_rn --ioengine=io_uring --direct=1 --iodepth=32 \
		--read_iolog=/tmp/trace.log --replay_redirect="$DEV" --replay_no_stall=1 \
		--output-format=json --output=$OUT/$_rs/$_rn.json >/dev/null 2>$OUT/$_rs/$_rn.err && return 0
	bad "$_rs $_rn: fio failed: $(tail -n 3 $OUT/$_rs/$_rn.err)"
	dmesg | tail -n 20
	return 1
}
# since T0: seconds since T0 (up), two decimals
since() {
	awk "BEGIN { printf \"%.2f\", $(up) - $1 }"
}

for S in $REPLAY_SYSTEMS; do
	echo "=== replay $S ($(up) s)"
	mkdir -p $OUT/$S
	PID=
	setup $S || { bad "$S: setup for the replay failed"; dmesg | tail -n 5; continue; }
	ok "$S: $DEV ($(blockdev --getsize64 $DEV) bytes)"
	[ $S = dmwritecache ] && dmsetup message wc 0 clear_stats 2>/dev/null
	counters $S >$OUT/$S/replay_counters0.txt
	diskstats >$OUT/$S/replay_disk0.txt
	: >$OUT/$S/replay.txt
	for P in 1 2; do
		cpu_snap >$OUT/$S/replay_cpu${P}_start.txt
		t0=$(up)
		_perf=$(perf_cmd)
		replay_fio $S replay_pass$P $_perf || break
		_secs=$(since $t0)
		cpu_snap >$OUT/$S/replay_cpu$P.txt
		[ -n "$_perf" ] && perf_report $S >$OUT/$S/perf_pass$P.txt
		# bcache folds its hit counters into stats_total on a timer (every
		# 300/22 s), so they are read once it has run
		[ $S = bcache ] && sleep 15
		counters $S >$OUT/$S/replay_counters$P.txt
		diskstats >$OUT/$S/replay_disk$P.txt
		echo "pass=$P s=$_secs" | tee -a $OUT/$S/replay.txt
	done
	echo "dirty after the replay: $(dirty_of $S)"
	teardown $S
done

# --- the paired replay: pmcache, dm-writecache and the raw disk side by
# side on thirds of the disk (dm-linear), each round replaying the trace
# twice on each in turn, the order rotating from round to round. Every
# round starts from new caches, and a cache is flushed after its second
# pass, outside the timing, so that no write-back runs behind the next
# system's passes. The replay above gives each system a stretch of its
# own, minutes apart, and one pass of the same system moved by 30-50 %
# between boots, more than the goals' margins; report.py prints each
# round's times and the median of the rounds' ratios
# (replay_passP_vs_dmwritecache_pmcache_paired and
# replay_passP_pmcache_over_rawnvme_paired). Results in
# SYSTEM/preplay.txt ("round=R pass=P s=SECONDS" lines). Not over NVMe/TCP:
# pmcache names the fabric namespace itself there, not a third of it.
PR_SYS=$(among "pmcache dmwritecache rawnvme" "$REPLAY_SYSTEMS")
case $MODE in full) PR_ROUNDS=3 ;; quick) PR_ROUNDS=2 ;; *) PR_ROUNDS=1 ;; esac
paired_replay() {
	DISK0=$D
	_end=$(awk '$2 == "read" || $2 == "write" { e = $3 + $4; if (e > m) m = e } END { print m + 0 }' \
		/tmp/trace.log)
	_t=$(($(blockdev --getsz $D) / 3 / 8 * 8))
	[ $((_t * 512)) -ge "$_end" ] ||
		{ bad "paired replay: thirds of $D ($((_t / 2048)) MiB) are smaller than the trace ($((_end >> 20)) MiB)"; return 1; }
	for _i in 0 1 2; do
		dmsetup create --noudevsync third$_i --table "0 $_t linear $D $((_i * _t))" ||
			{ bad "paired replay: dm-linear thirds of $D"; return 1; }
		dmsetup mknodes third$_i
	done
	_r=1 _order=$PR_SYS
	while [ $_r -le $PR_ROUNDS ]; do
		for S in $_order; do
			D=$(part_disk $S third /dev/mapper/third2) PID=
			if [ $S = pmcache ]; then
				# a new cache: the last one remembers another disk
				pmcachectl format "$DAX" --force >/dev/null ||
					{ bad "paired replay: pmcachectl format $DAX"; break 2; }
				rm -rf /tmp/pmcache-state
			fi
			setup $S || { bad "paired replay: $S: setup failed"; break 2; }
			for P in 1 2; do
				t0=$(up)
				replay_fio $S preplay_${_r}_$P || break
				echo "round=$_r pass=$P s=$(since $t0)" | tee -a $OUT/$S/preplay.txt
			done
			[ $S = rawnvme ] || flush_all $S || bad "paired replay: $S: flush after round $_r failed"
			teardown $S
		done
		_order=$(rotate $_order)
		_r=$((_r + 1))
	done
	D=$DISK0
	for _i in 0 1 2; do dmsetup remove third$_i; done
}
case $PR_SYS in
" pmcache "?*)
	if [ "$NVMF" = 1 ]; then
		echo "=== paired replay: not over NVMe/TCP"
	else
		echo "=== paired replay: $PR_SYS, $PR_ROUNDS rounds ($(up) s)"
		for S in $PR_SYS; do : >$OUT/$S/preplay.txt; done
		paired_replay
	fi ;;
esac
finish
