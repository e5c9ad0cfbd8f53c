//===- SerializedKernelObserver.h - Kernel PTX as it is made ---*- C++ -*-===//

#ifndef MLA_TRANSFORMS_SERIALIZEDKERNELOBSERVER_H
#define MLA_TRANSFORMS_SERIALIZEDKERNELOBSERVER_H

#include "llvm/ADT/StringRef.h"

#include <functional>

namespace mla {

/// Receives a kernel module's name and serialized object (PTX text) as
/// soon as that module is serialized, on the thread that serialized it,
/// while the other modules may still be serializing. Must be thread-safe.
using SerializedKernelObserver =
    std::function<void(llvm::StringRef module, llvm::StringRef object)>;

} // namespace mla

#endif // MLA_TRANSFORMS_SERIALIZEDKERNELOBSERVER_H
