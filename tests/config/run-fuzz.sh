#!/usr/bin/env bash
# tests/config/run-fuzz.sh - a libFuzzer pass over fuzz_config (the config
# file loader) and fuzz_ctl (the control protocol codec); see fuzz_*.c for
# what each checks.
#
# Usage: tests/config/run-fuzz.sh SECONDS [BUILD_DIR]
#
# SECONDS is per target. Configures BUILD_DIR (default: build/fuzz at the
# top of the tree) with clang and -DPMC_FUZZ=ON unless it is configured so
# already, and builds the targets there (the CMake targets when tests/config
# is part of that build; otherwise compiled here with clang against that
# build's libpmcache.a). Each target fuzzes over BUILD_DIR/fuzz_X-corpus, a
# copy of tests/config/corpus/X that also keeps what earlier runs found.
# Anything found (crash, sanitizer report, leak, an input slower than 5 s,
# more than 2 GiB of memory) is saved under BUILD_DIR/fuzz_X-artifacts/;
# replay it with `fuzz_X FILE` or `fuzz_X_replay -v FILE`, and add it to
# tests/config/corpus/X/ once lib/ is fixed.
#
# Exit: 0 nothing found, 1 something found or the build failed, 2 usage,
# 77 clang or its libFuzzer runtime (libclang-rt-14-dev) is missing.
# Environment: CI=true builds with -Werror; FUZZ_JOBS=N fuzzes with N
# processes; FUZZ_FLAGS adds libFuzzer flags; FUZZ_CC names the compiler.
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
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
	'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);' \
	'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return 0; }' >"$tmp/p.c"
if ! "$cc" -fsanitize=fuzzer,address,undefined "$tmp/p.c" -o "$tmp/p" 2>"$tmp/err"; then
	cat "$tmp/err" >&2
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

targets=(fuzz_config fuzz_ctl)
log=$build/fuzz_config-build.log
if cmake --build "$build" --target help 2>/dev/null | grep -q '\bfuzz_ctl\b'; then
	cmake --build "$build" --target "${targets[@]}" -j"$(nproc)" >"$log" 2>&1 || {
		cat "$log" >&2
		echo "run-fuzz.sh: building ${targets[*]} failed" >&2
		exit 1
	}
else
	# tests/config is not part of this build: compile the targets here, the
	# config and protocol code with coverage, the rest from libpmcache.a
	cmake --build "$build" --target pmcache -j"$(nproc)" >"$log" 2>&1 || {
		cat "$log" >&2
		echo "run-fuzz.sh: building libpmcache.a failed" >&2
		exit 1
	}
	lib=$(find "$build" -type f -name libpmcache.a | head -n1)
	mkdir -p "$build/tests/config"
	for t in "${targets[@]}"; do
		# shellcheck disable=SC2046
		"$cc" -std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined \
			-fno-sanitize-recover=undefined -fno-omit-frame-pointer \
			-I"$top/lib" "$here/$t.c" "$top/lib/config.c" "$top/lib/ctl.c" \
			"$lib" $(pkg-config --libs libconfig json-c libpmem2 liburing zlib libnvme) \
			-lpthread -o "$build/tests/config/$t" >>"$log" 2>&1 || {
			cat "$log" >&2
			echo "run-fuzz.sh: compiling $t failed" >&2
			exit 1
		}
	done
fi

rc_all=0
for t in "${targets[@]}"; do
	bin=$(find "$build" -type f -name "$t" -perm -u+x | head -n1)
	[ -n "$bin" ] || { echo "run-fuzz.sh: $t not found under $build" >&2; exit 1; }
	name=${t#fuzz_}
	corpus=$build/$t-corpus
	artifacts=$build/$t-artifacts
	mkdir -p "$corpus" "$artifacts"
	cp "$here/corpus/$name"/* "$corpus"/
	stamp=$tmp/stamp-$t
	touch "$stamp"
	flags=(-max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 -max_len=8192
		-dict="$here/$t.dict" -print_final_stats=1 -error_exitcode=1
		-timeout_exitcode=1 -artifact_prefix="$artifacts/")
	# libconfig 1.5 leaks a token on many syntax errors (see fuzz_config.c,
	# which suppresses those leaks); libFuzzer's per-input leak check would
	# then scan the heap after most inputs (20 times slower). LeakSanitizer
	# still checks at exit, so a leak of ours fails the run (find its input
	# with fuzz_config_replay --leak-each over the corpus).
	[ "$t" = fuzz_config ] && flags+=(-detect_leaks=0)
	[ "$jobs" -gt 1 ] && flags+=(-fork="$jobs")
	# shellcheck disable=SC2206
	flags+=(${FUZZ_FLAGS:-})
	echo "run-fuzz.sh: $t for ${seconds}s over $corpus ($(ls "$corpus" | wc -l) inputs)"
	set +e
	ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0} \
	UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
		"$bin" "${flags[@]}" "$corpus" 2>&1 | tee "$build/$t.log" |
		grep -v '^#[0-9]*.*\(NEW\|REDUCE\|pulse\)'
	rc=${PIPESTATUS[0]}
	set -e
	found=$(find "$artifacts" -type f -newer "$stamp")
	if [ "$rc" -ne 0 ] || [ -n "$found" ]; then
		echo "run-fuzz.sh: $t FAILED (exit $rc); full log $build/$t.log" >&2
		for f in $found; do echo "  found: $f" >&2; done
		rc_all=1
	else
		echo "run-fuzz.sh: $t: nothing found in ${seconds}s; log $build/$t.log"
	fi
done
exit $rc_all
