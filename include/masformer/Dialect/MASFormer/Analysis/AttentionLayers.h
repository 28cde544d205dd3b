//===- AttentionLayers.h - Attention layers in layer order ------*- C++ -*-===//
//
// Shared by the passes that work per layer (rewrite, report).
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_DIALECT_MASFORMER_ANALYSIS_ATTENTIONLAYERS_H
#define MASFORMER_DIALECT_MASFORMER_ANALYSIS_ATTENTIONLAYERS_H

#include "masformer/Dialect/MASFormer/IR/MASFormerOps.h"

#include "mlir/IR/BuiltinOps.h"

namespace mlir::masformer {

/// The module's attention ops sorted by `layer`. Fails (with a diagnostic)
/// when an op has no layer index or two ops share one; an empty result is
/// not an error here.
inline FailureOr<SmallVector<AttentionOp>> collectLayers(ModuleOp module) {
  SmallVector<AttentionOp> ops;
  module.walk([&](AttentionOp op) { ops.push_back(op); });
  for (AttentionOp op : ops)
    if (!op.getLayer())
      return op.emitError("attention op has no layer index; run "
                          "--masformer-raise-attention (which numbers the "
                          "layers) or set `layer`"),
             failure();
  llvm::stable_sort(ops, [](AttentionOp a, AttentionOp b) {
    return *a.getLayer() < *b.getLayer();
  });
  for (size_t i = 1; i < ops.size(); ++i)
    if (*ops[i].getLayer() == *ops[i - 1].getLayer())
      return ops[i].emitError() << "layer index " << *ops[i].getLayer()
                                << " is used twice",
             failure();
  return ops;
}

} // namespace mlir::masformer

#endif // MASFORMER_DIALECT_MASFORMER_ANALYSIS_ATTENTIONLAYERS_H
