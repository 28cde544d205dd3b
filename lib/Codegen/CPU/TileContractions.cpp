//===- TileContractions.cpp - Tiled, vectorized matrix products -*- C++ -*-===//
//
// The model's matrix products (the linalg.generic contractions that the
// importer makes of MatMul, Gemm and Einsum) as a parallel loop over
// (batch..., row tile, column tile) whose full tiles run the register-blocked
// micro-kernel of the tiled attention; partial tiles at the edges run a
// linalg.matmul on the slices.
//
//===----------------------------------------------------------------------===//

#include "masformer/Utils/IRBuilders.h"
#include "masformer/Utils/Contractions.h"
#include "MicroKernels.h"
#include "masformer/Codegen/CPU/Passes.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace mlir::masformer {
#define GEN_PASS_DEF_TILECONTRACTIONS
#include "masformer/Codegen/CPU/Passes.h.inc"
} // namespace mlir::masformer

using namespace mlir;
using namespace mlir::masformer;

namespace {

/// The longest run of k a micro-kernel call accumulates over: the A and B
/// panels of a 64 x 64 tile, 2 x 64 x 512 f32, stay in L2.
constexpr int64_t kChunk = 512;

struct TileContractionPattern final : OpRewritePattern<linalg::GenericOp> {
  TileContractionPattern(MLIRContext *ctx, int64_t tileM, int64_t tileN,
                         int64_t width)
      : OpRewritePattern(ctx), tileM(tileM), tileN(tileN), width(width) {}

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override;

  int64_t tileM, tileN, width;
};

LogicalResult
TileContractionPattern::matchAndRewrite(linalg::GenericOp op,
                                        PatternRewriter &rewriter) const {
  FailureOr<MatmulDims> dims = matchMatmul(op);
  if (failed(dims))
    return rewriter.notifyMatchFailure(op, "not a matrix product");
  Location loc = op.getLoc();
  OpBuilder &b = rewriter;
  Idx ix{b, loc};
  Value a = op.getDpsInputs()[0], bm = op.getDpsInputs()[1];
  Value c = op.getDpsInits()[0];
  auto cTy = cast<RankedTensorType>(c.getType());
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  int64_t rank = cTy.getRank();
  int64_t kLen = op.getStaticLoopRanges()[dims->k];

  // The sizes of C's dimensions, and the loop dimension each one is.
  SmallVector<OpFoldResult> cSizes = tensor::getMixedSizes(b, loc, c);
  SmallVector<unsigned> cDims;
  for (AffineExpr e : maps[2].getResults())
    cDims.push_back(cast<AffineDimExpr>(e).getPosition());
  OpFoldResult mSize = cSizes[rank - 2], nSize = cSizes[rank - 1];
  auto val = [&](OpFoldResult f) {
    return getValueOrCreateConstantIndexOp(b, loc, f);
  };
  SmallVector<OpFoldResult> ubs(cSizes.begin(), cSizes.end() - 2);
  ubs.push_back(ix.cdiv(val(mSize), ix.c(tileM)));
  ubs.push_back(ix.cdiv(val(nSize), ix.c(tileN)));

  auto forall =
      scf::ForallOp::create(b, loc, ubs, ValueRange{c}, std::nullopt);
  b.setInsertionPoint(forall.getTerminator());
  Value out = forall.getRegionIterArgs()[0];
  // The position of every loop dimension in this iteration.
  DenseMap<unsigned, Value> batchIv;
  for (int64_t r = 0; r + 2 < rank; ++r)
    batchIv[cDims[r]] = forall.getInductionVar(r);
  Value m0 = ix.mul(forall.getInductionVar(rank - 2), ix.c(tileM));
  Value n0 = ix.mul(forall.getInductionVar(rank - 1), ix.c(tileN));
  Value ms = ix.min(ix.c(tileM), ix.sub(val(mSize), m0));
  Value ns = ix.min(ix.c(tileN), ix.sub(val(nSize), n0));

  // The rank-reduced 2-D slice of an operand for this tile.
  auto slice = [&](Value t, AffineMap map, int64_t rows, int64_t cols) {
    SmallVector<OpFoldResult> offs, sizes;
    SmallVector<int64_t> shape;
    for (AffineExpr e : map.getResults()) {
      unsigned dim = cast<AffineDimExpr>(e).getPosition();
      if (dim == dims->m) {
        offs.push_back(m0);
        sizes.push_back(ms);
      } else if (dim == dims->n) {
        offs.push_back(n0);
        sizes.push_back(ns);
      } else if (dim == dims->k) {
        offs.push_back(b.getIndexAttr(0));
        sizes.push_back(b.getIndexAttr(kLen));
      } else {
        offs.push_back(batchIv.lookup(dim));
        sizes.push_back(b.getIndexAttr(1));
      }
    }
    SmallVector<OpFoldResult> strides(offs.size(), b.getIndexAttr(1));
    auto ty = cast<RankedTensorType>(t.getType());
    auto resultTy = RankedTensorType::get({rows, cols}, ty.getElementType());
    return tensor::ExtractSliceOp::create(b, loc, resultTy, t, offs, sizes,
                                          strides)
        .getResult();
  };
  int64_t dyn = ShapedType::kDynamic;
  Value aTile = slice(a, maps[0], dyn, kLen);
  Value bTile = dims->transposedB ? slice(bm, maps[1], dyn, kLen)
                                  : slice(bm, maps[1], kLen, dyn);
  Value cTile = slice(out, maps[2], dyn, dyn);
  auto cTileTy = cast<RankedTensorType>(cTile.getType());

  Value full = ix.andI(ix.cmp(arith::CmpIPredicate::eq, ms, ix.c(tileM)),
                       ix.cmp(arith::CmpIPredicate::eq, ns, ix.c(tileN)));
  auto ifOp = scf::IfOp::create(
      b, loc, full,
      [&](OpBuilder &tb, Location) {
        auto staticTy = [&](Value v, int64_t r, int64_t cl) {
          auto ty = cast<RankedTensorType>(v.getType());
          return tensor::CastOp::create(
                     tb, loc, RankedTensorType::get({r, cl},
                                                    ty.getElementType()),
                     v)
              .getResult();
        };
        Value at = staticTy(aTile, tileM, kLen);
        Value ct = staticTy(cTile, tileM, tileN);
        Value bt;
        if (dims->transposedB) {
          // B's tile [n, k] packed as [k, n]: the kernel loads rows of n.
          Value bn = staticTy(bTile, tileN, kLen);
          auto bty = cast<RankedTensorType>(bn.getType());
          Value init = tensor::EmptyOp::create(tb, loc, {kLen, tileN},
                                               bty.getElementType());
          bt = linalg::TransposeOp::create(tb, loc, bn, init,
                                           ArrayRef<int64_t>{1, 0})
                   .getResult()[0];
        } else {
          bt = staticTy(bTile, kLen, tileN);
        }
        // k in chunks of at most kChunk, accumulating into the C tile, so
        // that the A and B panels of a chunk stay in L2.
        auto kernel = [&](OpBuilder &kb, Value c, int64_t k0, Value k0v,
                          int64_t len) {
          auto panel = [&](Value t, bool kFirst) {
            auto ty = cast<RankedTensorType>(t.getType());
            SmallVector<OpFoldResult> offs(2, kb.getIndexAttr(0));
            SmallVector<OpFoldResult> sizes = {
                kb.getIndexAttr(ty.getDimSize(0)),
                kb.getIndexAttr(ty.getDimSize(1))};
            OpFoldResult off = k0v ? OpFoldResult(k0v)
                                   : OpFoldResult(kb.getIndexAttr(k0));
            offs[kFirst ? 0 : 1] = off;
            sizes[kFirst ? 0 : 1] = kb.getIndexAttr(len);
            SmallVector<int64_t> shape = {ty.getDimSize(0), ty.getDimSize(1)};
            shape[kFirst ? 0 : 1] = len;
            SmallVector<OpFoldResult> strides(2, kb.getIndexAttr(1));
            return tensor::ExtractSliceOp::create(
                       kb, loc,
                       RankedTensorType::get(shape, ty.getElementType()), t,
                       offs, sizes, strides)
                .getResult();
          };
          return buildBlockedMatmul(
              kb, loc, panel(at, false), panel(bt, true), c, tileM, tileN,
              len, width,
              [&](OpBuilder &nb, Value o, Value row, Value col) {
                return readF32(nb, loc, o, row, col, width);
              },
              [](OpBuilder &, Value x) { return x; });
        };
        int64_t chunks = kLen / kChunk, rest = kLen % kChunk;
        Value r = ct;
        if (kLen <= kChunk) {
          r = kernel(tb, r, 0, Value(), kLen);
        } else {
          if (chunks > 0) {
            Idx tix{tb, loc};
            auto loop = scf::ForOp::create(tb, loc, tix.c(0),
                                           tix.c(chunks * kChunk),
                                           tix.c(kChunk), ValueRange{r});
            OpBuilder::InsertionGuard g(tb);
            tb.setInsertionPointToStart(loop.getBody());
            scf::YieldOp::create(
                tb, loc,
                kernel(tb, loop.getRegionIterArg(0), 0,
                       loop.getInductionVar(), kChunk));
            r = loop.getResult(0);
          }
          if (rest > 0)
            r = kernel(tb, r, chunks * kChunk, Value(), rest);
        }
        scf::YieldOp::create(
            tb, loc, tensor::CastOp::create(tb, loc, cTileTy, r).getResult());
      },
      [&](OpBuilder &eb, Location) {
        // A partial tile: the same product on the slices, as loops.
        MLIRContext *ctx = eb.getContext();
        AffineMap bMap = dims->transposedB ? dimsMap(ctx, 3, {1, 2})
                                           : dimsMap(ctx, 3, {2, 1});
        Value r = linalg::GenericOp::create(
                      eb, loc, cTileTy, ValueRange{aTile, bTile},
                      ValueRange{cTile},
                      ArrayRef<AffineMap>{dimsMap(ctx, 3, {0, 2}), bMap,
                                          dimsMap(ctx, 3, {0, 1})},
                      ArrayRef<utils::IteratorType>{kPar, kPar, kRed},
                      [&](OpBuilder &nb, Location nl, ValueRange args) {
                        Value x = toF32(nb, nl, args[0]);
                        Value y = toF32(nb, nl, args[1]);
                        Value p = arith::MulFOp::create(nb, nl, x, y);
                        linalg::YieldOp::create(
                            nb, nl,
                            arith::AddFOp::create(nb, nl, args[2], p)
                                .getResult());
                      })
                      .getResult(0);
        scf::YieldOp::create(eb, loc, r);
      });

  // Insert the tile back into C.
  SmallVector<OpFoldResult> offs, sizes;
  for (int64_t r = 0; r < rank; ++r) {
    if (r == rank - 2) {
      offs.push_back(m0);
      sizes.push_back(ms);
    } else if (r == rank - 1) {
      offs.push_back(n0);
      sizes.push_back(ns);
    } else {
      offs.push_back(forall.getInductionVar(r));
      sizes.push_back(b.getIndexAttr(1));
    }
  }
  SmallVector<OpFoldResult> strides(rank, b.getIndexAttr(1));
  b.setInsertionPointToStart(forall.getTerminator().getBody());
  tensor::ParallelInsertSliceOp::create(b, loc, ifOp.getResult(0), out, offs,
                                        sizes, strides);
  rewriter.replaceOp(op, forall.getResult(0));
  return success();
}

struct TileContractionsPass final
    : masformer::impl::TileContractionsBase<TileContractionsPass> {
  using TileContractionsBase::TileContractionsBase;

  void runOnOperation() override {
    int64_t w = vectorWidth;
    if (w <= 0 || (w & (w - 1))) {
      emitError(getOperation()->getLoc())
          << "--masformer-tile-contractions: vector-width must be a power "
             "of two, got "
          << w;
      return signalPassFailure();
    }
    int64_t step = std::min<int64_t>(kVecs, std::max<int64_t>(1, tileN / w)) *
                   w;
    if (tileM <= 0 || tileM % kRows || tileN <= 0 || tileN % step) {
      emitError(getOperation()->getLoc())
          << "--masformer-tile-contractions: tile-m must be a positive "
             "multiple of "
          << kRows << " and tile-n of " << step << ", got "
          << static_cast<int64_t>(tileM) << " x "
          << static_cast<int64_t>(tileN);
      return signalPassFailure();
    }
    RewritePatternSet patterns(&getContext());
    patterns.add<TileContractionPattern>(&getContext(), tileM, tileN, w);
    walkAndApplyPatterns(getOperation(), std::move(patterns));
  }
};

} // namespace
