# t-dcut.sh write|verify SEED [ACKED] - guest halves of vm-daemon-powercut.
# write: pmcached (write-back) on devdax and an NVMe disk; ext4 on
#   /dev/ublkb0 with /usr/bin copied and synced; then, while files keep
#   being written into the mounted file system, fio writes 1 MiB chunks
#   with crc32c headers past the file system and prints PMC_ACK i after
#   each chunk completed. The host cuts the power at a random instant.
# verify: pmcached restarts on the same pmem and disk (a crash restart),
#   e2fsck finds the file system clean after its journal replay, the
#   synced files are intact, and every chunk up to ACKED verifies.
. /host/lib.sh
PATH=/host/bin:$PATH
WHAT=$1 SEED=$2 ACKED=${3:--1}
DAX=$(setup_devdax) || { bad "devdax: $DAX"; exit 1; }
D0=$(nvme_dev "$(nvme_serial 1)") || { bad "no NVMe disk"; exit 1; }
cat >/tmp/pmcached.conf <<EOC
pmem = { path = "$DAX"; };
state_dir = "/tmp/pmcache-state";
control = { socket = "/tmp/pmcached.sock"; };
volumes = ( { name = "vol0"; disk = "$D0"; mode = "write-back"; ublk_id = 0; seq_cutoff = 0; } );
EOC
# seq_cutoff 0: the chunks are one sequential stream, and the power cut is
# to find them acknowledged in the pmem, not sent around the cache
pmcached_start /tmp/pmcached.conf /tmp/pmcached.log ||
	{ bad "pmcached did not start"; cat /tmp/pmcached.log; exit 1; }
grep -E "restart|ready" /tmp/pmcached.log

chunk() { # I [verify]
	fio --name=c$1 --filename=/dev/ublkb0 --ioengine=io_uring --direct=1 --rw=write --bs=64k \
		--offset=$((512 + $1))M --size=1M --iodepth=4 --randseed=$((SEED + $1)) \
		--verify=crc32c --verify_fatal=1 ${2:+--verify_only=1} --output=/tmp/c.txt >/dev/null 2>&1
}

if [ "$WHAT" = write ]; then
	run mkfs.ext4 -q -F /dev/ublkb0 256M
	mkdir -p /mnt/a && run mount /dev/ublkb0 /mnt/a
	run cp -a /usr/bin /mnt/a/bin
	sync
	( n=0; while :; do cp /usr/bin/fio /mnt/a/f$((n % 8)); n=$((n + 1)); done ) &
	i=0
	while :; do
		chunk $i || { echo "FAIL: chunk $i"; tail -3 /tmp/c.txt; exit 1; }
		echo "PMC_ACK $i"
		[ $i = 2 ] && echo "PMC_CUTME"
		i=$((i + 1))
	done
fi

grep -q "crash restart" /tmp/pmcached.log && ok "pmcached: crash restart" || bad "not a crash restart"
# the kernel replays the journal (a mount); then the file system must be
# clean as it is: e2fsck -p would repair what a lost write damaged, and a
# check after it could not tell a replay from a repair
mkdir -p /mnt/a && run mount /dev/ublkb0 /mnt/a && run umount /mnt/a
e2fsck -fn /dev/ublkb0 >/tmp/fsck2.txt 2>&1 && ok "e2fsck -fn after the journal replay: clean" ||
	{ bad "e2fsck -fn after the journal replay"; cat /tmp/fsck2.txt; }
run mount /dev/ublkb0 /mnt/a
diff -r /usr/bin /mnt/a/bin >/dev/null && ok "files synced before the cut are intact" ||
	bad "synced files differ"
umount /mnt/a
i=0
while [ $i -le "$ACKED" ]; do
	chunk $i verify || { bad "acknowledged chunk $i does not verify"; tail -3 /tmp/c.txt; }
	i=$((i + 1))
done
[ "$ACKED" -ge 2 ] && ok "chunks 0..$ACKED acknowledged before the cut verify" ||
	bad "only chunks up to $ACKED acknowledged: the cut comes after chunk 2"
kill -TERM $PID
wait $PID
exit $FAIL
