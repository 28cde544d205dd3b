//===- AttentionLowering.h - Helpers of the attention lowerings --*- C++ -*-===//
//
// Shared by the lowerings of masformer.attention (the reference
// decomposition and the tiled kernels): the span predicate, so that the span
// semantics are written once, and small IR builders both use.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_LIB_DIALECT_MASFORMER_TRANSFORMS_ATTENTIONLOWERING_H
#define MASFORMER_LIB_DIALECT_MASFORMER_TRANSFORMS_ATTENTIONLOWERING_H

#include "MicroKernels.h"
#include "masformer/Dialect/MASFormer/IR/MASFormerAttrs.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace mlir::masformer {

using utils::IteratorType;
constexpr IteratorType kPar = IteratorType::parallel;
constexpr IteratorType kRed = IteratorType::reduction;

/// An f32 constant.
inline Value f32Const(OpBuilder &b, Location loc, float v) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
}

/// A tensor.empty of f32 with `sizes` (static or dynamic) filled with
/// `value`.
inline Value filledF32(OpBuilder &b, Location loc,
                       ArrayRef<OpFoldResult> sizes, float value) {
  Value empty = tensor::EmptyOp::create(b, loc, sizes, b.getF32Type());
  return linalg::FillOp::create(b, loc, f32Const(b, loc, value), empty)
      .getResult(0);
}

/// The affine map from `n` loop dims to the dims `ds`.
inline AffineMap dimsMap(MLIRContext *ctx, unsigned n, ArrayRef<unsigned> ds) {
  SmallVector<AffineExpr> e;
  for (unsigned d : ds)
    e.push_back(getAffineDimExpr(d, ctx));
  return AffineMap::get(n, 0, e, ctx);
}

/// Extends a float scalar to f32 (no-op for f32).
inline Value toF32(OpBuilder &b, Location loc, Value v) {
  if (v.getType().isF32())
    return v;
  return arith::ExtFOp::create(b, loc, b.getF32Type(), v);
}

/// Builds the i1 "query position qPos may attend key position j" from the
/// span and the causal flag, in index arithmetic inside a linalg body; a null
/// value when every pair is allowed.
inline Value buildSpanAllowed(OpBuilder &b, Location loc, SpanAttr span,
                              bool causal, Value qPos, Value j) {
  Value allowed;
  auto andWith = [&](Value cond) {
    allowed = allowed ? arith::AndIOp::create(b, loc, allowed, cond).getResult()
                      : cond;
  };
  if (causal)
    andWith(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle, j, qPos));
  switch (span.getKind()) {
  case SpanKind::Full:
    break;
  case SpanKind::Block: {
    Value size = arith::ConstantIndexOp::create(b, loc, span.getSize());
    Value qBlock = arith::FloorDivSIOp::create(b, loc, qPos, size);
    Value kBlock = arith::FloorDivSIOp::create(b, loc, j, size);
    andWith(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, qBlock,
                                  kBlock));
    break;
  }
  case SpanKind::Window: {
    Value size = arith::ConstantIndexOp::create(b, loc, span.getSize());
    Value dist = arith::SubIOp::create(b, loc, qPos, j);
    andWith(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, dist,
                                  size));
    if (causal) {
      Value zero = arith::ConstantIndexOp::create(b, loc, 0);
      andWith(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, dist,
                                    zero));
    } else {
      Value negSize = arith::ConstantIndexOp::create(b, loc, -span.getSize());
      andWith(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt, dist,
                                    negSize));
    }
    break;
  }
  }
  return allowed;
}

/// The keys [lo, hi) that the queries at positions qPos0..qPosLast may see
/// under the span and the causal flag, within [0, skv): the bounds of the
/// tiled lowerings' key-tile loops.
inline std::pair<Value, Value> buildSpanKeyRange(Idx &ix, SpanAttr span,
                                                 bool causal, Value qPos0,
                                                 Value qPosLast, Value skv) {
  Value lo = ix.c(0), hi = skv;
  if (causal)
    hi = ix.min(hi, ix.add(qPosLast, ix.c(1)));
  if (span.getKind() == SpanKind::Block) {
    Value bs = ix.c(span.getSize());
    lo = ix.max(lo, ix.mul(ix.fdiv(qPos0, bs), bs));
    hi = ix.min(hi, ix.mul(ix.add(ix.fdiv(qPosLast, bs), ix.c(1)), bs));
  } else if (span.getKind() == SpanKind::Window) {
    Value w = ix.c(span.getSize());
    lo = ix.max(lo, ix.add(ix.sub(qPos0, w), ix.c(1)));
    if (!causal)
      hi = ix.min(hi, ix.add(qPosLast, w));
  }
  return {lo, hi};
}

/// Whether every pair of a query at qPos0..qPosLast and a key at k0..kLast
/// passes the span and the causal flag (such a tile needs no position
/// mask); null when every pair always does.
inline Value buildSpanTileInterior(Idx &ix, SpanAttr span, bool causal,
                                   Value qPos0, Value qPosLast, Value k0,
                                   Value kLast) {
  using P = arith::CmpIPredicate;
  Value interior;
  auto andWith = [&](Value c) {
    interior = interior ? ix.andI(interior, c) : c;
  };
  if (causal)
    andWith(ix.cmp(P::sle, kLast, qPos0));
  if (span.getKind() == SpanKind::Block) {
    Value bs = ix.c(span.getSize());
    Value blk = ix.fdiv(qPos0, bs);
    andWith(ix.cmp(P::eq, blk, ix.fdiv(qPosLast, bs)));
    andWith(ix.cmp(P::eq, blk, ix.fdiv(k0, bs)));
    andWith(ix.cmp(P::eq, blk, ix.fdiv(kLast, bs)));
  } else if (span.getKind() == SpanKind::Window) {
    Value w = ix.c(span.getSize());
    andWith(ix.cmp(P::slt, ix.sub(qPosLast, k0), w));
    if (causal)
      andWith(ix.cmp(P::sge, ix.sub(qPos0, kLast), ix.c(0)));
    else
      andWith(ix.cmp(P::slt, ix.sub(kLast, qPos0), w));
  }
  return interior;
}

} // namespace mlir::masformer

#endif // MASFORMER_LIB_DIALECT_MASFORMER_TRANSFORMS_ATTENTIONLOWERING_H
