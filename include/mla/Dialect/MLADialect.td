//===- MLADialect.td - The mla dialect ---------------------*- tablegen -*-===//
//
// The `mla` dialect describes DeepSeek-style Multi-head Latent Attention as a
// handful of buffer-level operations. See docs/dialect.md.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_DIALECT_TD
#define MLA_DIALECT_TD

include "mlir/IR/OpBase.td"

def MLA_Dialect : Dialect {
  let name = "mla";
  let cppNamespace = "::mla";
  let summary = "Multi-head Latent Attention (prefill, absorbed decode, caches, merges)";
  let description = [{
    Operations over memrefs in destination-passing style: every operation
    reads its input buffers and writes its output buffers, and returns no
    values. The MLA dimensions (heads, latent rank, rope and head dims, page
    size) are attributes checked against the static dimensions of the
    buffers; token counts, batch sizes and block counts may be dynamic.
  }];
  let dependentDialects = [
    "::mlir::memref::MemRefDialect",
  ];
}

class MLA_Op<string mnemonic, list<Trait> traits = []>
    : Op<MLA_Dialect, mnemonic, traits> {
  let hasVerifier = 1;
}

#endif // MLA_DIALECT_TD
