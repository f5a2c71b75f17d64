# t-ctl-stress.sh [SECONDS] - guest: the control socket of a live pmcached
# under hostile clients (pmc-vm-ctlstress: requests abandoned, clients
# that never read, random and malformed lines, lines past the limit, bursts
# of 100 connections of a control.group member) for SECONDS (default 40)
# while fio writes and verifies on its device. Checks: the daemon neither
# dies nor grows (VmRSS at most 64 MiB over its start), root always gets
# status (pmc-vm-ctlstress), every fio pass verifies, and the daemon still
# stops cleanly.
. /host/lib.sh
PATH=/host/bin:$PATH
SECS=${1:-40}
CONF=/tmp/pmcached.conf
LOG=/host/out/pmcached.log
# a socket directory the daemon makes itself, under the unit's umask: it
# gives it to control.group (it stayed 0700, and members got EACCES)
SOCK=/tmp/pmcsock/pmcached.sock
GID=900

DAX=$(setup_devdax) || { bad "devdax: $DAX"; exit 1; }
D0=$(nvme_dev "$(nvme_serial 1)") || { bad "no NVMe disk 1"; exit 1; }
D1=$(nvme_dev "$(nvme_serial 2)") || { bad "no NVMe disk 2"; exit 1; }
ok "devdax $DAX, disks $D0 $D1"
grep -q '^pmcctl:' /etc/group || echo "pmcctl:x:$GID:" >>/etc/group
cat >"$CONF" <<EOC
pmem = { path = "$DAX"; };
state_dir = "/tmp/pmcache-state";
control = { socket = "$SOCK"; group = "pmcctl"; idle_timeout = 5; allowed_disks = "$D0 /dev/sd*"; };
queues = { count = 2; depth = 64; };
volumes = ( { name = "vol0"; disk = "$D0"; mode = "write-back"; ublk_id = 0; } );
EOC
: >"$LOG"
rm -rf /tmp/pmcsock
umask 077
pmcached_start "$CONF" "$LOG" || { bad "pmcached did not start"; cat "$LOG"; exit 1; }
umask 022
ok "pmcached ready (pid $PID)"
[ "$(stat -c '%a %G' /tmp/pmcsock)" = "750 pmcctl" ] &&
	ok "the socket directory it made: $(stat -c '%a %U:%G' /tmp/pmcsock)" ||
	bad "the socket directory it made: $(stat -c '%a %U:%G' /tmp/pmcsock)"
# volume add: block devices matching control.allowed_disks only
refused() { # WHAT PATTERN ARGS...: pmcachectl ARGS fails saying PATTERN
	_w=$1 _p=$2
	shift 2
	pmcachectl -s "$SOCK" "$@" >/tmp/o 2>&1 && { bad "$_w: accepted"; return; }
	grep -q -- "$_p" /tmp/o && ok "$_w: $(cat /tmp/o)" || bad "$_w: $(cat /tmp/o)"
}
refused "volume add of a disk not in control.allowed_disks" "not in control.allowed_disks" \
	volume add x "$D1"
refused "volume add of a character device" "not a block device" volume add x "$DAX"
refused "volume add of a file" "not a block device" volume add x "$CONF"
pmc-run-as 65534 $GID pmcachectl -s "$SOCK" volume add x "$D1" >/tmp/o 2>&1
rc=$?
[ $rc -eq 4 ] && grep -q "permission denied" /tmp/o && ok "a member may not add: exit 4: $(cat /tmp/o)" ||
	bad "a member's volume add: exit $rc: $(cat /tmp/o)"
pmc-run-as 65534 $GID pmcachectl -s "$SOCK" status >/tmp/o 2>&1 && ok "a member may read status" ||
	bad "a member's status: $(cat /tmp/o)"

rss() { awk '/^VmRSS:/ { print $2 }' /proc/$PID/status; }
RSS0=$(rss)

# fio verify passes on the device until the stress ends
rm -f /tmp/stress.done /tmp/fio.fail
(
	i=0
	while [ ! -e /tmp/stress.done ]; do
		i=$((i + 1))
		fio --name=s$i --filename=/dev/ublkb0 --ioengine=io_uring --direct=1 \
			--rw=randwrite --bs=16k --size=24M --offset=$(((i % 8) * 32))M \
			--iodepth=8 --verify=crc32c --verify_fatal=1 \
			--output=/tmp/fio-$i.txt >/dev/null 2>&1 ||
			{ echo "$i" >>/tmp/fio.fail; tail -5 /tmp/fio-$i.txt; }
		echo $i >/tmp/fio.passes
	done
) &
FIO=$!
# the daemon's RSS, every 2 s
(
	while kill -0 $PID 2>/dev/null && [ ! -e /tmp/stress.done ]; do
		rss >>/tmp/rss.txt
		sleep 2
	done
) &
SAMPLER=$!

pmc-vm-ctlstress "$SOCK" "$SECS" $GID ${PMC_VM_SEED:-} && ok "control socket stress: root always served" ||
	bad "control socket stress"
touch /tmp/stress.done
wait $FIO
wait $SAMPLER
kill -0 $PID 2>/dev/null && ok "pmcached alive after the stress" || { bad "pmcached died"; tail -30 "$LOG"; exit 1; }
[ -e /tmp/fio.fail ] && bad "fio verify failed in passes $(cat /tmp/fio.fail | tr '\n' ' ')" ||
	ok "fio: $(cat /tmp/fio.passes) passes written and verified during the stress"
rss >>/tmp/rss.txt
MAX=$(sort -n /tmp/rss.txt | tail -1)
[ -n "$RSS0" ] && [ -n "$MAX" ] || { bad "no RSS samples of pmcached (start '$RSS0', during '$MAX')"; exit 1; }
echo "pmcached VmRSS: $RSS0 KiB at start, at most $MAX KiB during the stress"
[ $((MAX - RSS0)) -le 65536 ] && ok "RSS grew $((MAX - RSS0)) KiB (bound 64 MiB)" ||
	bad "RSS grew $((MAX - RSS0)) KiB"
pmcachectl -s "$SOCK" status >/tmp/status.txt 2>&1 && ok "pmcachectl status after the stress" ||
	{ bad "status after the stress"; cat /tmp/status.txt; }
grep -c "control: uid 65534" "$LOG" | sed 's/^/log lines about uid 65534: /'
grep -q "refused, not an admin" "$LOG" && ok "refused changes by a member are logged" ||
	bad "no log of refused changes"
kill -TERM $PID
wait $PID
rc=$?
[ $rc -eq 0 ] && ok "pmcached stopped cleanly" || bad "pmcached exit $rc"
exit $FAIL
