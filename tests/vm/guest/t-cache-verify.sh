# t-cache-verify.sh SEED N ACKED - guest, boot 2 of the power-cut test: the
# devdax namespace must come back by itself (labels), and the cache on it
# must recover every acknowledged write.
. /host/lib.sh
if [ -c /dev/dax0.0 ]; then
	ok "/dev/dax0.0 came back after the power cut"
else
	bad "no /dev/dax0.0 after the power cut: $(ls /dev/dax* 2>/dev/null)"
	exit 1
fi
run pmc-vm-cache verify /dev/dax0.0 "$1" "$2" "$3"
exit $FAIL
