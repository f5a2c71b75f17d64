#!/usr/bin/env bash
# test-unit.sh SRC PMCACHED - systemd/pmcached.service on the host:
#   - systemd-analyze verify prints nothing, in a transaction that starts
#     it together with local-fs.target and local-fs-pre.target as a boot
#     does (an ordering cycle shows only there);
#   - the hardening the daemon relies on is there, CAP_SYS_MODULE and a
#     modprobe are not (modules-load.d/pmcache.conf loads ublk_drv);
#   - systemd-analyze security: exposure at most 3.0 (README.md).
set -uo pipefail
src=$1 pmcached=$2
fail=0
bad() { echo "FAIL: $*"; fail=1; }
command -v systemd-analyze >/dev/null || { echo "SKIP: no systemd-analyze (package systemd)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sbindir=$(dirname "$pmcached")
sed -e "s|@CMAKE_INSTALL_FULL_SBINDIR@|$sbindir|g" -e "s|@CMAKE_INSTALL_FULL_SYSCONFDIR@|/etc|g" \
	"$src/systemd/pmcached.service" >"$tmp/pmcached.service"
printf '[Unit]\nDescription=what a boot starts with pmcached\nWants=pmcached.service local-fs.target local-fs-pre.target\n' \
	>"$tmp/pmc-boot.target"
out=$(cd "$tmp" && systemd-analyze verify --man=no ./pmc-boot.target ./pmcached.service 2>&1)
rc=$?
if [ $rc -ne 0 ] || [ -n "$out" ]; then
	bad "systemd-analyze verify (exit $rc):"
	echo "$out"
else
	echo "ok: systemd-analyze verify: clean"
fi

unit=$src/systemd/pmcached.service
has() {
	grep -Eq "^$1" "$unit" && echo "ok: $1" || bad "the unit lacks $1"
}
for d in 'NoNewPrivileges=yes' 'SystemCallFilter=@system-service' 'ProtectKernelModules=yes' \
	'ProtectKernelLogs=yes' 'OOMScoreAdjust=-[0-9]+' 'DevicePolicy=closed' \
	'DeviceAllow=/dev/ublk-control rw' 'DeviceAllow=char-dax rw' 'DeviceAllow=block-\* rw' \
	'LimitMEMLOCK=infinity' 'RuntimeDirectoryMode=0750' 'ExecReload=.*pmcached .*--reload \$MAINPID' \
	'ProtectSystem=full' 'DeviceAllow=/dev/nvme-fabrics rw' 'DeviceAllow=char-nvme rw'; do
	has "$d"
done
grep -q CAP_SYS_MODULE "$unit" && bad "the unit keeps CAP_SYS_MODULE"
# NVMe/TCP connects open their kernel sockets in the daemon's namespace
grep -Eq '^PrivateNetwork=yes' "$unit" && bad "PrivateNetwork=yes breaks the daemon's NVMe/TCP connects"
grep -q modprobe "$unit" && bad "the unit runs modprobe"
# a state_dir or socket is wherever the configuration puts it: no fixed
# writable paths for them (ProtectSystem=full leaves them writable); the
# one fixed path is sysfs's NVMe-oF controllers, which the disconnects
# write under ProtectKernelTunables=yes
rw=$(grep -E '^ReadWritePaths=' "$unit")
[ "$rw" = "ReadWritePaths=-/sys/devices/virtual/nvme-fabrics" ] &&
	echo "ok: ReadWritePaths= only for the NVMe-oF disconnects" ||
	bad "ReadWritePaths= lines: '$rw' (want only -/sys/devices/virtual/nvme-fabrics)"
grep -qx ublk_drv "$src/systemd/modules-load.conf" && echo "ok: modules-load.d loads ublk_drv" ||
	bad "systemd/modules-load.conf does not name ublk_drv"

sec=$(cd "$tmp" && systemd-analyze security --offline=true ./pmcached.service 2>&1 | tail -1)
echo "$sec"
score=$(echo "$sec" | grep -Eo 'pmcached.service: [0-9.]+' | grep -Eo '[0-9.]+$')
if [ -z "$score" ]; then
	bad "no exposure score: $sec"
elif awk "BEGIN { exit !($score <= 3.0) }"; then
	echo "ok: exposure $score (at most 3.0)"
else
	bad "exposure $score, above 3.0"
fi
exit $fail
