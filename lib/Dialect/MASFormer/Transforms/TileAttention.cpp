//===- TileAttention.cpp - Span-aware tiled attention -------------*- C++ -*-===//
//
// masformer.attention as loops over (batch, head, query tile) and, inside, a
// loop over exactly the key tiles that meet the span and the causal
// triangle, with an online softmax. The key-tile bounds are computed from
// the span: tiles outside it are never visited, and tiles entirely inside
// it run without a position mask.
//
//===----------------------------------------------------------------------===//

#include "AttentionLowering.h"
#include "masformer/Dialect/MASFormer/IR/MASFormerOps.h"
#include "masformer/Dialect/MASFormer/Transforms/Passes.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

#include <limits>

namespace mlir::masformer {
#define GEN_PASS_DEF_TILEATTENTION
#include "masformer/Dialect/MASFormer/Transforms/Passes.h.inc"
} // namespace mlir::masformer

using namespace mlir;
using namespace mlir::masformer;

namespace {

using utils::IteratorType;
constexpr IteratorType kPar = IteratorType::parallel;
constexpr IteratorType kRed = IteratorType::reduction;

/// Index arithmetic with short names.
struct Idx {
  OpBuilder &b;
  Location loc;
  Value c(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubIOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulIOp::create(b, loc, x, y); }
  Value min(Value x, Value y) { return arith::MinSIOp::create(b, loc, x, y); }
  Value max(Value x, Value y) { return arith::MaxSIOp::create(b, loc, x, y); }
  Value fdiv(Value x, Value y) {
    return arith::FloorDivSIOp::create(b, loc, x, y);
  }
  Value cdiv(Value x, Value y) {
    return arith::CeilDivSIOp::create(b, loc, x, y);
  }
  Value cmp(arith::CmpIPredicate p, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, p, x, y);
  }
  Value andI(Value x, Value y) { return arith::AndIOp::create(b, loc, x, y); }
};

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

struct TileAttentionPattern final : OpRewritePattern<AttentionOp> {
  TileAttentionPattern(MLIRContext *ctx, int64_t tq, int64_t tk,
                       bool printCounts)
      : OpRewritePattern(ctx), tileQ(tq), tileKV(tk),
        printCounts(printCounts) {}

  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override;

  int64_t tileQ, tileKV;
  bool printCounts;
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
  Value scaleV;
  float scale = 0.0f;
  if (op.getScale()) {
    scale = op.getScale()->convertToFloat();
  } else if (auto ds = stat(d)) {
    scale = 1.0f / std::sqrt(static_cast<float>(*ds));
  } else {
    // 1/sqrt(head_dim) at run time.
    Value di = arith::IndexCastOp::create(b, loc, b.getI64Type(), val(d));
    Value df = arith::SIToFPOp::create(b, loc, b.getF32Type(), di);
    scaleV = arith::DivFOp::create(b, loc, f32Const(b, loc, 1.0f),
                                   math::SqrtOp::create(b, loc, df));
  }
  float negInf = -std::numeric_limits<float>::infinity();

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
  Value lo = ix.c(0), hiK = val(skvF);
  if (causal)
    hiK = ix.min(hiK, ix.add(qPosLast, ix.c(1)));
  if (span.getKind() == SpanKind::Block) {
    Value bs = ix.c(span.getSize());
    lo = ix.max(lo, ix.mul(ix.fdiv(qPos0, bs), bs));
    hiK = ix.min(hiK, ix.mul(ix.add(ix.fdiv(qPosLast, bs), ix.c(1)), bs));
  } else if (span.getKind() == SpanKind::Window) {
    Value w = ix.c(span.getSize());
    lo = ix.max(lo, ix.add(ix.sub(qPos0, w), ix.c(1)));
    if (!causal)
      hiK = ix.min(hiK, ix.add(qPosLast, w));
  }
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

  // S = Q K^T in f32, loops (i, j, e): dot products along contiguous rows
  // (a transposed K tile with j innermost measured slower).
  Value s0 = filledF32(b, loc, {qs, ks}, 0.0f);
  Value scores =
      linalg::GenericOp::create(
          b, loc, s0.getType(), ValueRange{qTile, kTile}, ValueRange{s0},
          ArrayRef<AffineMap>{dimsMap(ctx, 3, {0, 2}), dimsMap(ctx, 3, {1, 2}),
                              dimsMap(ctx, 3, {0, 1})},
          ArrayRef<IteratorType>{kPar, kPar, kRed},
          [&](OpBuilder &nb, Location nl, ValueRange a) {
            Value x = toF32(nb, nl, a[0]);
            Value y = toF32(nb, nl, a[1]);
            linalg::YieldOp::create(nb, nl, fma(nb, nl, x, y, a[2]));
          })
          .getResult(0);

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
  Value interior;
  auto andWith = [&](Value c) { interior = interior ? ix.andI(interior, c) : c; };
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

  // logits = scale * S (+ mask), -inf outside the span on boundary tiles.
  auto buildLogits = [&](OpBuilder &bb, bool masked) {
    SmallVector<Value> ins = {scores};
    SmallVector<AffineMap> maps = {dimsMap(ctx, 2, {0, 1})};
    if (maskTile) {
      ins.push_back(maskTile);
      maps.push_back(maskMap);
    }
    maps.push_back(dimsMap(ctx, 2, {0, 1}));
    Value init = tensor::EmptyOp::create(
        bb, loc, ArrayRef<OpFoldResult>{qs, ks}, bb.getF32Type());
    return linalg::GenericOp::create(
               bb, loc, init.getType(), ins, ValueRange{init}, maps,
               ArrayRef<IteratorType>{kPar, kPar},
               [&](OpBuilder &nb, Location nl, ValueRange a) {
                 Value x = arith::MulFOp::create(
                     nb, nl, a[0], scaleV ? scaleV : f32Const(nb, nl, scale));
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
  Value logits;
  if (!interior) {
    logits = buildLogits(b, /*masked=*/false);
  } else {
    auto ifOp = scf::IfOp::create(
        b, loc, interior,
        [&](OpBuilder &tb, Location) {
          scf::YieldOp::create(tb, loc, buildLogits(tb, false));
        },
        [&](OpBuilder &eb, Location) {
          scf::YieldOp::create(eb, loc, buildLogits(eb, true));
        });
    logits = ifOp.getResult(0);
  }

  // Online softmax: m' = max(m, rowmax), corr = exp(m - m'),
  // l' = l * corr + rowsum(exp(logits - m')), acc' = acc * corr + P V.
  auto safe = [&](OpBuilder &nb, Location nl, Value x) {
    Value isInf = arith::CmpFOp::create(nb, nl, arith::CmpFPredicate::OEQ, x,
                                        f32Const(nb, nl, negInf));
    return arith::SelectOp::create(nb, nl, isInf, f32Const(nb, nl, 0.0f), x)
        .getResult();
  };
  Value mNew =
      linalg::GenericOp::create(
          b, loc, m.getType(), ValueRange{logits}, ValueRange{m},
          ArrayRef<AffineMap>{dimsMap(ctx, 2, {0, 1}), dimsMap(ctx, 2, {0})},
          ArrayRef<IteratorType>{kPar, kRed},
          [&](OpBuilder &nb, Location nl, ValueRange a) {
            linalg::YieldOp::create(
                nb, nl, arith::MaximumFOp::create(nb, nl, a[0], a[1])
                            .getResult());
          })
          .getResult(0);
  Value pInit = tensor::EmptyOp::create(b, loc, ArrayRef<OpFoldResult>{qs, ks},
                                        b.getF32Type());
  Value probs =
      linalg::GenericOp::create(
          b, loc, pInit.getType(), ValueRange{logits, mNew}, ValueRange{pInit},
          ArrayRef<AffineMap>{dimsMap(ctx, 2, {0, 1}), dimsMap(ctx, 2, {0}),
                              dimsMap(ctx, 2, {0, 1})},
          ArrayRef<IteratorType>{kPar, kPar},
          [&](OpBuilder &nb, Location nl, ValueRange a) {
            Value e = math::ExpOp::create(
                nb, nl, arith::SubFOp::create(nb, nl, a[0], safe(nb, nl, a[1])));
            linalg::YieldOp::create(nb, nl, e);
          })
          .getResult(0);
  Value corrInit = tensor::EmptyOp::create(b, loc, ArrayRef<OpFoldResult>{qs},
                                           b.getF32Type());
  Value corr =
      linalg::GenericOp::create(
          b, loc, corrInit.getType(), ValueRange{m, mNew}, ValueRange{corrInit},
          ArrayRef<AffineMap>{dimsMap(ctx, 1, {0}), dimsMap(ctx, 1, {0}),
                              dimsMap(ctx, 1, {0})},
          ArrayRef<IteratorType>{kPar},
          [&](OpBuilder &nb, Location nl, ValueRange a) {
            Value e = math::ExpOp::create(
                nb, nl, arith::SubFOp::create(nb, nl, a[0], safe(nb, nl, a[1])));
            linalg::YieldOp::create(nb, nl, e);
          })
          .getResult(0);
  // l * corr, then + rowsum(P).
  Value lScaled =
      linalg::GenericOp::create(
          b, loc, l.getType(), ValueRange{l, corr}, ValueRange{l},
          ArrayRef<AffineMap>{dimsMap(ctx, 1, {0}), dimsMap(ctx, 1, {0}),
                              dimsMap(ctx, 1, {0})},
          ArrayRef<IteratorType>{kPar},
          [&](OpBuilder &nb, Location nl, ValueRange a) {
            linalg::YieldOp::create(
                nb, nl, arith::MulFOp::create(nb, nl, a[0], a[1]).getResult());
          })
          .getResult(0);
  Value lNew =
      linalg::GenericOp::create(
          b, loc, l.getType(), ValueRange{probs}, ValueRange{lScaled},
          ArrayRef<AffineMap>{dimsMap(ctx, 2, {0, 1}), dimsMap(ctx, 2, {0})},
          ArrayRef<IteratorType>{kPar, kRed},
          [&](OpBuilder &nb, Location nl, ValueRange a) {
            linalg::YieldOp::create(
                nb, nl, arith::AddFOp::create(nb, nl, a[0], a[1]).getResult());
          })
          .getResult(0);
  Value accScaled =
      linalg::GenericOp::create(
          b, loc, acc.getType(), ValueRange{acc, corr}, ValueRange{acc},
          ArrayRef<AffineMap>{dimsMap(ctx, 2, {0, 1}), dimsMap(ctx, 2, {0}),
                              dimsMap(ctx, 2, {0, 1})},
          ArrayRef<IteratorType>{kPar, kPar},
          [&](OpBuilder &nb, Location nl, ValueRange a) {
            linalg::YieldOp::create(
                nb, nl, arith::MulFOp::create(nb, nl, a[0], a[1]).getResult());
          })
          .getResult(0);
  // acc += P V, loops (i, j, e): the innermost loop runs along V's and
  // acc's contiguous rows.
  Value accNew =
      linalg::GenericOp::create(
          b, loc, acc.getType(), ValueRange{probs, vTile},
          ValueRange{accScaled},
          ArrayRef<AffineMap>{dimsMap(ctx, 3, {0, 1}), dimsMap(ctx, 3, {1, 2}),
                              dimsMap(ctx, 3, {0, 2})},
          ArrayRef<IteratorType>{kPar, kRed, kPar},
          [&](OpBuilder &nb, Location nl, ValueRange a) {
            linalg::YieldOp::create(
                nb, nl, fma(nb, nl, a[0], toF32(nb, nl, a[1]), a[2]));
          })
          .getResult(0);
  scf::YieldOp::create(b, loc, ValueRange{mNew, lNew, accNew});

  // O = acc / l (zero for rows with no allowed key), into the output.
  b.setInsertionPointAfter(kLoop);
  Value oInit = tensor::EmptyOp::create(
      b, loc, ArrayRef<OpFoldResult>{qs, d}, elemTy);
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

  /// The runner-utils functions the instrumentation calls.
  LogicalResult declarePrinters() {
    Operation *root = getOperation();
    auto module = dyn_cast<ModuleOp>(root);
    if (!module)
      module = root->getParentOfType<ModuleOp>();
    if (!module)
      return emitError(root->getLoc())
             << "print-tile-counts needs to run inside a module";
    OpBuilder b(module.getBodyRegion());
    MLIRContext *ctx = &getContext();
    auto declare = [&](StringRef name, TypeRange args) {
      if (module.lookupSymbol(name))
        return;
      auto f = func::FuncOp::create(b, module.getLoc(), name,
                                    FunctionType::get(ctx, args, {}));
      f.setPrivate();
    };
    declare("printI64", {b.getI64Type()});
    declare("printNewline", {});
    return success();
  }

  void runOnOperation() override {
    if (tileQ <= 0 || tileKV <= 0) {
      emitError(getOperation()->getLoc())
          << "--masformer-tile-attention: tile-q and tile-kv must be "
             "positive";
      return signalPassFailure();
    }
    if (printTileCounts && failed(declarePrinters()))
      return signalPassFailure();
    RewritePatternSet patterns(&getContext());
    patterns.add<TileAttentionPattern>(&getContext(), tileQ, tileKV,
                                       printTileCounts);
    walkAndApplyPatterns(getOperation(), std::move(patterns));
  }
};

} // namespace
