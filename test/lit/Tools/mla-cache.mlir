// mla-cache fills a kernel cache ahead of time with no GPU, lists it,
// verifies it (a corrupted payload fails verify until it is removed), and
// prunes it. Small dims keep the compiles short.

// RUN: rm -rf %t && mkdir -p %t
// RUN: mla-cache fill --cache-dir %t/cache --chips sm_80,cpu --heads 2 --kv-lora-rank 64 --qk-nope-head-dim 16 --qk-rope-head-dim 16 --v-head-dim 16 | FileCheck %s --check-prefix=FILL
// FILL: filling {{.*}}cache
// FILL: sm_80, 2 heads: backend TC_SM80, prefill backend PREFILL_TC_SM80
// FILL: compiled {{.*}} concat_and_cache__lkv64_r16_bs64_bf16_cbf16__sm_80+ptx70-{{.*}}-portable__
// FILL: cpu, 2 heads: backend CPU_JIT, prefill backend PREFILL_CPU_JIT
// FILL: 10 modules in {{.*}}: 10 compiled, 0 already in the cache, 0 failed

// A second fill finds everything.
// RUN: mla-cache fill --cache-dir %t/cache --chips sm_80,cpu --heads 2 --kv-lora-rank 64 --qk-nope-head-dim 16 --qk-rope-head-dim 16 --v-head-dim 16 | FileCheck %s --check-prefix=REFILL
// REFILL: 10 modules in {{.*}}: 0 compiled, 10 already in the cache, 0 failed

// RUN: mla-cache list --cache-dir %t/cache | FileCheck %s --check-prefix=LIST
// LIST: MB {{.*}} decode_attention {{.*}}decode_attention__h2_lkv64_r16_bs64_bf16_cbf16_causal__sm_80
// LIST: 10 entries, {{.*}} MB; 0 stale, 0 corrupt

// A flipped payload byte: verify reads every payload and fails.
// RUN: sh -c 'printf x | dd of=$(ls -d %t/cache/v1/decode_attention*sm_80*)/payload bs=1 seek=200 conv=notrunc 2>/dev/null'
// RUN: not mla-cache verify --cache-dir %t/cache | FileCheck %s --check-prefix=VERIFY
// VERIFY: CORRUPT: payload checksum does not match the manifest
// VERIFY: 10 entries, {{.*}}; 0 stale, 1 corrupt
// RUN: mla-cache verify --cache-dir %t/cache --remove | FileCheck %s --check-prefix=REMOVE
// REMOVE: 1 corrupt, 0 incomplete (removed)
// RUN: mla-cache verify --cache-dir %t/cache | FileCheck %s --check-prefix=CLEAN
// CLEAN: 9 entries, {{.*}}; 0 stale, 0 corrupt

// An entry without its manifest is a write that never finished (the writer
// published the manifest last): reported, never served, not a failure.
// RUN: sh -c 'rm $(ls -d %t/cache/v1/concat_and_cache*sm_80*)/manifest.json'
// RUN: mla-cache verify --cache-dir %t/cache | FileCheck %s --check-prefix=INCOMPLETE
// INCOMPLETE: INCOMPLETE: payload without a manifest (a write that did not finish; never served, rebuilt when next used)
// INCOMPLETE: 9 entries, {{.*}}; 0 stale, 0 corrupt, 1 incomplete
// RUN: mla-cache verify --cache-dir %t/cache --remove | FileCheck %s --check-prefix=REMOVE-INCOMPLETE
// REMOVE-INCOMPLETE: 0 corrupt, 1 incomplete (removed)
// RUN: mla-cache fill --cache-dir %t/cache --chips sm_80,cpu --heads 2 --kv-lora-rank 64 --qk-nope-head-dim 16 --qk-rope-head-dim 16 --v-head-dim 16 | FileCheck %s --check-prefix=REBUILT
// REBUILT: 10 modules in {{.*}}: 2 compiled, 8 already in the cache, 0 failed

// RUN: not mla-cache prune --cache-dir %t/cache 2>&1 | FileCheck %s --check-prefix=NOTHING
// NOTHING: say what to remove
// RUN: mla-cache prune --cache-dir %t/cache --stale | FileCheck %s --check-prefix=STALE
// STALE: removed 0 entries (0.00 MB), kept 10
// RUN: mla-cache prune --cache-dir %t/cache --all --dry-run | FileCheck %s --check-prefix=DRY
// DRY: would remove 10 entries
// RUN: mla-cache prune --cache-dir %t/cache --max-mb 0 | FileCheck %s --check-prefix=SIZE
// SIZE: removed 10 entries
// RUN: mla-cache list --cache-dir %t/cache | FileCheck %s --check-prefix=EMPTY
// EMPTY: 0 entries, 0.00 MB; 0 stale, 0 corrupt

// Chips a runtime never picks and bad options are errors.
// RUN: not mla-cache fill --cache-dir %t/cache --chips sm_90 2>&1 | FileCheck %s --check-prefix=SM90
// SM90: sm_90, 128 heads: sm_90 is never chosen by a runtime (a 9.0 device gets sm_90a)
// RUN: not mla-cache fill --cache-dir %t/cache --chips sm_70 2>&1 | FileCheck %s --check-prefix=SM70
// SM70: unknown chip 'sm_70' (supported: sm_80, sm_86, sm_89, sm_90, sm_90a)
