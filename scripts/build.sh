#!/usr/bin/env bash
# Configures and builds the project.
#   scripts/build.sh [build-dir] [link-mode]
# link-mode: dylib (default; fast links, needs the LLVM 22 packages at run
# time) or static (tools that run where no LLVM is installed).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
mode=${2:-dylib}

bash "$root/scripts/setup.sh"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMLA_LINK_MODE="$mode"
cmake --build "$build" -j "$(nproc)"
