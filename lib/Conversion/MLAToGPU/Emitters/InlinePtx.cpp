//===- InlinePtx.cpp - PTX instructions the NVVM dialect does not model ---===//

#include "Emitters/InlinePtx.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace mla::gpu::ptx {

namespace {
/// The operand list "{$first, ..., $first + count - 1}".
std::string registerList(int64_t first, int64_t count) {
  std::string list = "{";
  for (int64_t i = 0; i < count; ++i)
    list += llvm::formatv("{0}${1}", i ? ", " : "", first + i).str();
  return list + "}";
}
} // namespace

Value wgmmaRegisterA(OpBuilder &b, Location loc, Value acc, ArrayRef<Value> a,
                     Value descB, int64_t n, Type element, bool accumulate,
                     bool transposeB) {
  // The shapes and types are the kernels' constants: a bad one is a
  // compiler bug that ptxas would otherwise report far from its cause.
  auto accType = dyn_cast<LLVM::LLVMStructType>(acc.getType());
  if (n < 8 || n > 256 || n % 8 || a.size() != 4 || !accType ||
      int64_t(accType.getBody().size()) != n / 2 ||
      !(element.isBF16() || element.isF16()) ||
      !descB.getType().isInteger(64) ||
      llvm::any_of(a, [](Value v) { return !v.getType().isInteger(32); }))
    llvm::report_fatal_error("wgmmaRegisterA: bad shape or operand types");
  const int64_t accCount = n / 2;
  const char *type = element.isBF16() ? "bf16" : "f16";

  // Operands: the accumulators' outputs $0.., their tied inputs, A's four
  // registers, B's descriptor. scale-d, scale-a, scale-b and trans-b are
  // immediates.
  std::string asmString = llvm::formatv(
      "wgmma.mma_async.sync.aligned.m64n{0}k16.f32.{1}.{1} {2}, {3}, ${4}, "
      "{5}, 1, 1, {6};",
      n, type, registerList(0, accCount), registerList(2 * accCount, 4),
      2 * accCount + 4, accumulate ? 1 : 0, transposeB ? 1 : 0);
  std::string constraints;
  for (int64_t i = 0; i < accCount; ++i)
    constraints += "=f,";
  for (int64_t i = 0; i < accCount; ++i)
    constraints += llvm::formatv("{0},", i).str();
  constraints += "r,r,r,r,l";

  SmallVector<Value> operands;
  for (int64_t i = 0; i < accCount; ++i)
    operands.push_back(LLVM::ExtractValueOp::create(b, loc, acc, i));
  operands.append(a.begin(), a.end());
  operands.push_back(descB);
  return LLVM::InlineAsmOp::create(
             b, loc, accType, operands, asmString, constraints,
             /*has_side_effects=*/true, /*is_align_stack=*/false,
             LLVM::tailcallkind::TailCallKind::None,
             LLVM::AsmDialectAttr::get(b.getContext(),
                                       LLVM::AsmDialect::AD_ATT),
             /*operand_attrs=*/ArrayAttr())
      .getResult(0);
}

} // namespace mla::gpu::ptx
