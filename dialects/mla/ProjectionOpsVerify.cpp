//===- ProjectionOpsVerify.cpp - Verifiers of the up-projection ops -------===//

#include "OperandChecker.h"
#include "mla/Dialect/MLADialect.h"

using namespace mlir;
using namespace mla;
using namespace mla::detail;

LogicalResult KvUpProjOp::verify() {
  if (failed(verifyNoUnknownAttributes(*this)))
    return failure();
  int64_t heads = getNumHeads(), latent = getKvLoraRank(),
          nope = getQkNopeHeadDim(), rope = getRopeDim(), vd = getVHeadDim();
  OperandChecker c(*this);
  Dim headsDim = fixed("heads", heads, "num_heads");
  if (failed(c.latentRows(getKvC(), getKPe(), latent, rope)) ||
      failed(c.kvBProj(getKvBProj(), latent, heads, nope, vd)) ||
      failed(c.check(getK(), "k",
                     {sym("tokens"), headsDim,
                      fixed("qk_head_dim", nope + rope,
                            "qk_nope_head_dim + rope_dim")},
                     ElementKind::Activation)) ||
      failed(c.check(getV(), "v",
                     {sym("tokens"), headsDim,
                      fixed("v_head_dim", vd, "v_head_dim")},
                     ElementKind::Activation)))
    return failure();
  return success();
}

LogicalResult QAbsorbOp::verify() {
  if (failed(verifyNoUnknownAttributes(*this)))
    return failure();
  int64_t heads = getNumHeads(), nope = getQkNopeHeadDim(),
          latent = getKvLoraRank();
  // With rope_dim the rows carry q_pe after the projected columns.
  std::optional<int64_t> rope = getRopeDim();
  OperandChecker c(*this);
  Dim headsDim = fixed("heads", heads, "num_heads");
  Dim queryWidth = rope ? fixed("qk_nope_head_dim + rope_dim", nope + *rope,
                                "qk_nope_head_dim + rope_dim")
                        : fixed("qk_nope_head_dim", nope, "qk_nope_head_dim");
  Dim outputWidth = rope ? fixed("kv_lora_rank + rope_dim", latent + *rope,
                                 "kv_lora_rank + rope_dim")
                         : fixed("kv_lora_rank", latent, "kv_lora_rank");
  if (failed(c.check(getQNope(), "q_nope",
                     {sym("tokens"), headsDim, queryWidth},
                     ElementKind::Activation)) ||
      failed(c.check(getWUkT(), "w_uk_t",
                     {headsDim,
                      fixed("qk_nope_head_dim", nope, "qk_nope_head_dim"),
                      fixed("kv_lora_rank", latent, "kv_lora_rank")},
                     ElementKind::Activation)) ||
      failed(c.check(getQlNope(), "ql_nope",
                     {sym("tokens"), headsDim, outputWidth},
                     ElementKind::Activation)))
    return failure();
  return success();
}

LogicalResult VUpProjOp::verify() {
  if (failed(verifyNoUnknownAttributes(*this)))
    return failure();
  int64_t heads = getNumHeads(), latent = getKvLoraRank(),
          vd = getVHeadDim();
  OperandChecker c(*this);
  Dim headsDim = fixed("heads", heads, "num_heads");
  if (failed(c.check(getOLatent(), "o_latent",
                     {sym("tokens"), headsDim,
                      fixed("kv_lora_rank", latent, "kv_lora_rank")},
                     ElementKind::Activation)) ||
      failed(c.check(getWUv(), "w_uv",
                     {headsDim, fixed("kv_lora_rank", latent, "kv_lora_rank"),
                      fixed("v_head_dim", vd, "v_head_dim")},
                     ElementKind::Activation)) ||
      failed(c.check(getOut(), "out",
                     {sym("tokens"), headsDim,
                      fixed("v_head_dim", vd, "v_head_dim")},
                     ElementKind::Activation)))
    return failure();
  return success();
}
