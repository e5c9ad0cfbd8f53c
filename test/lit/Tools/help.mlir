// The tools' --help lists their own options, not the hundreds of LLVM's
// backends they link (which stay accepted).

// RUN: mla-run --help | FileCheck %s --check-prefix=RUNTOOL --implicit-check-not=aarch64 --implicit-check-not=amdgpu --implicit-check-not=x86
// RUN: mla-cache --help | FileCheck %s --check-prefix=CACHE --implicit-check-not=aarch64 --implicit-check-not=amdgpu --implicit-check-not=x86
// RUN: mla-cache fill --help | FileCheck %s --check-prefix=FILL --implicit-check-not=aarch64 --implicit-check-not=amdgpu --implicit-check-not=x86
// RUN: mla-bench --help | FileCheck %s --check-prefix=BENCH --implicit-check-not=aarch64 --implicit-check-not=amdgpu --implicit-check-not=x86

// RUNTOOL: mla-run options:
// RUNTOOL-DAG: --heads=<int>
// RUNTOOL-DAG: --device=<string>
// RUNTOOL-DAG: --steps=<int>
// RUNTOOL-DAG: --host-repeats=<int>
// RUNTOOL-DAG: --mixed-steps=<int>
// RUNTOOL-DAG: --prefill-backend=<string>

// CACHE: fill - compile a layer's kernels for chips into the cache
// CACHE-DAG: list - list the cache's entries
// CACHE-DAG: prune - remove entries
// CACHE-DAG: verify - check every entry

// FILL-DAG: --chips=<string>
// FILL-DAG: --heads=<int>
// FILL-DAG: --cache-dir=<string>
// FILL-DAG: --prefill-backend=<string>

// BENCH: mla-bench options:
// BENCH-DAG: --suite=<string>
// BENCH-DAG: --strategy=<string>
// BENCH-DAG: --heads=<int>
// BENCH-DAG: --l2-flush=<value>
// BENCH-DAG: =read
// BENCH-DAG: =write
// BENCH-DAG: =none
