#!/usr/bin/env bash
# Builds the project and runs the main job: one DeepSeek-shaped MLA serving
# step (chunked prefill with cached context + absorbed paged decode),
# JIT-compiled and checked against the float64 reference.
# Extra arguments go to mla-run (see `mla-run --help`).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build

bash "$root/scripts/build.sh" "$build"
exec "$build/bin/mla-run" "$@"
