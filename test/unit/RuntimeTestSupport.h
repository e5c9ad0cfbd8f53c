//===- RuntimeTestSupport.h - Runtimes and device tensors for tests -*- C++ -*-===//
//
// What the tests that run through a Runtime (layers, kernels on its device
// memory) share: a runtime on the suite's device, and host tensors with
// their copies in that runtime's memory.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TEST_UNIT_RUNTIMETESTSUPPORT_H
#define MLA_TEST_UNIT_RUNTIMETESTSUPPORT_H

#include "HostTensor.h"

#include "mla/Runtime/Runtime.h"

#include <memory>
#include <vector>

namespace mla::test {

/// A runtime on the suite's device (the CPU, or the GPU with
/// MLA_TEST_DEVICE=gpu) whose kernel cache stays in memory; null (with a
/// test failure) when it cannot be created.
std::unique_ptr<runtime::Runtime> makeTestRuntime();

/// A host tensor and its copy in a runtime's device memory.
struct RuntimeTensor {
  HostTensor host{DType::F32, {0}};
  runtime::DeviceAllocation device;

  /// Random values in [-range, range], on the host and the device.
  static RuntimeTensor random(runtime::Runtime &rt, DType dtype,
                              std::vector<int64_t> shape, double range = 1.0);
  BufferView view();
  /// Copies the host values to the device.
  void upload(runtime::Runtime &rt);
  /// The device values.
  std::vector<double> download(runtime::Runtime &rt) const;
};

} // namespace mla::test

#endif // MLA_TEST_UNIT_RUNTIMETESTSUPPORT_H
