#!/usr/bin/env bash
# tests/fuzz/run-fuzz.sh - a libFuzzer pass over fuzz_open (opening corrupt
# metadata: no crash, no hang, no write; see fuzz_open.c).
#
# Usage: tests/fuzz/run-fuzz.sh SECONDS [BUILD_DIR]
#
# Configures BUILD_DIR (default: build/fuzz at the top of the tree) with
# clang and -DPMC_FUZZ=ON unless it is configured so already, builds
# fuzz_open, and fuzzes for SECONDS over BUILD_DIR/fuzz_open-corpus: a copy
# of tests/fuzz/corpus that also keeps what earlier runs found. Anything
# found (crash, sanitizer report, leak, an input slower than 5 s, more than
# 2 GiB of memory) is saved under BUILD_DIR/fuzz_open-artifacts/; replay it
# with `fuzz_open FILE` or `fuzz_open_replay -v FILE` and, once lib/ is
# fixed, add it to tests/fuzz/corpus/.
#
# Exit: 0 nothing found, 1 something found or the build failed, 2 usage,
# 77 clang or its libFuzzer runtime (libclang-rt-14-dev) is missing.
# Environment: CI=true builds with -Werror; FUZZ_JOBS=N fuzzes with N
# processes (libFuzzer -fork=N; default 1); FUZZ_FLAGS adds libFuzzer flags.
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
cmake --build "$build" --target fuzz_open -j"$(nproc)" >"$build/fuzz_open-build.log" 2>&1 || {
	cat "$build/fuzz_open-build.log" >&2
	echo "run-fuzz.sh: building fuzz_open failed" >&2
	exit 1
}
bin=$(find "$build" -type f -name fuzz_open -perm -u+x | head -n1)
[ -n "$bin" ] || { echo "run-fuzz.sh: fuzz_open not found under $build" >&2; exit 1; }

corpus=$build/fuzz_open-corpus
artifacts=$build/fuzz_open-artifacts
mkdir -p "$corpus" "$artifacts"
cp "$here"/corpus/* "$corpus"/
stamp=$probe/stamp
touch "$stamp"

flags=(-max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 -max_len=4096
	-dict="$here/fuzz_open.dict" -print_final_stats=1 -artifact_prefix="$artifacts/")
[ "$jobs" -gt 1 ] && flags+=(-fork="$jobs")
# shellcheck disable=SC2206
flags+=(${FUZZ_FLAGS:-})

echo "run-fuzz.sh: fuzz_open for ${seconds}s over $corpus ($(ls "$corpus" | wc -l) inputs)"
set +e
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
	"$bin" "${flags[@]}" "$corpus" 2>&1 | tee "$build/fuzz_open.log" | grep -v '^#[0-9]*.*\(NEW\|REDUCE\|pulse\)'
rc=${PIPESTATUS[0]}
set -e
found=$(find "$artifacts" -type f -newer "$stamp")
if [ "$rc" -ne 0 ] || [ -n "$found" ]; then
	echo "run-fuzz.sh: fuzz_open FAILED (exit $rc); full log $build/fuzz_open.log" >&2
	for f in $found; do echo "  found: $f" >&2; done
	exit 1
fi
echo "run-fuzz.sh: fuzz_open: nothing found in ${seconds}s; log $build/fuzz_open.log"
