#!/usr/bin/env bash
# Builds the fully static tools and tests and packs them for a GPU machine
# that has the CUDA driver but no LLVM or build tools:
#   scripts/make-gpu-bundle.sh [build-dir]   ->  bundle/mla-bundle.tar.xz
# Unpack and run there with scripts/gpu-suite.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-static}

bash "$root/scripts/setup.sh"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DMLA_LINK_MODE=static -DMLA_BUILD_TESTS=ON > /dev/null
cmake --build "$build" -j "$(nproc)" --target mla-run mla-bench mla-unit-tests mla-host-example

stage=$(mktemp -d)
mkdir -p "$stage/mla/bin" "$stage/mla/scripts"
for tool in mla-run mla-bench mla-unit-tests mla-host-example; do
  strip -o "$stage/mla/bin/$tool" "$build/bin/$tool"
done
cp "$root/scripts/gpu-suite.sh" "$stage/mla/scripts/"
mkdir -p "$root/bundle"
tar -C "$stage" -cf - mla | xz -T0 -9 > "$root/bundle/mla-bundle.tar.xz"
rm -rf "$stage"
ls -l "$root/bundle/mla-bundle.tar.xz"
