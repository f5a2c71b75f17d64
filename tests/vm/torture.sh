#!/bin/bash
# torture.sh - the fault campaign: pmcached in the qemu guest with three
# volumes on two NVMe disks sharing one small cache, under SIGKILLs, power
# cuts, run-time mode switches, a failing and healing disk, volume removal
# and a pmem full of dirty data, every acknowledged write checked after
# every round (tests/vm/README.md, "Torture").
#
# usage: torture.sh -B BUILD -w WORK [options]
#   -B DIR          build directory (pmcached, pmcachectl, pmc-torture, and
#                   the guest image in DIR/tests/vm/guest)
#   -w DIR          work directory: disk images, console logs (round-N.log)
#   --rounds N      rounds to run (default 1)
#   --duration S    start no new round after S seconds (default: no limit)
#   --seed S        campaign seed; round N's seed is drawn from it
#   --round-seed S  run one round with this seed on fresh disks (the
#                   replay of a failed round's fault mix)
#   --ci            the short CTest round: every kind of fault once, short
#                   pauses, a power cut
#   --dense         the long run's rounds: short, 3-5 SIGKILLs each, short
#                   pauses, a power cut in every round (in the second half
#                   of its events, after the third kill), the slow faults
#                   (full pmem, removal) less often
#   --keep-logs     keep the console logs of passing rounds too
#   --events 'E...' every round runs these events (t-torture.sh) instead
#                   of drawn ones, no power cut unless "cut" is among them
#   --no-sim        skip the host leg of each round (engine_crash --seed)
#   --keep-going    after a failed round go on with fresh disks (the long
#                   run); the exit code still says a round failed
#   --boot-timeout S  a boot taking longer fails its round (default 3600;
#                   a round under TCG on a loaded machine takes 5-25 min)
#
# A round is one guest boot: pmc-torture writes to every volume while the
# round's faults happen in an order drawn from its seed; a round with a
# power cut is checked at the start of the next boot (and by one more boot
# after the last round). The guest's power cut cannot lose stores the
# engine never flushed (TCG has no CPU cache), so each round also runs the
# crash simulator on the host with the round's seed (engine_crash, which
# drops unflushed words at its persist points). Output: one line per
# round, then
#   torture: rounds=R kills=K power_cuts=P disk_failures=D mode_switches=M
#            acked_verified=A lost=L torn=T
# (one line). A failed round keeps its console logs and prints its seed and
# the command that replays it. Exit 0 when every round passed, 1 otherwise,
# 77 when qemu is missing.
set -uo pipefail

SRC=$(cd "$(dirname "$0")" && pwd)
BUILD= WORK= ROUNDS=1 DURATION=0 SEED= ROUND_SEED= CI=0 DENSE=0 KEEP=0 EVENTS= SIM=1 KEEP_GOING=0
BOOT_TIMEOUT=3600
ARGS=("$@")
die() {
	echo "torture: $*" >&2
	exit 2
}
while [ $# -gt 0 ]; do
	case $1 in
	-B) BUILD=$2; shift ;;
	-w) WORK=$2; shift ;;
	--rounds) ROUNDS=$2; shift ;;
	--duration) DURATION=$2; shift ;;
	--seed) SEED=$2; shift ;;
	--round-seed) ROUND_SEED=$2; ROUNDS=1; shift ;;
	--ci) CI=1 ;;
	--dense) DENSE=1 ;;
	--keep-logs) KEEP=1 ;;
	--events) EVENTS=$2; shift ;;
	--no-sim) SIM=0 ;;
	--keep-going) KEEP_GOING=1 ;;
	--boot-timeout) BOOT_TIMEOUT=$2; shift ;;
	*) die "unknown option $1 (see the head of torture.sh)" ;;
	esac
	shift
done
[ -n "$BUILD" ] && [ -n "$WORK" ] || die "-B BUILD and -w WORK are required"
[[ $ROUNDS =~ ^[0-9]+$ ]] && [ "$ROUNDS" -ge 1 ] || die "--rounds wants a number >= 1"
[[ $DURATION =~ ^[0-9]+$ ]] || die "--duration wants seconds"
BUILD=$(cd "$BUILD" && pwd) || die "no build directory $BUILD"
IMAGE=$BUILD/tests/vm/guest
BINS=()
for b in daemon/pmcached cli/pmcachectl tests/vm/pmc-torture tests/engine/engine_crash; do
	[ -x "$BUILD/$b" ] || die "$BUILD/$b is not built"
	[ "${b##*/}" = engine_crash ] || BINS+=(-b "$BUILD/$b")
done
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
SEED=${SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}

# the guest: a 48 MiB NVDIMM (a cache far smaller than the 192 MiB the
# checker writes over); the second NVDIMM holds the checker's log
export PMC_VM_PMEM_MIB=48 PMC_VM_PEER_PMEM_MIB=32
NVME1=$WORK/nvme-pmcvm0001.img NVME2=$WORK/nvme-pmcvm0002.img

# mbr IMAGE MIB...: an MBR partition table with one primary Linux
# partition of each size, 1 MiB apart from the start
le32() {
	printf '\\x%02x\\x%02x\\x%02x\\x%02x' $(($1 & 255)) $(($1 >> 8 & 255)) \
		$(($1 >> 16 & 255)) $(($1 >> 24 & 255))
}
mbr() {
	local img=$1 lba=2048 e=""
	shift
	for mib in "$@"; do
		e+="\\x00\\xff\\xff\\xff\\x83\\xff\\xff\\xff$(le32 $lba)$(le32 $((mib * 2048)))"
		lba=$((lba + mib * 2048))
	done
	printf "$e" | dd of="$img" bs=1 seek=446 conv=notrunc status=none &&
		printf '\x55\xaa' | dd of="$img" bs=1 seek=510 conv=notrunc status=none
}
fresh_disks() {
	rm -f "$WORK"/nvdimm*.img "$NVME1" "$NVME2"
	truncate -s 1024M "$NVME1" && truncate -s 768M "$NVME2" || die "cannot create the disk images"
	mbr "$NVME1" 80 80 && mbr "$NVME2" 80 32 || die "cannot partition the disk images"
}

# plan ROUND_SEED: the events of a round (t-torture.sh), drawn from the seed
MODES=(write-back write-through write-around pass-through)
plan() {
	local ev=() n i j t
	RANDOM=$1
	if [ -n "$EVENTS" ]; then
		read -r -a PLAN <<<"$EVENTS"
		CUT_MS=
		[[ " $EVENTS " == *" cut "* ]] && CUT_MS=$((RANDOM % 8000))
		return
	fi
	if [ $CI = 1 ]; then
		ev=(kill "mode:$((RANDOM % 3)):${MODES[1 + RANDOM % 3]}" kill
			"fail:$(pick error flakey):4:write-back" "remove:$((RANDOM % 3))"
			"fill:$(pick wait around):15")
	elif [ $DENSE = 1 ]; then
		n=$((3 + RANDOM % 3))
		for ((i = 0; i < n; i++)); do ev+=(kill); done
		n=$((RANDOM % 3))
		for ((i = 0; i < n; i++)); do ev+=("mode:$((RANDOM % 3)):${MODES[RANDOM % 4]}"); done
		((RANDOM % 100 < 40)) && ev+=("fail:$(pick error flakey delay):$((3 + RANDOM % 4)):$(pick write-back write-through)")
		((RANDOM % 100 < 15)) && ev+=("fill:$(pick wait around):15")
		((RANDOM % 100 < 20)) && ev+=("remove:$((RANDOM % 3))")
	else
		n=$((2 + RANDOM % 4))
		for ((i = 0; i < n; i++)); do ev+=(kill); done
		n=$((RANDOM % 4))
		for ((i = 0; i < n; i++)); do ev+=("mode:$((RANDOM % 3)):${MODES[RANDOM % 4]}"); done
		((RANDOM % 100 < 60)) && ev+=("fail:$(pick error flakey delay):$((4 + RANDOM % 7)):$(pick write-back write-through)")
		((RANDOM % 100 < 35)) && ev+=("fill:$(pick wait around):30")
		((RANDOM % 100 < 35)) && ev+=("remove:$((RANDOM % 3))")
	fi
	# shuffle, a pause of load before each event
	for ((i = ${#ev[@]} - 1; i > 0; i--)); do
		j=$((RANDOM % (i + 1)))
		t=${ev[i]} ev[i]=${ev[j]} ev[j]=$t
	done
	PLAN=()
	for t in "${ev[@]}"; do
		PLAN+=("sleep:$((CI ? 2 : DENSE ? 1 + RANDOM % 3 : 2 + RANDOM % 6))" "$t")
	done
	PLAN+=("sleep:$((CI ? 3 : DENSE ? 2 + RANDOM % 3 : 3 + RANDOM % 8))")
	# a power cut at a random place among the events, the kill at a
	# random moment within CUT_MS after it
	CUT_MS=
	if [ $CI = 1 ]; then # every fault first, then the cut
		PLAN+=(cut sleep:10)
		CUT_MS=$((RANDOM % 8000))
	elif [ $DENSE = 1 ]; then # every round, among the later events, after 3 kills
		n=${#PLAN[@]}
		k=0 j=0
		for ((j = 0; j < n && k < 3; j++)); do [ "${PLAN[j]}" = kill ] && k=$((k + 1)); done
		[ $j -lt $((n / 2)) ] && j=$((n / 2))
		i=$((j + RANDOM % (n - j + 1)))
		PLAN=("${PLAN[@]:0:i}" cut "${PLAN[@]:i}")
		CUT_MS=$((RANDOM % 8000))
	elif ((RANDOM % 100 < 50)); then
		i=$((RANDOM % ${#PLAN[@]}))
		PLAN=("${PLAN[@]:0:i}" cut "${PLAN[@]:i}")
		CUT_MS=$((RANDOM % 8000))
	fi
}
pick() {
	local a=("$@")
	echo "${a[RANDOM % ${#a[@]}]}"
}

# totals
R=0 K=0 P=0 D=0 M=0 A=0 L=0 T=0
summary() {
	echo "torture: rounds=$R kills=$K power_cuts=$P disk_failures=$D mode_switches=$M acked_verified=$A lost=$L torn=$T"
}
count() { # PATTERN LOG
	grep -c "$1" "$2" 2>/dev/null || true
}
# sum of a key of the TORT_VERIFY lines of kind WHERE in LOG
vsum() { # WHERE KEY LOG
	awk -v w="$1" -v k="$2" '$1 == "TORT_VERIFY" && $2 == w {
		for (i = 3; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) s += kv[2] } }
		END { print s + 0 }' "$3" | tr -d '\r'
}
# tally LOG: add a round's faults (from its own boot's log) to the totals
tally() {
	R=$((R + 1))
	K=$((K + $(count '^TORT_KILLED' "$1")))
	M=$((M + $(count '^TORT_MODE' "$1")))
	D=$((D + $(count '^TORT_DISKFAIL' "$1")))
}
FAILED=()
fail_round() { # ROUND SEED LOG WHY [OTHER]: print, and exit unless --keep-going
	local f ci=
	tally "$3"
	for f in "$3" $([ "$WORK/${5:-none}" = "$3" ] || echo "$WORK/${5:-none}"); do
		[ -f "$f" ] || continue # the failed round's losses count too
		L=$((L + $(vsum cache lost "$f") + $(vsum raw lost "$f") + $(vsum cache-after-cut lost "$f") + $(vsum raw-after-cut lost "$f")))
		T=$((T + $(vsum cache torn "$f") + $(vsum raw torn "$f") + $(vsum cache-after-cut torn "$f") + $(vsum raw-after-cut torn "$f")))
	done
	echo "round $1 seed $2: FAIL: $4"
	grep -a "^FAIL" "$3" 2>/dev/null | head -20
	echo "torture: console logs kept in $WORK (round-$1.log${5:+, $5})"
	[ $CI = 1 ] && ci=" --ci"
	[ $DENSE = 1 ] && ci+=" --dense"
	echo "torture: replay the campaign: $0 -B $BUILD -w $WORK --seed $SEED --rounds $1$ci"
	echo "torture: replay this round's faults on fresh disks: $0 -B $BUILD -w $WORK --round-seed $2$ci"
	FAILED+=("$1")
	if [ $KEEP_GOING = 0 ]; then
		summary
		exit 1
	fi
	echo "torture: --keep-going: going on with fresh disks"
	fresh_disks
	START=fresh PREV=
}
# round_line: add up a round whose checks passed and print its line
round_line() { # ROUND SEED PLANTEXT LOG VERIFYLOG WHERE SECS
	local kills modes fails acked verified lost torn
	kills=$(count '^TORT_KILLED' "$4")
	modes=$(count '^TORT_MODE' "$4")
	fails=$(count '^TORT_DISKFAIL' "$4")
	acked=$(sed -n 's/^TORT_WRITER write: acked=[^ ]* total=\([0-9]*\).*/\1/p' "$4" | tr -d '\r')
	verified=$(vsum "$6" verified "$5")
	lost=$(($(vsum cache lost "$4") + $(vsum "$6" lost "$5")))
	torn=$(($(vsum cache torn "$4") + $(vsum "$6" torn "$5")))
	if [ "$6" = raw-after-cut ]; then
		lost=$((lost + $(vsum cache-after-cut lost "$5")))
		torn=$((torn + $(vsum cache-after-cut torn "$5")))
	fi
	tally "$4"
	A=$((A + verified)) L=$((L + lost)) T=$((T + torn))
	[ "$6" = raw-after-cut ] && P=$((P + 1))
	printf 'round %d seed %s: %s | kills=%d modes=%d disk_failures=%d acked_writes=%s verified=%d lost=%d torn=%d %s (%d s)\n' \
		"$1" "$2" "$3" "$kills" "$modes" "$fails" "${acked:-cut}" "$verified" "$lost" "$torn" \
		"$([ "$6" = raw-after-cut ] && echo "power cut, checked after reboot" || echo ok)" "$7"
}

boot() { # NAME ROUND_SEED START [CUT_MS] -- EVENTS...
	local name=$1 rs=$2 start=$3 cut=$4
	shift 5
	local cutargs=()
	[ -n "$cut" ] && cutargs=(-k PMC_CUTME -d "0:$cut" -r "$rs")
	"$SRC/run-guest.sh" -i "$IMAGE" -w "$WORK" -n "$name" "${BINS[@]}" -t "$BOOT_TIMEOUT" "${cutargs[@]}" \
		-- sh t-torture.sh "$ROUND" "$rs" "$start" "$@" >"$WORK/$name.out" 2>&1
}

echo "torture: seed $SEED, rounds $ROUNDS, duration limit ${DURATION} s (0: none), work $WORK"
t_start=$(date +%s)
fresh_disks
START=fresh
PREV= PREV_SEED= PREV_PLAN= PREV_T0=
ROUND=0
while :; do
	ROUND=$((ROUND + 1))
	last=0
	if [ $ROUND -gt "$ROUNDS" ] ||
		{ [ "$DURATION" -gt 0 ] && [ $(($(date +%s) - t_start)) -ge "$DURATION" ]; }; then
		last=1
	fi
	if [ $last = 1 ]; then
		[ -n "$PREV" ] || break
		# the previous round ended in a power cut: one boot that only checks
		RS=0 PLAN=() CUT_MS=
	else
		if [ -n "$ROUND_SEED" ]; then RS=$ROUND_SEED; else
			RANDOM=$((SEED + ROUND * 7919))
			RS=$(((RANDOM << 15 | RANDOM) % 1000000))
		fi
		plan "$RS"
	fi
	name=round-$ROUND
	[ $last = 1 ] && name=check-$((ROUND - 1))
	log=$WORK/$name.log
	t0=$(date +%s)
	rc=0
	boot "$name" "$RS" "$START" "$CUT_MS" -- "${PLAN[@]}" || rc=$?
	[ $rc = 77 ] && { echo "torture: SKIP: qemu is not installed"; exit 77; }
	# the previous round's power cut is checked at the start of this boot
	if [ -n "$PREV" ]; then
		if ! grep -q '^TORT_CUTCHECKED' "$log" ||
			sed '/^TORT_CUTCHECKED/q' "$log" | grep -aq '^FAIL'; then
			tail -30 "$WORK/$name.out"
			fail_round $((ROUND - 1)) "$PREV_SEED" "$PREV" "the checks after its power cut failed" "$name.log"
			[ $last = 1 ] && break
			continue # the disks are fresh: this round's boot ran on a bad state
		fi
		round_line $((ROUND - 1)) "$PREV_SEED" "$PREV_PLAN" "$PREV" "$log" raw-after-cut $(($(date +%s) - PREV_T0))
		[ $KEEP = 1 ] || rm -f "$PREV"
		PREV=
	fi
	[ $last = 1 ] && break
	# the guest cannot lose unflushed stores (TCG has no CPU cache): the
	# crash simulator covers them, with this round's seed, on the host
	why=
	if [ $SIM = 1 ]; then
		if nice -n5 "$BUILD/tests/engine/engine_crash" --seed "$RS" >"$WORK/$name.sim" 2>&1; then
			[ $KEEP = 1 ] || rm -f "$WORK/$name.sim"
		else
			grep -a '^FAIL\|replay' "$WORK/$name.sim" | head -5
			why="the crash simulator (engine_crash --seed $RS) failed"
		fi
	fi
	if [ -n "$CUT_MS" ]; then
		if [ $rc != 0 ]; then
			tail -30 "$WORK/$name.out"
			why="the boot did not end in the planned power cut"
		elif grep -aq '^FAIL' "$log"; then
			why="failed before the power cut"
		elif ! grep -q '^PMC_CUTME' "$log"; then
			why="no power cut marker"
		fi
		if [ -n "$why" ]; then
			fail_round $ROUND "$RS" "$log" "$why" "$name.sim"
			continue
		fi
		PREV=$log PREV_SEED=$RS PREV_PLAN="${PLAN[*]} (cut 0..$CUT_MS ms)" PREV_T0=$t0
		START=cut
		continue
	fi
	if [ $rc != 0 ] || ! grep -q '^TORT_ROUND ok' "$log"; then
		tail -30 "$WORK/$name.out"
		why="guest exit $rc"
	fi
	if [ -n "$why" ]; then
		fail_round $ROUND "$RS" "$log" "$why" "$name.sim"
		continue
	fi
	round_line $ROUND "$RS" "${PLAN[*]}" "$log" "$log" raw $(($(date +%s) - t0))
	[ $KEEP = 1 ] || rm -f "$log"
	START=clean
done
summary
[ ${#FAILED[@]} = 0 ] || { echo "torture: failed rounds: ${FAILED[*]}"; exit 1; }
[ $L = 0 ] && [ $T = 0 ] || exit 1
exit 0
