// mla-run prints the prefill backend next to the decode's, with why each
// other one was not chosen, and takes --prefill-backend; the config's name
// beats MLA_PREFILL_BACKEND, which beats the priorities; a name that
// refuses or does not exist stops the run with the reasons or the valid
// names. On the CPU, with one head and tiny steps.

// RUN: rm -rf %t && mkdir -p %t
// RUN: env MLA_CACHE_DIR=%t/cache mla-run --device cpu --heads 1 --steps 1 --mixed-steps 1 --decode-contexts 10 --prefill-contexts 3 --prefill-new-tokens 4 --host-repeats 0 | FileCheck %s --check-prefix=PRIORITY
// PRIORITY: [runtime] backend: CPU_JIT
// PRIORITY-NEXT: [runtime] prefill backend: PREFILL_CPU_JIT
// PRIORITY: backend: CPU_JIT (host code JIT-compiled by LLVM
// PRIORITY: prefill backend: PREFILL_CPU_JIT (host code JIT-compiled by LLVM
// PRIORITY-DAG: not PREFILL_GENERIC_GPU: device CPU not supported (requires CUDA)
// PRIORITY-DAG: not PREFILL_TC_SM80: device CPU not supported (requires CUDA)
// PRIORITY-DAG: not PREFILL_TC_SM90A: device CPU not supported (requires CUDA)
// PRIORITY: check vs float64 reference: {{.*}}: PASS

// RUN: env MLA_CACHE_DIR=%t/cache MLA_PREFILL_BACKEND=PREFILL_CPU_JIT mla-run --device cpu --heads 1 --steps 1 --mixed-steps 1 --decode-contexts 10 --prefill-contexts 3 --prefill-new-tokens 4 --host-repeats 0 | FileCheck %s --check-prefix=ENV
// ENV: [runtime] backend: CPU_JIT{{$}}
// ENV-NEXT: [runtime] prefill backend: PREFILL_CPU_JIT (from MLA_PREFILL_BACKEND)

// RUN: env MLA_CACHE_DIR=%t/cache MLA_PREFILL_BACKEND=PREFILL_TC_SM90A mla-run --device cpu --heads 1 --steps 1 --mixed-steps 1 --decode-contexts 10 --prefill-contexts 3 --prefill-new-tokens 4 --host-repeats 0 --prefill-backend PREFILL_CPU_JIT | FileCheck %s --check-prefix=REQUESTED
// REQUESTED: [runtime] prefill backend: PREFILL_CPU_JIT (requested)
// REQUESTED: PASS

// RUN: env MLA_CACHE_DIR=%t/cache MLA_PREFILL_BACKEND=PREFILL_TC_SM90A not mla-run --device cpu --heads 1 --steps 1 --host-repeats 0 2>&1 | FileCheck %s --check-prefix=ENV-REFUSED
// ENV-REFUSED: mla-run: prefill backend PREFILL_TC_SM90A (named by MLA_PREFILL_BACKEND) cannot run {device=CPU, {{.*}}: [device CPU not supported (requires CUDA)]

// RUN: env MLA_CACHE_DIR=%t/cache not mla-run --device cpu --heads 1 --steps 1 --host-repeats 0 --prefill-backend PREFILL_TC_SM80 2>&1 | FileCheck %s --check-prefix=REFUSED
// REFUSED: mla-run: prefill backend PREFILL_TC_SM80 (requested) cannot run {device=CPU, {{.*}}: [device CPU not supported (requires CUDA)]

// RUN: env MLA_CACHE_DIR=%t/cache not mla-run --device cpu --heads 1 --steps 1 --host-repeats 0 --prefill-backend TC_SM80 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: mla-run: unknown prefill backend 'TC_SM80' (requested); valid names: PREFILL_GENERIC_GPU, PREFILL_CPU_JIT, PREFILL_TC_SM80, PREFILL_TC_SM90A
