#!/usr/bin/env bash
# daemon/demo.sh - the main job: pmcached serving a cached block device
# with a default configuration, and a file system on it, seen the way an
# operator sees it: pmcachectl status and stats tables, a restart under the
# mounted file system, a flush, and the commands to type next.
#
# Where this machine has ublk (/dev/ublk-control; the script loads ublk_drv
# first if that node is missing), pmcached runs here: over
# the devdax namespace named by PMC_DEMO_PMEM, else over a 1 GiB pmem file
# in /var/tmp, caching a 2 GiB disk image file (PMC_DEMO_DISK to name a
# real disk). Elsewhere (no ublk in the kernel, as on Debian 12's stock
# 6.1 kernel) it boots the tests/vm guest (Linux 6.12, an emulated NVDIMM
# as devdax, NVMe disks) and runs the same demonstration there.
# Installs what it needs (as root), builds into build/demo.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build/demo

"$top/tests/run.sh" --install-only
cmake -S "$top" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" --target pmcached pmcachectl >/dev/null

# the driver may be built but not loaded: try it, quietly (no module, or
# no permission: the guest below)
if [ ! -e /dev/ublk-control ] && command -v modprobe >/dev/null 2>&1; then
	modprobe -q ublk_drv >/dev/null 2>&1 || true
fi
if [ -e /dev/ublk-control ]; then
	pmem=${PMC_DEMO_PMEM:-/var/tmp/pmcache-demo.pmem}
	disk=${PMC_DEMO_DISK:-/var/tmp/pmcache-demo-disk.img}
	[ -e "$disk" ] || truncate -s 2G "$disk"
	conf=$build/pmcached.conf
	{
		echo "pmem = { path = \"$pmem\"; size = \"1G\"; };"
		echo "state_dir = \"$build/state\";"
		echo "control = { socket = \"$build/pmcached.sock\"; };"
		echo "volumes = ( { name = \"demo\"; disk = \"$disk\"; } );"
	} >"$conf"
	echo "pmcached -c $conf  (Ctrl-C stops it cleanly)"
	echo "in another terminal:"
	echo "  $build/cli/pmcachectl -s $build/pmcached.sock status"
	echo "  $build/cli/pmcachectl -s $build/pmcached.sock stats --watch"
	echo "  mkfs.ext4 /dev/ublkb0    # the cached device (/dev/pmcache/demo with the udev rule)"
	exec "$build/daemon/pmcached" -c "$conf"
fi

echo "demo: no /dev/ublk-control here; running pmcached in the tests/vm guest (Linux 6.12)"
cmake --build "$build" -j"$(nproc)" >/dev/null
bash "$top/tests/vm/build-guest.sh" "$build/tests/vm/guest"
exec bash "$top/tests/vm/run-guest.sh" -i "$build/tests/vm/guest" -w "$build/vm-demo" -f \
	-b "$build/daemon/pmcached" -b "$build/cli/pmcachectl" -- sh t-demo.sh
