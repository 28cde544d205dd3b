//===- TileAttention.cpp - Span-aware tiled attention -----------*- C++ -*-===//
//
// masformer.attention as loops over (batch, head, query tile) and, inside, a
// loop over exactly the key tiles that meet the span and the causal
// triangle, with an online softmax. The key-tile bounds are computed from
// the span: tiles outside it are never visited, and tiles entirely inside
// it run without a position mask.
//
//===----------------------------------------------------------------------===//

#include "masformer/Dialect/MASFormer/Utils/SpanUtils.h"
#include "MicroKernels.h"
#include "masformer/Dialect/MASFormer/IR/MASFormerOps.h"
#include "masformer/Codegen/CPU/Passes.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

#include <limits>

namespace mlir::masformer {
#define GEN_PASS_DEF_TILEATTENTION
#include "masformer/Codegen/CPU/Passes.h.inc"
} // namespace mlir::masformer

using namespace mlir;
using namespace mlir::masformer;

namespace {


/// a * b + acc with reassociation allowed, so that LLVM vectorizes the
/// reductions of the two contractions.
Value fma(OpBuilder &b, Location loc, Value x, Value y, Value acc) {
  auto fast = arith::FastMathFlagsAttr::get(b.getContext(),
                                            arith::FastMathFlags::fast);
  Value p = arith::MulFOp::create(b, loc, x.getType(), x, y, fast);
  return arith::AddFOp::create(b, loc, acc.getType(), acc, p, fast);
}

/// A rank-reduced 2-D slice x[lead..., r0:r0+rs, c0:c0+cs] of a 4-D tensor.
Value slice2D(OpBuilder &b, Location loc, Value x, ArrayRef<OpFoldResult> lead,
              OpFoldResult r0, OpFoldResult rs, OpFoldResult c0,
              OpFoldResult cs) {
  auto ty = cast<RankedTensorType>(x.getType());
  SmallVector<OpFoldResult> offsets(lead.begin(), lead.end());
  offsets.push_back(r0);
  offsets.push_back(c0);
  SmallVector<OpFoldResult> sizes(lead.size(), b.getIndexAttr(1));
  sizes.push_back(rs);
  sizes.push_back(cs);
  SmallVector<OpFoldResult> strides(4, b.getIndexAttr(1));
  auto staticSize = [](OpFoldResult s) {
    if (auto a = dyn_cast<Attribute>(s))
      return cast<IntegerAttr>(a).getInt();
    return ShapedType::kDynamic;
  };
  auto resultTy = RankedTensorType::get({staticSize(rs), staticSize(cs)},
                                        ty.getElementType());
  return tensor::ExtractSliceOp::create(b, loc, resultTy, x, offsets, sizes,
                                        strides);
}


//===----------------------------------------------------------------------===//
// Register-blocked micro-kernels for full tiles
//===----------------------------------------------------------------------===//

/// S = scale * Q K^T for a full tile: q is [tq, d], kt the transposed key
/// tile [d, tk]; the accumulators run over the head dimension.
Value buildScoresKernel(OpBuilder &b, Location loc, Value q, Value kt,
                        Value scale, int64_t tq, int64_t tk, int64_t d,
                        int64_t w) {
  auto vt = VectorType::get({w}, b.getF32Type());
  Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(vt));
  Value scaleVec = vector::BroadcastOp::create(b, loc, vt, scale);
  Value s0 = tensor::EmptyOp::create(b, loc, {tq, tk}, b.getF32Type());
  return buildBlockedMatmul(
      b, loc, q, kt, s0, tq, tk, d, w,
      [&](OpBuilder &, Value, Value, Value) { return zero; },
      [&](OpBuilder &nb, Value acc) {
        return arith::MulFOp::create(nb, loc, acc, scaleVec).getResult();
      });
}

/// acc * corr + P V for a full tile: p is [tq, tk] f32, v [tk, d], acc
/// [tq, d] f32, corr [tq] f32 (the rows' rescaling); the output rows stay
/// in registers across all tk keys.
Value buildPVKernel(OpBuilder &b, Location loc, Value p, Value v, Value acc,
                    Value corr, int64_t tq, int64_t tk, int64_t d, int64_t w) {
  auto vt = VectorType::get({w}, b.getF32Type());
  return buildBlockedMatmul(
      b, loc, p, v, acc, tq, d, tk, w,
      [&](OpBuilder &nb, Value out, Value row, Value col) {
        Value cr = vector::BroadcastOp::create(
            nb, loc, vt,
            tensor::ExtractOp::create(nb, loc, corr, ValueRange{row}));
        return arith::MulFOp::create(nb, loc,
                                     readF32(nb, loc, out, row, col, w), cr)
            .getResult();
      },
      [](OpBuilder &, Value x) { return x; });
}

/// The online-softmax update of a full tile, one query row at a time in
/// vectors of W: m' = max(m, rowmax(logits)), P = exp(logits - m'),
/// corr = exp(m - m'), l' = l * corr + rowsum(P). A row whose running max is
/// still -inf (no key allowed yet) subtracts 0 instead, so that it keeps
/// P = 0 and corr = 0 rather than NaN.
struct SoftmaxRows {
  Value probs, m, l, corr;
};
SoftmaxRows buildSoftmaxRows(OpBuilder &b, Location loc, Value logits,
                             Value m, Value l, int64_t tq, int64_t tk,
                             int64_t w) {
  Idx ix{b, loc};
  Type f32 = b.getF32Type();
  auto vt = VectorType::get({w}, f32);
  float negInf = -std::numeric_limits<float>::infinity();
  Value probs0 = tensor::EmptyOp::create(b, loc, {tq, tk}, f32);
  Value corr0 = tensor::EmptyOp::create(b, loc, {tq}, f32);
  auto rows = scf::ForOp::create(b, loc, ix.c(0), ix.c(tq), ix.c(1),
                                 ValueRange{probs0, m, l, corr0});
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(rows.getBody());
  Value i = rows.getInductionVar();
  Value probs = rows.getRegionIterArg(0), mT = rows.getRegionIterArg(1),
        lT = rows.getRegionIterArg(2), corrT = rows.getRegionIterArg(3);
  SmallVector<Value> x;
  for (int64_t c = 0; c < tk; c += w)
    x.push_back(readF32(b, loc, logits, i, ix.c(c), w));
  // maxnumf: plain vmaxps (a NaN logit still makes its row's output NaN
  // through exp).
  Value vmax;
  for (Value v : x)
    vmax = vmax ? arith::MaxNumFOp::create(b, loc, vmax, v).getResult() : v;
  Value mOld = tensor::ExtractOp::create(b, loc, mT, ValueRange{i});
  Value mNew = arith::MaxNumFOp::create(
      b, loc, mOld,
      vector::ReductionOp::create(b, loc, vector::CombiningKind::MAXNUMF,
                                  vmax));
  Value isInf = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, mNew,
                                      f32Const(b, loc, negInf));
  Value sub = arith::SelectOp::create(b, loc, isInf, f32Const(b, loc, 0.0f),
                                      mNew);
  Value subV = vector::BroadcastOp::create(b, loc, vt, sub);
  Value vsum;
  for (size_t c = 0; c < x.size(); ++c) {
    Value p = math::ExpOp::create(b, loc,
                                  arith::SubFOp::create(b, loc, x[c], subV));
    vsum = vsum ? arith::AddFOp::create(b, loc, vsum, p).getResult() : p;
    probs = writeVec(b, loc, p, probs, i, ix.c(c * w));
  }
  Value corr = math::ExpOp::create(b, loc,
                                   arith::SubFOp::create(b, loc, mOld, sub));
  Value lNew = arith::AddFOp::create(
      b, loc,
      arith::MulFOp::create(
          b, loc, tensor::ExtractOp::create(b, loc, lT, ValueRange{i}), corr),
      vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD, vsum));
  scf::YieldOp::create(
      b, loc,
      ValueRange{probs, tensor::InsertOp::create(b, loc, mNew, mT, i),
                 tensor::InsertOp::create(b, loc, lNew, lT, i),
                 tensor::InsertOp::create(b, loc, corr, corrT, i)});
  return {rows.getResult(0), rows.getResult(1), rows.getResult(2),
          rows.getResult(3)};
}

/// `v` cast to the static shape `shape` (same element type).
Value castTo(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> shape) {
  auto ty = cast<RankedTensorType>(v.getType());
  auto to = RankedTensorType::get(shape, ty.getElementType());
  if (ty == to)
    return v;
  return tensor::CastOp::create(b, loc, to, v);
}

struct TileAttentionPattern final : OpRewritePattern<AttentionOp> {
  TileAttentionPattern(MLIRContext *ctx, int64_t tq, int64_t tk,
                       bool printCounts, int64_t vectorWidth)
      : OpRewritePattern(ctx), tileQ(tq), tileKV(tk),
        printCounts(printCounts), vectorWidth(vectorWidth) {}

  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override;

  int64_t tileQ, tileKV;
  bool printCounts;
  int64_t vectorWidth;
};

LogicalResult
TileAttentionPattern::matchAndRewrite(AttentionOp op,
                                      PatternRewriter &rewriter) const {
  RankedTensorType qTy = op.getQueryType(), kTy = op.getKeyType();
  Value mask = op.getMask();
  Location loc = op.getLoc();
  MLIRContext *ctx = op.getContext();
  OpBuilder &b = rewriter;
  Idx ix{b, loc};
  // Sizes as attributes where static (the IR then folds them) and as
  // tensor.dim values where dynamic.
  OpFoldResult batchF = tensor::getMixedSize(b, loc, op.getQuery(), 0);
  OpFoldResult headsF = tensor::getMixedSize(b, loc, op.getQuery(), 1);
  OpFoldResult sqF = tensor::getMixedSize(b, loc, op.getQuery(), 2);
  OpFoldResult d = tensor::getMixedSize(b, loc, op.getQuery(), 3);
  OpFoldResult skvF = tensor::getMixedSize(b, loc, op.getKey(), 2);
  OpFoldResult kvHeadsF = tensor::getMixedSize(b, loc, op.getKey(), 1);
  auto val = [&](OpFoldResult f) {
    return getValueOrCreateConstantIndexOp(b, loc, f);
  };
  auto stat = [](OpFoldResult f) { return getConstantIntValue(f); };
  Type elemTy = qTy.getElementType();
  SpanAttr span = op.getSpan();
  bool causal = op.getCausal();
  // A static scale is a constant inside the tiles' bodies; a run-time one
  // (dynamic head_dim) is computed once here.
  std::optional<float> staticScale = op.getStaticScale();
  float scale = staticScale.value_or(0.0f);
  Value scaleV = staticScale ? Value() : op.buildScale(b, loc);
  float negInf = -std::numeric_limits<float>::infinity();

  // Full tiles use the micro-kernels when the head dimension is a static
  // multiple of the vector width. Their key tiles are read from K packed
  // once here as [batch, kv_heads, key tile, head_dim, tile-kv]: each key
  // tile transposed and contiguous (rows of a plain transpose would lie a
  // whole sequence apart, all in the same cache sets). The last, partial
  // tile is padded with zeros; it takes the linalg path anyway.
  std::optional<int64_t> dStatic = stat(d);
  bool kernels = vectorWidth > 0 && dStatic && *dStatic % vectorWidth == 0 &&
                 tileKV % vectorWidth == 0 && tileQ % kRows == 0;
  Value keyT;
  if (kernels) {
    OpFoldResult numKT =
        stat(skvF) ? OpFoldResult(b.getIndexAttr(
                         llvm::divideCeil(*stat(skvF), tileKV)))
                   : OpFoldResult(ix.cdiv(val(skvF), ix.c(tileKV)));
    SmallVector<OpFoldResult> ktSizes = {batchF, kvHeadsF, numKT, d,
                                         b.getIndexAttr(tileKV)};
    Type kElem = kTy.getElementType();
    Value init = tensor::EmptyOp::create(b, loc, ktSizes, kElem);
    Value key = op.getKey(), skv = val(skvF);
    // Packed in parallel, one key tile per iteration.
    auto pack = scf::ForallOp::create(
        b, loc, ArrayRef<OpFoldResult>{batchF, kvHeadsF, numKT},
        ValueRange{init}, std::nullopt);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(pack.getTerminator());
    Value pb = pack.getInductionVar(0), ph = pack.getInductionVar(1),
          pt = pack.getInductionVar(2);
    // The destination's own tile, so that the pack writes in place.
    auto tileTy = RankedTensorType::get(
        {stat(d) ? *stat(d) : ShapedType::kDynamic, tileKV}, kElem);
    Value tileInit = tensor::ExtractSliceOp::create(
        b, loc, tileTy, pack.getRegionIterArgs()[0],
        ArrayRef<OpFoldResult>{pb, ph, pt, b.getIndexAttr(0),
                               b.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1),
                               b.getIndexAttr(1), d, b.getIndexAttr(tileKV)},
        SmallVector<OpFoldResult>(5, b.getIndexAttr(1)));
    Value tile =
        linalg::GenericOp::create(
            b, loc, tileInit.getType(), ValueRange{}, ValueRange{tileInit},
            ArrayRef<AffineMap>{AffineMap::getMultiDimIdentityMap(2, ctx)},
            SmallVector<IteratorType>(2, kPar),
            [&](OpBuilder &nb, Location nl, ValueRange) {
              Idx nx{nb, nl};
              Value j = nx.add(nx.mul(pt, nx.c(tileKV)),
                               linalg::IndexOp::create(nb, nl, 1));
              Value in = nx.cmp(arith::CmpIPredicate::slt, j, skv);
              Value jc = arith::SelectOp::create(nb, nl, in, j, nx.c(0));
              Value x = tensor::ExtractOp::create(
                  nb, nl, key,
                  ValueRange{pb, ph, jc, linalg::IndexOp::create(nb, nl, 0)});
              Value zero =
                  arith::ConstantOp::create(nb, nl, nb.getZeroAttr(kElem));
              linalg::YieldOp::create(
                  nb, nl,
                  arith::SelectOp::create(nb, nl, in, x, zero).getResult());
            })
            .getResult(0);
    b.setInsertionPointToStart(pack.getTerminator().getBody());
    tensor::ParallelInsertSliceOp::create(
        b, loc, tile, pack.getRegionIterArgs()[0],
        ArrayRef<OpFoldResult>{pb, ph, pt, b.getIndexAttr(0),
                               b.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1),
                               b.getIndexAttr(1), d, b.getIndexAttr(tileKV)},
        SmallVector<OpFoldResult>(5, b.getIndexAttr(1)));
    keyT = pack.getResult(0);
  }

  // One parallel iteration per (batch, head, query tile).
  SmallVector<OpFoldResult> qSizes = {batchF, headsF, sqF, d};
  Value out0 = tensor::EmptyOp::create(b, loc, qSizes, elemTy);
  OpFoldResult numQT =
      stat(sqF) ? OpFoldResult(b.getIndexAttr(
                      llvm::divideCeil(*stat(sqF), tileQ)))
                : OpFoldResult(ix.cdiv(val(sqF), ix.c(tileQ)));
  auto forall = scf::ForallOp::create(
      b, loc, ArrayRef<OpFoldResult>{batchF, headsF, numQT}, ValueRange{out0},
      std::nullopt);
  b.setInsertionPoint(forall.getTerminator());
  Value bi = forall.getInductionVar(0), hi = forall.getInductionVar(1);
  Value qtIdx = forall.getInductionVar(2);
  Value group = stat(headsF) && stat(kvHeadsF)
                    ? ix.c(*stat(headsF) / *stat(kvHeadsF))
                    : arith::DivUIOp::create(b, loc, val(headsF),
                                             val(kvHeadsF))
                          .getResult();
  Value kvh = arith::DivUIOp::create(b, loc, hi, group);
  Value q0 = ix.mul(qtIdx, ix.c(tileQ));
  Value qs = ix.min(ix.c(tileQ), ix.sub(val(sqF), q0));
  // Absolute positions of the tile's first and last query.
  Value offset = stat(sqF) && stat(skvF)
                     ? ix.c(*stat(skvF) - *stat(sqF))
                     : ix.sub(val(skvF), val(sqF));
  Value qPos0 = ix.add(q0, offset);
  Value qPosLast = ix.add(qPos0, ix.sub(qs, ix.c(1)));

  // The keys this query tile may see, from the span and the triangle.
  auto [lo, hiK] =
      buildSpanKeyRange(ix, span, causal, qPos0, qPosLast, val(skvF));
  Value ktLo = ix.fdiv(lo, ix.c(tileKV));
  Value ktHi = ix.max(ktLo, ix.cdiv(hiK, ix.c(tileKV)));
  if (printCounts) {
    Value n = arith::IndexCastOp::create(b, loc, b.getI64Type(),
                                         ix.sub(ktHi, ktLo));
    func::CallOp::create(b, loc, "printI64", TypeRange{}, ValueRange{n});
    func::CallOp::create(b, loc, "printNewline", TypeRange{}, ValueRange{});
  }

  SmallVector<OpFoldResult> lead = {bi, hi};
  SmallVector<OpFoldResult> kvLead = {bi, kvh};
  Value qTile = slice2D(b, loc, op.getQuery(), lead, q0, qs, b.getIndexAttr(0),
                        d);
  Value m0 = filledF32(b, loc, {qs}, negInf);
  Value l0 = filledF32(b, loc, {qs}, 0.0f);
  Value acc0 = filledF32(b, loc, {qs, d}, 0.0f);
  auto kLoop = scf::ForOp::create(b, loc, ktLo, ktHi, ix.c(1),
                                  ValueRange{m0, l0, acc0});
  b.setInsertionPointToStart(kLoop.getBody());
  Value m = kLoop.getRegionIterArg(0), l = kLoop.getRegionIterArg(1),
        acc = kLoop.getRegionIterArg(2);
  Value k0 = ix.mul(kLoop.getInductionVar(), ix.c(tileKV));
  Value ks = ix.min(ix.c(tileKV), ix.sub(val(skvF), k0));
  Value kLast = ix.add(k0, ix.sub(ks, ix.c(1)));
  Value kTile = slice2D(b, loc, op.getKey(), kvLead, k0, ks,
                        b.getIndexAttr(0), d);
  Value vTile = slice2D(b, loc, op.getValue(), kvLead, k0, ks,
                        b.getIndexAttr(0), d);

  // The additive mask's piece for this tile, broadcast dims kept at 0.
  Value maskTile;
  AffineMap maskMap;
  if (mask) {
    auto mTy = cast<RankedTensorType>(mask.getType());
    int64_t r = mTy.getRank();
    SmallVector<OpFoldResult> offs, sizes, strides(r, b.getIndexAttr(1));
    SmallVector<int64_t> resultShape;
    SmallVector<AffineExpr> exprs;
    OpFoldResult pos[4] = {bi, hi, q0, k0};
    OpFoldResult ext[4] = {b.getIndexAttr(1), b.getIndexAttr(1), qs, ks};
    for (int64_t i = 0; i < r; ++i) {
      int64_t dim = 4 - r + i;
      bool bcast = mTy.getDimSize(i) == 1;
      offs.push_back(bcast ? OpFoldResult(b.getIndexAttr(0)) : pos[dim]);
      sizes.push_back(bcast || dim < 2 ? OpFoldResult(b.getIndexAttr(1))
                                       : ext[dim]);
      if (dim >= 2) {
        resultShape.push_back(bcast ? 1 : ShapedType::kDynamic);
        exprs.push_back(bcast ? getAffineConstantExpr(0, ctx)
                              : getAffineDimExpr(dim - 2, ctx));
      }
    }
    auto resTy = RankedTensorType::get(resultShape, mTy.getElementType());
    maskTile = tensor::ExtractSliceOp::create(b, loc, resTy, mask, offs, sizes,
                                              strides);
    maskMap = AffineMap::get(2, 0, exprs, ctx);
  }

  // Does every (query, key) pair of the tile pass the span and the
  // triangle? Then no position mask is evaluated for it.
  using P = arith::CmpIPredicate;
  Value interior =
      buildSpanTileInterior(ix, span, causal, qPos0, qPosLast, k0, kLast);

  // logits = scale * S (+ mask), -inf outside the span on boundary tiles.
  auto buildLogits = [&](OpBuilder &bb, Value scores, bool masked,
                         bool scaled) {
    SmallVector<Value> ins = {scores};
    SmallVector<AffineMap> maps = {dimsMap(ctx, 2, {0, 1})};
    if (maskTile) {
      ins.push_back(maskTile);
      maps.push_back(maskMap);
    }
    maps.push_back(dimsMap(ctx, 2, {0, 1}));
    Value init = tensor::EmptyOp::create(
        bb, loc, tensor::getMixedSizes(bb, loc, scores), bb.getF32Type());
    return linalg::GenericOp::create(
               bb, loc, init.getType(), ins, ValueRange{init}, maps,
               ArrayRef<IteratorType>{kPar, kPar},
               [&](OpBuilder &nb, Location nl, ValueRange a) {
                 Value x = a[0];
                 if (!scaled)
                   x = arith::MulFOp::create(
                       nb, nl, x, scaleV ? scaleV : f32Const(nb, nl, scale));
                 if (maskTile)
                   x = arith::AddFOp::create(nb, nl, x, toF32(nb, nl, a[1]));
                 if (masked) {
                   Idx nx{nb, nl};
                   Value qp = nx.add(qPos0, linalg::IndexOp::create(nb, nl, 0));
                   Value kp = nx.add(k0, linalg::IndexOp::create(nb, nl, 1));
                   Value ok = buildSpanAllowed(nb, nl, span, causal, qp, kp);
                   if (ok)
                     x = arith::SelectOp::create(nb, nl, ok, x,
                                                 f32Const(nb, nl, negInf));
                 }
                 linalg::YieldOp::create(nb, nl, x);
               })
        .getResult(0);
  };
  // `scaled`: the scores already carry the scale; then an interior tile
  // without an additive mask uses them as they are.
  auto logitsOf = [&](OpBuilder &bb, Value scores, bool scaled) -> Value {
    auto unmasked = [&](OpBuilder &ub) {
      if (scaled && !maskTile)
        return scores;
      return buildLogits(ub, scores, /*masked=*/false, scaled);
    };
    if (!interior)
      return unmasked(bb);
    auto ifOp = scf::IfOp::create(
        bb, loc, interior,
        [&](OpBuilder &tb, Location) {
          scf::YieldOp::create(tb, loc, unmasked(tb));
        },
        [&](OpBuilder &eb, Location) {
          scf::YieldOp::create(eb, loc,
                               buildLogits(eb, scores, true, scaled));
        });
    return ifOp.getResult(0);
  };

  // One key tile with linalg ops (any tile): S = Q K^T, logits, then the
  // online softmax: m' = max(m, rowmax), corr = exp(m - m'),
  // l' = l * corr + rowsum(exp(logits - m')), acc' = acc * corr + P V.
  auto stepLinalg = [&](OpBuilder &b) -> SmallVector<Value> {
    // S = Q K^T in f32, loops (i, j, e): dot products along contiguous rows.
    Value s0 = filledF32(b, loc, {qs, ks}, 0.0f);
    Value scores =
        linalg::GenericOp::create(
            b, loc, s0.getType(), ValueRange{qTile, kTile}, ValueRange{s0},
            ArrayRef<AffineMap>{dimsMap(ctx, 3, {0, 2}),
                                dimsMap(ctx, 3, {1, 2}),
                                dimsMap(ctx, 3, {0, 1})},
            ArrayRef<IteratorType>{kPar, kPar, kRed},
            [&](OpBuilder &nb, Location nl, ValueRange a) {
              Value x = toF32(nb, nl, a[0]);
              Value y = toF32(nb, nl, a[1]);
              linalg::YieldOp::create(nb, nl, fma(nb, nl, x, y, a[2]));
            })
            .getResult(0);
    Value logits = logitsOf(b, scores, /*scaled=*/false);
    auto safe = [&](OpBuilder &nb, Location nl, Value x) {
      Value isInf = arith::CmpFOp::create(nb, nl, arith::CmpFPredicate::OEQ,
                                          x, f32Const(nb, nl, negInf));
      return arith::SelectOp::create(nb, nl, isInf, f32Const(nb, nl, 0.0f), x)
          .getResult();
    };
    auto generic = [&](Type type, ValueRange ins, Value init,
                       ArrayRef<AffineMap> maps, ArrayRef<IteratorType> iters,
                       llvm::function_ref<Value(OpBuilder &, Location,
                                                ValueRange)>
                           body) {
      return linalg::GenericOp::create(
                 b, loc, type, ins, ValueRange{init}, maps, iters,
                 [&](OpBuilder &nb, Location nl, ValueRange a) {
                   linalg::YieldOp::create(nb, nl, body(nb, nl, a));
                 })
          .getResult(0);
    };
    AffineMap m2 = dimsMap(ctx, 2, {0, 1}), row2 = dimsMap(ctx, 2, {0}),
              id1 = dimsMap(ctx, 1, {0});
    Value mNew = generic(m.getType(), {logits}, m, {m2, row2}, {kPar, kRed},
                         [](OpBuilder &nb, Location nl, ValueRange a) {
                           return arith::MaximumFOp::create(nb, nl, a[0], a[1])
                               .getResult();
                         });
    Value pInit = tensor::EmptyOp::create(
        b, loc, ArrayRef<OpFoldResult>{qs, ks}, b.getF32Type());
    Value probs = generic(
        pInit.getType(), {logits, mNew}, pInit, {m2, row2, m2}, {kPar, kPar},
        [&](OpBuilder &nb, Location nl, ValueRange a) {
          return math::ExpOp::create(
                     nb, nl,
                     arith::SubFOp::create(nb, nl, a[0], safe(nb, nl, a[1])))
              .getResult();
        });
    Value corrInit = tensor::EmptyOp::create(b, loc, ArrayRef<OpFoldResult>{qs},
                                             b.getF32Type());
    Value corr = generic(
        corrInit.getType(), {m, mNew}, corrInit, {id1, id1, id1}, {kPar},
        [&](OpBuilder &nb, Location nl, ValueRange a) {
          return math::ExpOp::create(
                     nb, nl,
                     arith::SubFOp::create(nb, nl, a[0], safe(nb, nl, a[1])))
              .getResult();
        });
    // l * corr, then + rowsum(P).
    Value lScaled = generic(l.getType(), {l, corr}, l, {id1, id1, id1}, {kPar},
                            [](OpBuilder &nb, Location nl, ValueRange a) {
                              return arith::MulFOp::create(nb, nl, a[0], a[1])
                                  .getResult();
                            });
    Value lNew = generic(l.getType(), {probs}, lScaled, {m2, row2},
                         {kPar, kRed},
                         [](OpBuilder &nb, Location nl, ValueRange a) {
                           return arith::AddFOp::create(nb, nl, a[0], a[1])
                               .getResult();
                         });
    Value accScaled = generic(
        acc.getType(), {acc, corr}, acc, {m2, row2, m2}, {kPar, kPar},
        [](OpBuilder &nb, Location nl, ValueRange a) {
          return arith::MulFOp::create(nb, nl, a[0], a[1]).getResult();
        });
    // acc += P V, loops (i, j, e): the innermost loop runs along V's and
    // acc's contiguous rows.
    Value accNew = generic(
        acc.getType(), {probs, vTile}, accScaled,
        {dimsMap(ctx, 3, {0, 1}), dimsMap(ctx, 3, {1, 2}),
         dimsMap(ctx, 3, {0, 2})},
        {kPar, kRed, kPar}, [](OpBuilder &nb, Location nl, ValueRange a) {
          return fma(nb, nl, a[0], toF32(nb, nl, a[1]), a[2]);
        });
    return {mNew, lNew, accNew};
  };

  // One full key tile (tile-q x tile-kv, the common case) with the
  // micro-kernels: S from the pre-transposed keys, logits as above, the
  // softmax update row by row in vectors, and acc * corr + P V with acc in
  // registers.
  auto stepKernels = [&](OpBuilder &b) -> SmallVector<Value> {
    int64_t dd = *dStatic, w = vectorWidth;
    Value qS = castTo(b, loc, qTile, {tileQ, dd});
    auto ktTy = RankedTensorType::get({dd, tileKV}, kTy.getElementType());
    Value kt = tensor::ExtractSliceOp::create(
        b, loc, ktTy, keyT,
        ArrayRef<OpFoldResult>{bi, kvh, kLoop.getInductionVar(),
                               b.getIndexAttr(0), b.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1),
                               b.getIndexAttr(1), b.getIndexAttr(dd),
                               b.getIndexAttr(tileKV)},
        SmallVector<OpFoldResult>(5, b.getIndexAttr(1)));
    Value scores = buildScoresKernel(
        b, loc, qS, kt, scaleV ? scaleV : f32Const(b, loc, scale), tileQ,
        tileKV, dd, w);
    Value logits =
        castTo(b, loc, logitsOf(b, scores, /*scaled=*/true), {tileQ, tileKV});
    auto [probs, mNew, lNew, corr] = buildSoftmaxRows(
        b, loc, logits, castTo(b, loc, m, {tileQ}), castTo(b, loc, l, {tileQ}),
        tileQ, tileKV, w);
    Value accNew = buildPVKernel(
        b, loc, probs, castTo(b, loc, vTile, {tileKV, dd}),
        castTo(b, loc, acc, {tileQ, dd}), corr, tileQ, tileKV, dd, w);
    return {mNew, lNew, accNew};
  };

  SmallVector<Value> next;
  if (!kernels) {
    next = stepLinalg(b);
  } else {
    Value fullQ = ix.cmp(P::eq, qs, ix.c(tileQ));
    Value fullK = ix.cmp(P::eq, ks, ix.c(tileKV));
    Value full = ix.andI(fullQ, fullK);
    auto ifOp = scf::IfOp::create(
        b, loc, full,
        [&](OpBuilder &tb, Location) {
          SmallVector<Value> r = stepKernels(tb);
          Value like[] = {m, l, acc};
          for (size_t i = 0; i < r.size(); ++i)
            r[i] = castTo(tb, loc, r[i],
                          cast<RankedTensorType>(like[i].getType()).getShape());
          scf::YieldOp::create(tb, loc, r);
        },
        [&](OpBuilder &eb, Location) {
          scf::YieldOp::create(eb, loc, stepLinalg(eb));
        });
    next.assign(ifOp.getResults().begin(), ifOp.getResults().end());
  }
  scf::YieldOp::create(b, loc, next);


  // O = acc / l (zero for rows with no allowed key), into the output.
  b.setInsertionPointAfter(kLoop);
  // The output's own tile, so that the normalization writes in place.
  Value oInit = slice2D(b, loc, forall.getRegionIterArgs()[0], lead, q0, qs,
                        b.getIndexAttr(0), d);
  Value oTile =
      linalg::GenericOp::create(
          b, loc, oInit.getType(),
          ValueRange{kLoop.getResult(2), kLoop.getResult(1)},
          ValueRange{oInit},
          ArrayRef<AffineMap>{dimsMap(ctx, 2, {0, 1}), dimsMap(ctx, 2, {0}),
                              dimsMap(ctx, 2, {0, 1})},
          ArrayRef<IteratorType>{kPar, kPar},
          [&](OpBuilder &nb, Location nl, ValueRange a) {
            Value zero = f32Const(nb, nl, 0.0f);
            Value empty = arith::CmpFOp::create(
                nb, nl, arith::CmpFPredicate::OEQ, a[1], zero);
            Value x = arith::SelectOp::create(
                nb, nl, empty, zero, arith::DivFOp::create(nb, nl, a[0], a[1]));
            if (!elemTy.isF32())
              x = arith::TruncFOp::create(nb, nl, elemTy, x);
            linalg::YieldOp::create(nb, nl, x);
          })
          .getResult(0);
  SmallVector<OpFoldResult> offs = {bi, hi, q0, b.getIndexAttr(0)};
  SmallVector<OpFoldResult> sizes = {b.getIndexAttr(1), b.getIndexAttr(1), qs,
                                     d};
  SmallVector<OpFoldResult> strides(4, b.getIndexAttr(1));
  b.setInsertionPointToStart(forall.getTerminator().getBody());
  tensor::ParallelInsertSliceOp::create(b, loc, oTile,
                                        forall.getRegionIterArgs()[0], offs,
                                        sizes, strides);
  rewriter.replaceOp(op, forall.getResult(0));
  return success();
}

struct TileAttentionPass final
    : masformer::impl::TileAttentionBase<TileAttentionPass> {
  using TileAttentionBase::TileAttentionBase;

  void runOnOperation() override {
    if (tileQ <= 0 || tileKV <= 0) {
      emitError(getOperation()->getLoc())
          << "--masformer-tile-attention: tile-q and tile-kv must be "
             "positive";
      return signalPassFailure();
    }
    if (vectorWidth < 0 || (vectorWidth & (vectorWidth - 1))) {
      emitError(getOperation()->getLoc())
          << "--masformer-tile-attention: vector-width must be 0 or a power "
             "of two, got "
          << static_cast<int64_t>(vectorWidth);
      return signalPassFailure();
    }
    RewritePatternSet patterns(&getContext());
    TileAttentionPatternOptions options;
    options.tileQ = tileQ;
    options.tileKV = tileKV;
    options.vectorWidth = vectorWidth;
    populateTileAttentionPatterns(patterns, options);
    walkAndApplyPatterns(getOperation(), std::move(patterns));
  }
};

} // namespace

void mlir::masformer::populateTileAttentionPatterns(
    RewritePatternSet &patterns, const TileAttentionPatternOptions &options) {
  patterns.add<TileAttentionPattern>(
      patterns.getContext(), options.tileQ, options.tileKV,
      options.printTileCountsForTesting, options.vectorWidth);
}
