# t-ctl.sh - guest: pmcachectl against a running pmcached on devdax and the
# two NVMe disks, every subcommand in human and --json form, and the error
# cases with their exit codes (pmcachectl(8)): 2 usage, 3 daemon not
# running, 4 permission denied, 5 unknown volume, 6 device busy, 8 format
# refused. `disks` must show the emulated NVMe disks by serial. A remove
# that writes back over a slow disk (dm-delay) is not undone by a reload
# meanwhile, and fails, keeping the device, when it is mounted meanwhile.
# A stop while write-back to that slow disk is in flight ends, and one
# right after writes waited for free blocks on a small cache (the queue
# threads' own write-back still in flight) ends too; after a
# SIGKILL with every tag of its queues held on it, the next daemon waits
# for the driver (past 5 s) and takes the device over.
# A volume with no ublk_id whose slot's number is taken gets another.
. /host/lib.sh
PATH=/host/bin:$PATH
CONF=/tmp/pmcached.conf
LOG=/host/out/pmcached.log
SOCK=/tmp/pmcached.sock
OUT=/tmp/ctl.out

DAX=$(setup_devdax) || { bad "devdax: $DAX"; exit 1; }
S1=$(nvme_serial 1)
S2=$(nvme_serial 2)
D0=$(nvme_dev "$S1") || { bad "no NVMe disk 1"; exit 1; }
D1=$(nvme_dev "$S2") || { bad "no NVMe disk 2"; exit 1; }
ok "devdax $DAX, disks $D0 ($S1) $D1 ($S2)"

# ctl RC WHAT ARGS...: run pmcachectl -s $SOCK ARGS, output in $OUT; the
# exit code must be RC; a failure must say so in one line on stderr
ctl() {
	_want=$1 _what=$2
	shift 2
	pmcachectl -s "$SOCK" "$@" >$OUT 2>$OUT.err
	_rc=$?
	if [ $_rc -ne "$_want" ]; then
		bad "$_what: pmcachectl $*: exit $_rc, expected $_want"
		head -20 $OUT $OUT.err
		return 1
	fi
	if [ "$_want" -ne 0 ]; then
		_n=$(wc -l <$OUT.err)
		[ "$_n" -eq 1 ] || { bad "$_what: $_n lines on stderr"; cat $OUT.err; return 1; }
		ok "$_what: exit $_rc: $(cat $OUT.err)"
	else
		ok "$_what"
	fi
	return 0
}
has() { # PATTERN WHAT: $OUT contains PATTERN
	grep -q -- "$1" $OUT && ok "$2" || { bad "$2: no '$1' in:"; head -40 $OUT; }
}

# --- without a daemon ---------------------------------------------------
ctl 0 "--help" --help
for c in status stats "volume add" "volume remove" "volume list" set get flush check format \
	dump disks version; do
	grep -q "^  $c" $OUT || bad "--help does not list $c"
done
ok "--help lists every subcommand"
ctl 0 "version" version && has "pmcachectl 0.1.0" "version printed" && has "not running" "version: no daemon"
ctl 2 "unknown command" frobnicate
ctl 2 "unknown option" status --bogus
ctl 3 "status without a daemon" status && grep -q "daemon not running" $OUT.err ||
	bad "unclear: $(cat $OUT.err)"
ctl 3 "stats without a daemon, --json" --json stats && has '"ok":false' "--json error object"

ctl 0 "disks" disks && cat $OUT
has "$S1" "disks shows NVMe serial $S1" && has "$S2" "disks shows NVMe serial $S2"
grep "$S1" $OUT | grep -q "°C" && ok "disks: temperature of $S1" || bad "disks: no temperature"
grep "$S1" $OUT | grep -q "%" && ok "disks: percentage used of $S1" || bad "disks: no percent used"
ctl 0 "disks --json" --json disks
has "\"serial\": \"$S1\"" "disks --json: serial" && has '"media_errors"' "disks --json: media_errors" &&
	has '"critical_warning"' "disks --json: critical_warning" && has '"temperature_c"' "disks --json: temperature"

# format the fresh devdax, refuse a second time, --force
ctl 0 "format $DAX" format "$DAX" && cat $OUT
ctl 8 "format refuses a pmcache superblock" format "$DAX"
ctl 0 "format --force" format --force --json "$DAX" && has '"nr_blocks"' "format --json"
ctl 0 "check (offline)" check "$DAX" && cat $OUT && has "consistent" "check: consistent"
ctl 0 "check --repair --json" check --repair --json "$DAX" && has '"consistent": true' "check --json"
ctl 0 "dump" dump "$DAX" && has "superblock copy 1" "dump: both superblocks" && has "magic_ok *true" "dump: magic"

# --- the daemon -----------------------------------------------------------
# daemon_conf FILE VOLUME: vol0 (write-back on disk 1) and VOLUME
daemon_conf() {
	cat >"$1" <<EOC
pmem = { path = "$DAX"; format = "never"; };
state_dir = "/tmp/pmcache-state";
control = { socket = "$SOCK"; };
queues = { count = 4; depth = 64; };
volumes = (
	{ name = "vol0"; disk = "$D0"; mode = "write-back"; ublk_id = 0; },
	$2
);
EOC
}
daemon_conf "$CONF" '{ name = "vol1"; disk = "'"$D1"'"; mode = "write-through"; ublk_id = 1; }'
: >"$LOG"
pmcached_start "$CONF" "$LOG" || { bad "pmcached did not start"; cat "$LOG"; exit 1; }
ok "pmcached ready (pid $PID)"
# 4 queues asked on a guest of 2 CPUs: the driver makes 2 (it failed to
# map queue 2's descriptors and served nothing)
ncpu=$(($(cut -d- -f2 /sys/devices/system/cpu/possible) + 1))
if [ "$ncpu" -lt 4 ]; then
	grep -q "volume vol0: queues.count 4, but the kernel has $ncpu possible CPUs and the ublk driver as many queues: $ncpu queues" "$LOG" &&
		[ "$(ls /sys/block/ublkb0/mq | wc -l)" = "$ncpu" ] &&
		ok "queues.count 4 on $ncpu CPUs: $ncpu queues, logged" ||
		bad "queues.count 4 on $ncpu CPUs: $(ls /sys/block/ublkb0/mq | wc -l) queues; $(grep -i queue "$LOG")"
fi

ctl 0 "status" status && cat $OUT
has "vol0 *write-back *ok */dev/ublkb0" "status: vol0 row" && has "vol1 *write-through" "status: vol1 row"
has "occupancy" "status: occupancy"
ctl 0 "status --json" --json status && has '"nr_blocks"' "status --json"
ctl 0 "status via -c CONFIG" -c "$CONF" status
ctl 0 "version with a daemon" version && has "running" "version: daemon running"
ctl 0 "volume list" volume list && has "/dev/ublkb1" "volume list: ublkb1"
ctl 0 "volume list --json" --json volume list && has '"name": "vol1"' "volume list --json"

# offline commands refuse the pmem the daemon serves
ctl 6 "check while served: device busy" check "$DAX"
ctl 6 "format while served: device busy" format --force "$DAX"
ctl 6 "dump while served: device busy" dump "$DAX"

# set / get
ctl 0 "set mode" set -v vol1 mode write-around
ctl 0 "get mode" get -v vol1 mode && has "write-around" "get: mode is write-around"
# a global key, checked with the whole configuration (volumes included)
gset() { # KEY VALUE EXPECT
	pmcachectl -s "$SOCK" set "$1" "$2" >$OUT 2>$OUT.err
	_rc=$?
	[ $_rc -eq 0 ] && ok "set $1 $2" || { bad "set $1 $2: exit $_rc: $(cat $OUT.err)"; return 1; }
	ctl 0 "get $1" get "$1" && has "^$3\$" "get: $1 is $3"
}
gset writeback.high_pct 60 60
gset writeback.max_io 512K 512K
ctl 1 "raise writeback.max_io above its start value" set writeback.max_io 2M
ctl 0 "get a global key" get writeback.low_pct && has "^[0-9][0-9]*$" "get: writeback.low_pct is a number"
ctl 0 "get --json" --json get -v vol0 mode && has '"value": "write-back"' "get --json"
ctl 4 "set a start-time key: not permitted" set pmem.block_size 8K
ctl 5 "set on an unknown volume" set -v nosuch mode write-back
ctl 5 "get on an unknown volume" get -v nosuch mode
ctl 2 "get an unknown key" get no.such.key
ctl 2 "set a bad value" set -v vol1 mode fast
ctl 0 "mode back" set -v vol1 mode write-through

# write some data, then stats
dd if=/dev/urandom of=/dev/ublkb0 bs=1M count=32 oflag=direct 2>/dev/null && ok "32 MiB written to ublkb0" ||
	bad "dd to ublkb0"
dd if=/dev/ublkb0 of=/dev/null bs=1M count=32 iflag=direct 2>/dev/null
ctl 0 "stats" stats && head -60 $OUT
has "write_bytes" "stats: counters" && has "MiB" "stats: units" && has "P99" "stats: latency table"
has "µs\|ms" "stats: latency units"
ctl 0 "stats vol0 -H" stats vol0 -H && has "\.\." "stats -H: histogram buckets"
ctl 0 "stats --json" --json stats && has '"latency_log2_us"' "stats --json: histograms"
ctl 0 "stats --prometheus" stats --prometheus && head -12 $OUT
has 'pmcache_writes_total{volume="vol0"}' "prometheus: per-volume counter"
has '# TYPE pmcache_latency_seconds histogram' "prometheus: histogram"
has 'pmcache_latency_seconds_bucket{volume="vol0",path="write_pmem",le="+Inf"}' "prometheus: buckets"
ctl 0 "stats --watch" stats --watch=0.2 -n 3
[ "$(grep -c '^COUNTER' $OUT)" -eq 3 ] && ok "stats --watch: 3 refreshes" || bad "watch: $(grep -c '^COUNTER' $OUT) refreshes"
ctl 5 "stats of an unknown volume" stats nosuch

# flush: plain progress lines when not on a terminal
gset writeback.high_pct 100 100 # keep the data dirty for flush, if it can
dd if=/dev/urandom of=/dev/ublkb0 bs=1M count=64 oflag=direct 2>/dev/null
ctl 0 "flush" flush && cat $OUT
has "^flush: .* dirty blocks" "flush: progress lines" && has "flush: done" "flush: done"
# the cache's count (before the volumes: write-through vol1's own 0 matched)
ctl 0 "status after flush" --json status && sed '/"volumes"/,$d' $OUT | grep -q '"dirty_blocks": 0,' &&
	ok "flush: nothing dirty" || bad "flush: dirty blocks left: $(head -20 $OUT)"
ctl 0 "flush vol1 --json" --json flush vol1 && has '"ok"\|{ }\|{}' "flush --json"
ctl 5 "flush of an unknown volume" flush nosuch

# volume remove / add; a mounted device is busy (the daemon tests O_EXCL)
run mkfs.ext4 -q -F /dev/ublkb1 64M
mkdir -p /mnt/c
run mount /dev/ublkb1 /mnt/c
ctl 6 "volume remove of a mounted device: busy" volume remove vol1
run umount /mnt/c
ctl 5 "volume remove of an unknown volume" volume remove nosuch
ctl 0 "volume remove" volume remove vol1 && cat $OUT
ctl 0 "volume list after remove" volume list
grep -q vol1 $OUT && bad "vol1 still listed" || ok "vol1 gone"
# an add whose device cannot be made (vol0's ublk id) leaves no trace:
# the volume is not recorded in the pmem (the dump after the stop)
pmcachectl -s "$SOCK" volume add vol9 "$D1" ublk_id=0 >$OUT 2>$OUT.err &&
	bad "volume add on a ublk id in use succeeded" ||
	ok "volume add on a ublk id in use refused: $(cat $OUT.err)"
ctl 0 "volume list after the refused add" volume list
grep -q vol9 $OUT && bad "vol9 listed after its add was refused" || ok "vol9 not listed"
# a device this daemon serves is no backing disk (its I/O would come back)
ctl 1 "volume add on vol0's own device" volume add vol8 /dev/ublkb0 &&
	{ grep -q "/dev/ublkb0 is on volume vol0 of this daemon" $OUT.err && ok "the refusal names vol0" ||
		bad "the refusal does not name vol0: $(cat $OUT.err)"; }
# ... nor a device stacked on one (its I/O comes back the same way)
if dmsetup create --noudevsync ontop --table "0 2048 linear /dev/ublkb0 0" && dmsetup mknodes ontop; then
	ctl 1 "volume add on a device-mapper device over vol0's" volume add vol8 /dev/mapper/ontop &&
		{ grep -q "is on volume vol0 of this daemon" $OUT.err && ok "the refusal names vol0" ||
			bad "the refusal does not name vol0: $(cat $OUT.err)"; }
	dmsetup remove ontop || bad "dmsetup remove ontop"
else
	bad "dm-linear over /dev/ublkb0"
fi
ctl 0 "volume add" volume add vol1 "$D1" mode=write-around ublk_id=1 && cat $OUT
has "/dev/ublkb1" "volume add: device printed"
ctl 0 "volume list after add" volume list && has "vol1 *write-around" "vol1 back, write-around"
ctl 1 "volume add twice" volume add vol1 "$D1"
ctl 2 "volume add with a bad option" volume add vol2 "$D1" colour=red

# --- a remove that takes a while ------------------------------------------
# vol3 on a disk that answers in 300 ms (dm-delay over disk 2), named in
# the file: its remove writes back ~1500 scattered blocks. A reload
# (SIGHUP) meanwhile must not put it back in write-back; a file system
# mounted on it meanwhile must keep its device (the remove fails, naming
# the mount); unmounted, the remove goes through.
ctl 0 "volume remove vol1 (its disk goes under dm-delay)" volume remove vol1
if dmsetup create --noudevsync slowd --table "0 $(blockdev --getsz "$D1") delay $D1 0 300" &&
	dmsetup mknodes slowd; then
	cp "$CONF" /tmp/ctl-good.conf
	sed -i 's|^volumes = ($|volumes = ( { name = "vol3"; disk = "/dev/mapper/slowd"; mode = "write-back"; ublk_id = 3; },|' "$CONF"
	ctl 0 "volume add vol3 on the slow disk" volume add vol3 /dev/mapper/slowd mode=write-back ublk_id=3
	run mkfs.ext4 -q -F -E nodiscard /dev/ublkb3 16M
	fio --name=scatter --filename=/dev/ublkb3 --ioengine=psync --direct=1 --rw=randwrite \
		--bs=4k --offset=32M --size=64M --number_ios=1500 --randrepeat=0 \
		--output=/tmp/scatter.txt >/dev/null 2>&1 || bad "fio on ublkb3: $(cat /tmp/scatter.txt)"
	mkdir -p /mnt/s
	pmcachectl -s "$SOCK" volume remove vol3 >/tmp/rm.out 2>&1 &
	RM=$!
	sleep 1
	kill -HUP $PID
	sleep 1
	pmcachectl -s "$SOCK" --json status | tr -d ' \n' | grep -o '"name":"vol3"[^}]*' >$OUT
	kill -0 $RM 2>/dev/null && ok "the remove of vol3 is still writing back after the reload" ||
		bad "the remove of vol3 ended within 2 s: $(cat /tmp/rm.out)"
	# ... and the reload says it did not apply the file's settings of vol3
	# (it reported "reloaded": if the remove then fails, vol3 keeps its own)
	grep -q "reload of $CONF: not applied: .*volume vol3: being removed; its settings in the file not applied" "$LOG" &&
		ok "the reload says vol3's settings were not applied" ||
		bad "the reload during vol3's remove: $(grep 'reload' "$LOG" | tail -2)"
	# the remove switched it to write-around: write-back mode until its
	# dirty data is gone, draining (a reload that undid it clears that)
	grep -q '"draining":true' $OUT && ok "a reload during the remove leaves vol3 draining" ||
		bad "a reload during the remove changed vol3: $(cat $OUT)"
	run mount /dev/ublkb3 /mnt/s
	wait $RM
	rc=$?
	[ $rc -eq 6 ] && grep -q "came into use during the removal: .*/mnt/s" /tmp/rm.out &&
		ok "mounted during its remove: refused, exit 6: $(cat /tmp/rm.out)" ||
		bad "mounted during its remove: exit $rc: $(cat /tmp/rm.out)"
	ls /mnt/s >/dev/null && touch /mnt/s/after && sync && ok "the file system mounted during the remove works" ||
		bad "the file system mounted during the remove"
	ctl 0 "vol3 served after the refused remove" volume list && has "vol3 *write-back" "vol3 served, write-back"
	# the file names vol3's disk by its /dev/mapper link, the run-time add
	# recorded the node it resolved to: a reload takes them for one disk
	out=$(pmcached -c "$CONF" --reload $PID 2>&1)
	case "$out" in
	"") bad "reload after vol3's add printed nothing" ;;
	*vol3*) bad "reload: vol3's disk named by its link taken for another: $out" ;;
	*) ok "reload: vol3's disk by its link is the one served ($out)" ;;
	esac
	run umount /mnt/s
	# a stop while write-back writes to the slow disk are in flight (a
	# flush, on the write-back thread's ring) ends cleanly, and the next
	# daemon serves vol3 with what is still dirty. (Write-back on a queue
	# thread's ring, which the stop must drain, needs writes waiting for
	# free blocks: the 64 MiB cache at the end does that.)
	fio --name=scatter2 --filename=/dev/ublkb3 --ioengine=psync --direct=1 --rw=randwrite \
		--bs=4k --offset=32M --size=64M --number_ios=1500 --randrepeat=0 \
		--output=/tmp/scatter.txt >/dev/null 2>&1 || bad "fio on ublkb3: $(cat /tmp/scatter.txt)"
	vol3_dirty() {
		pmcachectl -s "$SOCK" --json status | tr -d ' \n' |
			grep -o '"name":"vol3"[^}]*' | grep -o '"dirty_blocks":[0-9]*' | cut -d: -f2
	}
	d0=$(vol3_dirty)
	pmcachectl -s "$SOCK" flush vol3 >/tmp/flush3.out 2>&1 &
	FL=$!
	for _ in $(seq 50); do
		d=$(vol3_dirty)
		[ -n "$d" ] && [ -n "$d0" ] && [ "$d" -lt "$d0" ] && break
		sleep 0.2
	done
	d=$(vol3_dirty)
	[ -n "$d" ] && [ "$d" -gt 0 ] && [ "$d" -lt "${d0:-0}" ] &&
		ok "vol3 writing back to the slow disk ($d0 dirty, now $d): stopping pmcached" ||
		bad "vol3 not writing back before the stop: dirty $d0, then $d"
	pmcached_stop "write-back in flight on a slow disk" 120
	wait $FL
	# again with vol0 and vol3 (vol1's disk is under dm-delay)
	daemon_conf /tmp/ctl-restart.conf \
		'{ name = "vol3"; disk = "/dev/mapper/slowd"; mode = "write-back"; ublk_id = 3; }'
	pmcached_start /tmp/ctl-restart.conf "$LOG" ||
		{ bad "pmcached did not start again"; cat "$LOG"; exit 1; }
	ctl 0 "vol3 served after the restart" volume list && has "vol3 *write-back" "vol3 served again"
	# a SIGKILL while every tag of vol3's queues waits on the slow disk
	# (write-through, 8 jobs at depth 64 over 2 queues of 64): the driver
	# may quiesce such a queue only when its requests time out (io_timeout,
	# 8 s here); the next pmcached waits that long and takes the device
	# over (it gave up after 5 s and refused the volume)
	ctl 0 "vol3 write-through" set -v vol3 mode write-through
	echo 8000 >/sys/block/ublkb3/queue/io_timeout || bad "io_timeout of ublkb3"
	fio --name=held --filename=/dev/ublkb3 --ioengine=libaio --direct=1 --rw=randwrite \
		--bs=4k --offset=32M --size=64M --iodepth=64 --numjobs=8 --time_based --runtime=6 \
		--group_reporting --output=/tmp/held.txt >/dev/null 2>&1 &
	FH=$!
	# until every tag of both queues waits on the slow disk (a fixed 2 s
	# was too short for 8 jobs to start on a loaded host)
	for _i in $(seq 1 100); do
		_held=$(awk '{ print $2 }' /sys/block/ublkb3/inflight)
		[ "$_held" -ge 128 ] 2>/dev/null && break
		sleep 0.2
	done
	[ "$_held" -ge 128 ] 2>/dev/null && ok "all 128 tags of vol3 held by writes to the slow disk" ||
		bad "vol3's tags not all held after 20 s: $_held writes in flight"
	kill -9 $PID
	wait $PID 2>/dev/null
	pmcached_start /tmp/ctl-restart.conf "$LOG" ||
		{ bad "pmcached did not start after SIGKILL with vol3's tags held"; tail -20 "$LOG"; exit 1; }
	if grep -q "vol3: recovered /dev/ublkb3" "$LOG"; then
		ok "vol3's device taken over after SIGKILL"
	else
		# nobody serves ublkb3: fio would wait on it for ever
		bad "vol3's device not taken over: $(grep vol3 "$LOG" | tail -3)"
		kill -9 $FH
		exit 1
	fi
	# the scenario itself: without the wait there was nothing to test
	grep -q "ublk device 3 not quiesced yet" "$LOG" &&
		ok "the takeover waited for the driver: $(grep -o 'waiting up to [0-9]* s' "$LOG" | tail -1)" ||
		bad "the takeover did not have to wait for the driver: the held tags were not produced"
	wait $FH && ok "fio across the SIGKILL: no error" || bad "fio across the SIGKILL: $(tail -5 /tmp/held.txt)"
	ctl 0 "vol3 write-back" set -v vol3 mode write-back
	ctl 0 "volume remove vol3, unmounted" volume remove vol3
	ctl 0 "volume list" volume list
	grep -q vol3 $OUT && bad "vol3 still listed after its remove" || ok "vol3 removed"
	cp /tmp/ctl-good.conf "$CONF"
	dmsetup remove slowd || bad "dmsetup remove slowd"
else
	bad "dm-delay over $D1"
fi

# --- ublk_id -1 ("any free one") when the slot's own number is taken ------
# two halves of disk 2: volA takes slot 1 with ublk_id 2 given, volB takes
# slot 2 with no ublk_id, whose number (2) volA holds: the driver picks
# (it failed with "exists" before)
sz=$(blockdev --getsz "$D1")
if dmsetup create --noudevsync halfa --table "0 $((sz / 2)) linear $D1 0" &&
	dmsetup create --noudevsync halfb --table "0 $((sz / 2)) linear $D1 $((sz / 2))" &&
	dmsetup mknodes halfa && dmsetup mknodes halfb; then
	ctl 0 "volume add volA with ublk_id 2" volume add volA /dev/mapper/halfa ublk_id=2 &&
		has "/dev/ublkb2" "volA on /dev/ublkb2"
	ctl 0 "volume add volB with any ublk id, its slot's number taken" volume add volB /dev/mapper/halfb &&
		{ grep -o "/dev/ublkb[0-9]*" $OUT | grep -qvx /dev/ublkb2 &&
			ok "volB on $(grep -o '/dev/ublkb[0-9]*' $OUT)" || bad "volB device: $(cat $OUT)"; }
	dev=$(grep -o "/dev/ublkb[0-9]*" $OUT)
	[ -n "$dev" ] && dd if=/dev/zero of="$dev" bs=4k count=16 oflag=direct 2>/dev/null &&
		ok "volB's device $dev takes writes" || bad "volB's device $dev"
	ctl 0 "volume remove volB" volume remove volB
	ctl 0 "volume remove volA" volume remove volA
	# a device start that fails after ADD_DEV (the driver makes fewer
	# queues than asked: the possible CPUs read as 8, the guest has 2)
	# deletes the device it added, not /dev/ublkb0 (it stopped and deleted
	# device 0, vol0's, and hung in DEL_DEV on vol0's open char device)
	echo 0-7 >/tmp/possible
	if mount --bind /tmp/possible /sys/devices/system/cpu/possible; then
		before=$(ls /dev/ublkc* | sort | tr '\n' ' ')
		pmcachectl -s "$SOCK" volume add volC /dev/mapper/halfa >$OUT 2>$OUT.err
		rc=$?
		umount /sys/devices/system/cpu/possible
		[ $rc -ne 0 ] && grep -q "made device [0-9]* with 2 queues, not 4" $OUT.err &&
			ok "an add whose device has too few queues is refused: exit $rc: $(cat $OUT.err)" ||
			bad "an add whose device has too few queues: exit $rc: $(cat $OUT.err)"
		after=$(ls /dev/ublkc* | sort | tr '\n' ' ')
		[ "$before" = "$after" ] && ok "no ublk device left behind ($after)" ||
			bad "ublk devices before the refused add: $before; after: $after"
		dd if=/dev/ublkb0 of=/dev/null bs=4k count=16 iflag=direct 2>/dev/null &&
			ok "vol0's /dev/ublkb0 still serves" || bad "vol0's /dev/ublkb0 gone after the refused add"
	else
		bad "bind mount over /sys/devices/system/cpu/possible"
	fi
	dmsetup remove halfb || bad "dmsetup remove halfb"
	dmsetup remove halfa || bad "dmsetup remove halfa"
else
	bad "dm-linear halves of $D1"
fi
ctl 0 "volume add vol1 again" volume add vol1 "$D1" mode=write-around ublk_id=1

# permission denied: a non-root user on the root-only socket
pmc-run-as 65534 65534 pmcachectl -s "$SOCK" status >$OUT 2>$OUT.err
rc=$?
[ $rc -eq 4 ] && grep -q "permission denied" $OUT.err && ok "non-root: exit 4: $(cat $OUT.err)" ||
	bad "non-root: exit $rc: $(cat $OUT.err)"

# --- stop, then offline again --------------------------------------------
pmcached_stop "before the offline checks"
ctl 3 "status after stop" status
ctl 0 "check after stop" check "$DAX" && has "consistent" "check: consistent after serving"
ctl 0 "dump after stop" dump "$DAX" && head -80 $OUT | tail -30
has "vol0" "dump: vol0 in the volume table"
grep -q vol9 $OUT && bad "dump: vol9, whose add was refused, is in the volume table" ||
	ok "dump: no vol9 in the volume table"
ctl 0 "dump --json --all" --json dump --limit 4 "$DAX" && has '"descriptors"' "dump --json"
ctl 8 "format refuses the served cache" format "$DAX"

# --- a stop right after writes waited for free blocks ---------------------
# A cache of 64 MiB (a file, 15872 blocks) in front of disk 2 whose writes
# take a second (dm-delay): fio writes 72 MiB, more than the cache holds,
# so writes wait for free blocks and the queue threads run write-back on
# their own rings. A stop as soon as fio is done (its device unused, so
# removed: STOP_DEV ends the queue threads' loops) must reap the write-back
# writes still on those rings (it spun for ever in pmc_queue_destroy: only
# the ring's own thread can reap them). The next daemon serves every
# block fio wrote.
if dmsetup create --noudevsync slowq --table "0 $(blockdev --getsz "$D1") delay $D1 0 0 $D1 0 1000" &&
	dmsetup mknodes slowq; then
	rm -f /tmp/small.pmem
	cat >/tmp/small.conf <<EOC
pmem = { path = "/tmp/small.pmem"; size = "64M"; format = "if-blank"; };
state_dir = "/tmp/pmcache-state-small";
control = { socket = "$SOCK"; };
queues = { count = 2; depth = 64; };
writeback = { max_inflight = 128; };
volumes = ( { name = "q"; disk = "/dev/mapper/slowq"; mode = "write-back"; ublk_id = 5; } );
EOC
	pmcached_start /tmp/small.conf "$LOG" ||
		{ bad "pmcached on a 64 MiB cache did not start"; tail -20 "$LOG"; exit 1; }
	fill() { # fio ARGS over all of 72 MiB of ublkb5, each block once
		timeout 240 fio --name=fill --filename=/dev/ublkb5 --ioengine=libaio --direct=1 --rw=randwrite \
			--bs=4k --size=72M --iodepth=32 --verify=crc32c --verify_fatal=1 "$@" \
			--output=/tmp/fill.txt >/dev/null 2>&1
	}
	fill --do_verify=0 &
	FF=$!
	# the waits counted while fio runs (by another process: the stop
	# below must come as soon as fio is done)
	(while kill -0 $FF 2>/dev/null; do
		pmcachectl -s "$SOCK" --json stats 2>/dev/null | tr -d ' \n' |
			grep -o '"nospace_waits":[0-9]*' | head -1 | cut -d: -f2
		sleep 0.5
	done >/tmp/waits.txt) &
	WP=$!
	wait $FF
	rc=$?
	pmcached_stop "at once after writes waited for free blocks" 60
	[ $rc -eq 0 ] && ok "72 MiB written through a 64 MiB cache over the slow disk" ||
		bad "fio on ublkb5: exit $rc: $(grep -i -m3 'err' /tmp/fill.txt)"
	wait $WP
	waits=$(sort -n /tmp/waits.txt | tail -1)
	[ "${waits:-0}" -gt 0 ] && ok "writes waited for free blocks ($waits times)" ||
		bad "no write waited for a free block: $(tr '\n' ' ' </tmp/waits.txt)"
	pmcached_start /tmp/small.conf "$LOG" ||
		{ bad "pmcached did not start again on the 64 MiB cache"; tail -20 "$LOG"; exit 1; }
	pmcachectl -s "$SOCK" --json status | tr -d ' \n' | grep -o '"dirty_blocks":[0-9]*' | head -1 >$OUT
	ok "after the restart: $(cat $OUT)"
	fill --verify_only && ok "every block fio wrote reads back" ||
		bad "ublkb5 after the restart: $(grep -i -m3 'err\|verify' /tmp/fill.txt)"
	# 8 MiB more (dirty for seconds at a write-back write a second), then a
	# start whose file no longer lists q: warned, naming q and its disk
	fio --name=more --filename=/dev/ublkb5 --ioengine=libaio --direct=1 --rw=randwrite \
		--bs=4k --size=8M --iodepth=32 --output=/tmp/more.txt >/dev/null 2>&1 ||
		bad "fio on ublkb5: $(cat /tmp/more.txt)"
	pmcached_stop "after the 64 MiB cache's check" 60
	sz=$(blockdev --getsz "$D1")
	if dmsetup create --noudevsync tailq --table "0 131072 linear $D1 $((sz - 131072))" &&
		dmsetup mknodes tailq; then
		sed 's|{ name = "q"; disk = "/dev/mapper/slowq";|{ name = "q2"; disk = "/dev/mapper/tailq";|; s|ublk_id = 5;|ublk_id = 6;|' \
			/tmp/small.conf >/tmp/small2.conf
		pmcached_start /tmp/small2.conf "$LOG" ||
			{ bad "pmcached on the 64 MiB cache without q did not start"; tail -20 "$LOG"; }
		grep -q "volume q: [0-9]* dirty blocks in the pmem (0 of them lost to media errors), but the configuration does not list it: its disk /dev/mapper/slowq lacks those writes" "$LOG" &&
			ok "a start without q names its dirty blocks: $(grep -o 'volume q: [0-9]* dirty blocks' "$LOG" | tail -1)" ||
			bad "no warning for q's dirty blocks: $(grep 'volume q' "$LOG" | tail -3)"
		pmcached_stop "the 64 MiB cache without q" 60
		dmsetup remove tailq || bad "dmsetup remove tailq"
	else
		bad "dm-linear over the tail of $D1"
	fi
	dmsetup remove slowq || bad "dmsetup remove slowq"
else
	bad "dm-delay over $D1 for the 64 MiB cache"
fi
exit $FAIL
