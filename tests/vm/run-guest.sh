#!/bin/bash
# run-guest.sh - boot the vm test guest once and return its exit code.
#
# usage: run-guest.sh -i IMAGE -w WORK [options] -- COMMAND [ARG...]
#   -i DIR     guest image (vmlinuz, initramfs.cpio from build-guest.sh)
#   -w DIR     work dir: disk images (kept across boots), share/, logs
#   -n NAME    name of this boot; console log is WORK/NAME.log (default boot)
#   -b FILE    project binary to run in the guest (repeatable): copied to
#              share/bin, its shared libraries to share/lib
#   -f         fresh disks: delete the NVDIMM and NVMe images first
#   -k MARKER  power cut: SIGKILL qemu once MARKER shows on the console
#   -d MIN:MAX extra delay before the kill, in ms, drawn at random (after
#              the marker, or after qemu started when there is no -k)
#   -r SEED    seed of that draw (printed; default: random)
#   -t SECS    timeout of the whole boot (default 600)
#
# The guest runs COMMAND with sh in /host (the share) after /init loaded
# the modules; guest/*.sh are copied into the share, so COMMAND is
# usually "sh t-name.sh args". The machine: TCG (KVM when /dev/kvm works,
# probed once per image and remembered), 2 vCPUs, 2 GiB RAM
# (PMC_VM_MEM_MIB), two NVDIMMs backed by shared files (nvdimm0: the
# devdax namespace for pmcache, nvdimm1: a pmem block device for the
# peers), two NVMe disks with fixed serials and distinct sizes (the guest
# must select them by serial), the share over virtio-9p, and
# isa-debug-exit for the exit code.
# WORK/share/vm.env tells the guest the serials and sizes.
#
# Exit: the guest's exit code; for a requested power cut 0 when qemu was
# killed as planned and 1 when the guest ended first; 1 on timeout or when
# the guest gave no exit code; 77 when qemu is not installed. The console
# log is kept; on failure its tail is printed.
# Env: PMC_VM_ACCEL=tcg|kvm forces the accelerator; PMC_VM_PMEM_MIB (1024)
# and PMC_VM_PEER_PMEM_MIB (512) size the NVDIMMs (multiples of 16);
# PMC_VM_MEM_MIB (2048) is the guest's RAM;
# PMC_VM_NVME_MIB (1024) sizes the first NVMe disk (a sparse image);
# PMC_VM_NVME_WRITTEN=1 writes the NVMe images whole when they are made
# (for benchmarks: the host's first write into a hole of a sparse image
# allocates its blocks, and would slow whichever system writes a region
# first).
set -euo pipefail

SRC=$(cd "$(dirname "$0")" && pwd)
NVME_SERIALS="pmcvm0001 pmcvm0002"
NVME_MIB="${PMC_VM_NVME_MIB:-1024} 768"
PMEM_MIB=${PMC_VM_PMEM_MIB:-1024}
PEER_PMEM_MIB=${PMC_VM_PEER_PMEM_MIB:-512}
MEM_MIB=${PMC_VM_MEM_MIB:-2048}

die() {
	echo "run-guest: $*" >&2
	exit 1
}

IMAGE= WORK= NAME=boot FRESH=0 MARKER= DELAY= SEED= TIMEOUT=600
BINS=()
while getopts "i:w:n:b:fk:d:r:t:" o; do
	case $o in
	i) IMAGE=$OPTARG ;;
	w) WORK=$OPTARG ;;
	n) NAME=$OPTARG ;;
	b) BINS+=("$OPTARG") ;;
	f) FRESH=1 ;;
	k) MARKER=$OPTARG ;;
	d) DELAY=$OPTARG ;;
	r) SEED=$OPTARG ;;
	t) TIMEOUT=$OPTARG ;;
	*) die "bad option (see the head of run-guest.sh)" ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || die "no guest command given"
CMD=("$@")
[ -n "$IMAGE" ] && [ -n "$WORK" ] || die "-i IMAGE and -w WORK are required"
if ! command -v qemu-system-x86_64 >/dev/null; then
	echo "run-guest: SKIP: qemu-system-x86_64 not installed"
	exit 77
fi
[ -f "$IMAGE/vmlinuz" ] && [ -f "$IMAGE/initramfs.cpio" ] ||
	die "no guest image in $IMAGE (run build-guest.sh $IMAGE)"
for m in $PMEM_MIB $PEER_PMEM_MIB; do
	[ $((m % 16)) -eq 0 ] || die "NVDIMM size $m MiB is not a multiple of 16"
done
case $MEM_MIB in '' | *[!0-9]* | 0*) die "PMC_VM_MEM_MIB must be a whole number of MiB, not '$MEM_MIB'" ;; esac

mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
SHARE=$WORK/share
LOG=$WORK/$NAME.log

now() {
	date +%s.%N
}
elapsed() {
	awk "BEGIN { printf \"%.1f\", $(now) - $1 }"
}

# --- share: guest scripts, binaries with their libraries, env, command
rm -rf "$SHARE"
mkdir -p "$SHARE/bin" "$SHARE/lib" "$SHARE/out"
cp "$SRC"/guest/*.sh "$SHARE/"
for b in "${BINS[@]}"; do
	[ -x "$b" ] || die "binary $b not found"
	cp "$b" "$SHARE/bin/"
	ldd "$b" | awk '/=> \// { print $3 }' | while read -r l; do
		case $(basename "$l") in
		libc.so.* | ld-linux*) ;; # the image has the same ones
		*) cp -L "$l" "$SHARE/lib/" ;;
		esac
	done
done
{
	echo "# written by run-guest.sh for one boot"
	echo "PMC_VM_NVME=\"$(set -- $NVME_MIB
		for s in $NVME_SERIALS; do
			printf '%s:%d ' "$s" $(($1 << 20))
			shift
		done)\""
	echo "PMC_VM_PMEM_BYTES=$((PMEM_MIB << 20))"
	echo "PMC_VM_PEER_PMEM_BYTES=$((PEER_PMEM_MIB << 20))"
	echo "PATH=/host/bin:\$PATH"
	echo "LD_LIBRARY_PATH=/host/lib"
	echo "export PMC_VM_NVME PMC_VM_PMEM_BYTES PMC_VM_PEER_PMEM_BYTES PATH LD_LIBRARY_PATH"
} >"$SHARE/vm.env"
printf '%q ' "${CMD[@]}" >"$SHARE/cmd"
echo >>"$SHARE/cmd"

# --- disks: created sparse on first use, kept across boots (power cut)
if [ $FRESH = 1 ]; then
	rm -f "$WORK"/nvdimm*.img "$WORK"/nvme-*.img
fi
mkimg() { # file MiB [written]: sparse, or with "written" all of it written
	if [ ! -f "$1" ] && [ "${3:-}" = written ]; then
		dd if=/dev/zero of="$1" bs=1M count="$2" oflag=direct status=none || die "writing $1"
	fi
	[ -f "$1" ] || truncate -s "$2M" "$1"
	[ "$(stat -c %s "$1")" = $(($2 << 20)) ] || die "$1 has the wrong size (delete it)"
}
# the label area lives past the last 16 MiB boundary: size = 16 MiB * N + 2 MiB
mkimg "$WORK/nvdimm0.img" $((PMEM_MIB + 2))
mkimg "$WORK/nvdimm1.img" $((PEER_PMEM_MIB + 2))
NVME_ARGS=()
NVME_FILL=
[ "${PMC_VM_NVME_WRITTEN:-0}" != 1 ] || NVME_FILL=written
set -- $NVME_MIB
i=0
for s in $NVME_SERIALS; do
	mkimg "$WORK/nvme-$s.img" "$1" $NVME_FILL
	NVME_ARGS+=(-drive "file=$WORK/nvme-$s.img,if=none,id=nvme$i,format=raw,cache=none"
		-device "nvme,serial=$s,drive=nvme$i")
	shift
	i=$((i + 1))
done

qemu_cmd() { # accel kernel-cmdline-extra
	local cpu=max
	[ "$1" = kvm ] && cpu=host
	QEMU=(qemu-system-x86_64 -machine "pc,nvdimm=on,accel=$1" -cpu "$cpu" -smp 2
		-m "${MEM_MIB}M,slots=4,maxmem=$((MEM_MIB + PMEM_MIB + PEER_PMEM_MIB + 4096))M"
		-object "memory-backend-file,id=pm0,share=on,mem-path=$WORK/nvdimm0.img,size=$((PMEM_MIB + 2))M,align=2M"
		-device nvdimm,id=nvdimm0,memdev=pm0,label-size=128K
		-object "memory-backend-file,id=pm1,share=on,mem-path=$WORK/nvdimm1.img,size=$((PEER_PMEM_MIB + 2))M,align=2M"
		-device nvdimm,id=nvdimm1,memdev=pm1,label-size=128K
		"${NVME_ARGS[@]}"
		-fsdev "local,id=fs0,path=$SHARE,security_model=none"
		-device virtio-9p-pci,fsdev=fs0,mount_tag=host0
		-device isa-debug-exit,iobase=0xf4,iosize=0x04
		-kernel "$IMAGE/vmlinuz" -initrd "$IMAGE/initramfs.cpio"
		-append "console=ttyS0 panic=-1 loglevel=4 no_timer_check $2"
		-nodefaults -display none -no-reboot -serial "file:$LOG")
}

# --- accelerator: KVM only if a guest really boots with it, else TCG
accel() {
	if [ -n "${PMC_VM_ACCEL:-}" ]; then
		echo "$PMC_VM_ACCEL"
		return
	fi
	if ! [ -r /dev/kvm ] || ! [ -w /dev/kvm ]; then
		echo tcg
		return
	fi
	local memo
	memo="$IMAGE/kvm.$(cat "$IMAGE/stamp" 2>/dev/null | cut -c1-12).$(uname -r)"
	if [ ! -f "$memo" ]; then
		# a boot with a trivial command must reach its exit code in time
		local saved_cmd r=1
		saved_cmd=$(cat "$SHARE/cmd")
		echo "exit 42" >"$SHARE/cmd"
		qemu_cmd kvm ""
		timeout -s KILL 20 "${QEMU[@]}" >/dev/null 2>&1 || r=$?
		rm -f "$SHARE/out/rc"
		echo "$saved_cmd" >"$SHARE/cmd"
		if [ $r = $((42 * 2 + 1)) ]; then
			echo kvm >"$memo"
			echo "run-guest: KVM works, using it" >&2
		else
			echo tcg >"$memo"
			cp "$LOG" "$WORK/kvm-probe.log" 2>/dev/null || true
			echo "run-guest: KVM probe boot failed (status $r, log in" \
				"$WORK/kvm-probe.log), using TCG" >&2
		fi
	fi
	cat "$memo"
}
ACCEL=$(accel)

# --- boot
kill_at_ms=
if [ -n "$DELAY" ]; then
	[[ $DELAY =~ ^([0-9]+):([0-9]+)$ ]] || die "-d wants MIN:MAX in ms"
	[ -n "$SEED" ] || SEED=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
	lo=${BASH_REMATCH[1]} hi=${BASH_REMATCH[2]}
	[ "$hi" -ge "$lo" ] || die "-d $DELAY: MAX < MIN"
	RANDOM=$SEED
	kill_at_ms=$((lo + (RANDOM * 32768 + RANDOM) % (hi - lo + 1)))
	echo "run-guest: power-cut delay ${kill_at_ms} ms (seed $SEED, range $DELAY)"
fi
qemu_cmd "$ACCEL" ""
printf '%q ' "${QEMU[@]}" >"$WORK/$NAME.qemu"
boot_once() {
	rm -f "$LOG" "$SHARE/out/rc"
	: >"$LOG"
	t0=$(now)
	echo "run-guest: $NAME: booting ($ACCEL) to run: ${CMD[*]}"
	"${QEMU[@]}" >"$WORK/$NAME.qemu-out" 2>&1 &
	qpid=$!

	cut=0 timedout=0 seen=
	deadline=$(($(date +%s) + TIMEOUT))
	while kill -0 $qpid 2>/dev/null; do
		if [ -n "$MARKER" ] && [ -z "$seen" ] && grep -qF -- "$MARKER" "$LOG"; then
			seen=$(now)
		fi
		if [ -n "$MARKER$kill_at_ms" ] && { [ -z "$MARKER" ] || [ -n "$seen" ]; }; then
			from=${seen:-$t0}
			if awk "BEGIN { exit !($(now) - $from >= ${kill_at_ms:-0} / 1000) }"; then
				kill -KILL $qpid 2>/dev/null && cut=1
				break
			fi
		fi
		if [ "$(date +%s)" -ge $deadline ]; then
			kill -KILL $qpid 2>/dev/null || true
			timedout=1
			break
		fi
		sleep 0.05
	done
	qrc=0
	{ wait $qpid; } 2>/dev/null || qrc=$? # no "Killed" notice from bash
	wall=$(elapsed "$t0")
}
# Under TCG the guest kernel now and then dies while it boots, before
# /init runs anything (seen: an int3 oops in sched_clock_cpu while code is
# patched across vCPUs). Nothing has touched the disks then: boot again,
# at most twice, keeping each failed console log.
for attempt in 1 2 3; do
	boot_once
	[ $cut = 0 ] && [ $timedout = 0 ] && ! grep -q PMC_VM_START "$LOG" &&
		grep -qE "Kernel panic|Oops" "$LOG" && [ $attempt -lt 3 ] || break
	cp "$LOG" "$WORK/$NAME.died-$attempt.log"
	echo "run-guest: $NAME: the guest kernel died before the command started" \
		"($WORK/$NAME.died-$attempt.log); booting again"
done

# guest output: the command's part of the console log (its tail when
# long), or the tail of the boot when the command never started
if grep -q PMC_VM_START "$LOG"; then
	sed -n '/PMC_VM_START/,$p' "$LOG" | tail -n 400
else
	echo "run-guest: --- the guest never started the command; last 40 console lines:"
	tail -n 40 "$LOG"
fi

tail_log() {
	[ -s "$WORK/$NAME.qemu-out" ] && { echo "run-guest: --- qemu said:"; cat "$WORK/$NAME.qemu-out"; }
	echo "run-guest: console log kept in $LOG, qemu command line in $WORK/$NAME.qemu"
}

if [ $timedout = 1 ]; then
	echo "run-guest: $NAME: FAIL: timeout after $TIMEOUT s (accel $ACCEL)"
	tail_log
	exit 1
fi
if [ -n "$MARKER$kill_at_ms" ]; then
	if [ $cut = 1 ]; then
		echo "run-guest: $NAME: power cut (SIGKILL to qemu) after $wall s${MARKER:+, marker '$MARKER' seen}"
		exit 0
	fi
	echo "run-guest: $NAME: FAIL: the guest ended (qemu status $qrc) before the power cut${MARKER:+; marker '$MARKER' never seen}"
	tail_log
	exit 1
fi
if [ -f "$SHARE/out/rc" ]; then
	rc=$(cat "$SHARE/out/rc")
elif [ $((qrc & 1)) = 1 ] && [ $qrc -lt 128 ] && [ $qrc -gt 1 ]; then
	rc=$((qrc >> 1))
else
	echo "run-guest: $NAME: FAIL: the guest gave no exit code (qemu status $qrc)"
	tail_log
	exit 1
fi
echo "run-guest: $NAME: guest exit code $rc, wall $wall s, accel $ACCEL"
[ "$rc" = 0 ] || [ "$rc" = 77 ] || tail_log
exit "$rc"
