//===- HeadSpans.cpp - Per-head spans as one op per head run ----*- C++ -*-===//

#include "masformer/Dialect/MASFormer/Utils/HeadSpans.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

using namespace mlir;
using namespace mlir::masformer;

namespace {
/// Consecutive key/value heads [start, start + count) sharing `span`.
struct HeadRun {
  int64_t start, count;
  SpanAttr span;
};

/// `value` sliced to [start, start + count) along dimension `dim`.
Value sliceDim(OpBuilder &b, Location loc, Value value, int64_t dim,
               OpFoldResult start, OpFoldResult count) {
  auto ty = cast<RankedTensorType>(value.getType());
  SmallVector<OpFoldResult> offsets(ty.getRank(), b.getIndexAttr(0));
  SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(b, loc, value);
  SmallVector<OpFoldResult> strides(ty.getRank(), b.getIndexAttr(1));
  offsets[dim] = start;
  sizes[dim] = count;
  return tensor::ExtractSliceOp::create(b, loc, value, offsets, sizes, strides);
}

/// `group * n`, folded when the group size is static.
OpFoldResult timesGroup(OpBuilder &b, Location loc, OpFoldResult group,
                        int64_t n) {
  if (std::optional<int64_t> g = getConstantIntValue(group))
    return b.getIndexAttr(*g * n);
  if (n == 0)
    return b.getIndexAttr(0);
  if (n == 1)
    return group;
  return arith::MulIOp::create(b, loc, cast<Value>(group),
                               arith::ConstantIndexOp::create(b, loc, n))
      .getResult();
}
} // namespace

FailureOr<SmallVector<AttentionOp>>
mlir::masformer::splitHeadSpans(RewriterBase &rewriter, AttentionOp op) {
  std::optional<ArrayAttr> heads = op.getHeadSpans();
  assert(heads && "op has no head spans");
  // The mask's query-heads dimension, where it has one (rank >= 3, size not
  // 1): sliced with the query.
  Value mask = op.getMask();
  int64_t maskHeadDim = -1;
  if (mask) {
    auto mTy = cast<RankedTensorType>(mask.getType());
    if (mTy.getRank() >= 3) {
      int64_t d = mTy.getRank() - 3;
      if (ShapedType::isDynamic(mTy.getDimSize(d)))
        return op.emitOpError("with head_spans and a mask whose heads "
                              "dimension is dynamic cannot be split by head");
      if (mTy.getDimSize(d) != 1)
        maskHeadDim = d;
    }
  }

  SmallVector<HeadRun> runs;
  for (auto [h, a] : llvm::enumerate(*heads)) {
    auto span = cast<SpanAttr>(a);
    if (!runs.empty() && runs.back().span == span)
      ++runs.back().count;
    else
      runs.push_back({static_cast<int64_t>(h), 1, span});
  }

  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(op);
  Location loc = op.getLoc();
  // Query heads per key/value head: static, or q_heads / kv_heads at run
  // time (kv_heads is static with head spans).
  OpFoldResult group;
  if (std::optional<int64_t> g = op.getStaticGroupSize())
    group = rewriter.getIndexAttr(*g);
  else
    group = arith::DivUIOp::create(
                rewriter, loc,
                tensor::DimOp::create(rewriter, loc, op.getQuery(), 1),
                arith::ConstantIndexOp::create(rewriter, loc, heads->size()))
                .getResult();
  SmallVector<OpFoldResult> outSizes =
      tensor::getMixedSizes(rewriter, loc, op.getQuery());
  Value out = tensor::EmptyOp::create(rewriter, loc, outSizes,
                                      op.getQueryType().getElementType());
  SmallVector<AttentionOp> parts;
  for (const HeadRun &run : runs) {
    OpFoldResult qStart = timesGroup(rewriter, loc, group, run.start);
    OpFoldResult qCount = timesGroup(rewriter, loc, group, run.count);
    OpFoldResult kvStart = rewriter.getIndexAttr(run.start);
    OpFoldResult kvCount = rewriter.getIndexAttr(run.count);
    // (Built in this order: query, key, value, mask.)
    Value query = sliceDim(rewriter, loc, op.getQuery(), 1, qStart, qCount);
    Value key = sliceDim(rewriter, loc, op.getKey(), 1, kvStart, kvCount);
    Value value = sliceDim(rewriter, loc, op.getValue(), 1, kvStart, kvCount);
    Value partMask = mask;
    if (mask && maskHeadDim >= 0)
      partMask = sliceDim(rewriter, loc, mask, maskHeadDim, qStart, qCount);
    // The op's own attributes but its span and head_spans; the discardable
    // ones (the model's span) as they were.
    auto part = AttentionOp::create(
        rewriter, loc, query.getType(), query, key, value, partMask,
        op.getRowOffset(), run.span, op.getCausalAttr(), op.getScaleAttr(),
        op.getLayerAttr(), ArrayAttr(), op.getSoftcapAttr());
    for (NamedAttribute a : op->getDiscardableAttrs())
      part->setAttr(a.getName(), a.getValue());
    parts.push_back(part);
    SmallVector<OpFoldResult> offsets(4, rewriter.getIndexAttr(0));
    offsets[1] = qStart;
    SmallVector<OpFoldResult> sizes =
        tensor::getMixedSizes(rewriter, loc, part.getResult());
    SmallVector<OpFoldResult> strides(4, rewriter.getIndexAttr(1));
    out = tensor::InsertSliceOp::create(rewriter, loc, part.getResult(), out,
                                        offsets, sizes, strides);
  }
  rewriter.replaceOp(op, out);
  return parts;
}

LogicalResult mlir::masformer::splitAllHeadSpans(Operation *root) {
  SmallVector<AttentionOp> ops;
  root->walk([&](AttentionOp op) {
    if (op.hasHeadSpans())
      ops.push_back(op);
  });
  IRRewriter rewriter(root->getContext());
  for (AttentionOp op : ops)
    if (failed(splitHeadSpans(rewriter, op)))
      return failure();
  return success();
}

SmallVector<SpanAttr> mlir::masformer::getKVHeadSpans(AttentionOp op) {
  SmallVector<SpanAttr> spans;
  if (std::optional<ArrayAttr> heads = op.getHeadSpans())
    for (Attribute a : *heads)
      spans.push_back(cast<SpanAttr>(a));
  else
    spans.push_back(op.getSpan());
  return spans;
}

Value mlir::masformer::buildHeadGroupSize(OpBuilder &b, Location loc,
                                          AttentionOp op, OpFoldResult qHeads) {
  std::optional<ArrayAttr> heads = op.getHeadSpans();
  if (!heads)
    return Value();
  if (std::optional<int64_t> g = op.getStaticGroupSize())
    return arith::ConstantIndexOp::create(b, loc, *g);
  return arith::DivUIOp::create(
      b, loc, getValueOrCreateConstantIndexOp(b, loc, qHeads),
      arith::ConstantIndexOp::create(b, loc, heads->size()));
}

AffineMap mlir::masformer::getMaskBroadcastMap(MLIRContext *ctx,
                                               RankedTensorType maskTy) {
  int64_t offset = 4 - maskTy.getRank();
  SmallVector<AffineExpr> exprs;
  for (int64_t d = 0; d < maskTy.getRank(); ++d)
    exprs.push_back(maskTy.getDimSize(d) == 1
                        ? getAffineConstantExpr(0, ctx)
                        : getAffineDimExpr(offset + d, ctx));
  return AffineMap::get(4, 0, exprs, ctx);
}
