# t-daemon.sh [KILLS] - guest: pmcached on devdax and two NVMe disks.
#   1. bad input refused with a clear message, nothing changed: an invalid
#      config, a missing pmem device, a backing disk smaller than recorded;
#   2. two volumes on two disks sharing one cache (write-back and
#      write-through): ext4 on /dev/ublkb0 (mkfs, copy, compare, remount),
#      fio crc32c verify at several block sizes on /dev/ublkb1;
#   3. the daemon SIGKILLed KILLS times during fio writes (default 5):
#      restarted, the devices never disappear, fio's verify passes;
#   4. a graceful stop removes the devices; a restart serves the same data;
#   5. removing a volume at run time leaves all its data on its NVMe disk,
#      and adding it back at run time serves the same data;
#   6. the per-tag buffer path (kernels without UBLK_F_USER_COPY, forced
#      with PMCACHED_NO_USER_COPY=1): fio verify in write-back;
#   7. another (smaller) disk under a volume is refused, nothing changed.
# and on the way: fio verify in all four modes switched at run time, and
# malformed or oversized control requests answered with errors.
. /host/lib.sh
KILLS=${1:-5}
PATH=/host/bin:$PATH
CONF=/tmp/pmcached.conf
LOG=/host/out/pmcached.log
SOCK=/tmp/pmcached.sock

DAX=$(setup_devdax) || { bad "devdax: $DAX"; exit 1; }
D0=$(nvme_dev "$(nvme_serial 1)") || { bad "no NVMe disk 1"; exit 1; }
D1=$(nvme_dev "$(nvme_serial 2)") || { bad "no NVMe disk 2"; exit 1; }
ok "devdax $DAX, disks $D0 $D1"

conf() { # MODE1 [PMEM]
	cat >"$CONF" <<EOC
pmem = { path = "${2:-$DAX}"; };
state_dir = "/tmp/pmcache-state";
control = { socket = "$SOCK"; };
queues = { count = 2; depth = 64; };
volumes = (
	{ name = "vol0"; disk = "$D0"; mode = "write-back"; ublk_id = 0; },
	{ name = "vol1"; disk = "$D1"; mode = "${1:-write-through}"; ublk_id = 1; }
);
EOC
}

start() {
	pmcached_start "$CONF" "$LOG"
}

# --- 1. bad input -------------------------------------------------------
echo 'volumes = ( { name = "x" } );' >/tmp/bad.conf
out=$(pmcached -c /tmp/bad.conf --check-config 2>&1) && bad "invalid config accepted"
echo "$out" | grep -q "bad.conf" && ok "invalid config refused: $out" || bad "unclear: $out"
conf write-through /dev/dax9.9
out=$(pmcached -c "$CONF" 2>&1); rc=$?
[ $rc -ne 0 ] && ok "missing pmem: exit $rc" || bad "missing pmem accepted"
echo "$out" | grep -q "dax9.9" && ok "message names it: $(echo "$out" | grep dax9.9 | head -1)" ||
	bad "missing pmem: unclear: $out"
[ -e /dev/ublkb0 ] && bad "a device appeared without pmem"

# --- 2. serving ---------------------------------------------------------
conf write-through
: >"$LOG"
start || { bad "pmcached did not start"; cat "$LOG"; exit 1; }
ok "pmcached ready (pid $PID): $(grep ready: "$LOG" | tail -1)"
# Linux 6.12 has UBLK_F_USER_COPY: the data goes between pmem and the request
grep -q "/dev/ublkb0.*user copy" "$LOG" && ok "user copy in use: $(grep -m1 'user copy' "$LOG")" ||
	bad "user copy not in use: $(grep -m1 '/dev/ublkb0' "$LOG")"
[ -b /dev/ublkb0 ] && [ -b /dev/ublkb1 ] || { bad "no /dev/ublkb0 and 1"; exit 1; }
S0=$(blockdev --getsize64 /dev/ublkb0)
[ "$S0" = "$(blockdev --getsize64 "$D0")" ] && ok "ublkb0 is $S0 bytes like $D0" ||
	bad "ublkb0 size $S0"
# ext4 in the first 256 MiB: the fio runs below use 512 MiB and up
run mkfs.ext4 -q -F /dev/ublkb0 256M
mkdir -p /mnt/a
run mount /dev/ublkb0 /mnt/a
run cp -a /usr/lib /mnt/a/lib
run cp -a /usr/bin /mnt/a/bin
sync
diff -r /usr/lib /mnt/a/lib >/dev/null && diff -r /usr/bin /mnt/a/bin >/dev/null &&
	ok "files copied to ext4 on ublkb0 compare equal" || bad "copy differs"
run umount /mnt/a
run mount /dev/ublkb0 /mnt/a
diff -r /usr/lib /mnt/a/lib >/dev/null && ok "equal after remount" || bad "differs after remount"
run umount /mnt/a
# every mode, switched at run time through the control socket
off=0
for mode in write-through write-back write-around pass-through; do
	out=$(pmc-vm-ctl "$SOCK" "{\"cmd\":\"set\",\"volume\":\"vol1\",\"key\":\"mode\",\"value\":\"$mode\"}")
	echo "$out" | grep -q '"ok":true' || bad "set mode $mode: $out"
	_in=0
	for _i in $(seq 1 300); do
		pmc-vm-ctl "$SOCK" '{"cmd":"volume-list"}' | grep -q "\"name\":\"vol1\"[^}]*\"mode\":\"$mode\",\"draining\":false" &&
			{ _in=1; break; }
		sleep 0.2
	done
	[ $_in = 1 ] || bad "vol1 not in $mode (draining done) within 60 s"
	for bs in 4k 64k 256k; do
		fio --name=v$bs --filename=/dev/ublkb1 --ioengine=io_uring --direct=1 --rw=randwrite \
			--bs=$bs --offset=${off}M --size=16M --iodepth=16 --verify=crc32c --verify_fatal=1 \
			--output=/tmp/fio-$bs.txt >/dev/null 2>&1 && ok "fio crc32c verify bs=$bs on ublkb1 ($mode)" ||
			{ bad "fio verify bs=$bs ($mode)"; tail -5 /tmp/fio-$bs.txt; }
		off=$((off + 16))
	done
done

# malformed and oversized control requests get an error reply; the daemon goes on
for req in 'not json' '{"cmd":"nope"}' '{"cmd":"set","volume":"vol1","key":"mode","value":"fast"}' \
	'{"cmd":"get","key":"no.such.key"}' '[1,2,3]'; do
	out=$(pmc-vm-ctl "$SOCK" "$req" 2>&1)
	echo "$out" | grep -q '"ok":false,' && ok "refused $req: $(echo "$out" | head -c 160)" ||
		bad "control request $req: $out"
done
big=$(head -c 70000 /dev/zero | tr '\0' 'x')
out=$(pmc-vm-ctl "$SOCK" "{\"cmd\":\"status\",\"pad\":\"$big\"}" 2>&1)
echo "$out" | grep -q '"ok":false' && ok "oversized request refused" || bad "oversized: $(echo "$out" | head -c 200)"
pmc-vm-ctl "$SOCK" '{"cmd":"status"}' | grep -q '"ok":true' && ok "daemon still answers" ||
	bad "daemon stopped answering"

# SIGHUP reloads the run-time tunables from the file
sed -i 's/^queues = { count = 2; depth = 64; };/queues = { count = 2; depth = 64; };\nwriteback = { high_pct = 77; low_pct = 33; };/' "$CONF"
kill -HUP $PID
# the reload runs on the daemon's loop: up to 20 s on a loaded host
for _i in $(seq 1 100); do
	out=$(pmc-vm-ctl "$SOCK" '{"cmd":"get","key":"writeback.high_pct"}')
	echo "$out" | grep -q '"value":77[,}]' && break
	sleep 0.2
done
echo "$out" | grep -q '"value":77[,}]' && ok "SIGHUP reloaded writeback.high_pct: $out" || bad "reload: $out"
grep -q "reloaded run-time tunables" "$LOG" && ok "reload logged" || bad "reload not logged"

# --- 3. SIGKILL during fio ----------------------------------------------
for k in $(seq 1 "$KILLS"); do
	fio --name=kill$k --filename=/dev/ublkb0 --ioengine=io_uring --direct=1 --rw=randwrite \
		--bs=16k --size=48M --offset=512M --iodepth=8 --verify=crc32c --verify_fatal=1 \
		--output=/tmp/fio-kill$k.txt >/dev/null 2>&1 &
	FIO=$!
	sleep 2
	kill -9 $PID
	wait $PID 2>/dev/null
	[ -b /dev/ublkb0 ] && ok "kill $k: /dev/ublkb0 still there after SIGKILL" ||
		bad "kill $k: device gone"
	start || { bad "kill $k: restart failed"; tail -20 "$LOG"; break; }
	[ "$(grep -c "recovered /dev/ublkb0" "$LOG")" -ge "$k" ] && ok "kill $k: device recovered" ||
		bad "kill $k: not recovered"
	wait $FIO && ok "kill $k: fio crc32c verify passed across the crash" ||
		{ bad "kill $k: fio failed"; tail -8 /tmp/fio-kill$k.txt; }
done

# --- 4. graceful stop and restart ---------------------------------------
kill -TERM $PID
for _i in $(seq 1 300); do kill -0 $PID 2>/dev/null || break; sleep 0.2; done
kill -0 $PID 2>/dev/null && { bad "pmcached still running 60 s after SIGTERM"; kill -9 $PID; }
wait $PID
rc=$?
[ $rc -eq 0 ] && ok "graceful stop: exit 0" || bad "graceful stop: exit $rc"
grep -q "stopped cleanly" "$LOG" && ok "logged a clean stop" || bad "no clean stop in the log"
[ -e /dev/ublkb0 ] && bad "ublkb0 left after a graceful stop" || ok "devices removed"
start || { bad "restart after stop"; tail -20 "$LOG"; exit 1; }
grep "restart (epoch" "$LOG" | tail -1 | grep -q "clean restart" &&
	ok "restart after a clean stop is a clean restart" ||
	bad "not a clean restart"
run mount /dev/ublkb0 /mnt/a
diff -r /usr/lib /mnt/a/lib >/dev/null && ok "ext4 data intact after restart" || bad "data lost"
run umount /mnt/a
fio --name=kill1 --filename=/dev/ublkb0 --ioengine=io_uring --direct=1 --rw=randwrite \
	--bs=16k --size=48M --offset=512M --iodepth=8 --verify=crc32c --verify_only=1 \
	--output=/tmp/fio-vo.txt >/dev/null 2>&1 && ok "fio verify-only after restart" ||
	{ bad "fio verify-only after restart"; tail -5 /tmp/fio-vo.txt; }

# --- 5. removing a volume leaves all its data on its disk ----------------
dd if=/dev/urandom of=/tmp/pat bs=1M count=8 2>/dev/null
run dd if=/tmp/pat of=/dev/ublkb0 bs=1M seek=100 oflag=direct 2>/dev/null
out=$(pmc-vm-ctl "$SOCK" '{"cmd":"volume-remove","name":"vol0"}' 2>&1)
echo "$out" | grep -q '"ok":true' && ok "volume-remove: $out" || bad "volume-remove: $out"
[ -e /dev/ublkb0 ] && bad "ublkb0 still there after remove"
dd if="$D0" of=/tmp/back bs=1M skip=100 count=8 iflag=direct 2>/dev/null
cmp /tmp/pat /tmp/back && ok "vol0's data is on $D0 byte for byte" || bad "data missing on $D0"
# and added back at run time: a new device over the same disk and data
out=$(pmc-vm-ctl "$SOCK" "{\"cmd\":\"volume-add\",\"name\":\"vol0\",\"disk\":\"$D0\",\"ublk_id\":0}" 2>&1)
echo "$out" | grep -q '"ok":true' && ok "volume-add at run time" ||
	{ bad "volume-add: $out"; ls -l /proc/$PID/fd; cat /proc/$PID/task/*/comm; tail -5 "$LOG"; }
dd if=/dev/ublkb0 of=/tmp/back2 bs=1M skip=100 count=8 iflag=direct 2>/dev/null
cmp /tmp/pat /tmp/back2 && ok "re-added vol0 serves the same data" || bad "re-added vol0 differs"

# --- 5b. a flush that writers keep from ending: its client gone, cancelled
# (it went on, and held off every other operation meanwhile). Write-back
# slowed to one 4 KiB write at a time, so that fio outruns it
for kv in writeback.busy_inflight=1 writeback.max_inflight=1 writeback.max_io=4K; do
	pmcachectl -s "$SOCK" set "${kv%%=*}" "${kv#*=}" >/tmp/set.txt 2>&1 ||
		bad "set $kv: $(cat /tmp/set.txt)"
done
fio --name=busy --filename=/dev/ublkb0 --ioengine=io_uring --direct=1 --rw=randwrite \
	--bs=4k --offset=256M --size=64M --iodepth=16 --time_based --runtime=30 \
	--output=/tmp/fio-busy.txt >/dev/null 2>&1 &
FIO=$!
sleep 3
timeout -s INT 5 pmcachectl -s "$SOCK" flush vol0 >/tmp/flush1.txt 2>&1
rc=$?
case $rc in
124 | 130) ok "flush of vol0 under writes interrupted after 5 s (exit $rc): $(tail -1 /tmp/flush1.txt)" ;;
0) ok "flush of vol0 under writes ended by itself: the cancel not exercised" ;;
*) bad "flush of vol0 under writes: exit $rc: $(tail -2 /tmp/flush1.txt)" ;;
esac
sleep 1
timeout 20 pmcachectl -s "$SOCK" flush vol1 >/tmp/flush2.txt 2>&1 &&
	ok "the next flush runs: $(tail -1 /tmp/flush2.txt)" ||
	bad "the next flush: $(tail -2 /tmp/flush2.txt)"
wait $FIO || bad "fio under the flushes: $(tail -3 /tmp/fio-busy.txt)"
for kv in writeback.max_io=1M writeback.max_inflight=32 writeback.busy_inflight=4; do
	pmcachectl -s "$SOCK" set "${kv%%=*}" "${kv#*=}" >/tmp/set.txt 2>&1 ||
		bad "set $kv: $(cat /tmp/set.txt)"
done

# --- 6. the tag-buffer path ------------------------------------------------
pmcached_stop "before the tag-buffer path"
PMCACHED_NO_USER_COPY=1 pmcached_start "$CONF" "$LOG" || { bad "start with tag buffers"; exit 1; }
grep "/dev/ublkb1" "$LOG" | tail -1 | grep -q "tag buffers" && ok "PMCACHED_NO_USER_COPY=1: tag buffers" ||
	bad "tag buffers not in use: $(grep '/dev/ublkb1' "$LOG" | tail -1)"
out=$(pmc-vm-ctl "$SOCK" '{"cmd":"set","volume":"vol1","key":"mode","value":"write-back"}')
echo "$out" | grep -q '"ok":true' || bad "set mode write-back: $out"
for bs in 4k 256k; do
	fio --name=tb$bs --filename=/dev/ublkb1 --ioengine=io_uring --direct=1 --rw=randrw \
		--bs=$bs --offset=256M --size=16M --iodepth=16 --verify=crc32c --verify_fatal=1 \
		--output=/tmp/fio-tb$bs.txt >/dev/null 2>&1 && ok "tag buffers: fio verify bs=$bs" ||
		{ bad "tag buffers: fio verify bs=$bs"; tail -5 /tmp/fio-tb$bs.txt; }
done

# --- 7. a backing disk smaller than the volume recorded in the cache ------
pmcached_stop "after the tag-buffer path"
truncate -s 256M /tmp/small.img
cat >/tmp/small.conf <<EOC
pmem = { path = "$DAX"; };
state_dir = "/tmp/pmcache-state";
control = { socket = "$SOCK"; };
volumes = ( { name = "vol1"; disk = "/tmp/small.img"; ublk_id = 1; } );
EOC
timeout 120 pmcached -c /tmp/small.conf >/tmp/small.log 2>&1
rc=$?
[ $rc -ne 0 ] && ok "volume on a too small disk: exit $rc" || bad "too small disk accepted"
# another disk than the one vol1 recorded: refused as the wrong disk before
# its size is looked at (the size refusal of a volume's own, shrunk disk is
# engine_faults.refusals)
grep -q "volume vol1: wrong disk: the cache recorded nvme\..*, /tmp/small.img is file-" /tmp/small.log &&
	ok "$(grep small.img /tmp/small.log | head -1)" || { bad "unclear:"; cat /tmp/small.log; }
[ -e /dev/ublkb1 ] && bad "ublkb1 served from the small disk"
conf write-through
start || { bad "restart with the right disk"; tail -20 "$LOG"; exit 1; }
pmc-vm-ctl "$SOCK" '{"cmd":"volume-list"}' | grep -q '"name":"vol1"' && ok "vol1 still in the cache" ||
	bad "vol1 lost"
pmcached_stop "end"
grep -E "<[0-3]>" "$LOG" | head -5
exit $FAIL
