#!/bin/bash
# build-guest.sh - build the vm test guest from Debian packages alone.
#
# usage: build-guest.sh OUTDIR
#
# The guest is Debian's 6.12 kernel (the newest
# linux-image-6.12.*+deb12-amd64-unsigned apt knows about; the stock 6.1
# kernel has no ublk) plus a busybox-static initramfs holding the modules
# the tests load (nvdimm/devdax, ublk, nvme, device-mapper, bcache, ext4,
# 9p, the NVMe-oF host and target over tcp and loop), ndctl/daxctl, nvme-cli, e2fsprogs, fio, dmsetup and bcache-tools
# with the ldd closure of their shared libraries, and tests/vm/guest/init.
# Project binaries do not go in the image: run-guest.sh puts them on the
# 9p share at each run, so rebuilding the project never rebuilds the guest.
#
# Outputs in OUTDIR: vmlinuz, initramfs.cpio, kernel.version, stamp.
# Downloads are cached in OUTDIR/dl. The image is rebuilt only when the
# stamp (a hash over the kernel package, this script, the guest init and
# the versions of the host packages copied into it) changes. Concurrent
# runs serialise on OUTDIR/.lock.
#
# Exit: 0 built or up to date, 1 error, 77 qemu is missing (and could not
# be installed), so the vm tests skip.
# Env: PMC_VM_KERNEL_PKG forces a kernel package name.
set -euo pipefail

die() {
	echo "build-guest: $*" >&2
	exit 1
}

[ $# -eq 1 ] || die "usage: build-guest.sh OUTDIR"
OUT=$1
SRC=$(cd "$(dirname "$0")" && pwd)
export PATH=$PATH:/usr/sbin:/sbin
export LC_ALL=C

# Host packages the image is made of, and the binaries taken from them.
HOST_PKGS="qemu-system-x86 ndctl daxctl nvme-cli fio busybox-static cpio kmod xz-utils zstd
	e2fsprogs bcache-tools dmsetup libc6"
TOOLS="/usr/bin/ndctl /usr/bin/daxctl /usr/sbin/nvme /sbin/mke2fs /sbin/mkfs.ext4 /sbin/e2fsck
	/usr/sbin/dmsetup /usr/sbin/make-bcache /usr/sbin/bcache-super-show /usr/bin/fio"
# Modules insmod'ed at boot, in dependency order after resolution.
MODS="nfit nd_pmem dax_pmem device_dax ublk_drv nvme dm_mod dm_writecache dm_flakey dm_delay
	dm_log_writes bcache ext4 9p 9pnet_virtio nvme_fabrics nvme_tcp nvme_loop nvmet nvmet_tcp"
# Copied but not loaded: they take load-time parameters (brd rd_size=...,
# null_blk nr_devices=0 for the delayed disk of t-bench.sh).
MODS_NOLOAD="brd null_blk"

mkdir -p "$OUT/dl"
OUT=$(cd "$OUT" && pwd)
exec 9>"$OUT/.lock"
flock 9

# 1. host packages: install what is missing when we can (root with apt).
missing=""
for p in $HOST_PKGS; do
	dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed' ||
		missing="$missing $p"
done
if [ -n "$missing" ]; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		echo "build-guest: installing:$missing"
		apt-get update -qq || true
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			$missing >/dev/null || true
	fi
fi
if ! command -v qemu-system-x86_64 >/dev/null; then
	echo "build-guest: SKIP: qemu-system-x86_64 not installed (package qemu-system-x86)"
	exit 77
fi
for p in $HOST_PKGS; do
	dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed' ||
		die "host package $p is missing and could not be installed"
done

# 2. kernel package: newest 6.12 unsigned image for bookworm.
pick_kernel() {
	apt-cache pkgnames linux-image-6.12. 2>/dev/null |
		grep -E '^linux-image-6\.12\.[0-9]+\+deb12-amd64-unsigned$' | sort -V | tail -n 1
}
KPKG=${PMC_VM_KERNEL_PKG:-}
if [ -z "$KPKG" ]; then
	KPKG=$(pick_kernel)
	if [ -z "$KPKG" ] && [ "$(id -u)" = 0 ]; then
		apt-get update -qq || true
		KPKG=$(pick_kernel)
	fi
fi
if [ -z "$KPKG" ]; then
	# offline: fall back to the newest package already downloaded
	deb=$(ls "$OUT"/dl/linux-image-6.12.*+deb12-amd64-unsigned_*.deb 2>/dev/null |
		sort -V | tail -n 1 || true)
	[ -n "$deb" ] || die "apt knows no linux-image-6.12.*+deb12-amd64-unsigned" \
		"(add bookworm-security to the apt sources) and none is cached in $OUT/dl"
	KPKG=$(basename "$deb")
	KPKG=${KPKG%%_*}
fi
KDEB=$(ls "$OUT"/dl/"${KPKG}"_*.deb 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$KDEB" ]; then
	echo "build-guest: downloading $KPKG"
	(cd "$OUT/dl" && apt-get download -qq "$KPKG" >/dev/null 2>"$OUT/dl/apt.err") ||
		die "apt-get download $KPKG failed: $(grep -v unsandboxed "$OUT/dl/apt.err" | head -n 3)"
	KDEB=$(ls "$OUT"/dl/"${KPKG}"_*.deb 2>/dev/null | sort -V | tail -n 1 || true)
	[ -n "$KDEB" ] || die "apt-get download $KPKG left no .deb in $OUT/dl"
fi

# 3. stamp: rebuild only when an input changed.
stamp=$({
	echo "kernel $(basename "$KDEB") $(stat -c %s "$KDEB")"
	sha256sum "$SRC/build-guest.sh" "$SRC/guest/init" | cut -d' ' -f1
	dpkg-query -W -f='${Package} ${Version}\n' $HOST_PKGS
} | sha256sum | cut -d' ' -f1)
if [ -f "$OUT/stamp" ] && [ "$(cat "$OUT/stamp")" = "$stamp" ] &&
	[ -f "$OUT/vmlinuz" ] && [ -f "$OUT/initramfs.cpio" ]; then
	echo "build-guest: up to date ($(cat "$OUT/kernel.version"), stamp ${stamp:0:12})"
	exit 0
fi

t0=$(date +%s.%N)
TMP=$(mktemp -d "$OUT/tmp.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
K=$TMP/kernel
R=$TMP/root

# 4. kernel and modules
dpkg-deb -x "$KDEB" "$K"
KV=$(ls "$K/lib/modules")
[ -f "$K/boot/vmlinuz-$KV" ] || die "$KDEB holds no boot/vmlinuz-$KV"
depmod -b "$K" "$KV"

mkdir -p "$R"/{bin,sbin,usr/bin,usr/sbin,lib64,lib/modules,proc,sys,dev,tmp,run,host,mnt,etc}
: >"$R/etc/modules.load"
for m in $MODS $MODS_NOLOAD; do
	modprobe -C /dev/null -d "$K" -S "$KV" --show-depends "$m" | sed "s/^/$m /" ||
		die "module $m not found in $KPKG"
done | awk '$2 == "insmod" { print $1, $3 }' | awk '!seen[$2]++' | while read -r m f; do
	b=$(basename "$f")
	b=${b%.xz}
	b=${b%.zst}
	case "$f" in
	*.xz) xz -dc "$f" >"$R/lib/modules/$b" ;;
	*.zst) zstd -qdc "$f" >"$R/lib/modules/$b" ;;
	*) cp "$f" "$R/lib/modules/$b" ;;
	esac
	case " $MODS_NOLOAD " in
	*" $m "*) ;;
	*) echo "$b" >>"$R/etc/modules.load" ;;
	esac
done
for m in $MODS; do
	grep -q "^${m//_/[-_]}\.ko$" "$R/etc/modules.load" ||
		die "module $m did not resolve to a file"
done

# 5. busybox, tools and their shared libraries
cp /bin/busybox "$R/bin/busybox"
for a in $("$R/bin/busybox" --list); do
	[ -e "$R/bin/$a" ] || ln -s busybox "$R/bin/$a"
done
for t in $TOOLS; do
	cp -L "$t" "$R/usr/bin/$(basename "$t")"
done
for t in $TOOLS; do
	ldd "$t" | awk '/=> \// { print $3 } /^\t\// { print $1 }'
done | sort -u | while read -r l; do
	mkdir -p "$R$(dirname "$l")"
	cp -L "$l" "$R$l"
done
mkdir -p "$R/usr/lib" "$R/lib/x86_64-linux-gnu"
[ -e "$R/usr/lib/x86_64-linux-gnu" ] || ln -s ../../lib/x86_64-linux-gnu "$R/usr/lib/x86_64-linux-gnu"
cp -L /lib64/ld-linux-x86-64.so.2 "$R/lib64/"
cp /etc/mke2fs.conf "$R/etc/"
mkdir -p "$R/etc/nvme"
echo "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-000000000001" >"$R/etc/nvme/hostnqn"
echo 'root:x:0:0:root:/root:/bin/sh' >"$R/etc/passwd"
echo 'root:x:0:' >"$R/etc/group"
install -m 0755 "$SRC/guest/init" "$R/init"

# 6. pack (uncompressed: unpacking is faster than decompressing under TCG)
(cd "$R" && find . | cpio -o -H newc --quiet) >"$TMP/initramfs.cpio"
cp "$K/boot/vmlinuz-$KV" "$TMP/vmlinuz"
mv "$TMP/vmlinuz" "$TMP/initramfs.cpio" "$OUT/"
echo "$KV ($KPKG)" >"$OUT/kernel.version"
echo "$stamp" >"$OUT/stamp"
# keep only the kernel package in use
for d in "$OUT"/dl/linux-image-*.deb; do
	[ "$d" = "$KDEB" ] || rm -f "$d"
done
t1=$(date +%s.%N)
printf 'build-guest: built kernel %s, initramfs %s, %d modules, in %.1f s\n' "$KV" \
	"$(du -h "$OUT/initramfs.cpio" | cut -f1)" "$(wc -l <"$R/etc/modules.load")" \
	"$(awk "BEGIN { print $t1 - $t0 }")"
