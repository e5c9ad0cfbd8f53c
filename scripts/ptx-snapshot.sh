#!/usr/bin/env bash
# Writes the PTX of the GPU kernels the project emits for the IR of the
# lit tests that lower to kernels (test/lit/Target/ptxas.mlir and
# test/lit/Conversion/mla-to-gpu*.mlir) and for a DeepSeek layer's kernels
# (the benchmarks' shapes) into a new folder, so that a change meant to
# keep the kernels as they are can be checked byte for byte:
#   scripts/ptx-snapshot.sh BUILD_DIR OUT_DIR
#   (change, rebuild)
#   scripts/ptx-snapshot.sh BUILD_DIR OUT_DIR2 && diff -r OUT_DIR OUT_DIR2
# Each test input (the files cut at split-file's "//--- " and at
# "// -----", as the tests run them) goes through mla-opt for sm_80 and
# sm_90a with every strategy the chip has; the layer's kernels (16 and 128
# heads, bf16, page 64) are compiled into a scratch kernel cache by
# mla-cache fill and their PTX is taken out of the cache's payloads.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$1" && pwd)
out=$2
# A kernel that stops compiling must not leave an older snapshot's file.
if [ -e "$out" ] && [ -n "$(ls -A "$out")" ]; then
  echo "ptx-snapshot: $out is not empty; give a new folder" >&2
  exit 2
fi
mkdir -p "$out/lit" "$out/layer"
out=$(cd "$out" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

mkdir -p "$scratch/parts"
python3 "$root/scripts/ptx_snapshot_parts.py" "$scratch/parts" \
  "$root"/test/lit/Target/ptxas.mlir "$root"/test/lit/Conversion/mla-to-gpu*.mlir
configs=("sm_80 generic" "sm_80 mma-sync" "sm_90a generic" "sm_90a mma-sync" "sm_90a wgmma")
for file in "$scratch"/parts/*.mlir; do
  name=$(basename "$file" .mlir)
  for config in "${configs[@]}"; do
    read -r chip strategy <<< "$config"
    # Inputs made to be refused (no target) give no PTX.
    "$build/bin/mla-opt" "$file" --mla-expand-chunked-prefill \
      --mla-select-gpu-target="chip=$chip strategy=$strategy" \
      --mla-lower-to-gpu="chip=$chip" \
      --mla-print-ptx="output=$out/lit/$name.$chip.$strategy.ptx" \
      -o /dev/null 2> /dev/null || echo "ptx-snapshot: no PTX for $name ($chip $strategy)"
  done
done

"$build/bin/mla-cache" fill --cache-dir "$scratch/cache" --chips sm_80,sm_90a \
  --heads 16,128 --dtype bf16 --cache-dtype bf16 --block-size 64 > /dev/null
python3 "$root/scripts/ptx_snapshot_parts.py" --payloads "$scratch/cache" "$out/layer"
echo "ptx-snapshot: $(find "$out" -name '*.ptx' | wc -l) files," \
  "$(cat "$out"/*/*.ptx | wc -l) lines in $out"
