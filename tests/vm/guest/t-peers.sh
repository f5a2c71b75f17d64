# t-peers.sh - guest: the peer caches the benchmarks compare against are
# usable in this guest: dm-writecache (pmem mode) over the pmem block device
# and the first NVMe disk, and bcache (writeback) with the pmem block device
# as cache and the second NVMe disk as backing. Each gets a small O_DIRECT
# write and read-back; dm-writecache's data must also reach its origin.
. /host/lib.sh
MIB=8
dd if=/dev/urandom of=/tmp/pat bs=1M count=$MIB 2>/dev/null

# check_rw DEV SKIP_MIB: write the pattern at SKIP_MIB, read it back
check_rw() {
	dd if=/tmp/pat of="$1" bs=1M seek="$2" oflag=direct 2>/dev/null &&
		dd if="$1" of=/tmp/back bs=1M skip="$2" count=$MIB iflag=direct 2>/dev/null &&
		cmp /tmp/pat /tmp/back
}

t=$(up)
PMEM=$(setup_peer_pmem) || { bad "peer pmem: $PMEM"; exit 1; }
ok "peer pmem block device $PMEM ($(blockdev --getsize64 $PMEM) bytes," \
	"dax=$(cat /sys/block/${PMEM#/dev/}/queue/dax)) in $(awk "BEGIN{print $(up) - $t}") s"
N1=$(nvme_dev "$(nvme_serial 1)") || { bad "no NVMe disk $(nvme_serial 1)"; exit 1; }
N2=$(nvme_dev "$(nvme_serial 2)") || { bad "no NVMe disk $(nvme_serial 2)"; exit 1; }

# --- dm-writecache, pmem mode: a non-zero first block is refused as
# "Invalid magic in the superblock"
echo "=== dm-writecache: cache $PMEM, origin $N1"
wipe "$PMEM"
S=$(blockdev --getsz "$N1")
if run dmsetup create --noudevsync wc --table "0 $S writecache p $N1 $PMEM 4096 0"; then
	dmsetup mknodes wc
	dmsetup table wc
	check_rw /dev/mapper/wc 16 && ok "dm-writecache: $MIB MiB written and read back" ||
		bad "dm-writecache: read-back mismatch"
	echo "status after write: $(dmsetup status wc)"
	# write everything back, then the origin alone must hold the data
	run dmsetup message wc 0 flush_on_suspend
	run dmsetup suspend wc
	echo "status after flush: $(dmsetup status wc)"
	run dmsetup remove wc
	dd if="$N1" of=/tmp/back bs=1M skip=16 count=$MIB iflag=direct 2>/dev/null
	cmp /tmp/pat /tmp/back && ok "dm-writecache: data written back to $N1" ||
		bad "dm-writecache: $N1 lacks the data after write-back"
else
	dmesg | grep -i writecache | tail -n 3
fi

# --- bcache, writeback: make-bcache writes superblocks, registration
# through sysfs brings up /dev/bcache0 (no udev here)
echo "=== bcache: cache $PMEM, backing $N2"
wipe "$PMEM"
wipe "$N2"
run make-bcache -C "$PMEM" -B "$N2" --writeback >/tmp/mb.out || cat /tmp/mb.out
echo "$PMEM" >/sys/fs/bcache/register || bad "register $PMEM"
echo "$N2" >/sys/fs/bcache/register || bad "register $N2"
i=0
while [ ! -b /dev/bcache0 ] && [ $i -lt 100 ]; do
	sleep 0.1
	i=$((i + 1))
done
if [ -b /dev/bcache0 ]; then
	BC=/sys/block/bcache0/bcache
	CSET=$(ls -d /sys/fs/bcache/*-*-*-*-* | head -n 1)
	# under TCG the cache looks congested and sequential I/O bypasses it
	echo 0 >$BC/sequential_cutoff
	echo 0 >$CSET/congested_read_threshold_us
	echo 0 >$CSET/congested_write_threshold_us
	grep -q '\[writeback\]' $BC/cache_mode && ok "bcache: cache mode writeback" ||
		bad "bcache: cache mode $(cat $BC/cache_mode)"
	[ "$(cat $BC/state)" = dirty ] || [ "$(cat $BC/state)" = clean ] ||
		bad "bcache: state $(cat $BC/state), not attached"
	check_rw /dev/bcache0 16 && ok "bcache: $MIB MiB written and read back" ||
		bad "bcache: read-back mismatch"
	echo "bcache: state $(cat $BC/state), dirty_data $(cat $BC/dirty_data)"
	echo 1 >$BC/stop
	echo 1 >$CSET/stop
	i=0
	while [ -b /dev/bcache0 ] && [ $i -lt 50 ]; do
		sleep 0.1
		i=$((i + 1))
	done
else
	bad "bcache: no /dev/bcache0"
	dmesg | grep -i bcache | tail -n 5
fi
exit $FAIL
