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

/// The kernel strategies of a layer's modules (none: generic; the CPU
/// ignores them): the decode backend's for every module but the chunked
/// prefill, which takes the prefill backend's.
struct LayerStrategies {
  std::optional<KernelStrategy> decode;
  std::optional<KernelStrategy> prefill;

  /// The strategies of the backends `decode` and `prefill` chose.
  static LayerStrategies of(const Selection &decode, const Selection &prefill);
};

/// The modules of a layer, in the order layerKernelModules lists them.
enum LayerModule : size_t {
  CacheWriteModule,
  ChunkedPrefillModule,
  DecodeQueryModule,
  DecodeAttentionModule,
  VUpProjModule,
  NumLayerModules,
  /// Under decode context parallelism only, after the others: the merge of
  /// the group's decode partials, a rank's gather of its tokens of a
  /// prefill context chunk, and the chunk's attention over the group's
  /// gathered rows.
  DcpMergeModule = NumLayerModules,
  DcpContextGatherModule,
  DcpContextChunkModule,
  NumDcpLayerModules
};

/// The kernel modules a layer of `config` compiles, each with its
/// strategy: the cache write, the chunked prefill (strategies.prefill),
/// the decode query, the decode attention and the V up-projection
/// (strategies.decode), then under decode context parallelism the DCP
/// modules (the context chunk's attention with strategies.prefill). The layer compiles them at once; `mla-cache fill`
/// compiles the same modules ahead of time.
std::vector<CompileRequest>
layerKernelModules(const MlaLayerConfig &config, LayerStrategies strategies);

} // namespace mla::runtime

#endif // MLA_RUNTIME_MLALAYERKERNELS_H
