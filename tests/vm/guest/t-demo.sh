# t-demo.sh - guest half of the main job (daemon/demo.sh): pmcached over
# the devdax namespace and an NVMe disk with the default tunables, a file
# system on the cached device, and what pmcached reports about it.
. /host/lib.sh
PATH=/host/bin:$PATH
DAX=$(setup_devdax) || { bad "devdax: $DAX"; exit 1; }
DISK=$(nvme_dev "$(nvme_serial 1)") || { bad "no NVMe disk"; exit 1; }
SOCK=/run/pmcache/pmcached.sock
cat >/tmp/pmcached.conf <<EOC
pmem = { path = "$DAX"; };
state_dir = "/var/lib/pmcache";
volumes = ( { name = "demo"; disk = "$DISK"; } );
EOC
echo "== /tmp/pmcached.conf"
cat /tmp/pmcached.conf
pmcached_start /tmp/pmcached.conf /tmp/pmcached.log
cat /tmp/pmcached.log
[ -b /dev/ublkb0 ] || { bad "pmcached did not export /dev/ublkb0"; exit 1; }
echo "== /dev/ublkb0 serves volume demo ($(blockdev --getsize64 /dev/ublkb0) bytes), caching $DISK in $DAX"
run mkfs.ext4 -q -F /dev/ublkb0
mkdir -p /mnt/demo
run mount /dev/ublkb0 /mnt/demo
run cp -a /usr/lib /mnt/demo/
sync
df -h /mnt/demo
diff -r /usr/lib /mnt/demo/lib >/dev/null && ok "a file system on the cached device holds what was copied" ||
	bad "copy differs"
echo "== status"
pmc-vm-ctl "$SOCK" '{"cmd":"status"}'
echo "== stats"
pmc-vm-ctl "$SOCK" '{"cmd":"stats","volume":"demo"}'
run umount /mnt/demo
echo "== flush (write back everything)"
pmc-vm-ctl "$SOCK" '{"cmd":"flush"}'
kill -TERM $PID
wait $PID
tail -3 /tmp/pmcached.log
exit $FAIL
