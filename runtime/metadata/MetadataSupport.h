//===- MetadataSupport.h - Shared by the metadata builders ------*- C++ -*-===//
//
// Private to runtime/metadata: error construction, integer rounding and the
// structural check every builder runs before indexing into the metadata.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_RUNTIME_METADATA_METADATASUPPORT_H
#define MLA_RUNTIME_METADATA_METADATASUPPORT_H

#include "mla/Runtime/Metadata.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <cstdint>

namespace mla::runtime::detail {

inline llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(message);
}

/// a / b rounded up, for a >= 0 and b > 0.
inline int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Checks that the counts are non-negative and every array of `m` has the
/// size the counts give it, that queryStartLoc starts at 0, never decreases
/// and ends at numActualTokens: what a builder needs before it may index
/// the arrays and take query lengths.
llvm::Error checkShape(const CommonAttentionMetadata &m);

/// Errors unless numReqs >= 0 and queryStartLoc has numReqs + 1 entries
/// (computed without overflow for any numReqs).
llvm::Error checkQueryStartLocSize(const CommonAttentionMetadata &m);

/// Errors unless decodeThreshold >= 1.
llvm::Error checkDecodeThreshold(int64_t decodeThreshold);

} // namespace mla::runtime::detail

#endif // MLA_RUNTIME_METADATA_METADATASUPPORT_H
