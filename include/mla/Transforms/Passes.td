//===- Passes.td - Passes of the mla compiler --------------*- tablegen -*-===//

#ifndef MLA_TRANSFORMS_PASSES_TD
#define MLA_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def ExpandChunkedPrefill : Pass<"mla-expand-chunked-prefill"> {
  let summary = "rewrites mla.chunked_prefill into its loop of primitive ops";
  let description = [{
    Replaces each `mla.chunked_prefill` with the algorithm it stands for:
    `mla.kv_up_proj` and causal `mla.prefill_attention` over the new tokens,
    then an `scf.for` over context chunks whose body gathers the chunk
    (`mla.gather_cache`), up-projects it, attends non-causally and merges
    into the running output (`mla.merge_attn_states`). Scratch buffers for
    the up-projected keys and values and the per-chunk attention state are
    allocated around the loop and freed after it.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
  ];
}

def ConvertMLAToLoops : Pass<"convert-mla-to-loops"> {
  let summary = "lowers primitive mla ops to vectorized loops over memrefs (CPU)";
  let description = [{
    Lowers every primitive `mla` operation to `scf` loops over the memrefs,
    with the innermost head-dimension loops written as `vector` operations
    of `vector-width` f32 lanes and a scalar tail. Attention uses blocked
    online softmax (FlashAttention-2 style) with f32 accumulators in small
    stack buffers: no scratch grows with sequence length. The composite
    `mla.chunked_prefill` must be expanded first.
  }];
  let options = [
    Option<"vectorWidth", "vector-width", "int64_t", /*default=*/"16",
           "f32 lanes per vector operation in the inner loops">,
    Option<"keyBlock", "key-block", "int64_t", /*default=*/"32",
           "keys scored per online-softmax step">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect",
  ];
}

def SelectGpuTarget : Pass<"mla-select-gpu-target", "mlir::ModuleOp"> {
  let summary = "records the GPU target and kernel strategy on the module";
  let description = [{
    Sets the module attribute `mla.target = {chip, ptx_features, strategy}`
    for the chip given by `chip` (sm_80, sm_86, sm_89, sm_90 or sm_90a). The
    strategy for a chip is chosen here and only here; every later pass reads
    the attribute. An existing `mla.target` keeps its chip unless `chip` is
    given, and its strategy unless `strategy` is given.

    `strategy` is `generic` (CUDA cores only), `mma-sync` (tensor cores
    through warp-level mma.sync where a kernel has that form: the bf16/f16
    decode split kernel, prefill attention and up-projections) or `wgmma` (sm_90a only:
    warpgroup-level wgmma where a kernel has that form, the decode split
    kernel for 16 or more heads, else as mma-sync; refused for other
    chips). Without it, the module's existing strategy is kept (also when
    `chip` replaces the chip), and a new target gets `generic`.
  }];
  let options = [
    Option<"chip", "chip", "std::string", /*default=*/"\"\"",
           "the chip to generate code for (default: keep the module's)">,
    Option<"strategy", "strategy", "std::string", /*default=*/"\"\"",
           "generic | mma-sync | wgmma (default: keep the module's, else generic)">,
  ];
}

def ConvertMLAToGPU : Pass<"convert-mla-to-gpu", "mlir::ModuleOp"> {
  let summary = "lowers primitive mla ops to GPU kernels and their launches";
  let description = [{
    For each primitive `mla` op in a host function, generates a kernel
    (`gpu.func` in the module's `gpu.module @mla_kernels`, targeted at the
    chip recorded in `mla.target`) and replaces the op with the
    `gpu.launch_func` ops that run it, with grid sizes computed from the
    operands' dimensions. Long decode contexts are split across thread
    blocks and combined by a second kernel; the split partials live in
    `gpu.alloc` buffers. Host `memref.alloc`s feeding kernels (scratch of the
    expanded chunked prefill) become `gpu.alloc`s. The composite
    `mla.chunked_prefill` must be expanded first.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::nvgpu::NVGPUDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect",
  ];
}

def AsyncEntryReturn : Pass<"mla-async-entry-return", "mlir::func::FuncOp"> {
  let summary = "lets host functions return with their GPU work still queued";
  let description = [{
    After gpu-async-region every host function ends by waiting, on the host,
    for the stream its work was queued on. The runtime gives each call the
    caller's stream, so that wait is not needed for ordering: everything the
    caller queues next runs after it. It also forbids what serving engines
    rely on, overlapping host work with the GPU and capturing calls into CUDA
    graphs (a host wait inside a stream capture is an error). This pass
    removes every synchronous `gpu.wait` in a function's body after which
    the host reads no memory; waits that a later host read depends on stay
    (conservatively: any op with a read effect or unknown effects, outside
    the gpu dialect).
  }];
}

def SplitKernelModules : Pass<"mla-split-kernel-modules", "mlir::ModuleOp"> {
  let summary = "gives every GPU kernel a gpu.module of its own";
  let description = [{
    The kernels of one op share a gpu.module when they are generated (a
    wgmma decode has four). Each kernel moves to a module named after it
    (`@k::@k`), with a copy of whatever else its module held (globals,
    device functions), and every `gpu.launch_func` follows. Modules are the
    unit that the nested device pipeline, the serialization to PTX and the
    driver's assembly to machine code each work on in parallel, so one
    large kernel no longer waits for its siblings at each step.
  }];
}

def SerializeKernelModules : Pass<"mla-serialize-kernel-modules",
                                  "mlir::ModuleOp"> {
  let summary = "compiles every gpu.module to PTX, the modules in parallel";
  let description = [{
    What `gpu-module-to-binary` does with format `isa`: each gpu.module in
    the NVVM/LLVM dialects goes through LLVM's optimizer and NVPTX backend
    for each of its targets and becomes a `gpu.binary` holding the PTX
    text. The modules are serialized on the context's thread pool (each in
    its own LLVM context); the binaries then replace them in order.
  }];
}

def PrintPtx : Pass<"mla-print-ptx", "mlir::ModuleOp"> {
  let summary = "writes the PTX of every compiled GPU module";
  let description = [{
    After `gpu-module-to-binary` with format `isa`, writes the PTX text of
    each `gpu.binary` object to `output` (a file; `-` for stdout), so it can
    be read or assembled. Every module's text starts with a line
    `// mla-print-ptx: module @<name>`; `ptxas -arch=<chip>` assembles one
    module at a time (test/lit/ptxas-modules.py splits the file).
  }];
  let options = [
    Option<"output", "output", "std::string", /*default=*/"\"-\"",
           "file to write the PTX to ('-' for stdout)">,
  ];
}

#endif // MLA_TRANSFORMS_PASSES_TD
