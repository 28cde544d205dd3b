//===- RowOffsets.cpp - Per-row positions for the kernels -------*- C++ -*-===//

#include "masformer/Dialect/MASFormer/Utils/RowOffsets.h"
#include "masformer/Dialect/MASFormer/Utils/HeadSpans.h"
#include "masformer/Dialect/MASFormer/Utils/SpanUtils.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <limits>

using namespace mlir;
using namespace mlir::masformer;

namespace {

/// Whether every row offset is 0 (an i1).
Value allZero(OpBuilder &b, Location loc, Value offsets) {
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
  Value yes = arith::ConstantIntOp::create(b, loc, 1, 1);
  auto loop = scf::ForOp::create(
      b, loc, c0, tensor::DimOp::create(b, loc, offsets, 0), c1,
      ValueRange{yes},
      [&](OpBuilder &lb, Location ll, Value row, ValueRange acc) {
        Value off = tensor::ExtractOp::create(lb, ll, offsets, row);
        Value zero =
            arith::CmpIOp::create(lb, ll, arith::CmpIPredicate::eq, off, c0);
        scf::YieldOp::create(
            lb, ll, ValueRange{arith::AndIOp::create(lb, ll, acc[0], zero)});
      });
  return loop.getResult(0);
}

/// The op's additive mask with the span's rule at each row's positions
/// added (-inf where a pair is not allowed): [batch, heads, q_seq, kv_seq],
/// heads the query heads with per-head spans or a mask that has them, else
/// 1; the element type the mask's (the query's without one).
Value spanMask(OpBuilder &b, AttentionOp op) {
  Location loc = op.getLoc();
  MLIRContext *ctx = op.getContext();
  Value mask = op.getMask();
  auto maskTy = mask ? cast<RankedTensorType>(mask.getType()) : nullptr;
  Type et =
      maskTy ? maskTy.getElementType() : op.getQueryType().getElementType();
  int64_t maskOffset = maskTy ? 4 - maskTy.getRank() : 4;
  auto maskHas = [&](int64_t d) {
    return maskTy && d >= maskOffset && maskTy.getDimSize(d - maskOffset) != 1;
  };
  bool perHead = op.hasHeadSpans() || maskHas(1);

  SmallVector<OpFoldResult> sizes = {
      tensor::getMixedSize(b, loc, op.getQuery(), 0),
      perHead ? tensor::getMixedSize(b, loc, op.getQuery(), 1)
              : b.getIndexAttr(1),
      tensor::getMixedSize(b, loc, op.getQuery(), 2),
      tensor::getMixedSize(b, loc, op.getKey(), 2)};
  Value init = tensor::EmptyOp::create(b, loc, sizes, et);
  Value qSeq = getValueOrCreateConstantIndexOp(b, loc, sizes[2]);
  Value kvSeq = getValueOrCreateConstantIndexOp(b, loc, sizes[3]);
  Value queryStart = arith::SubIOp::create(b, loc, kvSeq, qSeq);

  SmallVector<Value> inputs = {op.getRowOffset()};
  SmallVector<AffineMap> maps = {
      AffineMap::get(4, 0, getAffineDimExpr(0, ctx), ctx)};
  if (mask) {
    inputs.push_back(mask);
    maps.push_back(getMaskBroadcastMap(ctx, maskTy));
  }
  maps.push_back(AffineMap::getMultiDimIdentityMap(4, ctx));

  SmallVector<SpanAttr> spans = getKVHeadSpans(op);
  Value group = buildHeadGroupSize(b, loc, op, sizes[1]);
  bool causal = op.getCausal();
  auto generic = linalg::GenericOp::create(
      b, loc, init.getType(), inputs, ValueRange{init}, maps,
      SmallVector<utils::IteratorType>(4, utils::IteratorType::parallel),
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        Value off = args[0];
        Value i = linalg::IndexOp::create(nb, nloc, 2);
        Value j = linalg::IndexOp::create(nb, nloc, 3);
        Value qPos = arith::SubIOp::create(
            nb, nloc, arith::AddIOp::create(nb, nloc, i, queryStart), off);
        Value kPos = arith::SubIOp::create(nb, nloc, j, off);
        Value allowed =
            buildHeadSpansAllowed(nb, nloc, spans, causal, qPos, kPos,
                                  linalg::IndexOp::create(nb, nloc, 1), group);
        auto ft = cast<FloatType>(et);
        Value zero =
            arith::ConstantOp::create(nb, nloc, ft, nb.getFloatAttr(ft, 0.0));
        Value negInf = arith::ConstantOp::create(
            nb, nloc, ft,
            nb.getFloatAttr(ft, -std::numeric_limits<double>::infinity()));
        Value x = arith::SelectOp::create(nb, nloc, allowed, zero, negInf);
        if (mask)
          x = arith::AddFOp::create(nb, nloc, args[1], x);
        linalg::YieldOp::create(nb, nloc, x);
      });
  return generic.getResult(0);
}

} // namespace

void mlir::masformer::resolveRowOffset(RewriterBase &rewriter, AttentionOp op) {
  Value offsets = op.getRowOffset();
  if (!offsets)
    return;
  // Causal rules, full spans and windows see differences of positions
  // only: the same pairs at any offset.
  if (!op.hasPositionalSpan()) {
    rewriter.modifyOpInPlace(op, [&] { op.getRowOffsetMutable().clear(); });
    return;
  }
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(op);
  Location loc = op.getLoc();
  auto ifOp = scf::IfOp::create(rewriter, loc, TypeRange{op.getType()},
                                allZero(rewriter, loc, offsets),
                                /*withElseRegion=*/true);
  // Every row from position 0: the op as it is.
  rewriter.setInsertionPointToStart(&ifOp.getThenRegion().front());
  auto same = cast<AttentionOp>(rewriter.clone(*op));
  same.getRowOffsetMutable().clear();
  scf::YieldOp::create(rewriter, loc, same.getResult());
  // Rows of their own: the span's rule in the mask, the op full.
  rewriter.setInsertionPointToStart(&ifOp.getElseRegion().front());
  Value mask = spanMask(rewriter, op);
  auto dense = cast<AttentionOp>(rewriter.clone(*op));
  dense.getRowOffsetMutable().clear();
  dense.getMaskMutable().assign(mask);
  dense.setSpanAttr(SpanAttr::get(op.getContext(), SpanKind::Full));
  dense.removeHeadSpansAttr();
  scf::YieldOp::create(rewriter, loc, dense.getResult());
  rewriter.replaceOp(op, ifOp.getResults());
}

void mlir::masformer::resolveAllRowOffsets(Operation *root) {
  SmallVector<AttentionOp> ops;
  root->walk([&](AttentionOp op) {
    if (op.getRowOffset())
      ops.push_back(op);
  });
  IRRewriter rewriter(root->getContext());
  for (AttentionOp op : ops)
    resolveRowOffset(rewriter, op);
}
