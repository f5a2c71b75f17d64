#!/usr/bin/env bash
# tests/fuzz/run-fuzz.sh - a libFuzzer pass over every fuzz target: fuzz_open
# (opening corrupt metadata: no crash, no hang, no write; tests/fuzz),
# fuzz_config (the config file loader) and fuzz_ctl (the control protocol
# codec; both tests/config). See each fuzz_*.c for what it checks.
#
# Usage: tests/fuzz/run-fuzz.sh SECONDS [BUILD_DIR]
#
# SECONDS is per target. Configures BUILD_DIR (default: build/fuzz at the
# top of the tree) with clang and -DPMC_FUZZ=ON unless it is configured so
# already, builds the targets, and fuzzes each over BUILD_DIR/fuzz_X-corpus:
# a copy of its seed corpus that also keeps what earlier runs found.
# Anything found (crash, sanitizer report, leak, an input slower than 5 s,
# more than 2 GiB of memory) is saved under BUILD_DIR/fuzz_X-artifacts/;
# replay it with `fuzz_X FILE` or `fuzz_X_replay -v FILE` and, once lib/ is
# fixed, add it to the target's seed corpus.
#
# Exit: 0 nothing found, 1 something found or the build failed, 2 usage,
# 77 clang or its libFuzzer runtime (libclang-rt-14-dev) is missing.
# Environment: CI=true builds with -Werror; FUZZ_JOBS=N fuzzes with N
# processes (libFuzzer -fork=N; default 1); FUZZ_FLAGS adds libFuzzer flags;
# FUZZ_CC names the compiler.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)

if [ $# -lt 1 ] || [ $# -gt 2 ] || ! [[ $1 =~ ^[0-9]+$ ]]; then
	echo "usage: $0 SECONDS [BUILD_DIR]" >&2
	exit 2
fi
seconds=$1
build=${2:-$top/build/fuzz}
mkdir -p "$build"
build=$(cd "$build" && pwd)
jobs=${FUZZ_JOBS:-1}
werror=OFF
[ "${CI:-}" = true ] && werror=ON

cc=${FUZZ_CC:-clang}
if ! command -v "$cc" >/dev/null; then
	echo "run-fuzz.sh: $cc not found (Debian: apt-get install clang libclang-rt-14-dev)" >&2
	exit 77
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
	'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);' \
	'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return 0; }' >"$probe/p.c"
if ! "$cc" -fsanitize=fuzzer,address,undefined "$probe/p.c" -o "$probe/p" 2>"$probe/err"; then
	cat "$probe/err" >&2
	echo "run-fuzz.sh: $cc cannot link libFuzzer (Debian: apt-get install libclang-rt-14-dev)" >&2
	exit 77
fi

cache=$build/CMakeCache.txt
configured=0
if [ -f "$cache" ]; then
	if ! grep -q '^CMAKE_C_COMPILER:[A-Z]*=.*clang' "$cache"; then
		echo "run-fuzz.sh: $build is configured with another compiler; give another BUILD_DIR" >&2
		exit 2
	fi
	grep -q '^PMC_FUZZ:BOOL=ON' "$cache" && configured=1
fi
if [ $configured = 0 ]; then
	echo "run-fuzz.sh: configuring $build (clang, PMC_FUZZ=ON)"
	CC=$cc cmake -S "$top" -B "$build" -DPMC_FUZZ=ON -DPMC_WERROR=$werror \
		-DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
# target  seed corpus  dictionary  max input  extra libFuzzer flags
# fuzz_config: libconfig 1.5 leaks a token on many syntax errors (see
# fuzz_config.c, which suppresses those leaks); the per-input leak check
# would then scan the heap after most inputs (20 times slower). Leaks are
# still checked at exit, so a leak of ours fails the run (find its input
# with fuzz_config_replay --leak-each over the corpus).
targets=(
	"fuzz_open $here/corpus $here/fuzz_open.dict 4096"
	"fuzz_config $top/tests/config/corpus/config $top/tests/config/fuzz_config.dict 8192 -detect_leaks=0"
	"fuzz_ctl $top/tests/config/corpus/ctl $top/tests/config/fuzz_ctl.dict 8192"
)
names=()
for t in "${targets[@]}"; do names+=("${t%% *}"); done
log=$build/fuzz-build.log
cmake --build "$build" --target "${names[@]}" -j"$(nproc)" >"$log" 2>&1 || {
	cat "$log" >&2
	echo "run-fuzz.sh: building ${names[*]} failed" >&2
	exit 1
}

rc_all=0
for t in "${targets[@]}"; do
	# shellcheck disable=SC2086
	set -- $t
	name=$1 seeds=$2 dict=$3 max_len=$4
	shift 4
	bin=$(find "$build" -type f -name "$name" -perm -u+x | head -n1)
	[ -n "$bin" ] || { echo "run-fuzz.sh: $name not found under $build" >&2; exit 1; }
	corpus=$build/$name-corpus
	artifacts=$build/$name-artifacts
	mkdir -p "$corpus" "$artifacts"
	cp "$seeds"/* "$corpus"/
	stamp=$probe/stamp-$name
	touch "$stamp"
	flags=(-max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 -max_len="$max_len"
		-dict="$dict" -print_final_stats=1 -error_exitcode=1 -timeout_exitcode=1
		-artifact_prefix="$artifacts/" "$@")
	[ "$jobs" -gt 1 ] && flags+=(-fork="$jobs")
	# shellcheck disable=SC2206
	flags+=(${FUZZ_FLAGS:-})
	echo "run-fuzz.sh: $name for ${seconds}s over $corpus ($(ls "$corpus" | wc -l) inputs)"
	set +e
	ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0} \
	UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
		"$bin" "${flags[@]}" "$corpus" 2>&1 | tee "$build/$name.log" |
		grep -v '^#[0-9]*.*\(NEW\|REDUCE\|pulse\)'
	rc=${PIPESTATUS[0]}
	set -e
	found=$(find "$artifacts" -type f -newer "$stamp")
	if [ "$rc" -ne 0 ] || [ -n "$found" ]; then
		echo "run-fuzz.sh: $name FAILED (exit $rc); full log $build/$name.log" >&2
		for f in $found; do echo "  found: $f" >&2; done
		rc_all=1
	else
		echo "run-fuzz.sh: $name: nothing found in ${seconds}s; log $build/$name.log"
	fi
done
exit $rc_all
