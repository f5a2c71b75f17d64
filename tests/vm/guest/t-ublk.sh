# t-ublk.sh - guest: /dev/ublk-control exists and lib/ublk_probe reads the
# driver's features. Debian's 6.12 kernel has GET_FEATURES (>= 6.5), so the
# mask must come from the kernel and hold what pmcache relies on.
. /host/lib.sh
echo "kernel $(uname -r)"
if [ -c /dev/ublk-control ]; then
	ok "/dev/ublk-control is a character device"
else
	bad "/dev/ublk-control missing"
	exit 1
fi
run pmc-vm-probe ublk USER_RECOVERY USER_RECOVERY_REISSUE CMD_IOCTL_ENCODE USER_COPY >/tmp/ublk.out
cat /tmp/ublk.out
grep -q '^ublk: features from GET_FEATURES' /tmp/ublk.out &&
	ok "features from GET_FEATURES" || bad "features not from GET_FEATURES on $(uname -r)"
grep -q 'legacy opcodes yes' /tmp/ublk.out &&
	ok "legacy opcodes accepted" || bad "legacy opcodes not accepted"
exit $FAIL
