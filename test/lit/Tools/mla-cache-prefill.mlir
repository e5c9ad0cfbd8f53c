// mla-cache fill compiles a layer's chunked prefill with its prefill
// backend's kernel strategy and the other modules with the decode
// backend's: on sm_90a, the wgmma decode (TC_SM90A: 16 heads over the
// 512 + 64 latent cache) paired with the mma.sync prefill, then with the
// wgmma prefill that the priorities choose. The payloads carry the PTX, so
// which instructions each module holds is checked there. The kernel cache
// keys each module with its own strategy: the second fill compiles the
// chunked prefill alone. No GPU needed.

// RUN: rm -rf %t && mkdir -p %t
// RUN: mla-cache fill --cache-dir %t/cache --chips sm_90a --heads 16 --qk-nope-head-dim 64 --v-head-dim 64 --prefill-backend PREFILL_TC_SM80 | FileCheck %s --check-prefix=PAIRED
// PAIRED: sm_90a, 16 heads: backend TC_SM90A, prefill backend PREFILL_TC_SM80
// PAIRED: 5 modules in {{.*}}: 5 compiled, 0 already in the cache, 0 failed

// RUN: sh -c 'grep -c wgmma.mma_async %t/cache/v1/decode_attention*/payload' | FileCheck %s --check-prefix=SOME
// RUN: sh -c 'grep -ac mma.sync.aligned %t/cache/v1/chunked_prefill*/payload' | FileCheck %s --check-prefix=SOME
// RUN: sh -c '! grep -q wgmma.mma_async %t/cache/v1/chunked_prefill*/payload'
// SOME: {{^[1-9][0-9]*$}}

// RUN: mla-cache fill --cache-dir %t/cache --chips sm_90a --heads 16 --qk-nope-head-dim 64 --v-head-dim 64 | FileCheck %s --check-prefix=PRIORITY
// PRIORITY: sm_90a, 16 heads: backend TC_SM90A, prefill backend PREFILL_TC_SM90A
// PRIORITY: 5 modules in {{.*}}: 1 compiled, 4 already in the cache, 0 failed
// Two chunked-prefill entries now, one of them with wgmma.
// RUN: sh -c 'ls -d %t/cache/v1/chunked_prefill* | wc -l' | FileCheck %s --check-prefix=TWO
// RUN: sh -c 'grep -l wgmma.mma_async %t/cache/v1/chunked_prefill*/payload | wc -l' | FileCheck %s --check-prefix=ONE
// TWO: {{^ *2$}}
// ONE: {{^ *1$}}

// A name that is no prefill backend's, and one that refuses the chip.
// RUN: not mla-cache fill --cache-dir %t/cache --chips sm_90a --prefill-backend FLASH_ATTN 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: sm_90a, 128 heads: unknown prefill backend 'FLASH_ATTN' (requested); valid names: PREFILL_GENERIC_GPU, PREFILL_CPU_JIT, PREFILL_TC_SM80, PREFILL_TC_SM90A
// RUN: not mla-cache fill --cache-dir %t/cache --chips sm_86 --prefill-backend PREFILL_TC_SM90A 2>&1 | FileCheck %s --check-prefix=REFUSED
// REFUSED: prefill backend PREFILL_TC_SM90A (requested) cannot run {device=CUDA 8.6, {{.*}}: [compute capability 8.6 below minimum 9.0]
