#!/usr/bin/env bash
# test-deb.sh BUILD - the Debian package cpack makes of this build:
#   - the unit's ExecStart/ExecReload name a pmcached the package holds,
#     and the configuration they (and ConditionPathExists) name is in the
#     package and is a conffile; every conffile is in the package;
#   - the udev rule, modules-load.d file, man pages and the maintainer
#     scripts are there; Depends names the libraries pmcached links;
#   - the packaged pmcached runs: it refuses the packaged configuration
#     with the one-line "no volume configured";
#   - a build configured with another prefix is refused by cpack with a
#     message naming the prefix (its unit would name a binary the package
#     does not hold).
# Exit 77 (skipped) when cpack or dpkg-deb is missing, or when the build
# itself has another prefix (the refusal is still checked).
set -uo pipefail
build=$1
fail=0
bad() { echo "FAIL: $*"; fail=1; }
command -v cpack >/dev/null && command -v dpkg-deb >/dev/null || {
	echo "skipped: cpack or dpkg-deb missing"
	exit 77
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cfg=$build/CPackConfig.cmake

# another prefix: refused, no package
out=$(cpack -G DEB -B "$tmp/other" --config "$cfg" -D CPACK_PMC_INSTALL_PREFIX=/usr/local 2>&1)
rc=$?
if [ $rc -ne 0 ] && grep -q "CMAKE_INSTALL_PREFIX=/usr/local" <<<"$out" &&
	! ls "$tmp"/other/*.deb >/dev/null 2>&1; then
	echo "ok: a /usr/local build is refused by cpack"
else
	bad "cpack of a /usr/local build: exit $rc, no refusal naming the prefix: $out"
fi

prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$build/CMakeCache.txt")
if [ "$prefix" != /usr ]; then
	echo "skipped: this build's prefix is $prefix, not /usr (reconfigure to pack it)"
	[ $fail -eq 0 ] && exit 77 || exit 1
fi
out=$(cpack -G DEB -B "$tmp/pkg" --config "$cfg" 2>&1) || {
	echo "FAIL: cpack: $out"
	exit 1
}
deb=$(ls "$tmp"/pkg/*.deb 2>/dev/null | head -1)
[ -n "$deb" ] || { echo "FAIL: cpack made no .deb: $out"; exit 1; }
echo "ok: $(basename "$deb")"
mkdir -p "$tmp/root" "$tmp/ctl"
dpkg-deb -x "$deb" "$tmp/root" && dpkg-deb -e "$deb" "$tmp/ctl" || { echo "FAIL: dpkg-deb"; exit 1; }
has() { [ -e "$tmp/root$1" ]; }

unit=$tmp/root/usr/lib/systemd/system/pmcached.service
[ -f "$unit" ] || unit=$tmp/root/lib/systemd/system/pmcached.service
[ -f "$unit" ] || { echo "FAIL: no pmcached.service in the package"; exit 1; }
for key in ExecStart ExecReload; do
	line=$(sed -n "s/^$key=//p" "$unit")
	bin=${line%% *}
	conf=$(sed -n 's/.* -c \([^ ]*\).*/\1/p' <<<"$line")
	[ -x "$tmp/root$bin" ] && echo "ok: $key names $bin, in the package" ||
		bad "$key names $bin, not in the package"
	[ -n "$conf" ] && has "$conf" && grep -qx "$conf" "$tmp/ctl/conffiles" &&
		echo "ok: $key's configuration $conf is a packaged conffile" ||
		bad "$key's configuration '$conf' is not a packaged conffile"
done
cond=$(sed -n 's/^ConditionPathExists=//p' "$unit")
[ -n "$cond" ] && has "$cond" && echo "ok: ConditionPathExists=$cond is packaged" ||
	bad "ConditionPathExists='$cond' is not in the package"
while read -r f; do
	[ -z "$f" ] || has "$f" || bad "conffile $f is not in the package"
done <"$tmp/ctl/conffiles"
for f in /usr/sbin/pmcachectl /usr/share/man/man8/pmcached.8 /usr/share/man/man8/pmcachectl.8 \
	/usr/share/man/man5/pmcached.conf.5; do
	has "$f" || bad "$f is not in the package"
done
# under /lib or /usr/lib (one place on a merged-/usr Debian 12)
inlib() { has "/usr/lib/$1" || has "/lib/$1"; }
inlib udev/rules.d/90-pmcache.rules || bad "no udev rule packaged"
inlib modules-load.d/pmcache.conf || bad "no modules-load.d file packaged"
for s in postinst prerm; do
	[ -x "$tmp/ctl/$s" ] || bad "maintainer script $s missing or not executable"
done
dep=$(dpkg-deb -f "$deb" Depends)
for lib in libpmem2 liburing2 libev4 libconfig9 libnvme1; do
	grep -qw "$lib" <<<"$dep" || bad "Depends lacks $lib: $dep"
done
echo "ok: Depends: $dep"

# the packaged binary runs and refuses the packaged (unedited) config
conf=$(sed -n 's/^ExecStart=.* -c \([^ ]*\).*/\1/p' "$unit")
out=$("$tmp/root/usr/sbin/pmcached" --check-config -c "$tmp/root$conf" 2>&1)
rc=$?
if [ $rc -ne 0 ] && grep -q "no volume configured" <<<"$out" && [ "$(wc -l <<<"$out")" -eq 1 ]; then
	echo "ok: the packaged pmcached refuses the packaged config: $out"
else
	bad "packaged pmcached --check-config: exit $rc: $out"
fi
[ $fail -eq 0 ] && echo "test-deb: ok"
exit $fail
