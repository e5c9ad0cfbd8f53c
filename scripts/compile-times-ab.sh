#!/usr/bin/env bash
# Cold compile times (the driver's JIT cache off) of the wgmma decode,
# prefill and chunked-prefill modules, for two mla-bench binaries in
# alternating rounds, so that both are measured on the same machine:
#   scripts/compile-times-ab.sh OLD_MLA_BENCH NEW_MLA_BENCH LOG [ROUNDS]
# Appends each run's "compiled ... in N ms (phases)", "driver compiles"
# and step-time lines to LOG under a header naming the round, the binary
# and the shape.
set -uo pipefail
old=$1; new=$2; log=$3; rounds=${4:-3}
for round in $(seq "$rounds"); do
  for args in "--suite decode --heads 128 --batch 64 --context 4096" \
              "--suite decode --heads 16 --batch 128 --context 4096" \
              "--suite prefill --heads 128 --quick" \
              "--suite chunked --quick"; do
    for which in old new; do
      bench=$old; [ "$which" = new ] && bench=$new
      echo "== round $round $which: $args" >> "$log"
      # shellcheck disable=SC2086 # args is a list of options
      CUDA_CACHE_DISABLE=1 "$bench" --strategy wgmma $args 2>&1 \
        | grep -E "compiled|driver compiles|^[0-9]+ x" >> "$log"
    done
  done
done
