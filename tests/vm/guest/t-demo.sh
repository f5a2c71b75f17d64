# t-demo.sh - guest half of the main job (daemon/demo.sh): pmcached over
# the devdax namespace and an NVMe disk with the default tunables, a file
# system on the cached device, and what an operator sees of it through
# pmcachectl: status and stats tables, a restart under the mounted file
# system, a flush with progress, and the commands to type next.
. /host/lib.sh
PATH=/host/bin:$PATH
DAX=$(setup_devdax) || { bad "devdax: $DAX"; exit 1; }
DISK=$(nvme_dev "$(nvme_serial 1)") || { bad "no NVMe disk"; exit 1; }
cat >/tmp/pmcached.conf <<EOC
pmem = { path = "$DAX"; };
state_dir = "/var/lib/pmcache";
volumes = ( { name = "demo"; disk = "$DISK"; } );
EOC
echo "== /tmp/pmcached.conf"
cat /tmp/pmcached.conf
pmcached_start /tmp/pmcached.conf /tmp/pmcached.log || { bad "pmcached did not start"; cat /tmp/pmcached.log; exit 1; }
cat /tmp/pmcached.log
[ -b /dev/ublkb0 ] || { bad "pmcached did not export /dev/ublkb0"; exit 1; }
echo "== /dev/ublkb0 serves volume demo ($(blockdev --getsize64 /dev/ublkb0) bytes), caching $DISK in $DAX"
run mkfs.ext4 -q -F /dev/ublkb0
mkdir -p /mnt/demo
run mount /dev/ublkb0 /mnt/demo
run cp -a /usr/lib /mnt/demo/
sync
df -h /mnt/demo
# from the device, not the page cache that holds what cp wrote
run umount /mnt/demo && run mount /dev/ublkb0 /mnt/demo
diff -r /usr/lib /mnt/demo/lib >/dev/null && ok "a file system on the cached device holds what was copied" ||
	bad "copy differs"
echo
echo "== pmcachectl status"
run pmcachectl status
echo
echo "== pmcachectl stats"
run pmcachectl stats
echo
echo "== restart of pmcached under the mounted file system (what systemctl restart does)"
kill -TERM $PID
wait $PID
tail -2 /tmp/pmcached.log
pmcached_start /tmp/pmcached.conf /tmp/pmcached.log || { bad "pmcached did not start again"; exit 1; }
grep "recovered /dev/ublkb0" /tmp/pmcached.log | tail -1
sync
echo 3 >/proc/sys/vm/drop_caches # read through the restarted daemon
diff -r /usr/lib /mnt/demo/lib >/dev/null && ok "the mounted file system reads the same after the restart" ||
	bad "differs after the restart"
run umount /mnt/demo
echo
echo "== pmcachectl flush (write back everything)"
run pmcachectl flush
run pmcachectl shutdown
wait $PID
tail -2 /tmp/pmcached.log
cat <<'EON'

== what an operator types next, on a machine with ublk (Linux >= 6.1):
  pmcachectl status                      # the cache and its volumes at a glance
  pmcachectl stats --watch               # counters and latencies, refreshed every second
  pmcachectl volume add NAME /dev/disk/by-id/DISK   # cache one more disk, as /dev/pmcache/NAME
EON
exit $FAIL
