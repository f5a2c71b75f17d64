# t-nvme.sh - guest: lib/nvme_info finds the runner's NVMe disks through
# libnvme and identifies them (model, serial, firmware, size) as the runner
# made them; nvme-cli agrees; each disk found by serial takes a write and
# reads it back.
. /host/lib.sh
run pmc-vm-probe nvme $PMC_VM_NVME
nvme list
i=1
while s=$(nvme_serial $i) && [ -n "$s" ]; do
	d=$(nvme_dev "$s") || { bad "no block device for serial $s"; i=$((i + 1)); continue; }
	want=$(nvme_bytes $i)
	got=$(blockdev --getsize64 "$d")
	[ "$got" = "$want" ] && ok "serial $s is $d, $got bytes" ||
		bad "serial $s is $d: $got bytes, expected $want"
	dd if=/dev/urandom of=/tmp/pat bs=1M count=4 2>/dev/null
	dd if=/tmp/pat of="$d" bs=1M seek=1 oflag=direct 2>/dev/null &&
		dd if="$d" of=/tmp/back bs=1M skip=1 count=4 iflag=direct 2>/dev/null &&
		cmp /tmp/pat /tmp/back && ok "$d: 4 MiB O_DIRECT write and read back" ||
		bad "$d: write/read-back mismatch"
	i=$((i + 1))
done
[ $i -gt 2 ] || bad "PMC_VM_NVME names fewer than two disks: '$PMC_VM_NVME'"
exit $FAIL
