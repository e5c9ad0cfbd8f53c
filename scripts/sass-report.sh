#!/usr/bin/env bash
# Per-kernel SASS instruction counts of a cubin, to check what the tensor
# cores and the copy engines are given: mma (HMMA), ldmatrix (LDSM),
# cp.async (LDGSTS), bulk/TMA copies (UBLKCP/UTMALDG), wgmma (HGMMA),
# barriers (BAR), and local memory (LDL/STL: spills).
#   scripts/sass-report.sh kernels.cubin        (needs cuobjdump on PATH or
#                                                in /usr/local/cuda/bin)
# Make the cubin with ptxas from mla-opt's PTX, e.g.:
#   mla-opt f.mlir --mla-select-gpu-target="chip=sm_90a strategy=mma-sync" \
#     --mla-lower-to-gpu=chip=sm_90a --mla-print-ptx=output=k.ptx -o /dev/null
#   ptxas -arch=sm_90a k.ptx -o k.cubin
set -euo pipefail
cubin=$1
objdump=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
"$objdump" -sass "$cubin" | awk '
  /Function : / { name = $3; order[++n] = name; next }
  name != "" && /\/\*[0-9a-f]+\*\// {
    for (i = 1; i <= NF; ++i) {
      op = $i
      if (op ~ /^@/ || op ~ /^\/\*/ || op == "{" ) continue
      split(op, parts, ".")
      base = parts[1]
      count[name, base]++
      total[name]++
      break
    }
  }
  END {
    printf "%-34s %6s %6s %6s %7s %6s %6s %6s %6s\n", "kernel", "instr", "HMMA", "LDSM", "LDGSTS", "HGMMA", "BULK", "BAR", "LDL/STL"
    for (k = 1; k <= n; ++k) {
      f = order[k]
      printf "%-34s %6d %6d %6d %7d %6d %6d %6d %6d\n", f, total[f], count[f, "HMMA"],
        count[f, "LDSM"], count[f, "LDGSTS"], count[f, "HGMMA"],
        count[f, "UBLKCP"] + count[f, "UTMALDG"], count[f, "BAR"],
        count[f, "LDL"] + count[f, "STL"]
    }
  }'
