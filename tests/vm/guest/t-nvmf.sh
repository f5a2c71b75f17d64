# t-nvmf.sh run|verify SEED [ACKED] - guest halves of vm-nvmf: pmcached in front of
# an NVMe-oF namespace. The target is the kernel's (nvmet) exporting the
# second emulated NVMe disk over TCP on loopback (nvme-loop when tcp does
# not come up); pmcached connects it from its config with libnvme.
# run:
#  1. connect, fio write + verify through /dev/ublkb0; status shows the path;
#  2. the target's port is removed under load: writes are absorbed and read
#     back from the pmem, a read miss fails, write-back fails with the
#     volume's sticky error; the port comes back: the kernel reconnects, the
#     error clears, everything drains to the namespace;
#  3. the port stays away past ctrl_loss_tmo: the kernel deletes the
#     controller ("lost"); pmcached reconnects it once the port is back,
#     the namespace reappears under another block device name, its
#     identity matches, the disk is re-pointed and write-back drains;
#  4. dirty data with the port away, pmcached SIGKILLed, the port back, a
#     restart (its config now names the namespace by NGUID, not nsid)
#     takes the device over and everything reads back and drains;
#     then pmcached stopped and started with the port away (the controller
#     still reconnecting, or already gone): the volume is served without
#     its disk, a dirty hit reads back; the port back: the namespace is
#     swapped in and drains;
#  5. dirty data with the port away again, then PMC_CUTME: the host cuts
#     the power.
# verify: first the target exports another disk (another NGUID) under the
#   same NQN and nsid: pmcached refuses the volume naming both identities
#   and writes nothing to it. Then pmcached starts (a crash restart) with
#   the target's port removed: the volume is served without its disk
#   (status "lost"): a dirty hit reads back, a read miss fails, a write is
#   absorbed, write-back fails with the sticky error; a volume the cache
#   does not know is refused by "volume add". The port comes back
#   with the other disk: "pmcachectl volume reconnect" connects it, the
#   rebind is refused naming both identities ("wrong-disk"), nothing
#   changes. Then the right one again and a reconnect, through the
#   target's discovery controller: the namespace is swapped in after its
#   identity check, write-back drains; every acknowledged region (ACKED,
#   from the run's PMC_NVMF_ACKED line, and the one written without the
#   disk) reads back through the cache, then from the namespace's own disk
#   after a flush.
#   6. a second subsystem exports the other disk in a namespace without
#   NGUID or EUI-64 (nvmet's default): the volume records its UUID; the
#   namespace deleted and made again at the same nsid on the same disk
#   (same serial and nsid, another UUID) is refused naming both UUIDs, the
#   disk unchanged; given its old UUID (device_uuid) it is accepted and the
#   data drains; a record by controller serial and nsid, as an older
#   pmcached made, is accepted and replaced by the UUID.
. /host/lib.sh
PATH=/host/bin:$PATH
WHAT=$1 SEED=${2:-1} ACKED=$3
NQN=nqn.2026-12.org.pmcache:vm-nvmf
NGUID=504d43616368652d6e766d662d763031 # "PMCache-nvmf-v01"
CFS=/sys/kernel/config/nvmet
SOCK=/tmp/pmcached.sock
CONF=/tmp/pmcached.conf
LOG=/host/out/pmcached-$WHAT.log
SECONDS0=$(up)

DAX=$(setup_devdax) || { bad "devdax: $DAX"; exit 1; }
BACK=$(nvme_dev "$(nvme_serial 2)") || { bad "no NVMe disk 2"; exit 1; }
ok "devdax $DAX, the target's disk $BACK"

# --- the target ---------------------------------------------------------
TR=tcp
# target_up [DISK NGUID]: the subsystem with namespace 1 on DISK (default
# the target's disk and NGUID)
target_up() {
	_disk=${1:-$BACK} _nguid=${2:-$NGUID}
	grep -q ' /sys/kernel/config ' /proc/mounts || mount -t configfs none /sys/kernel/config
	ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up
	mkdir -p $CFS/subsystems/$NQN/namespaces/1 $CFS/ports/1 || return 1
	echo 1 >$CFS/subsystems/$NQN/attr_allow_any_host
	echo pmcnvmf0001 >$CFS/subsystems/$NQN/attr_serial
	echo "$_disk" >$CFS/subsystems/$NQN/namespaces/1/device_path
	echo $_nguid >$CFS/subsystems/$NQN/namespaces/1/device_nguid
	echo 1 >$CFS/subsystems/$NQN/namespaces/1/enable || return 1
	if echo tcp >$CFS/ports/1/addr_trtype && echo ipv4 >$CFS/ports/1/addr_adrfam &&
		echo 127.0.0.1 >$CFS/ports/1/addr_traddr && echo 4420 >$CFS/ports/1/addr_trsvcid &&
		ln -s $CFS/subsystems/$NQN $CFS/ports/1/subsystems/$NQN; then
		TR=tcp
	else
		echo "tcp port did not come up; nvme-loop instead"
		rm -f $CFS/ports/1/subsystems/$NQN
		echo loop >$CFS/ports/1/addr_trtype || return 1
		ln -s $CFS/subsystems/$NQN $CFS/ports/1/subsystems/$NQN || return 1
		TR=loop
	fi
}
port_down() { rm $CFS/ports/1/subsystems/$NQN; }
port_back() { ln -s $CFS/subsystems/$NQN $CFS/ports/1/subsystems/$NQN; }

if [ "$WHAT" = verify ]; then
	OTHER=$(nvme_dev "$(nvme_serial 1)") || { bad "no NVMe disk 1"; exit 1; }
	target_up "$OTHER" 0123456789abcdef0123456789abcdef || { bad "nvmet target"; exit 1; }
else
	target_up || { bad "nvmet target"; exit 1; }
fi
ok "nvmet: $NQN ns 1 = $BACK on $TR $(cat $CFS/ports/1/addr_traddr):$(cat $CFS/ports/1/addr_trsvcid)"

ADDR='traddr = "127.0.0.1"; trsvcid = "4420";'
# after the power cut: through the discovery controller (nvmet serves one
# on every port)
[ $WHAT = verify ] && ADDR="$ADDR discovery = \"yes\";"
[ $TR = loop ] && ADDR=""
# ctrl_loss_tmo: longer than part 2's outage even on a slow guest (with 6 s
# it ran out there in a run, the daemon reconnected the controller, and a
# write-back write to the deleted namespace set the volume's error after
# the path came back), short enough for part 3 to wait it out
cat >$CONF <<EOC
pmem = { path = "$DAX"; };
state_dir = "/tmp/pmcache-state";
control = { socket = "$SOCK"; };
queues = { count = 1; depth = 64; };
writeback = { high_pct = 90; low_pct = 80; max_age_ms = 500; retry_ms = 200; idle_ms = 20; };
volumes = ( { name = "net"; mode = "write-back"; ublk_id = 0;
	disk = { transport = "$TR"; $ADDR subsysnqn = "$NQN"; nsid = 1;
		ctrl_loss_tmo = 12; fast_io_fail_tmo = 1; reconnect_delay = 1; }; } );
EOC

# the host's controllers of the subsystem
nr_ctrls() { grep -lx "$NQN" /sys/class/nvme/nvme*/subsysnqn 2>/dev/null | wc -l; }
status() { pmcachectl -s $SOCK status --json 2>/dev/null | tr -d ' \n'; }
# jval NAME: the value of the volume's member NAME in status (first match)
jval() { status | grep -o "\"$1\":\"*[^\",}]*" | head -n 1 | sed 's/.*://; s/"//g'; }
# wait_for SECS DESC CMD...: until CMD succeeds
wait_for() {
	_t=$1 _d=$2
	shift 2
	for _i in $(seq 1 $((_t * 5))); do
		"$@" && { ok "$_d ($(up) s)"; return 0; }
		sleep 0.2
	done
	bad "$_d: not within $_t s; status: $(status)"
	return 1
}
state_is() { [ "$(jval state)" = "$1" ]; }
state_not() { [ "$(jval state)" != "$1" ] && [ -n "$(jval state)" ]; }
dirty_is_zero() { [ "$(jval dirty_blocks)" = 0 ]; }
dirty_nonzero() { [ "$(jval dirty_blocks)" -gt 0 ] 2>/dev/null; }
error_set() { [ "$(jval error)" -gt 0 ] 2>/dev/null; }

# region I [verify]: fio 2 MiB at I*4 MiB, crc32c headers, written and read
# back (or only verified)
region() {
	fio --name=r$1 --filename=${3:-/dev/ublkb0} --ioengine=psync --direct=1 --rw=randwrite \
		--bs=16k --offset=$(($1 * 4))M --size=2M --randseed=$((SEED + $1)) \
		--verify=crc32c --verify_fatal=1 ${2:+--verify_only=1} --output=/tmp/r.txt \
		>/dev/null 2>&1 || { cat /tmp/r.txt; return 1; }
}
# regions_ok DESC DEV I...: every region verifies on DEV
regions_ok() {
	_d=$1 _dev=$2
	shift 2
	for _r in "$@"; do
		region $_r v $_dev || { bad "$_d: region $_r does not verify on $_dev"; return 1; }
	done
	ok "$_d: regions $* verify on $_dev"
}
raw_dev() { # the namespace's own disk, read around the cache and the fabric
	echo "$BACK"
}
# start_refused CONF OUT WANT DESC: a start with CONF is refused with a line
# matching WANT (in OUT), and the other disk's first 64 MiB do not change
start_refused() {
	_sum=$(dd if="$OTHER" bs=1M count=64 iflag=direct 2>/dev/null | md5sum)
	timeout 120 pmcached -c $1 >$2 2>&1
	_rc=$?
	grep -q "$3" $2 && [ $_rc -ne 0 ] && [ $_rc -ne 124 ] &&
		ok "$4 is refused: $(grep 'wrong disk' $2)" || { bad "$4 (exit $_rc):"; cat $2; }
	[ "$(dd if="$OTHER" bs=1M count=64 iflag=direct 2>/dev/null | md5sum)" = "$_sum" ] &&
		ok "$4: its disk did not change" || bad "$4: its disk changed"
}

if [ "$WHAT" = verify ]; then
	[ -n "$ACKED" ] || { bad "no acknowledged regions given"; exit 1; }
	SUM=$(dd if="$OTHER" bs=1M count=16 iflag=direct 2>/dev/null | md5sum)
	start_refused $CONF /tmp/wrong.log "volume net: wrong disk: the cache recorded nvme.nguid-$NGUID, .* is nvme.nguid-0123456789abcdef0123456789abcdef; refusing to attach" \
		"another namespace behind the same NQN and nsid"
	# the refusal disconnected the controller its connect made
	[ "$(nr_ctrls)" = 0 ] && ok "the refused volume's controller was disconnected" ||
		bad "$(nr_ctrls) controllers of $NQN left after the refusal"
	nvme disconnect -n $NQN >/dev/null 2>&1
	# the target down when pmcached starts: the volume the cache knows is
	# served from the pmem without its disk (a placeholder); the path monitor
	# reconnects it when asked
	port_down
	pmcached_start $CONF $LOG || { bad "pmcached did not start with the target down"; cat $LOG; exit 1; }
	grep -E "restart|ready|volume net" $LOG | tail -4
	pmcachectl -s $SOCK status
	grep -q "volume net: .*; served from the cache without its disk" $LOG &&
		ok "started with the target down: the volume is served without its disk" ||
		bad "no log line: served without its disk"
	wait_for 10 "status shows the path lost" state_is lost
	regions_ok "target down at start: dirty hits" /dev/ublkb0 7
	if dd if=/dev/ublkb0 of=/dev/null bs=4k count=1 skip=$((600 * 256)) iflag=direct 2>/dev/null; then
		bad "a read miss succeeded without the disk"
	else
		ok "a read miss fails without the disk"
	fi
	region 9 && ok "a write absorbed without the disk (region 9 reads back)" ||
		bad "region 9 without the disk"
	wait_for 20 "write-back fails with the volume's sticky error" error_set
	pmcachectl -s $SOCK volume reconnect net >/tmp/rc.txt 2>&1 &&
		ok "volume reconnect with the port away: $(cat /tmp/rc.txt)" ||
		bad "volume reconnect with the port away: $(cat /tmp/rc.txt)"
	sleep 1
	state_is lost && ok "still lost with the port away" || bad "state $(jval state), port away"
	# a volume the cache does not know is not served without its disk
	if pmcachectl -s $SOCK volume add fresh nvmf disk.transport=tcp disk.traddr=127.0.0.1 \
		disk.subsysnqn=$NQN disk.nsid=1 >/tmp/add.txt 2>&1; then
		bad "a new volume was added with the target down: $(cat /tmp/add.txt)"
	elif grep -q "volume fresh: .*connect" /tmp/add.txt && [ "$(wc -l </tmp/add.txt)" = 1 ]; then
		ok "a new volume with the target down is refused: $(cat /tmp/add.txt)"
	else
		bad "the refusal of a new volume: $(cat /tmp/add.txt)"
	fi
	# the port back with another namespace behind the NQN: the rebind is
	# refused naming both identities, the volume stays on the pmem
	port_back
	pmcachectl -s $SOCK volume reconnect net >/dev/null || bad "volume reconnect (wrong namespace)"
	wait_for 30 "the other namespace is refused at the rebind" state_is wrong-disk
	grep -q "volume net: /dev/nvme[0-9n]* is disk nvme.nguid-0123456789abcdef0123456789abcdef, the cache recorded nvme.nguid-$NGUID: not used" $LOG &&
		ok "rebind refused: $(grep 'is disk nvme.nguid-0123' $LOG | tail -n 1)" ||
		{ bad "no refusal naming both identities:"; tail -n 5 $LOG; }
	regions_ok "wrong namespace refused: still served from the pmem" /dev/ublkb0 7 9
	error_set && ok "the sticky error stays" || bad "the error was cleared: $(jval error)"
	[ "$(dd if="$OTHER" bs=1M count=16 iflag=direct 2>/dev/null | md5sum)" = "$SUM" ] &&
		ok "the other disk did not change" || bad "the other disk changed"
	# the right namespace back: reconnect, identity checked, swapped in
	port_down
	nvme disconnect -n $NQN >/dev/null
	echo 0 >$CFS/subsystems/$NQN/namespaces/1/enable &&
		echo "$BACK" >$CFS/subsystems/$NQN/namespaces/1/device_path &&
		echo $NGUID >$CFS/subsystems/$NQN/namespaces/1/device_nguid &&
		echo 1 >$CFS/subsystems/$NQN/namespaces/1/enable || bad "the target's namespace back"
	port_back
	pmcachectl -s $SOCK volume reconnect net >/dev/null || bad "volume reconnect"
	wait_for 60 "reconnected: path live" state_is live
	grep -E "reconnected|disk is in|path back" $LOG | tail -3
	grep -q "volume net: its disk is in: the namespace is /dev/nvme.* (identity nvme.nguid-$NGUID matches)" $LOG &&
		ok "the namespace was swapped in after its identity check" ||
		bad "no log line: its disk is in"
	if [ $TR = tcp ]; then
		dmesg | grep -q 'new ctrl: NQN "nqn.2014-08.org.nvmexpress.discovery"' &&
			ok "pmcached connected through the discovery controller" ||
			bad "no discovery controller was connected"
	fi
	pmcachectl -s $SOCK status
	wait_for 60 "the dirty data drained after the reconnect" dirty_is_zero
	[ "$(jval error)" = 0 ] && ok "sticky error cleared" || bad "error still $(jval error)"
	regions_ok "after the power cut, through the cache" /dev/ublkb0 $ACKED 9
	pmcachectl -s $SOCK flush >/dev/null && ok "flush" || bad "flush after the power cut"
	regions_ok "after the power cut and a flush, on the namespace's disk" "$(raw_dev)" $ACKED 9
	pmcachectl -s $SOCK shutdown --remove-devices >/dev/null
	wait $PID

	# --- 6. a namespace without NGUID: identified by its UUID ---------------
	NQN2=nqn.2026-12.org.pmcache:vm-nvmf-uuid
	NS2=$CFS/subsystems/$NQN2/namespaces/1
	ns2_make() { # [UUID]: namespace 1 of NQN2 on the other disk, no NGUID
		mkdir -p $NS2 && echo "$OTHER" >$NS2/device_path &&
			{ [ -z "$1" ] || echo "$1" >$NS2/device_uuid; } && echo 1 >$NS2/enable
	}
	mkdir -p $CFS/subsystems/$NQN2 && echo 1 >$CFS/subsystems/$NQN2/attr_allow_any_host &&
		echo pmcnvmf0002 >$CFS/subsystems/$NQN2/attr_serial && ns2_make &&
		ln -s $CFS/subsystems/$NQN2 $CFS/ports/1/subsystems/$NQN2 ||
		{ bad "the second subsystem"; exit 1; }
	U1=$(cat $NS2/device_uuid)
	ok "$NQN2 ns 1 = $OTHER, device_nguid $(cat $NS2/device_nguid), uuid $U1"
	CONF2=/tmp/pmcached-uuid.conf
	LOG2=/host/out/pmcached-uuid.log
	sed -e "s/name = \"net\"/name = \"uns\"/" -e "s/subsysnqn = \"$NQN\"/subsysnqn = \"$NQN2\"/" \
		-e "s/max_age_ms = 500/max_age_ms = 600000/" $CONF >$CONF2
	pmcachectl format --force "$DAX" >/dev/null || { bad "format for part 6"; exit 1; }
	pmcached_start $CONF2 $LOG2 || { bad "pmcached on the namespace without NGUID"; cat $LOG2; exit 1; }
	[ "$(jval disk_id)" = "nvme.uuid-$U1" ] && ok "the volume recorded the namespace's UUID: $(jval disk_id)" ||
		bad "disk_id $(jval disk_id), expected nvme.uuid-$U1"
	region 12 && ok "region 12 written through the cache" || bad "region 12"
	dirty_nonzero && ok "$(jval dirty_blocks) dirty blocks" || bad "no dirty blocks in part 6"
	kill -9 $PID
	wait $PID 2>/dev/null
	nvme disconnect -n $NQN2 >/dev/null 2>&1
	# the namespace made again at the same nsid: same serial, another UUID
	echo 0 >$NS2/enable && rmdir $NS2 && ns2_make || bad "the namespace made again"
	U2=$(cat $NS2/device_uuid)
	[ "$U2" != "$U1" ] && ok "made again: uuid $U2" || bad "the namespace kept its UUID $U1"
	start_refused $CONF2 /tmp/wrong2.log "volume uns: wrong disk: the cache recorded nvme.uuid-$U1, .* is nvme.uuid-$U2; refusing to attach" \
		"the namespace made again at the same nsid"
	nvme disconnect -n $NQN2 >/dev/null 2>&1
	# the way out the refusal names: the namespace given its old UUID
	echo 0 >$NS2/enable && echo "$U1" >$NS2/device_uuid && echo 1 >$NS2/enable ||
		bad "device_uuid $U1"
	pmcached_start $CONF2 $LOG2 || { bad "pmcached with the old UUID back"; cat $LOG2; exit 1; }
	regions_ok "the old UUID back: through the cache" /dev/ublkb0 12
	pmcachectl -s $SOCK flush >/dev/null && ok "flush" || bad "flush in part 6"
	regions_ok "after a flush, on the namespace's disk" "$OTHER" 12
	# an older pmcached recorded such a namespace by serial and nsid, and
	# left its device quiesced under a user (a restart into this one): the
	# device and the volume slot are given that record
	sleep 600 </dev/ublkb0 &
	HOLD=$!
	kill $PID
	wait $PID
	grep -q "ublkb0 left quiesced" $LOG2 && ok "stopped with ublkb0 in use: left quiesced" ||
		bad "ublkb0 was not left quiesced"
	pmc-vm-cache set-id "$DAX" uns nvme.sn-pmcnvmf0002-ns1 || bad "pmc-vm-cache set-id"
	sed -i "s/^disk_id=.*/disk_id=nvme.sn-pmcnvmf0002-ns1/" /run/pmcache/ublkb0.volume ||
		bad "the device's record"
	pmcached_start $CONF2 $LOG2 || { bad "pmcached on a record by serial"; cat $LOG2; exit 1; }
	grep -q "volume uns: disk .* was recorded as nvme.sn-pmcnvmf0002-ns1 by an older pmcached; recorded its identity nvme.uuid-$U1" $LOG2 &&
		[ "$(jval disk_id)" = "nvme.uuid-$U1" ] &&
		ok "a record by serial and nsid moved to the UUID: $(jval disk_id)" ||
		{ bad "the record by serial and nsid: disk_id $(jval disk_id)"; tail -n 5 $LOG2; }
	grep -q "uns: recovered /dev/ublkb0" $LOG2 &&
		ok "the device the older record names was taken over: $(grep 'uns: recovered' $LOG2 | tail -n 1)" ||
		{ bad "the quiesced device was not taken over"; grep "ublkb" $LOG2 | tail -n 3; }
	regions_ok "after the move to the UUID" /dev/ublkb0 12
	kill $HOLD
	pmcachectl -s $SOCK shutdown --remove-devices >/dev/null
	wait $PID
	echo "PMC_NVMF_TIME verify $(awk "BEGIN { print $(up) - $SECONDS0 }") s"
	exit $FAIL
fi

# --- 1. connect, fio verify ---------------------------------------------
pmcachectl format --force "$DAX" >/dev/null || { bad "format"; exit 1; }
: >$LOG
pmcached_start $CONF $LOG || { bad "pmcached did not start"; cat $LOG; exit 1; }
grep "volume net" $LOG
[ "$(jval state)" = live ] && ok "status: path $(jval controller) $(jval device) live" ||
	bad "status after start: $(status)"
pmcachectl -s $SOCK status
case "$(jval disk_id)" in
nvme.nguid-$NGUID) ok "the volume recorded the namespace's identity $(jval disk_id)" ;;
*) bad "disk_id $(jval disk_id), expected nvme.nguid-$NGUID" ;;
esac
pmcachectl -s $SOCK disks >/tmp/disks.txt 2>&1
grep -q "$NQN" /tmp/disks.txt && ok "pmcachectl disks lists the fabric controller" ||
	{ bad "pmcachectl disks:"; cat /tmp/disks.txt; }
cat /tmp/disks.txt
region 0 && region 1 && ok "fio write + verify through the cache (regions 0 1)" || bad "fio on ublkb0"
wait_for 30 "written back" dirty_is_zero
regions_ok "written back" "$(raw_dev)" 0 1
# a refused add on the controller the served volume uses leaves it connected
if pmcachectl -s $SOCK volume add twin nvmf disk.transport=tcp disk.traddr=127.0.0.1 \
	disk.subsysnqn=$NQN disk.nsid=1 ublk_id=0 >/tmp/add.txt 2>&1; then
	bad "a second volume on the same namespace and ublk id was added"
else
	ok "a second volume on the namespace refused: $(cat /tmp/add.txt)"
fi
[ "$(nr_ctrls)" = 1 ] && state_is live && ok "the served volume's controller stays, live" ||
	bad "after the refused add: $(nr_ctrls) controllers, state $(jval state)"

# --- 2. the port removed under load, and back ---------------------------
fio --name=load --filename=/dev/ublkb0 --ioengine=psync --direct=1 --rw=randwrite --bs=4k \
	--offset=100M --size=8M --time_based --runtime=6 --output=/tmp/load.txt >/dev/null 2>&1 &
LOADPID=$!
sleep 1
port_down && ok "port removed under load"
wait_for 20 "path down (state $(jval state))" state_not live
region 2 && region 3 && ok "writes absorbed while the path is down (regions 2 3 read back from the pmem)" ||
	bad "writes while the path is down"
wait_for 20 "write-back fails with the volume's sticky error" error_set
dirty_nonzero && ok "dirty data kept: $(jval dirty_blocks) blocks" || bad "no dirty data while down"
if dd if=/dev/ublkb0 of=/dev/null bs=4k count=1 skip=$((600 * 256)) iflag=direct 2>/dev/null; then
	bad "a read miss succeeded with the path down"
else
	ok "a read miss fails while the path is down"
fi
regions_ok "hits while the path is down" /dev/ublkb0 0 1 2 3
wait $LOADPID && ok "the load ran through the outage" || { bad "fio load:"; cat /tmp/load.txt; }
port_back && ok "port back"
wait_for 30 "the kernel reconnected: path live" state_is live
wait_for 60 "the dirty data drained" dirty_is_zero
[ "$(jval error)" = 0 ] && ok "sticky error cleared" || bad "error still $(jval error)"
regions_ok "after the outage, on the namespace's disk" "$(raw_dev)" 0 1 2 3

# --- 2b. back without the namespace (disabled at the target meanwhile) ---
# a live controller that shows no namespace of the volume is not its path
# back: the error and the dirty data stay until the namespace is there
port_down && ok "port removed"
wait_for 20 "path down (state $(jval state))" state_not live
region 11 && ok "region 11 absorbed while the path is down" || bad "region 11 while the path is down"
wait_for 20 "write-back fails with the volume's sticky error" error_set
echo 0 >$CFS/subsystems/$NQN/namespaces/1/enable || bad "the namespace disabled at the target"
port_back && ok "port back, the namespace disabled"
wait_for 40 "a live controller without the namespace: no-namespace" state_is no-namespace
error_set && ok "the sticky error stays" || bad "the error was cleared: $(jval error)"
dirty_nonzero && ok "dirty data kept: $(jval dirty_blocks) blocks" || bad "no dirty data without the namespace"
echo 1 >$CFS/subsystems/$NQN/namespaces/1/enable || bad "the namespace enabled at the target"
wait_for 60 "the namespace back: path live" state_is live
wait_for 60 "the dirty data drained" dirty_is_zero
regions_ok "after the namespace came back, on its disk" "$(raw_dev)" 11

# --- 3. lost for good (ctrl_loss_tmo), the daemon reconnects -----------
DEV1=$(jval device)
port_down
region 4 && ok "region 4 absorbed with the port away" || bad "region 4 with the port away"
wait_for 40 "controller lost (ctrl_loss_tmo ran out)" state_is lost
region 5 && ok "region 5 absorbed with the controller lost" || bad "region 5 with the controller lost"
port_back
wait_for 60 "the daemon reconnected: path live" state_is live
DEV2=$(jval device)
# pmcached holds the old block device open until the rebind, so the kernel
# cannot give its name to the new one
[ "$DEV2" != "$DEV1" ] && ok "the namespace came back as $DEV2 (was $DEV1), identity checked" ||
	bad "the namespace came back under the same name $DEV2: no rebind was tested"
grep -E "reconnected|namespace is now|path back" $LOG | tail -3
wait_for 60 "drained after the reconnect" dirty_is_zero
regions_ok "after the reconnect, on the namespace's disk" "$(raw_dev)" 4 5

# --- 4. SIGKILL with dirty data and the port away -------------------------
port_down
wait_for 20 "path down again" state_not live
region 6 && ok "region 6 absorbed" || bad "region 6"
dirty_nonzero || bad "no dirty data before the kill"
D6=$(jval dirty_blocks)
kill -9 $PID
wait $PID 2>/dev/null
ok "pmcached SIGKILLed with $D6 dirty blocks in the pmem and the port away"
port_back
wait_for 30 "the kernel reconnected while no daemon ran" sh -c \
	"grep -q live /sys/class/nvme/*/state"
# from here on the config names the namespace by its NGUID, not its nsid
sed -i "s/nsid = 1;/nguid = \"$NGUID\";/" $CONF
grep -q "nguid = \"$NGUID\";" $CONF && ok "the config names the namespace by its NGUID" ||
	bad "the config does not name the NGUID"
pmcached_start $CONF $LOG || { bad "pmcached did not restart"; cat $LOG; exit 1; }
regions_ok "after SIGKILL and takeover, through the cache" /dev/ublkb0 0 1 2 3 4 5 6
wait_for 60 "drained after the restart" dirty_is_zero
regions_ok "after SIGKILL, on the namespace's disk" "$(raw_dev)" 6

# --- 4b. a restart with the port away: served without its disk ------------
port_down
wait_for 20 "path down before the restart" state_not live
region 10 && ok "region 10 absorbed" || bad "region 10"
NSRV=$(grep -c "served from the cache without its disk" $LOG)
kill $PID
wait $PID 2>/dev/null
pmcached_start $CONF $LOG || { bad "pmcached did not start with the port away"; cat $LOG; exit 1; }
# the controller still reconnecting (connecting, resetting), being deleted,
# or gone (lost): anything but live
S4=$(jval state)
[ -n "$S4" ] && [ "$S4" != live ] && ok "restarted with the port away: path $S4, device '$(jval device)'" ||
	bad "restarted with the port away: path '$S4'"
[ "$(grep -c "served from the cache without its disk" $LOG)" -gt "$NSRV" ] &&
	ok "$(grep "served from the cache without its disk" $LOG | tail -n 1 | cut -c1-120)..." ||
	bad "no log line: served without its disk"
regions_ok "restarted with the port away: dirty hits" /dev/ublkb0 10
port_back
wait_for 90 "path live after the restart with the port away" state_is live
grep -E "disk is in|path back" $LOG | tail -2
wait_for 60 "drained after the port came back" dirty_is_zero
regions_ok "after the restart with the port away, on the namespace's disk" "$(raw_dev)" 10

# --- 5. power cut with dirty data and the port away -----------------------
port_down
wait_for 20 "path down for the power cut" state_not live
region 7 && ok "region 7 absorbed" || bad "region 7"
echo "PMC_NVMF_ACKED 0 1 2 3 4 5 6 7 10"
echo "PMC_NVMF_TIME run $(awk "BEGIN { print $(up) - $SECONDS0 }") s"
[ $FAIL = 0 ] || exit 1
echo PMC_CUTME
region 8 >/dev/null 2>&1
sleep 30
exit 1
