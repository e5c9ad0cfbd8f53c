// mla-cache fill with an FP8 cache: every chip's layer takes its
// tensor-core backends (their decodes dequantize the tiles on chip), whose
// modules carry the cache format in their keys. No GPU needed.

// RUN: rm -rf %t && mkdir -p %t
// RUN: mla-cache fill --cache-dir %t/cache --chips sm_80,sm_90a --heads 16 --cache-dtype fp8_e5m2 | FileCheck %s
// CHECK: sm_80, 16 heads: backend TC_SM80, prefill backend PREFILL_TC_SM80
// CHECK-DAG: concat_and_cache__{{.*}}_cf8E5M2__sm_80
// CHECK-DAG: decode_attention__{{.*}}_cf8E5M2_causal__sm_80
// CHECK: sm_90a, 16 heads: backend TC_SM90A, prefill backend PREFILL_TC_SM90A
// CHECK: 0 failed
// RUN: not mla-cache fill --cache-dir %t/cache --chips sm_90a --cache-dtype fp8 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: --cache-dtype also fp8_e4m3 or fp8_e5m2

// mla-run on the CPU with FP8 caches of both formats: mixed steps, each
// checked against the float64 reference over the dequantized cache.
// RUN: env MLA_CACHE_DIR=%t/run mla-run --device cpu --cache-dtype fp8_e4m3 --steps 2 --mixed-steps 1 --decode-contexts 100,0 --prefill-contexts 70 --prefill-new-tokens 9 --workspace 64 | FileCheck %s --check-prefix=RUN-E4M3
// RUN-E4M3: cache fp8_e4m3
// RUN-E4M3: prefill rel. L2 {{[0-9.]+e-0[34]}}, decode rel. L2 {{[0-9.]+e-0[34]}}, {{.*}}cache rows wrong 0 {{.*}}: PASS
// RUN-E4M3: {{^PASS$}}
// RUN: env MLA_CACHE_DIR=%t/run mla-run --device cpu --cache-dtype fp8_e5m2 --steps 1 --decode-contexts 100,0 --prefill-contexts 70 --prefill-new-tokens 9 --workspace 64 | FileCheck %s --check-prefix=RUN-E5M2
// RUN-E5M2: {{^PASS$}}

// A decode context parallel group of two ranks over FP8 caches: the ranks'
// cache writes, their context gathers (each with the scale) and the merged
// decode rows against the float64 reference and a layer without DCP.
// RUN: env MLA_CACHE_DIR=%t/run mla-run --device cpu --cache-dtype fp8_e5m2 --dcp-world-size 2 --steps 1 --decode-contexts 100,0 --prefill-contexts 70 --prefill-new-tokens 9 --workspace 64 | FileCheck %s --check-prefix=DCP
// DCP: step over 2 DCP ranks
// DCP: prefill rows: rel L2 {{.*}}; worst rank vs without DCP 0.00e+00
// DCP: cache rows written wrongly: 0
// DCP: {{^PASS$}}
