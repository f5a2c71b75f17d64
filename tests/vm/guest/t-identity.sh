# t-identity.sh - guest: one owner per cache and the right disk behind every
# volume, on devdax and the two NVMe disks:
#  1. a second pmcached against a running one is refused, naming its pid
#     (same socket: the pid lock; another socket: the pmem lock), and an
#     offline check/dump/format on the served pmem says who serves it;
#  2. status shows each disk's identity;
#  3. with dirty data in the cache, the daemon is killed and the two disks
#     are swapped under the volumes (the config names each volume's disk by
#     device path; after the swap each path leads to the other disk): both
#     volumes are refused, naming the recorded and the found identity, and
#     neither disk changes by a byte;
#  4. crash takeover with the ublk ids of the two volumes exchanged: the
#     quiesced devices are left alone, each volume gets a fresh device, and
#     the acknowledged (dirty) data reads back through it.
. /host/lib.sh
PATH=/host/bin:$PATH
CONF=/tmp/pmcached.conf
LOG=/host/out/pmcached.log
SOCK=/tmp/pmcached.sock
OUT=/tmp/id.out
MIB=8

DAX=$(setup_devdax) || { bad "devdax: $DAX"; exit 1; }
S1=$(nvme_serial 1)
S2=$(nvme_serial 2)
D0=$(nvme_dev "$S1") || { bad "no NVMe disk 1"; exit 1; }
D1=$(nvme_dev "$S2") || { bad "no NVMe disk 2"; exit 1; }
ok "devdax $DAX, disks $D0 ($S1) $D1 ($S2)"
pmcachectl format --force "$DAX" >/dev/null || { bad "format"; exit 1; }

# the dirty data of part 3 is written sequentially: seq_cutoff 0 keeps it
# in the cache (with the default, all but the first 4 MiB went to the disks)
conf() { # FILE SOCKET DISK_OF_VOL0 DISK_OF_VOL1 ID0 ID1
	cat >"$1" <<EOC
pmem = { path = "$DAX"; format = "never"; };
state_dir = "/tmp/pmcache-state";
control = { socket = "$2"; };
queues = { count = 1; depth = 32; };
writeback = { high_pct = 95; low_pct = 90; max_age_ms = 3600000; };
volumes = (
	{ name = "vol0"; disk = "$3"; mode = "write-back"; ublk_id = $5; seq_cutoff = 0; },
	{ name = "vol1"; disk = "$4"; mode = "write-back"; ublk_id = $6; seq_cutoff = 0; }
);
EOC
}
sums() { # the first MIB MiB of both disks, read around any cache; a read
	# that fails or comes short is a failure (not the hash of nothing)
	for _d in "$D0" "$D1"; do
		if dd if="$_d" of=/tmp/sum.img bs=1M count=$MIB iflag=direct 2>/dev/null &&
			[ "$(stat -c %s /tmp/sum.img)" = $((MIB << 20)) ]; then
			md5sum </tmp/sum.img | cut -d' ' -f1
		else
			touch /tmp/sum.bad # a subshell: FAIL set here would not stay
			echo "unreadable-$_d"
		fi
	done | tr '\n' ' '
	rm -f /tmp/sum.img
}
# second DESC CONF PATTERN: a pmcached that must exit non-zero within 60 s
# with PATTERN in its one error line
second() {
	timeout 60 pmcached -c "$2" >$OUT 2>&1
	_rc=$?
	if [ $_rc -eq 0 ] || [ $_rc -eq 124 ]; then
		bad "$1: exit $_rc"
		cat $OUT
		return 1
	fi
	grep -q -- "$3" $OUT && ok "$1: exit $_rc: $(grep -- "$3" $OUT | head -1)" ||
		{ bad "$1: no '$3' in:"; cat $OUT; }
}

# --- 1. one owner ---------------------------------------------------------
conf $CONF $SOCK "$D0" "$D1" 0 1
: >"$LOG"
pmcached_start "$CONF" "$LOG" || { bad "pmcached did not start"; cat "$LOG"; exit 1; }
P1=$PID
ok "pmcached ready (pid $P1)"
second "second pmcached, same socket" $CONF "already runs (pid $P1,"
conf /tmp/other.conf /tmp/other.sock "$D0" "$D1" 0 1
second "second pmcached, another socket" /tmp/other.conf "in use by pmcached (pid $P1)"
kill -0 $P1 && ok "the first pmcached still runs" || bad "the first pmcached died"
pmcachectl -s $SOCK status >/dev/null && ok "its socket still answers" || bad "socket taken over"
# offline commands through a socket nobody answers on: the pmem lock refuses
for c in check dump "format --force"; do
	pmcachectl -s /tmp/nobody.sock $c "$DAX" >$OUT 2>&1
	_rc=$?
	[ $_rc -eq 6 ] && grep -q "served by pmcached (pid $P1); stop it or use the online command" $OUT &&
		ok "offline $c while served: exit 6: $(cat $OUT)" || { bad "offline $c: exit $_rc"; cat $OUT; }
done

# --- 2. identities shown --------------------------------------------------
pmcachectl -s $SOCK volume list >$OUT 2>&1
cat $OUT
ID0=$(pmcachectl -s $SOCK --json volume list | tr ',' '\n' | grep '"disk_id"' | sed -n 1p |
	sed 's/.*: *"\(.*\)"/\1/')
ID1=$(pmcachectl -s $SOCK --json volume list | tr ',' '\n' | grep '"disk_id"' | sed -n 2p |
	sed 's/.*: *"\(.*\)"/\1/')
case "$ID0" in nvme.*) ok "vol0 disk identity $ID0" ;; *) bad "vol0 disk identity '$ID0'" ;; esac
case "$ID1" in nvme.*) ok "vol1 disk identity $ID1" ;; *) bad "vol1 disk identity '$ID1'" ;; esac
[ "$ID0" != "$ID1" ] && ok "the identities differ" || bad "both disks are '$ID0'"
grep -q -- "$ID0" $OUT && ok "volume list shows it" || bad "volume list lacks $ID0"
pmcachectl -s $SOCK status | grep -q -- "$ID1" && ok "status shows it" || bad "status lacks $ID1"

# --- 3. dirty data, crash, disks swapped ----------------------------------
dd if=/dev/urandom of=/tmp/p0 bs=1M count=$MIB 2>/dev/null
dd if=/dev/urandom of=/tmp/p1 bs=1M count=$MIB 2>/dev/null
dd if=/tmp/p0 of=/dev/ublkb0 bs=1M oflag=direct 2>/dev/null && dd if=/tmp/p1 of=/dev/ublkb1 bs=1M oflag=direct 2>/dev/null ||
	bad "writes to the devices"
DIRTY=$(pmcachectl -s $SOCK --json status | tr ',' '\n' | grep '"dirty_blocks"' | head -1 | tr -dc 0-9)
[ "${DIRTY:-0}" -ge $((2 * MIB * 256)) ] && ok "$DIRTY dirty blocks in the cache" ||
	bad "only ${DIRTY:-0} dirty blocks"
BEFORE=$(sums)
kill -9 $P1
wait $P1 2>/dev/null
ok "pmcached killed with dirty data; disks: $BEFORE"
conf /tmp/swapped.conf $SOCK "$D1" "$D0" 0 1
second "disks swapped under the volumes" /tmp/swapped.conf "no volume could be served"
grep -q "volume vol0: wrong disk: the cache recorded $ID0, $D1 is $ID1" $OUT &&
	ok "vol0 refused: $(grep 'volume vol0: wrong' $OUT)" || { bad "vol0 refusal"; cat $OUT; }
grep -q "volume vol1: wrong disk: the cache recorded $ID1, $D0 is $ID0" $OUT &&
	ok "vol1 refused" || bad "vol1 refusal"
AFTER=$(sums)
[ ! -e /tmp/sum.bad ] || bad "a disk could not be read whole: $BEFORE -> $AFTER"
[ "$BEFORE" = "$AFTER" ] && ok "neither disk changed" || bad "disks changed: $BEFORE -> $AFTER"

# --- 4. takeover with the ublk ids exchanged ------------------------------
conf /tmp/xids.conf $SOCK "$D0" "$D1" 1 0
: >"$LOG"
pmcached_start /tmp/xids.conf "$LOG" || { bad "pmcached (ids exchanged) did not start"; cat "$LOG"; exit 1; }
grep "not taking over" "$LOG"
grep -q "volume vol0: not taking over quiesced /dev/ublkb1: it served volume vol1" "$LOG" &&
	ok "vol0 left ublkb1 alone" || { bad "vol0 took over ublkb1"; cat "$LOG"; }
grep -q "volume vol1: not taking over quiesced /dev/ublkb0: it served volume vol0" "$LOG" &&
	ok "vol1 left ublkb0 alone" || bad "vol1 took over ublkb0"
N0=$(pmcachectl -s $SOCK --json volume list | tr ',' '\n' | grep '"device"' | sed -n 1p |
	sed 's/.*"\/dev\/\(ublkb[0-9]*\)".*/\1/')
N1=$(pmcachectl -s $SOCK --json volume list | tr ',' '\n' | grep '"device"' | sed -n 2p |
	sed 's/.*"\/dev\/\(ublkb[0-9]*\)".*/\1/')
case "$N0$N1" in *ublkb0* | *ublkb1*) bad "fresh devices expected, got $N0 $N1" ;; *) ok "fresh devices $N0 $N1" ;; esac
[ "$(dd if=/dev/$N0 bs=1M count=$MIB iflag=direct 2>/dev/null | md5sum)" = "$(md5sum </tmp/p0)" ] &&
	ok "vol0's acknowledged data reads back on $N0" || bad "vol0 data differs"
[ "$(dd if=/dev/$N1 bs=1M count=$MIB iflag=direct 2>/dev/null | md5sum)" = "$(md5sum </tmp/p1)" ] &&
	ok "vol1's acknowledged data reads back on $N1" || bad "vol1 data differs"
pmcached_stop "end"
exit $FAIL
