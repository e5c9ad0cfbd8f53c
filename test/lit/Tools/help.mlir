// The tools' --help lists their own options, not the hundreds of LLVM's
// backends they link (which stay accepted).

// RUN: mla-run --help | FileCheck %s --check-prefix=RUNTOOL --implicit-check-not=aarch64 --implicit-check-not=amdgpu --implicit-check-not=x86
// RUN: mla-bench --help | FileCheck %s --check-prefix=BENCH --implicit-check-not=aarch64 --implicit-check-not=amdgpu --implicit-check-not=x86

// RUNTOOL: mla-run options:
// RUNTOOL-DAG: --heads=<int>
// RUNTOOL-DAG: --device=<string>
// RUNTOOL-DAG: --steps=<int>
// RUNTOOL-DAG: --host-repeats=<int>

// BENCH: mla-bench options:
// BENCH-DAG: --suite=<string>
// BENCH-DAG: --strategy=<string>
// BENCH-DAG: --heads=<int>
// BENCH-DAG: --l2-flush=<value>
// BENCH-DAG: =read
// BENCH-DAG: =write
// BENCH-DAG: =none
