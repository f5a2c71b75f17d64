# t-torture.sh ROUND SEED START EVENT... - guest half of torture.sh: one
# round of the fault campaign (one boot).
#
# Disks (partitioned by torture.sh on the host): NVMe 1 holds vol0 (p1) and
# vol1 (p2); NVMe 2 holds vol2's disk (p1, under
# the device-mapper device tvol2: linear, or flakey/error/delay while it
# fails) and an ext4 file system for pmcached's state_dir (p2). The checker
# logs acknowledged writes to a raw namespace on the second NVDIMM. The pmem is
# the small devdax namespace (smaller than the data written), write-back
# watermarks are low.
# START: fresh (first boot: format the log, the state fs), clean (the
#   previous boot ended with the checks), or cut (the previous boot was
#   killed: its checks run first).
# EVENTS, run in order while pmc-torture writes to all three volumes:
#   sleep:S             let the load run S seconds
#   kill                SIGKILL pmcached, restart it (devices recovered)
#   mode:V:MODE         pmcachectl set -v volV mode MODE
#   fail:KIND:S:V       vol2's disk fails S seconds under load (KIND error,
#                       flakey or delay), then heals; V: vol2's mode meanwhile
#   fill:NOSPACE:S      nospace=NOSPACE on vol2, vol2's disk fails (error),
#                       writes go mostly to vol2 until the pmem is full of
#                       dirty data or S seconds passed; then it heals
#   remove:V            pmcachectl volume remove volV, then volume add again
#   cut                 print PMC_CUTME: the host kills qemu at a random
#                       moment from now on; the events go on meanwhile
# After the events (unless cut): stats add up, every acknowledged write
# reads back through the cache, flush, clean stop, the same on the raw
# disks, pmcachectl check finds the pmem consistent.
# Lines for torture.sh: TORT_EV, TORT_VERIFY WHERE acked=.. verified=..
# lost=.. torn=.., TORT_ROUND ok|fail; FAIL: lines say what went wrong.
. /host/lib.sh
ROUND=$1 SEED=$2 START=$3
shift 3
PATH=/host/bin:$PATH
SOCK=/tmp/pmcached.sock
CONF=/tmp/pmcached.conf
LOG=/tmp/pmcached.log
CTL=/tmp/torture.ctl
BLOCKS=16384
THREADS=16
CTLSEQ=0
PID=
WPID=

DAX=$(setup_devdax) || { bad "devdax: $DAX"; exit 1; }
N1=$(nvme_dev "$(nvme_serial 1)") || { bad "no NVMe disk 1"; exit 1; }
N2=$(nvme_dev "$(nvme_serial 2)") || { bad "no NVMe disk 2"; exit 1; }
for p in ${N1}p1 ${N1}p2 ${N2}p1 ${N2}p2; do
	[ -b $p ] || { bad "partition $p missing (torture.sh partitions the images)"; exit 1; }
done
D0=${N1}p1 D1=${N1}p2 RAW2=${N2}p1 STATEDEV=${N2}p2
# the checker's log: a raw namespace on the second NVDIMM, outside pmcache;
# what is written to it survives a power cut (its backing file is shared)
LOGREG=$(region_of_size "$PMC_VM_PEER_PMEM_BYTES") || { bad "no region for the log"; exit 1; }
if [ "$START" = fresh ]; then
	region_reset $LOGREG && ndctl create-namespace -r $LOGREG --mode=raw >/dev/null ||
		{ bad "log namespace on $LOGREG"; exit 1; }
fi
LOGDEV=/dev/$(basename "$(ls -d /sys/bus/nd/devices/$LOGREG/namespace*/block/pmem* 2>/dev/null | head -n 1)")
[ -b "$LOGDEV" ] || { bad "no log device on $LOGREG"; exit 1; }
D2=/dev/mapper/tvol2
SECTORS2=$(blockdev --getsz $RAW2)

# vol2's disk: a device-mapper device over NVMe 2's first partition
dm_table() { # TABLE...: load and switch to it
	dmsetup suspend --noudevsync tvol2 && dmsetup load --noudevsync tvol2 --table "$*" &&
		dmsetup resume --noudevsync tvol2
}
dmsetup create --noudevsync tvol2 --table "0 $SECTORS2 linear $RAW2 0" &&
	dmsetup mknodes tvol2 || { bad "dmsetup create tvol2"; exit 1; }

if [ "$START" = fresh ]; then
	run mkfs.ext4 -q -F $STATEDEV || exit 1
	run pmc-torture init $LOGDEV 3 $BLOCKS || exit 1
fi
mkdir -p /state
run mount $STATEDEV /state || exit 1

cat >$CONF <<EOC
pmem = { path = "$DAX"; };
state_dir = "/state/pmcache";
control = { socket = "$SOCK"; };
queues = { count = 2; depth = 32; };
writeback = { high_pct = 10; low_pct = 5; max_age_ms = 2000; retry_ms = 200; idle_ms = 20; };
volumes = (
	{ name = "vol0"; disk = "$D0"; mode = "write-back"; ublk_id = 0; },
	{ name = "vol1"; disk = "$D1"; mode = "write-back"; ublk_id = 1; },
	{ name = "vol2"; disk = "$D2"; mode = "write-back"; ublk_id = 2; }
);
EOC
DISK0=$D0 DISK1=$D1 DISK2=$D2

ctl() { # pmcachectl ARGS..., output in /tmp/ctl.out (JSON on one line)
	pmcachectl -s $SOCK "$@" >/tmp/ctl.raw 2>&1
	_rc=$?
	case "$*" in
	--json*) tr -d ' \t\n\r' </tmp/ctl.raw >/tmp/ctl.out ;;
	*) cp /tmp/ctl.raw /tmp/ctl.out ;;
	esac
	return $_rc
}
start() { # WHAT
	pmcached_start $CONF $LOG || { bad "$1: pmcached did not start"; tail -20 $LOG; return 1; }
}
stop() { # clean stop, at most 5 minutes (write-back of everything dirty)
	# the log holds every start and stop of the run: this stop must add a line
	_clean=$(grep -c "stopped cleanly" $LOG)
	kill -TERM $PID
	for _i in $(seq 1 1500); do kill -0 $PID 2>/dev/null || break; sleep 0.2; done
	kill -0 $PID 2>/dev/null && { bad "pmcached still running 300 s after SIGTERM"; kill -9 $PID; }
	wait $PID
	_rc=$?
	[ $_rc = 0 ] || bad "pmcached exit $_rc after SIGTERM"
	[ "$(grep -c "stopped cleanly" $LOG)" -gt "$_clean" ] || bad "no clean stop logged"
	PID=
}
# statistics add up: dirty + clean <= blocks in the cache and per volume,
# no counter negative or wrapped (>= 2^63 would print as 19+ digits).
# status reads the counters one volume after another while blocks move
# between volumes and states (a clean block of one volume evicted and
# taken by another): one reading can count a moving block twice. A sum
# over the blocks is read again, up to 4 times; it fails when every
# reading shows one (a counter that drifted); a bad counter fails at once.
stats_once() { # WHEN: one reading; exit 1: a sum over the blocks, 2: a bad counter
	ctl --json status || { echo "FAIL: $1: status: $(cat /tmp/ctl.out)"; return 2; }
	cp /tmp/ctl.out /tmp/status.json
	ctl --json stats || { echo "FAIL: $1: stats: $(cat /tmp/ctl.out)"; return 2; }
	# the block counts come from status alone (a volume missing from it
	# must not pair the stats' cache totals with a volume); stats is read
	# for bad counters only
	{ cat /tmp/status.json; echo ',"stats_follow":0,'; cat /tmp/ctl.out; } | tr '{}[]' ',,,,' | awk -v when="$1" '
		{ s = s $0 }
		END {
			n = split(s, tok, ",")
			vol = -1
			for (i = 1; i <= n; i++) {
				if (tok[i] !~ /^"[a-z0-9_]+":-?[0-9]/) continue
				split(tok[i], kv, ":"); k = kv[1]; v = kv[2]; gsub(/"/, "", k)
				if (v ~ /^-/ || length(v) >= 19) { printf "FAIL: %s: counter %s = %s\n", when, k, v; worst = 2 }
				if (k == "stats_follow") stats = 1
				if (stats) continue
				if (k == "nr_blocks" && !nr) nr = v
				if (k == "dirty_blocks") { d[++nd] = v }
				if (k == "clean_blocks") { c[++nc] = v }
			}
			# status: cache totals first, then one pair per volume
			if (nr == 0 || nd < 4 || nc < 4) { printf "FAIL: %s: status without the block counts of the cache and three volumes (%d)\n", when, nd; exit 2 }
			if (d[1] + c[1] > nr) { printf "FAIL: %s: dirty %d + clean %d > %d blocks\n", when, d[1], c[1], nr; if (!worst) worst = 1 }
			for (j = 2; j <= 4; j++) {
				if (d[j] + c[j] > nr) { printf "FAIL: %s: volume %d: dirty %d + clean %d > %d blocks\n", when, j - 2, d[j], c[j], nr; if (!worst) worst = 1 }
				sd += d[j]; sc += c[j]
			}
			if (sd + sc > nr) { printf "FAIL: %s: volumes hold dirty %d + clean %d > %d blocks\n", when, sd, sc, nr; if (!worst) worst = 1 }
			printf "TORT_STATS %s blocks=%d dirty=%d clean=%d vols_dirty=%d vols_clean=%d\n", when, nr, d[1], c[1], sd, sc
			exit worst
		}'
}
stats_check() { # WHEN
	for _try in 1 2 3 4; do
		stats_once "$1" >/tmp/stats.out
		_rc=$?
		[ $_rc = 1 ] && [ $_try -lt 4 ] || break
		echo "TORT_STATS_REREAD $1: $(grep '^FAIL' /tmp/stats.out | head -1 | sed 's/^FAIL: //')"
	done
	cat /tmp/stats.out
	[ $_rc = 0 ] || FAIL=1
}
# every acknowledged write reads back (WHERE: cache or raw)
verify() { # WHERE DEV0 DEV1 DEV2
	pmc-torture verify $LOGDEV $2 $3 $4 >/tmp/verify.out 2>&1
	_rc=$?
	grep FAIL /tmp/verify.out | head -20
	awk -v w="$1" '/^verify: volume/ {
			for (i = 1; i <= NF; i++) { split($i, kv, "="); t[kv[1]] += kv[2] }
		} END {
			printf "TORT_VERIFY %s acked=%d verified=%d lost=%d torn=%d newer=%d logbad=%d\n",
				w, t["acked"], t["verified"], t["lost"], t["torn"], t["newer"], t["logbad"]
		}' /tmp/verify.out
	[ $_rc = 0 ] || { bad "verify $1: exit $_rc"; grep -v '^FAIL' /tmp/verify.out | grep -v '^verify: volume' | head; }
}
pmem_check() { # WHEN
	pmcachectl -c $CONF check $DAX >/tmp/check.out 2>&1
	_rc=$?
	[ $_rc = 0 ] && echo "TORT_CHECK $1 consistent: $(grep linked /tmp/check.out)" ||
		{ bad "$1: pmcachectl check: exit $_rc"; cat /tmp/check.out; }
}
# one line: every volume's mode, dirty and clean blocks, error; the writer
status_line() { # WHAT
	timeout 20 pmcachectl -s $SOCK --json status 2>&1 | tr -d ' \t\n\r' | tr '{' '\n' |
		sed -n 's/.*"name":"\([^"]*\)".*"mode":"\([^"]*\)","draining":\([a-z]*\).*"dirty_blocks":\([0-9]*\),"clean_blocks":\([0-9]*\).*"error":\([0-9-]*\).*/\1 \2 draining=\3 dirty=\4 clean=\5 error=\6/p' |
		tr '\n' ';' | sed "s/^/TORT_WAIT $1: /"
	echo " writer (seq acked failed) $(cat $CTL.ack 2>/dev/null)"
}
# ctl_wait WHAT SECS ARGS...: pmcachectl ARGS in the background, a status
# line every 20 s while it runs; bad after SECS
ctl_wait() {
	_what=$1 _secs=$2
	shift 2
	pmcachectl -s $SOCK "$@" >/tmp/ctlw.out 2>&1 &
	_p=$!
	_t0=$(secs) _n=0
	while kill -0 $_p 2>/dev/null; do
		sleep 1
		_t=$(($(secs) - _t0))
		[ $_t -ge $((_n * 20 + 20)) ] && { _n=$((_n + 1)); status_line "$_what ${_t}s"; }
		if [ $_t -ge $_secs ]; then
			bad "$_what: pmcachectl $* still running after $_secs s"
			blocked_tasks
			kill $_p
			break
		fi
	done
	wait $_p
	_rc=$?
	cp /tmp/ctlw.out /tmp/ctl.out
	return $_rc
}
vol_dev() { # V: the device of volV from volume list
	ctl --json volume list
	tr '{' '\n' </tmp/ctl.out | grep "\"name\":\"vol$1\"" | sed -n 's/.*"device":"\([^"]*\)".*/\1/p'
}
checker_ctl() { # LINES...: new control file for the writer, wait for its ack
	CTLSEQ=$((CTLSEQ + 1))
	{ echo "seq $CTLSEQ"; for _l in "$@"; do echo "$_l"; done; } >$CTL.new
	mv $CTL.new $CTL
	_end=$(($(secs) + 300))
	while [ "$(secs)" -lt $_end ]; do
		[ "$(cut -d' ' -f1 $CTL.ack 2>/dev/null)" = $CTLSEQ ] && return 0
		kill -0 $WPID 2>/dev/null || { bad "the writer died"; return 1; }
		sleep 0.2
	done
	bad "the writer did not take control file $CTLSEQ in 300 s ($*): I/O hangs"
	status_line "hang"
	blocked_tasks
	return 1
}
acked_now() {
	cut -d' ' -f2 $CTL.ack 2>/dev/null
}
# the writer makes progress: ACKED grows within 120 s
progress() { # WHAT
	_a=$(acked_now)
	_end=$(($(secs) + 300))
	while [ "$(secs)" -lt $_end ]; do
		[ "$(acked_now)" -gt "$_a" ] 2>/dev/null && return 0
		sleep 0.2
	done
	bad "$1: no write acknowledged in 300 s"
	status_line "no progress"
	blocked_tasks
}
secs() {
	cut -d. -f1 /proc/uptime
}
# the kernel's list of blocked tasks with their stacks, and pmcached's log
blocked_tasks() {
	echo w >/proc/sysrq-trigger
	dmesg | tail -n 80 | sed 's/^/TORT_DMESG /'
	tail -n 20 $LOG | sed 's/^/TORT_PMCLOG /'
	# the pmem as it is (read-only, past the busy check): descriptors per
	# volume and state
	timeout 120 pmcachectl -s /nonexistent --json dump $DAX --all 2>/dev/null |
		tr -d ' \t\r' | tr '\n' ' ' | tr '{' '\n' |
		sed -n 's/.*"state":"\([a-z]*\)","vol":\([0-9]*\),.*"pins":\([0-9]*\).*/vol\2 \1 pins=\3/p' |
		sort | uniq -c | sed 's/^/TORT_DUMP /'
}

# a heartbeat on the console every 30 s: processes in D state and what
# they wait in, the writer's counters; a hang shows what hangs
(
	while sleep 30; do
		_d=$(for _s in /proc/[0-9]*/stat; do
			awk '$3 == "D" { printf "%s/%s ", $1, $2 }' $_s 2>/dev/null
		done)
		echo "TORT_HEARTBEAT uptime=$(secs) load=$(cut -d' ' -f1-3 /proc/loadavg) writer=[$(cat $CTL.ack 2>/dev/null)] D=[$_d]"
	done
) &
HBPID=$!

# --- the checks a power cut left to this boot
if [ "$START" = cut ]; then
	pmem_check "after the power cut"
	start "crash restart" || exit 1
	grep "restart (epoch" $LOG | tail -1 | grep -q "crash restart" &&
		echo "TORT_EV crash-restart" || bad "not a crash restart: $(grep "restart (epoch" $LOG | tail -1)"
	stats_check "after the power cut"
	verify cache-after-cut /dev/ublkb0 /dev/ublkb1 /dev/ublkb2
	ctl_wait "flush after the cut" 600 flush || bad "flush after the cut: $(tail -3 /tmp/ctl.out)"
	stop
	verify raw-after-cut $D0 $D1 $RAW2
	pmem_check "after the cut, flush and clean stop"
	echo "TORT_CUTCHECKED"
fi
[ "$START" = fresh ] || [ "$START" = cut ] || [ "$START" = clean ] || { bad "START $START"; exit 1; }

start "round $ROUND" || exit 1
echo "TORT_READY round $ROUND: $(grep ready: $LOG | tail -1)"
if [ $# = 0 ]; then # a boot that only checks
	stop
	kill $HBPID
	umount /state
	exit $FAIL
fi
printf 'seq 0\ndev 0 /dev/ublkb0\ndev 1 /dev/ublkb1\ndev 2 /dev/ublkb2\n' >$CTL
pmc-torture write $LOGDEV 0 $SEED $THREADS $CTL >/tmp/writer.out 2>&1 &
WPID=$!
checker_ctl "dev 0 /dev/ublkb0" "dev 1 /dev/ublkb1" "dev 2 /dev/ublkb2" || exit 1
CUT=0
t0=$(up)
for ev in "$@"; do
	set -- $(echo "$ev" | tr ':' ' ')
	echo "TORT_EV $ev t=$(awk "BEGIN { print $(up) - $t0 }")"
	case $1 in
	sleep)
		sleep $2
		;;
	kill)
		kill -9 $PID
		wait $PID 2>/dev/null
		n=$(grep -c "recovered /dev/ublkb" $LOG)
		start "restart after SIGKILL" || break
		m=$(grep -c "recovered /dev/ublkb" $LOG)
		[ $((m - n)) -ge 1 ] || bad "restart after SIGKILL: no device recovered"
		echo "TORT_KILLED recovered=$((m - n))"
		progress "after the SIGKILL"
		;;
	mode)
		ctl set -v vol$2 mode $3 && echo "TORT_MODE vol$2 $3" ||
			bad "set vol$2 mode $3: $(cat /tmp/ctl.out)"
		;;
	fail)
		ctl set -v vol2 mode $4 || bad "set vol2 mode $4: $(cat /tmp/ctl.out)"
		case $2 in
		error) dm_table "0 $SECTORS2 error" ;;
		flakey) dm_table "0 $SECTORS2 flakey $RAW2 0 1 1" ;;
		delay) dm_table "0 $SECTORS2 delay $RAW2 0 300" ;;
		esac || bad "dm table $2"
		echo "TORT_DISKFAIL $2 $3 s, vol2 $4"
		sleep $3
		stats_check "disk failing ($2)"
		dm_table "0 $SECTORS2 linear $RAW2 0" || bad "dm heal"
		ctl set -v vol2 mode write-back || bad "set vol2 mode write-back: $(cat /tmp/ctl.out)"
		progress "after the disk healed"
		;;
	fill)
		ctl set -v vol2 mode write-back && ctl set -v vol2 nospace $2 ||
			bad "set vol2 nospace $2: $(cat /tmp/ctl.out)"
		checker_ctl "weight 2 30"
		dm_table "0 $SECTORS2 error" || bad "dm table error"
		echo "TORT_DISKFAIL error fill nospace=$2"
		end=$(($(cut -d. -f1 /proc/uptime) + $3))
		pct=0
		while [ "$(cut -d. -f1 /proc/uptime)" -lt $end ]; do
			ctl --json status
			pct=$(sed 's/"volumes".*//' /tmp/ctl.out | awk '{
				match($0, /"nr_blocks":[0-9]+/); n = substr($0, RSTART + 12, RLENGTH - 12)
				match($0, /"dirty_blocks":[0-9]+/); d = substr($0, RSTART + 15, RLENGTH - 15)
				print (n > 0) ? int(100 * d / n) : 0 }')
			[ "$pct" -ge 95 ] && break
			sleep 1
		done
		echo "TORT_FILL dirty ${pct}% of the pmem, nospace=$2"
		stats_check "pmem full, disk failing"
		dm_table "0 $SECTORS2 linear $RAW2 0" || bad "dm heal"
		checker_ctl "weight 2 1"
		ctl set -v vol2 nospace wait || bad "set vol2 nospace wait: $(cat /tmp/ctl.out)"
		progress "after the full pmem's disk healed"
		;;
	remove)
		checker_ctl "dev $2 -" || break
		ctl_wait "remove vol$2" 600 volume remove vol$2 && echo "TORT_REMOVED vol$2" ||
			bad "volume remove vol$2: $(cat /tmp/ctl.out)"
		eval disk=\$DISK$2
		ctl volume add vol$2 $disk mode=write-back ublk_id=$2 ||
			bad "volume add vol$2: $(cat /tmp/ctl.out)"
		dev=$(vol_dev $2)
		[ -b "$dev" ] || bad "vol$2 re-added: no device ($dev)"
		checker_ctl "dev $2 $dev"
		;;
	cut)
		CUT=1
		echo "PMC_CUTME"
		;;
	*)
		bad "unknown event $ev"
		;;
	esac
	[ $1 = sleep ] || stats_check "after $ev"
	[ $FAIL = 0 ] || break
done
if [ $CUT = 1 ]; then # the host cuts the power any moment now
	while :; do sleep 1; done
fi

kill -TERM $WPID
for _i in $(seq 1 600); do kill -0 $WPID 2>/dev/null || break; sleep 0.2; done
kill -0 $WPID 2>/dev/null && { bad "the writer hangs 120 s after SIGTERM"; kill -9 $WPID; }
wait $WPID
wrc=$?
cat /tmp/writer.out
echo "TORT_WRITER $(grep '^write: acked' /tmp/writer.out)"
[ $wrc = 0 ] || bad "the writer exited $wrc"
# only vol2's disk is ever failed: a write error on vol0 or vol1 is pmcache's
# (after a takeover, a mode switch, a full pmem), never expected
for v in 0 1; do
	n=$(grep '^write: acked' /tmp/writer.out | grep -o 'failed=[^ ]*' | sed 's/^failed=//' |
		tr ',' '\n' | sed -n "s/^$v:\([0-9]*\).*/\1/p")
	[ "$n" = 0 ] || bad "vol$v: ${n:-?} writes failed (its disk never does)"
done
for v in 0 1 2; do # every volume back where the checks read it
	dev=$(vol_dev $v)
	[ "$dev" = /dev/ublkb$v ] || bad "vol$v is served as '$dev'"
done
stats_check "end of round"
verify cache /dev/ublkb0 /dev/ublkb1 /dev/ublkb2
ctl_wait flush 600 flush || bad "flush: $(tail -3 /tmp/ctl.out)"
ctl --json status
sed 's/"volumes".*//' /tmp/ctl.out | grep -q '"dirty_blocks":0,' || bad "dirty blocks left after flush: $(cat /tmp/ctl.out)"
stop
verify raw $D0 $D1 $RAW2
pmem_check "after flush and clean stop"
kill $HBPID
umount /state
echo "TORT_ROUND $([ $FAIL = 0 ] && echo ok || echo fail)"
exit $FAIL
