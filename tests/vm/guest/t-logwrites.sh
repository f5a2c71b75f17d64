# t-logwrites.sh [OPS] - guest: flush, FUA and write ordering on the real
# path (lib/ORDERING.md). Four volumes, one per mode (write-back,
# write-through, write-around, pass-through), each on a slice of the first
# NVMe disk under dm-log-writes, whose log goes to a slice of the second.
# pmc-vm-logwrites writes OPS 4 KiB blocks (default 800) through each
# /dev/ublkbN from 4 threads, with FUA writes and FLUSHes (fdatasync), and
# marks the log after each of them completed. After a graceful stop of
# pmcached, after a flush of all dirty data, and a mark "final", each
# log is replayed: at every entry no block holds a version never written
# or older than the one before; in write-through, write-around and
# pass-through every write acknowledged before a FLUSH or FUA mark is on
# the replayed disk at that mark; in all modes the last version of every
# block is there at "final".
. /host/lib.sh
OPS=${1:-800}
PATH=/host/bin:$PATH
CONF=/tmp/pmcached.conf
LOG=/host/out/pmcached.log
BLOCKS=2048			# 8 MiB written per volume
DSEC=131072			# 64 MiB data slice, in 512-byte sectors
LSEC=327680			# 160 MiB log slice
MODES="write-back write-through write-around pass-through"

DAX=$(setup_devdax) || { bad "devdax: $DAX"; exit 1; }
D0=$(nvme_dev "$(nvme_serial 1)") || { bad "no NVMe disk 1"; exit 1; }
D1=$(nvme_dev "$(nvme_serial 2)") || { bad "no NVMe disk 2"; exit 1; }
ok "devdax $DAX, data on $D0, logs on $D1"
mkdir -p /host/out

i=0
vols=""
for m in $MODES; do
	run dmsetup create --noudevsync d$i --table "0 $DSEC linear $D0 $((i * DSEC))" || exit 1
	run dmsetup create --noudevsync l$i --table "0 $LSEC linear $D1 $((i * LSEC))" || exit 1
	run dmsetup mknodes d$i
	run dmsetup mknodes l$i
	# the writer's blocks start as zeroes; a fresh log
	dd if=/dev/zero of=/dev/mapper/d$i bs=1M count=$((BLOCKS * 4096 / 1048576)) \
		oflag=direct 2>/dev/null || bad "zeroing d$i"
	wipe /dev/mapper/l$i
	run dmsetup create --noudevsync lw$i \
		--table "0 $DSEC log-writes /dev/mapper/d$i /dev/mapper/l$i" || exit 1
	run dmsetup mknodes lw$i
	vols="$vols	{ name = \"v$i\"; disk = \"/dev/mapper/lw$i\"; mode = \"$m\"; ublk_id = $i; },
"
	i=$((i + 1))
done
cat >"$CONF" <<EOC
pmem = { path = "$DAX"; };
state_dir = "/tmp/pmcache-state";
control = { socket = "/tmp/pmcached.sock"; };
queues = { count = 2; depth = 64; };
volumes = (
${vols%,
}
);
EOC
: >"$LOG"
pmcached_start "$CONF" "$LOG" || { bad "pmcached did not start"; cat "$LOG"; exit 1; }
ok "pmcached ready (pid $PID)"

t0=$(up)
i=0
for m in $MODES; do
	pmc-vm-logwrites write /dev/ublkb$i lw$i /host/out/journal$i $BLOCKS "$OPS" $((i + 1)) &
	eval "W$i=\$!"
	i=$((i + 1))
done
for i in 0 1 2 3; do
	eval "wait \$W$i" || bad "writer on ublkb$i failed"
done
ok "writers done in $(echo "$(up) $t0" | awk '{ printf "%.1f", $1 - $2 }') s"

# write back every dirty block (write-back), then stop
pmc-vm-ctl /tmp/pmcached.sock '{"cmd":"flush"}' | tail -n 1 | grep -q '"ok":true' &&
	ok "flush of all dirty data" || bad "flush of all dirty data failed"
kill -TERM $PID
wait $PID
grep -q "stopped cleanly" "$LOG" && ok "pmcached stopped cleanly" || bad "no clean stop"

i=0
for m in $MODES; do
	run dmsetup message lw$i 0 mark final
	run dmsetup remove lw$i
	how=strict
	[ "$m" = write-back ] && how=final
	echo "--- $m (ublkb$i): replay, $how"
	if pmc-vm-logwrites check /dev/mapper/l$i /host/out/journal$i $BLOCKS $how; then
		ok "$m: the replayed log holds every acknowledged write at its marks"
	else
		bad "$m: replay check failed"
	fi
	i=$((i + 1))
done
exit $FAIL
