//===- TestSupport.h - Host tensors and kernels for numerics tests -*- C++ -*-===//
//
// HostTensor owns a buffer of one dtype and converts it to and from double,
// so tests draw random inputs, round them to the kernel's precision, feed
// the rounded values to the float64 reference and compare.
//
//===----------------------------------------------------------------------===//

#ifndef MLA_TEST_UNIT_TESTSUPPORT_H
#define MLA_TEST_UNIT_TESTSUPPORT_H

#include "mla/Runtime/BufferView.h"
#include "mla/Runtime/CpuKernel.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace mla::test {

class HostTensor {
public:
  HostTensor(DType dtype, std::vector<int64_t> shape);

  static HostTensor i32(std::vector<int64_t> shape,
                        const std::vector<int32_t> &values);
  static HostTensor i64(std::vector<int64_t> shape,
                        const std::vector<int64_t> &values);

  /// Uniform values in [lo, hi), rounded to the dtype.
  void fillRandom(std::mt19937 &rng, double lo = -1.0, double hi = 1.0);
  /// NaN for floats, a large sentinel for integers: catches unwritten
  /// elements.
  void poison();
  std::vector<double> toDouble() const;
  void fromDouble(const std::vector<double> &values);
  std::vector<int32_t> toI32() const;
  std::vector<int64_t> toI64() const;

  BufferView view() { return BufferView::contiguous(bytes.data(), dtype, shape); }
  int64_t numElements() const;
  const std::vector<int64_t> &dims() const { return shape; }

private:
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

/// Compiles a one-op module on the CPU, failing the test with the compiler's
/// message if it does not compile.
std::unique_ptr<CpuKernel>
compileKernel(mlir::OwningOpRef<mlir::ModuleOp> module);

/// Runs `kernel`, failing the test with the runtime's message on error.
void runKernel(const CpuKernel &kernel, std::vector<BufferView> args);

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

/// Random offsets for `lengths`: {0, l0, l0+l1, ...}.
std::vector<int32_t> prefixSums(const std::vector<int32_t> &lengths);

} // namespace mla::test

#endif // MLA_TEST_UNIT_TESTSUPPORT_H
