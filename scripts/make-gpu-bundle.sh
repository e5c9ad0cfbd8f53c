#!/usr/bin/env bash
# Builds the fully static tools, tests and libmla.so (which carries LLVM and
# MLIR inside) and packs them, with the Python package and its tests, for a
# GPU machine that has the CUDA driver but no LLVM or build tools:
#   scripts/make-gpu-bundle.sh [build-dir] [tool...]  ->  bundle/mla-bundle.tar.xz
# The tools default to mla-run mla-bench mla-unit-tests mla-host-example;
# each static tool carries its own LLVM (about 15 MB packed), so a run that
# needs fewer names them to stay under a transfer limit. Unpack and run
# there with scripts/gpu-suite.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-static}
shift || true
tools=("$@")
[ ${#tools[@]} -gt 0 ] || tools=(mla-run mla-bench mla-unit-tests mla-host-example)

bash "$root/scripts/setup.sh"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DMLA_LINK_MODE=static -DMLA_BUILD_TESTS=ON > /dev/null
cmake --build "$build" -j "$(nproc)" --target mla "${tools[@]}"

stage=$(mktemp -d)
mkdir -p "$stage/mla/bin" "$stage/mla/lib" "$stage/mla/scripts" "$stage/mla/python"
for tool in "${tools[@]}"; do
  strip -o "$stage/mla/bin/$tool" "$build/bin/$tool"
done
# mla-host-example finds the library through its RUNPATH ($ORIGIN/../lib).
soname=$(objdump -p "$build/lib/libmla.so" | awk '/SONAME/ {print $2}')
strip --strip-unneeded -o "$stage/mla/lib/$soname" "$build/lib/$soname"
ln -s "$soname" "$stage/mla/lib/libmla.so"
cp -r "$root/runtime/python/mla" "$stage/mla/python/"
cp -r "$root/test/python" "$stage/mla/python/tests"
find "$stage/mla/python" -name __pycache__ -prune -exec rm -rf {} +
cp "$root/scripts/gpu-suite.sh" "$stage/mla/scripts/"
mkdir -p "$root/bundle"
tar -C "$stage" -cf - mla | xz -T0 -9 > "$root/bundle/mla-bundle.tar.xz"
rm -rf "$stage"
ls -l "$root/bundle/mla-bundle.tar.xz"
