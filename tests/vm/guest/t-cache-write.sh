# t-cache-write.sh SEED N - guest, boot 1 of the power-cut test: devdax
# namespace, then pmc-vm-cache formats a cache on it and writes until the
# host cuts the power (it never returns on its own).
. /host/lib.sh
DAX=$(setup_devdax) || { bad "devdax: $DAX"; exit 1; }
ok "devdax $DAX, $(cat /sys/bus/dax/devices/${DAX#/dev/}/size) bytes"
S=$(nvme_serial 1)
DISK=$(nvme_dev "$S") || { bad "no NVMe disk $S"; exit 1; }
exec pmc-vm-cache write "$DAX" "$DISK" "$(nvme_bytes 1)" "$1" "$2"
