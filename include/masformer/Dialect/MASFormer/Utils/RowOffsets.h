//===- RowOffsets.h - Per-row positions for the kernels ---------*- C++ -*-===//
//
// masformer.attention may start each batch row's positions at its own key
// (`row_offset`: rows of different lengths right-aligned in one tensor, as
// a batched decode step of onnxruntime-genai's models holds them). The
// tiled CPU and GPU kernels take one layout for every row: they first
// rewrite such an op into ops without an offset that compute the same.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_DIALECT_MASFORMER_UTILS_ROWOFFSETS_H
#define MASFORMER_DIALECT_MASFORMER_UTILS_ROWOFFSETS_H

#include "masformer/Dialect/MASFormer/IR/MASFormerOps.h"

#include "mlir/IR/PatternMatch.h"

namespace mlir::masformer {

/// Rewrites `op` (if it has a `row_offset`) into ops without one: with full
/// spans and windows (no sinks) the offset is dropped (they keep the same
/// pairs at any offset); with blocks or sinks, an `scf.if` of the op as it
/// is when every offset is 0 and, otherwise, the op on a full span with the
/// span's rule at each row's positions as -inf in its mask.
void resolveRowOffset(RewriterBase &rewriter, AttentionOp op);

/// resolveRowOffset on every op under `root`.
void resolveAllRowOffsets(Operation *root);

} // namespace mlir::masformer

#endif // MASFORMER_DIALECT_MASFORMER_UTILS_ROWOFFSETS_H
