//===- HeadSpans.h - Per-head spans as one op per head run ------*- C++ -*-===//
//
// masformer.attention may give each key/value head its own span
// (`head_spans`). Lowerings that handle one span per op (the CPU tiles, the
// GPU kernels) first split such an op into one op per run of consecutive
// key/value heads with the same span, each with its own exact tile bounds.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_DIALECT_MASFORMER_UTILS_HEADSPANS_H
#define MASFORMER_DIALECT_MASFORMER_UTILS_HEADSPANS_H

#include "masformer/Dialect/MASFormer/IR/MASFormerOps.h"

#include "mlir/IR/PatternMatch.h"

namespace mlir::masformer {

/// Replaces `op`, which has `head_spans`, by one masformer.attention per run
/// of consecutive key/value heads with the same span, on slices of the query
/// (and of the mask where it has a heads dimension), key and value, whose
/// results are inserted into one tensor shaped like the query (the query
/// heads per key/value head computed at run time when q_heads is dynamic).
/// Fails (with an error on `op`) when a mask's heads dimension is dynamic.
/// Returns the new ops, in head order.
FailureOr<SmallVector<AttentionOp>> splitHeadSpans(RewriterBase &rewriter,
                                                   AttentionOp op);

/// Splits every op with `head_spans` under `root`; fails on the first op
/// that cannot be split.
LogicalResult splitAllHeadSpans(Operation *root);

/// Each key/value head's span: `head_spans`, or the op's one span for all.
SmallVector<SpanAttr> getKVHeadSpans(AttentionOp op);

/// The query heads per key/value head as an index value built at `b`, for
/// ops with `head_spans` (a constant when static, else `qHeads` divided by
/// the number of key/value heads); null without them.
Value buildHeadGroupSize(OpBuilder &b, Location loc, AttentionOp op,
                         OpFoldResult qHeads);

/// How an additive mask of type `maskTy` broadcasts (numpy rules,
/// right-aligned, size-1 dims repeated) onto loops over
/// [batch, q_heads, q_seq, kv_seq].
AffineMap getMaskBroadcastMap(MLIRContext *ctx, RankedTensorType maskTy);

} // namespace mlir::masformer

#endif // MASFORMER_DIALECT_MASFORMER_UTILS_HEADSPANS_H
