# lib.sh - helpers for guest test scripts (sourced by busybox sh in /host).
#
# Result convention: ok/bad print one line each; bad sets FAIL=1 and the
# script ends with "exit $FAIL". Devices are found by what they are, never
# by the order qemu created them: NVMe disks by serial, the devdax
# namespace on the NVDIMM region of the expected size.
FAIL=0
ok() {
	echo "OK: $*"
}
bad() {
	echo "FAIL: $*"
	FAIL=1
}
# run CMD...: echo it, run it, report a non-zero exit
run() {
	echo "+ $*"
	"$@"
	_r=$?
	[ $_r -eq 0 ] || bad "exit $_r: $*"
	return $_r
}
up() {
	cut -d' ' -f1 /proc/uptime
}

# nvme_dev SERIAL: print /dev/nvmeXnY of the disk with that serial. The
# block device's "device" is its controller, or with native multipath its
# subsystem; both carry the serial.
nvme_dev() {
	for _b in /sys/block/nvme*n*; do
		[ -e "$_b/device/serial" ] || continue
		[ "$(tr -d ' ' <"$_b/device/serial")" = "$1" ] || continue
		echo "/dev/$(basename "$_b")"
		return 0
	done
	return 1
}

# the n-th (1-based) "serial:bytes" entry of PMC_VM_NVME
nvme_serial() {
	echo "$PMC_VM_NVME" | tr ' ' '\n' | grep . | sed -n "${1}p" | cut -d: -f1
}
nvme_bytes() {
	echo "$PMC_VM_NVME" | tr ' ' '\n' | grep . | sed -n "${1}p" | cut -d: -f2
}

# region_of_size BYTES: print the nd region (regionN) of that size
region_of_size() {
	for _r in /sys/bus/nd/devices/region*; do
		[ "$(cat "$_r/size")" = "$1" ] && basename "$_r" && return 0
	done
	return 1
}

# region_reset REGION: wipe the labels of the region's DIMM, no namespace left
region_reset() {
	_dimm=$(cut -d, -f1 /sys/bus/nd/devices/"$1"/mapping0)
	ndctl disable-region "$1" >/dev/null &&
		ndctl init-labels -f "$_dimm" >/dev/null &&
		ndctl enable-region "$1" >/dev/null
}

# setup_devdax: make sure /dev/dax0.0 is a devdax namespace over the whole
# first NVDIMM (labels persist it across boots, so this is a no-op after
# the first boot on the same images). Prints the device.
setup_devdax() {
	if [ ! -c /dev/dax0.0 ]; then
		_reg=$(region_of_size "$PMC_VM_PMEM_BYTES") || {
			echo "no nd region of $PMC_VM_PMEM_BYTES bytes"
			return 1
		}
		echo "creating a devdax namespace on $_reg" >&2
		region_reset "$_reg" &&
			ndctl create-namespace -r "$_reg" --mode=devdax --align=2M >/dev/null || return 1
	fi
	[ -c /dev/dax0.0 ] || {
		echo "the devdax namespace is not dax0.0: $(ls /dev/dax* 2>/dev/null)"
		return 1
	}
	echo /dev/dax0.0
}

# setup_peer_pmem: a fresh fsdax namespace (struct pages in RAM) over the
# second NVDIMM, for dm-writecache and bcache. The block device is named
# after its region (pmemN for regionN), so it is /dev/pmem1 while the
# devdax namespace holds region0. Prints the device.
setup_peer_pmem() {
	_reg=$(region_of_size "$PMC_VM_PEER_PMEM_BYTES") || {
		echo "no nd region of $PMC_VM_PEER_PMEM_BYTES bytes"
		return 1
	}
	region_reset "$_reg" &&
		ndctl create-namespace -r "$_reg" --mode=fsdax --map=mem >/dev/null || return 1
	_ns=$(ls -d /sys/bus/nd/devices/"$_reg"/namespace*/block/pmem* 2>/dev/null |
		head -n 1) || true
	[ -z "$_ns" ] && _ns=$(ls -d /sys/bus/nd/devices/pfn*/block/pmem* 2>/dev/null | head -n 1)
	[ -n "$_ns" ] || _ns=/dev/pmem${_reg#region}
	_d=/dev/$(basename "$_ns")
	[ -b "$_d" ] || {
		echo "no pmem block device on $_reg"
		return 1
	}
	echo "$_d"
}

# wipe DEV [MiB]: zero the head of a block device (old superblocks)
wipe() {
	dd if=/dev/zero of="$1" bs=1M count="${2:-1}" oflag=direct 2>/dev/null
}

# pmcached_start CONF LOG: start pmcached in the background (its pid in
# PID), appending to LOG, and wait until LOG has one more "ready:" line
# than before. Returns 1 if the daemon exited or took over 2 minutes.
pmcached_start() {
	_n=$(grep -c "ready:" "$2" 2>/dev/null) || _n=0
	pmcached -c "$1" >>"$2" 2>&1 &
	PID=$!
	for _i in $(seq 1 600); do
		[ "$(grep -c "ready:" "$2")" -gt "$_n" ] && return 0
		kill -0 $PID 2>/dev/null || return 1
		sleep 0.2
	done
	return 1
}

# pmcached_stop DESC [SECONDS]: SIGTERM to $PID and wait (at most SECONDS,
# default 300, then SIGKILL): a clean stop exits 0. Returns 1 otherwise.
pmcached_stop() {
	kill -TERM $PID
	for _i in $(seq 1 $((${2:-300} * 5))); do
		kill -0 $PID 2>/dev/null || break
		sleep 0.2
	done
	if kill -0 $PID 2>/dev/null; then
		bad "pmcached did not stop within ${2:-300} s ($1)"
		kill -KILL $PID
		wait $PID
		return 1
	fi
	wait $PID
	_rc=$?
	[ $_rc = 0 ] && ok "pmcached stopped cleanly ($1)" && return 0
	bad "pmcached stopped with exit $_rc ($1)"
	return 1
}
