#!/usr/bin/env bash
# test-package.sh SRC PMCACHED - the package's safe defaults:
#   - the shipped etc/pmcached.conf formats nothing (pmem.format "never";
#     test_config_file checks the rest of it) and "pmcached --check-config"
#     refuses it with "edit PATH: no volume configured" until the example
#     volume names a disk; then it passes;
#   - postinst never enables the service (installed disabled), also when
#     run with stand-ins for systemctl, udevadm and modprobe;
#   - the configuration is a conffile;
#   - pmem.format "if-blank" does not format a pmem path that holds other
#     data (a swap signature): refused naming it, the file unchanged;
#   - a state file of another cache that records a volume dirty refuses
#     the start (that cache holds its writes); with none dirty it is rebuilt;
#   - a state_dir longer than 255 bytes is made and used where named;
#   - SIGTERM and SIGHUP while start() blocks do not kill pmcached.
set -uo pipefail
src=$1 pmcached=$2
fail=0
bad() { echo "FAIL: $*"; fail=1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
conf=$src/etc/pmcached.conf

grep -Eq '^[[:space:]]*format = "never";' "$conf" && echo "ok: the shipped config formats nothing" ||
	bad "etc/pmcached.conf: pmem.format is not \"never\""
out=$("$pmcached" --check-config -c "$conf" 2>&1)
rc=$?
want="pmcached: edit $conf: no volume configured"
if [ $rc -ne 0 ] && [ "${out#"$want"}" != "$out" ] && [ "$(echo "$out" | wc -l)" -eq 1 ]; then
	echo "ok: check-config refuses the shipped file: exit $rc: $out"
else
	bad "check-config of the shipped file: exit $rc: $out (want one line starting \"$want\")"
fi
: >"$tmp/disk.img"
sed "s|/dev/disk/by-id/CHANGE-ME|$tmp/disk.img|" "$conf" >"$tmp/edited.conf"
out=$("$pmcached" --check-config -c "$tmp/edited.conf" 2>&1)
rc=$?
want="pmcached: edit $tmp/edited.conf: volume net names the example NVMe-oF subsystem"
[ $rc -ne 0 ] && [ "${out#"$want"}" != "$out" ] &&
	echo "ok: the example NVMe-oF volume is refused until edited: $out" ||
	bad "example NVMe-oF volume: exit $rc: $out (want \"$want\")"
sed -i "s|nqn.2014-08.org.example:CHANGE-ME|nqn.2014-08.org.example:disk1|" "$tmp/edited.conf"
out=$("$pmcached" --check-config -c "$tmp/edited.conf" 2>&1)
rc=$?
[ $rc -eq 0 ] && echo "ok: once the disks are named: $out" || bad "edited config refused: exit $rc: $out"
# a control group that does not exist: refused before anything is served
sed 's|^\([[:space:]]*\)admin_group = "";|\1admin_group = "pmc-no-such-group";|' "$tmp/edited.conf" >"$tmp/group.conf"
out=$("$pmcached" --check-config -c "$tmp/group.conf" 2>&1)
rc=$?
want="pmcached: $tmp/group.conf: control.admin_group: no group named pmc-no-such-group"
[ $rc -ne 0 ] && [ "$out" = "$want" ] && echo "ok: a missing control group is refused: $out" ||
	bad "missing control.admin_group: exit $rc: $out (want \"$want\")"

# pmem.format "if-blank" (the built-in default) on a pmem path that holds
# other data (a wrong path): refused naming it, nothing written
truncate -s 64M "$tmp/pmem" && truncate -s 64M "$tmp/disk"
if mkswap "$tmp/pmem" >/dev/null 2>&1; then
	sum=$(md5sum <"$tmp/pmem")
	cat >"$tmp/swap.conf" <<EOC
pmem = { path = "$tmp/pmem"; format = "if-blank"; };
state_dir = "$tmp/state";
control = { socket = "$tmp/pmcached.sock"; };
volumes = ( { name = "v0"; disk = "$tmp/no-such-disk"; } );
EOC
	out=$(timeout 60 "$pmcached" -c "$tmp/swap.conf" 2>&1)
	rc=$?
	[ $rc -ne 0 ] && [ $rc -ne 124 ] && echo "$out" | grep -q "pmem $tmp/pmem: no pmcache superblock, but a signature of swap (other); not formatted (if-blank)" &&
		[ "$(md5sum <"$tmp/pmem")" = "$sum" ] &&
		echo "ok: if-blank refuses a pmem path holding a swap signature: $(echo "$out" | grep "but a signature")" ||
		bad "if-blank on a swap signature: exit $rc: $out; $( [ "$(md5sum <"$tmp/pmem")" = "$sum" ] || echo changed)"
else
	bad "mkswap $tmp/pmem"
fi
# ... and formats one that holds nothing
rm -f "$tmp/pmem" && truncate -s 64M "$tmp/pmem"
out=$(timeout 60 "$pmcached" -c "$tmp/swap.conf" 2>&1)
echo "$out" | grep -q "pmem $tmp/pmem: blank: formatting a new cache" &&
	echo "ok: if-blank formats a blank pmem" || bad "if-blank on a blank file: $out"

# a devdax path that is not there, with pmem.size set: refused, no file
# made (one under /dev lives in RAM: the cache would lose every
# acknowledged write at a power cut)
dax=/dev/pmc-test-no-dax-$$
shmstate=/dev/shm/pmc-test-state-$$
cat >"$tmp/nodax.conf" <<EOC
pmem = { path = "$dax"; size = "16M"; };
state_dir = "$shmstate";
control = { socket = "$tmp/pmcached.sock"; };
volumes = ( { name = "v0"; disk = "$tmp/no-such-disk"; } );
EOC
out=$(timeout 60 "$pmcached" -c "$tmp/nodax.conf" 2>&1)
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ ! -e "$dax" ] &&
	echo "$out" | grep -q "pmem $dax: no such device (pmem.size makes a pmem file only outside /dev" &&
	echo "ok: a missing device under /dev is not made a file: $(echo "$out" | grep "no such device")" ||
	bad "pmem.size with a missing $dax: exit $rc: $out; $(ls -l "$dax" 2>&1)"
rm -f "$dax"
# (and its state_dir in RAM is said: lost at every reboot)
echo "$out" | grep -q "state directory $shmstate is in RAM (tmpfs): its volume state is lost at every reboot" &&
	echo "ok: a state_dir in tmpfs is warned of" || bad "no warning for a state_dir in tmpfs: $out"
rm -rf "$shmstate"

# a state file of another cache that records a volume dirty: that cache
# holds its acknowledged writes, so this pmem (another cache) is refused,
# naming both, and the file is kept; with nothing dirty it is rebuilt
printf 'pmcache-state 1 0123456789abcdef0123456789abcdef\nv0 dirty\n' >"$tmp/other.state"
mkdir -p "$tmp/state" && cp "$tmp/other.state" "$tmp/state/volumes.state"
out=$(timeout 60 "$pmcached" -c "$tmp/swap.conf" 2>&1)
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] &&
	echo "$out" | grep -q "; state file $tmp/state/volumes.state says cache 0123456789abcdef0123456789abcdef holds acknowledged writes of v0: set pmem.path to it (if it is lost, remove the file)" &&
	cmp -s "$tmp/other.state" "$tmp/state/volumes.state" &&
	echo "ok: another cache's state file with a dirty volume: refused: $(echo "$out" | grep "holds acknowledged writes")" ||
	bad "another cache's state file, v0 dirty: exit $rc: $out"
printf 'pmcache-state 1 0123456789abcdef0123456789abcdef\nv0 clean\n' >"$tmp/state/volumes.state"
out=$(timeout 60 "$pmcached" -c "$tmp/swap.conf" 2>&1)
echo "$out" | grep -q "describes another cache, with no volume dirty in it: rebuilding it" &&
	! grep -q 0123456789abcdef "$tmp/state/volumes.state" &&
	echo "ok: another cache's state file with nothing dirty is rebuilt" ||
	bad "another cache's state file, v0 clean: $out; $(cat "$tmp/state/volumes.state")"

# a state_dir longer than 255 bytes (the configuration takes 4095): made
# and used where named (it was cut at 255 bytes, made elsewhere)
long="$tmp/$(printf 'd%.0s' $(seq 120))/$(printf 'e%.0s' $(seq 120))/state"
sed "s|^state_dir = .*|state_dir = \"$long\";|" "$tmp/swap.conf" >"$tmp/long.conf"
timeout 60 "$pmcached" -c "$tmp/long.conf" >"$tmp/long.out" 2>&1
[ -f "$long/volumes.state" ] &&
	echo "ok: a state_dir of ${#long} bytes is made and used where named" ||
	bad "state_dir of ${#long} bytes: $(ls -R "$tmp" | head -5); $(cat "$tmp/long.out")"

# a SIGTERM or SIGHUP while start() blocks (here in the open of a state
# file that is a FIFO, standing in for an NVMe-oF connect or a device
# takeover) waits for the loop: it is not a death by the default action
# with devices made (start goes on, then fails here: no ublk device or
# disk)
for sig in TERM HUP; do
	rm -f "$tmp/state/volumes.state" && mkfifo "$tmp/state/volumes.state"
	"$pmcached" -c "$tmp/swap.conf" >"$tmp/sig.out" 2>&1 &
	pid=$!
	for _ in $(seq 100); do
		grep -q wait_for_partner "/proc/$pid/wchan" 2>/dev/null && break
		sleep 0.1
	done
	if grep -q wait_for_partner "/proc/$pid/wchan" 2>/dev/null; then
		kill -$sig $pid
		sleep 0.3
		timeout 10 sh -c "printf 'pmcache-state 1 0123456789abcdef0123456789abcdef\n' >'$tmp/state/volumes.state'"
		wait $pid
		rc=$?
		[ $rc -lt 128 ] && grep -q "cache of [0-9]* blocks" "$tmp/sig.out" &&
			echo "ok: SIG$sig during start waited for the loop (start went on; exit $rc)" ||
			bad "SIG$sig during start: exit $rc: $(cat "$tmp/sig.out")"
	else
		kill $pid 2>/dev/null
		wait $pid
		bad "pmcached never blocked in the open of the state FIFO: $(cat "$tmp/sig.out")"
	fi
	rm -f "$tmp/state/volumes.state"
done

# postinst with every command it may run replaced by a recorder
mkdir -p "$tmp/bin"
for c in systemctl udevadm modprobe deb-systemd-helper deb-systemd-invoke; do
	printf '#!/bin/sh\necho "%s $*" >>"%s/calls"\n' "$c" "$tmp" >"$tmp/bin/$c"
	chmod +x "$tmp/bin/$c"
done
PATH=$tmp/bin:$PATH sh "$src/systemd/debian/postinst" configure >/dev/null 2>&1 ||
	bad "postinst configure failed"
PATH=$tmp/bin:$PATH sh "$src/systemd/debian/postinst" configure 0.0.9 >/dev/null 2>&1 ||
	bad "postinst configure (upgrade) failed"
if grep -Eqw 'enable|reenable|preset' "$tmp/calls" 2>/dev/null ||
	grep -Ev '^[[:space:]]*#' "$src/systemd/debian/postinst" | grep -Eqw 'enable|reenable|preset'; then
	bad "postinst enables the service: $(grep -Ew 'enable|reenable|preset' "$src/systemd/debian/postinst" "$tmp/calls" 2>/dev/null | head -3)"
else
	echo "ok: postinst leaves the service disabled"
fi
# an upgrade restarts a running daemon only when the new version takes the
# configuration (a downgrade's binary may not know a key of the file): a
# copy of postinst that sees systemd running here, pmcached a stub
mkdir -p "$tmp/sd"
sed "s|/run/systemd/system|$tmp/sd|" "$src/systemd/debian/postinst" >"$tmp/postinst"
for verdict in 0 1; do
	printf '#!/bin/sh
echo "pmcached: x.conf:3: writeback.new_key: unknown key"
exit %s
' \
		"$verdict" >"$tmp/bin/pmcached"
	chmod +x "$tmp/bin/pmcached"
	: >"$tmp/calls"
	PATH=$tmp/bin:$PATH sh "$tmp/postinst" configure 0.0.9 >"$tmp/postinst.out" 2>&1 ||
		bad "postinst configure (upgrade, check $verdict) failed"
	if [ $verdict = 0 ]; then
		grep -q "systemctl try-restart pmcached.service" "$tmp/calls" &&
			echo "ok: postinst restarts the daemon when the new version takes the config" ||
			bad "postinst did not restart the daemon: $(cat "$tmp/calls")"
	elif grep -q "try-restart" "$tmp/calls"; then
		bad "postinst restarted the daemon into a version that refuses the config"
	elif grep -q "not restarting pmcached: .*unknown key" "$tmp/postinst.out"; then
		echo "ok: postinst keeps the running daemon when the new version refuses the config"
	else
		bad "postinst, config refused: $(cat "$tmp/postinst.out")"
	fi
done
grep -qx /etc/pmcache/pmcached.conf "$src/systemd/debian/conffiles" && echo "ok: conffile" ||
	bad "/etc/pmcache/pmcached.conf is not a conffile"
exit $fail
