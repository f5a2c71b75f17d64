#!/usr/bin/env bash
# tests/run.sh - the one command that runs every test of pmcache.
#
# Installs the Debian packages in tests/packages.txt that are missing (as
# root, with apt-get), then builds and runs, each in its own directory
# under build/:
#   build/asan   ASan+UBSan build: ctest labels unit, crash, fuzz; then
#                label mutants (tests/mutants: every kept mutant must be
#                caught; builds its own plain copy in build/asan/mutants)
#   build/tsan   ThreadSanitizer build: the concurrency tests
#   build/fuzz   clang libFuzzer build: a short fuzzing pass per target
#   build/vm     plain build: ctest label vm (the qemu guest)
# Usage: tests/run.sh [--no-vm] [--no-fuzz] [--fuzz-seconds N] [--install-only]
# Environment: CI=true turns warnings into errors.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
vm=1
fuzz=1
install_only=0
fuzz_seconds=60
while [ $# -gt 0 ]; do
	case "$1" in
	--no-vm) vm=0 ;;
	--no-fuzz) fuzz=0 ;;
	--fuzz-seconds) fuzz_seconds=$2; shift ;;
	--install-only) install_only=1 ;;
	*) echo "tests/run.sh: unknown option '$1'" >&2; exit 2 ;;
	esac
	shift
done

say() { printf '\n=== %s\n' "$*"; }

install_packages() {
	local missing=() p
	while read -r p; do
		case "$p" in ''|'#'*) continue ;; esac
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
			missing+=("$p")
	done < "$top/tests/packages.txt"
	[ ${#missing[@]} -eq 0 ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		echo "tests/run.sh: missing packages (run as root to install): ${missing[*]}" >&2
		exit 1
	fi
	say "installing: ${missing[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		"${missing[@]}" >/dev/null
}

werror=OFF
[ "${CI:-}" = true ] && werror=ON

build() { # dir, cmake options...
	local dir=$1; shift
	cmake -S "$top" -B "$top/build/$dir" -DPMC_WERROR=$werror "$@" >/dev/null
	cmake --build "$top/build/$dir" -j"$(nproc)" >/dev/null
}

install_packages
[ $install_only = 1 ] && exit 0

say "ASan+UBSan: unit, crash, fuzz (corpus replay)"
build asan -DPMC_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
ctest --test-dir "$top/build/asan" -L 'unit|crash|fuzz' --output-on-failure

say "mutants: each kept mutant of the data-safety code must be caught"
ctest --test-dir "$top/build/asan" -L mutants --output-on-failure

say "ThreadSanitizer: concurrency"
build tsan -DPMC_TSAN=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
	ctest --test-dir "$top/build/tsan" -L threads --output-on-failure

if [ $fuzz = 1 ] && [ -x "$top/tests/fuzz/run-fuzz.sh" ]; then
	say "libFuzzer: ${fuzz_seconds}s per target"
	"$top/tests/fuzz/run-fuzz.sh" "$fuzz_seconds" "$top/build/fuzz"
fi

if [ $vm = 1 ]; then
	say "qemu guest: vm"
	build vm -DCMAKE_BUILD_TYPE=RelWithDebInfo
	# the plain build's own: the sanitizer builds skip it (mlockall is a
	# no-op under their runtimes)
	ctest --test-dir "$top/build/vm" -R '^daemon_memlock$' --output-on-failure
	ctest --test-dir "$top/build/vm" -L vm --output-on-failure
fi
say "all tests passed"
