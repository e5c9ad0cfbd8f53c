#!/usr/bin/env bash
# Builds the project and runs every test: lit (IR round trips, verifier
# diagnostics, lowering, the broken-input corpus) and the GoogleTest
# numerics against the float64 reference.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}

bash "$root/scripts/build.sh" "$build"
cd "$build"
ctest -j "$(nproc)" --output-on-failure
