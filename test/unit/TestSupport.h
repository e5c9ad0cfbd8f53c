//===- TestSupport.h - Host tensors and kernels for numerics tests -*- C++ -*-===//
//
// Tests draw random inputs into HostTensors (rounded to the kernel's
// precision), feed the rounded values to the float64 reference, compile and
// run the kernel, and compare.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TEST_UNIT_TESTSUPPORT_H
#define MLA_TEST_UNIT_TESTSUPPORT_H

#include "HostTensor.h"

#include "mla/Runtime/BufferView.h"
#include "mla/Runtime/CpuKernel.h"
#include "mla/Runtime/HostBufferKernel.h"
#include "mla/Target/GpuTarget.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace mla::test {

/// True when the suite runs its kernels on the GPU (MLA_TEST_DEVICE=gpu).
bool testingOnGpu();

/// Compiles a one-op module for the suite's device (the host CPU, or with
/// MLA_TEST_DEVICE=gpu the first CUDA device), failing the test with the
/// compiler's message if it does not compile. On the GPU, `strategy`
/// (default: generic) chooses the kernel strategy of the device's target;
/// the CPU ignores it.
std::unique_ptr<HostBufferKernel>
compileKernel(mlir::OwningOpRef<mlir::ModuleOp> module,
              std::optional<KernelStrategy> strategy = std::nullopt);

/// The suite's CUDA device (MLA_TEST_DEVICE=gpu), or null.
const cuda::Device *testGpu();

/// Runs `kernel` on host buffers, failing the test with the runtime's
/// message on error.
void runKernel(HostBufferKernel &kernel, std::vector<BufferView> args);

/// A context with the kernel dialects loaded, one per test.
mlir::MLIRContext &testContext();

/// A generator seeded differently on every run (the seed is printed so a
/// failure can be replayed with MLA_TEST_SEED).
std::mt19937 &rng();

/// Relative L2 tolerance of a result stored as `dtype` whose inputs were
/// rounded to `dtype` and whose arithmetic is f32.
double tolerance(DType dtype);

/// Expects ‖got − want‖ / ‖want‖ <= tol and no NaN.
void expectClose(const std::vector<double> &got,
                 const std::vector<double> &want, double tol,
                 const std::string &what);

/// Expects LSE values to match: -inf exactly, finite ones within absTol.
void expectLseClose(const std::vector<double> &got,
                    const std::vector<double> &want, double absTol,
                    const std::string &what);

/// A fresh directory for one test (kernel caches), removed with it.
class TemporaryDirectory {
public:
  explicit TemporaryDirectory(const char *prefix);
  ~TemporaryDirectory();
  TemporaryDirectory(const TemporaryDirectory &) = delete;
  TemporaryDirectory &operator=(const TemporaryDirectory &) = delete;
  const std::string &path() const { return directory; }

private:
  std::string directory;
};

/// Sets an environment variable (unsets it, for null) for one scope and
/// restores its previous value, so tests do not leak into each other.
class ScopedEnv {
public:
  ScopedEnv(const char *variable, const char *value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv &) = delete;
  ScopedEnv &operator=(const ScopedEnv &) = delete;

private:
  std::string variable;
  std::optional<std::string> previous;
};

/// Random offsets for `lengths`: {0, l0, l0+l1, ...}.
std::vector<int32_t> prefixSums(const std::vector<int32_t> &lengths);

} // namespace mla::test

#endif // MLA_TEST_UNIT_TESTSUPPORT_H
