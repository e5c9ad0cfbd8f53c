#!/usr/bin/env bash
# Builds the unit tests and tools with AddressSanitizer and
# UndefinedBehaviorSanitizer and runs the CPU tests under them.
#   scripts/sanitize.sh [build-dir]
# LLVM and MLIR come from the packages, uninstrumented; so is the code the
# JIT compiles at run time. Container-overflow checks are off: they need
# every library that touches a std::vector instrumented. Any report fails
# the run (halt_on_error, -fno-sanitize-recover).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-sanitize}

bash "$root/scripts/setup.sh"
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DMLA_LINK_MODE=dylib -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined"
cmake --build "$build" -j "$(nproc)" --target mla-unit-tests mla-capi-tests mla-opt mla-run mla-cache
export ASAN_OPTIONS=detect_container_overflow=0:halt_on_error=1:detect_leaks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
cd "$build"
bin/mla-unit-tests
bin/mla-capi-tests
cache=$(mktemp -d)
MLA_CACHE_DIR=$cache bin/mla-run --device=cpu
MLA_CACHE_DIR=$cache bin/mla-run --device=cpu
bin/mla-cache verify --cache-dir "$cache"
rm -rf "$cache"
echo "sanitize: every run clean"
