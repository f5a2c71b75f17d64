# t-restart-mounted.sh - guest: pmcached restarted under a mounted file
# system (the restart and live-upgrade path).
#   1. ext4 on /dev/ublkb0, mounted, with fio crc32c verify running on a
#      file in it the whole time;
#   2. "pmcachectl shutdown --remove-devices" is refused while the device
#      is mounted, and the message names the mount point;
#   3. SIGTERM four times; each daemon finishes its requests, exits 0 and
#      leaves /dev/ublkb0 quiesced; the next one (the second time a
#      different build, pmcached-next, with another version string; the
#      third time with other queues.depth and queues.max_io in its file,
#      which the device it takes over keeps as it was made) takes it over;
#   4. every fio run passes its verify, a file written before the restarts
#      reads back the same, e2fsck finds nothing, and the kernel logged no
#      I/O error;
#   5. pmcached --reload (what "systemctl reload" runs) fails, naming it,
#      for a key that needs a restart, a volume not served, a broken file,
#      and applies the run-time keys anyway (but keeps queues.max_io, which
#      sized the engine at start);
#   6. a device held open by a process: removal refused naming the
#      process; once closed, "shutdown --remove-devices" removes it;
# and first: the daemon's memory is locked but not its pmem mapping; a
# member of control.group reaches the socket in /run/pmcache though the
# directory starts as root's 0750, as systemd makes it (and, at the first
# restart, a member of control.admin_group when that is the only group).
. /host/lib.sh
PATH=/host/bin:$PATH
CONF=/tmp/pmcached.conf
LOG=/host/out/pmcached.log
SOCK=/run/pmcache/pmcached.sock
RESTARTS=4

# /run/pmcache as the unit's RuntimeDirectory leaves it (root, 0750); the
# daemon must let control.group reach its socket there
echo 'pmcops:x:4242:' >>/etc/group
echo 'pmcadm:x:4244:' >>/etc/group
mkdir -p /run/pmcache
chmod 0750 /run/pmcache

DAX=$(setup_devdax) || { bad "devdax: $DAX"; exit 1; }
D0=$(nvme_dev "$(nvme_serial 1)") || { bad "no NVMe disk"; exit 1; }
cat >"$CONF" <<EOC
pmem = { path = "$DAX"; };
state_dir = "/tmp/pmcache-state";
control = { socket = "$SOCK"; group = "pmcops"; };
queues = { count = 2; depth = 32; max_io = "512K"; };
volumes = ( { name = "data"; disk = "$D0"; mode = "write-back"; ublk_id = 0; } );
EOC
: >"$LOG"
pmcached_start "$CONF" "$LOG" || { bad "pmcached did not start"; cat "$LOG"; exit 1; }
[ -b /dev/ublkb0 ] || { bad "no /dev/ublkb0"; exit 1; }
# its memory is locked (mlockall), the pmem mapping is not
lck=$(grep VmLck /proc/$PID/status | tr -s ' \t' ' ')
[ "$(echo "$lck" | cut -d' ' -f2)" -gt 0 ] && ok "pmcached memory locked: $lck" || bad "no locked memory: $lck"
flags=$(awk '/\/dev\/dax0.0/ { m = 1 } m && /^VmFlags:/ { print; exit }' /proc/$PID/smaps)
[ -n "$flags" ] && ! echo "$flags" | grep -qE ' (lo|lf)( |$)' && ok "the pmem mapping is not locked: $flags" ||
	bad "pmem mapping: $flags"
out=$(pmc-run-as 4243 4242 pmcachectl -s "$SOCK" status 2>&1) &&
	ok "a member of control.group reaches $SOCK ($(ls -ld /run/pmcache | cut -c1-10))" ||
	bad "control.group member: $out; $(ls -ld /run/pmcache)"
run mkfs.ext4 -q -F /dev/ublkb0 256M
mkdir -p /mnt/r
run mount /dev/ublkb0 /mnt/r || exit 1
dd if=/dev/urandom of=/mnt/r/before bs=1M count=8 2>/dev/null
sync
SUM=$(md5sum </mnt/r/before)
dmesg_lines=$(dmesg | wc -l)

# fio verify in a loop on a file of the mounted ext4 until /tmp/stop-fio
fio_loop() {
	_i=0
	while [ ! -e /tmp/stop-fio ]; do
		_i=$((_i + 1))
		if fio --name=r$_i --filename=/mnt/r/fio.dat --size=16M --bs=4k --rw=randwrite \
			--ioengine=io_uring --direct=1 --iodepth=8 --verify=crc32c --verify_fatal=1 \
			--output=/tmp/fio-$_i.txt >/dev/null 2>&1; then
			echo "pass $_i" >>/tmp/fio-results
		else
			echo "FAIL $_i" >>/tmp/fio-results
		fi
	done
}
rm -f /tmp/stop-fio /tmp/fio-results
fio_loop &
LOOP=$!
sleep 3

# --- removal refused while mounted, the holder named ---------------------
out=$(pmcachectl -s "$SOCK" shutdown --remove-devices 2>&1)
rc=$?
[ $rc -eq 6 ] && echo "$out" | grep -q "mounted on /mnt/r" &&
	ok "shutdown --remove-devices refused: exit 6: $out" ||
	bad "shutdown --remove-devices while mounted: exit $rc: $out"
kill -0 $PID 2>/dev/null && ok "pmcached still serving after the refusal" ||
	{ bad "pmcached exited"; exit 1; }

# --- restarts under the mount --------------------------------------------
mkdir -p /tmp/next
ln -sf /host/bin/pmcached-next /tmp/next/pmcached
for k in $(seq 1 $RESTARTS); do
	sleep 4 # fio runs meanwhile: requests are in flight at the signal
	# the loop starts the next fio as one ends: look for a second, not
	# at the one instant between two runs
	for _w in 1 2 3 4 5 6 7 8 9 10; do pidof fio >/dev/null && break; sleep 0.1; done
	pidof fio >/dev/null && ok "restart $k: fio verify running at SIGTERM" ||
		bad "restart $k: no fio running at SIGTERM"
	kill -TERM $PID
	for _i in $(seq 1 300); do kill -0 $PID 2>/dev/null || break; sleep 0.2; done
	kill -0 $PID 2>/dev/null && { bad "restart $k: pmcached still running 60 s after SIGTERM"; kill -9 $PID; }
	wait $PID
	rc=$?
	[ $rc -eq 0 ] && ok "restart $k: SIGTERM: exit 0" || bad "restart $k: SIGTERM: exit $rc"
	[ -b /dev/ublkb0 ] && ok "restart $k: /dev/ublkb0 stays" || bad "restart $k: /dev/ublkb0 gone"
	[ "$(grep -c "ublkb0 left quiesced" "$LOG")" -ge $k ] && ok "restart $k: $(grep "left quiesced" "$LOG" | tail -1)" ||
		bad "restart $k: the device was not left quiesced"
	if [ $k -eq 2 ]; then
		PATH=/tmp/next:$PATH pmcached_start "$CONF" "$LOG" || { bad "restart $k: pmcached-next did not start"; tail -20 "$LOG"; break; }
		out=$(pmcachectl -s "$SOCK" --json status)
		echo "$out" | grep -q '"version": *"[^"]*-next"' && ok "restart $k: now serving: pmcached-next ($(echo "$out" | grep '"version"'))" ||
			bad "restart $k: not the second build: $out"
	elif [ $k -eq 1 ]; then
		# control.admin_group alone: /run/pmcache (root's 0750 again,
		# as a reboot leaves it) must be given to it, or its members
		# cannot reach the socket
		sed 's|group = "pmcops";|admin_group = "pmcadm";|' "$CONF" >/tmp/admin.conf
		chgrp root /run/pmcache && chmod 0750 /run/pmcache
		pmcached_start /tmp/admin.conf "$LOG" || { bad "restart $k: pmcached did not start"; tail -20 "$LOG"; break; }
		out=$(pmc-run-as 4245 4244 pmcachectl -s "$SOCK" set writeback.max_age_ms 30000 2>&1) &&
			ok "restart $k: a member of control.admin_group alone changes a setting ($(ls -ld /run/pmcache | cut -c1-10))" ||
			bad "restart $k: admin_group member: $out; $(ls -ld /run/pmcache)"
	elif [ $k -eq 3 ]; then
		# the file's queues changed since the device was made: it is
		# taken over with the queues it has (refusing it would leave the
		# mount waiting)
		sed 's/depth = 32; max_io = "512K";/depth = 64; max_io = "1M";/' "$CONF" >/tmp/queues.conf
		grep -q 'depth = 64; max_io = "1M";' /tmp/queues.conf || bad "restart $k: queues not edited"
		pmcached_start /tmp/queues.conf "$LOG" || { bad "restart $k: pmcached did not start with other queues"; tail -20 "$LOG"; break; }
		grep -q "ublkb0 keeps 2 queues of depth 32 and 524288-byte I/O, as it was made" "$LOG" &&
			ok "restart $k: $(grep 'keeps 2 queues' "$LOG" | tail -1)" ||
			bad "restart $k: no word of the device's own queues"
	else
		pmcached_start "$CONF" "$LOG" || { bad "restart $k: pmcached did not start"; tail -20 "$LOG"; break; }
	fi
	[ "$(grep -c "recovered /dev/ublkb0" "$LOG")" -ge $k ] && ok "restart $k: device taken over" ||
		bad "restart $k: device not recovered"
	grep "restart (epoch" "$LOG" | tail -1 | grep -q "clean restart" && ok "restart $k: a clean restart" ||
		bad "restart $k: not recorded as a clean stop: $(grep "restart (epoch" "$LOG" | tail -1)"
done
sleep 4
touch /tmp/stop-fio
wait $LOOP
n=$(grep -c pass /tmp/fio-results)
if grep -q FAIL /tmp/fio-results; then
	bad "fio verify failed: $(grep FAIL /tmp/fio-results | tr '\n' ' ')"
	f=$(grep FAIL /tmp/fio-results | head -1 | cut -d' ' -f2)
	tail -8 /tmp/fio-$f.txt
fi
[ "$n" -ge 1 ] && ok "fio crc32c verify on the mounted ext4: $n runs passed across $RESTARTS restarts" ||
	bad "no fio run finished"
# from the device, not the page cache that held it all along
sync
echo 3 >/proc/sys/vm/drop_caches
[ "$(dd if=/mnt/r/before bs=1M iflag=direct 2>/dev/null | md5sum)" = "$SUM" ] &&
	ok "a file written before the restarts reads back the same (O_DIRECT)" ||
	bad "file changed across the restarts"
errs=$(dmesg | tail -n +$((dmesg_lines + 1)) | grep -iE "I/O error|EXT4-fs error|EXT4-fs warning|blk_update_request|Buffer I/O")
[ -z "$errs" ] && ok "the kernel logged no I/O error" || bad "kernel: $errs"
run umount /mnt/r
run e2fsck -fn /dev/ublkb0 >/tmp/fsck.txt 2>&1 && ok "e2fsck: clean" || tail -5 /tmp/fsck.txt

# --- reload: what the file changes and cannot be applied fails it ---------
cp "$CONF" /tmp/good.conf
out=$(pmcached -c "$CONF" --reload $PID 2>&1) && ok "reload, file unchanged: $out" ||
	bad "reload of an unchanged file: $out"
sed -i 's/depth = 32;/depth = 64;/' "$CONF"
echo 'writeback = { high_pct = 77; low_pct = 33; };' >>"$CONF"
out=$(pmcached -c "$CONF" --reload $PID 2>&1)
rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "queues.depth 32 -> 64 needs a restart" &&
	ok "reload of a start-time key fails: $out" || bad "reload, queues.depth: exit $rc: $out"
pmcachectl -s "$SOCK" get writeback.high_pct | grep -qx 77 &&
	ok "the run-time keys of that file were applied" || bad "writeback.high_pct not applied"
# reload_keeps WHAT MSG KEY VALUE: a reload of $CONF fails naming MSG, and
# KEY keeps VALUE
reload_keeps() {
	out=$(pmcached -c "$CONF" --reload $PID 2>&1)
	rc=$?
	[ $rc -eq 1 ] && echo "$out" | grep -q "$2" &&
		pmcachectl -s "$SOCK" get "$3" | grep -qx "$4" && ok "$1: $out" ||
		bad "$1: exit $rc: $out; now $(pmcachectl -s "$SOCK" get "$3")"
}
cp /tmp/good.conf "$CONF"
echo 'writeback = { max_io = "2M"; };' >>"$CONF"
reload_keeps "reload cannot raise writeback.max_io above its start value" \
	"writeback.max_io 2097152 above its value at start" writeback.max_io 1M
cp /tmp/good.conf "$CONF"
sed -i 's/max_io = "512K";/max_io = "1M";/' "$CONF"
reload_keeps "a reload keeps queues.max_io, which sized the engine at start" \
	"queues.max_io \"512K\" -> \"1M\" needs a restart" queues.max_io 512K
cp /tmp/good.conf "$CONF"
sed -i "s|^volumes = ( |volumes = ( { name = \"extra\"; disk = \"$(nvme_dev "$(nvme_serial 2)")\"; }, |" "$CONF"
out=$(pmcached -c "$CONF" --reload $PID 2>&1)
rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "volume extra is not served" &&
	ok "reload of a new volume fails: $out" || bad "reload, new volume: exit $rc: $out"
echo 'queues = {' >"$CONF"
out=$(pmcached -c "$CONF" --reload $PID 2>&1)
rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "keeping the running configuration" &&
	ok "reload of a broken file fails: $out" || bad "reload, broken file: exit $rc: $out"
cp /tmp/good.conf "$CONF"
kill -0 $PID && ok "pmcached serves on after the failed reloads" || bad "pmcached gone"

# --- a device open in a process: refused, the process named ---------------
sleep 600 </dev/ublkb0 &
HOLD=$!
sleep 0.5
out=$(pmcachectl -s "$SOCK" shutdown --remove-devices 2>&1)
rc=$?
[ $rc -eq 6 ] && echo "$out" | grep -q "open by process $HOLD (sleep)" &&
	ok "open device: refused: $out" || bad "open device: exit $rc: $out"
kill $HOLD
wait $HOLD 2>/dev/null
out=$(pmcachectl -s "$SOCK" shutdown --remove-devices 2>&1)
rc=$?
[ $rc -eq 0 ] && ok "shutdown --remove-devices: $out" || bad "shutdown --remove-devices: exit $rc: $out"
for _i in $(seq 1 300); do kill -0 $PID 2>/dev/null || break; sleep 0.2; done
wait $PID
[ -e /dev/ublkb0 ] && bad "/dev/ublkb0 left after shutdown --remove-devices" ||
	ok "shutdown --remove-devices removed /dev/ublkb0"
grep -E "<[0-3]>" "$LOG" | head -5
exit $FAIL
