//===- MlaLayerKernels.h - The kernel modules of an MLA layer ---*- C++ -*-===//
//
// For compiler-side users (MlaLayer itself, mla-cache): the modules an MLA
// layer compiles, as requests for compileAll (RuntimeCompile.h).
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_MLALAYERKERNELS_H
#define MLA_RUNTIME_MLALAYERKERNELS_H

#include "mla/Runtime/MlaLayer.h"
#include "mla/Runtime/RuntimeCompile.h"

#include <optional>
#include <vector>

namespace mla::runtime {

/// The kernel modules a layer of `config` compiles, for `strategy` (the
/// backend's): the cache write, the chunked prefill, the decode query, the
/// decode attention and the V up-projection, then under decode context
/// parallelism the merge of the group's partials. The layer compiles them at
/// once; `mla-cache fill` compiles the same modules ahead of time.
std::vector<CompileRequest>
layerKernelModules(const MlaLayerConfig &config,
                   std::optional<KernelStrategy> strategy);

} // namespace mla::runtime

#endif // MLA_RUNTIME_MLALAYERKERNELS_H
