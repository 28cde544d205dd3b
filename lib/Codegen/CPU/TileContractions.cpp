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

/// `v`, a 2-D tensor, cast to the static shape [rows, cols].
Value castTo2D(OpBuilder &b, Location loc, Value v, int64_t rows,
               int64_t cols) {
  auto ty = cast<RankedTensorType>(v.getType());
  return tensor::CastOp::create(
             b, loc, RankedTensorType::get({rows, cols}, ty.getElementType()),
             v)
      .getResult();
}

/// The columns k0 .. k0+len of `t` (the rows with `kFirst`), a static 2-D
/// tile; `k0v` is k0 when it is only known at run time.
Value kPanel(OpBuilder &b, Location loc, Value t, bool kFirst, int64_t k0,
             Value k0v, int64_t len) {
  auto ty = cast<RankedTensorType>(t.getType());
  SmallVector<OpFoldResult> offs(2, b.getIndexAttr(0));
  SmallVector<OpFoldResult> sizes = {b.getIndexAttr(ty.getDimSize(0)),
                                     b.getIndexAttr(ty.getDimSize(1))};
  OpFoldResult off = k0v ? OpFoldResult(k0v) : OpFoldResult(b.getIndexAttr(k0));
  offs[kFirst ? 0 : 1] = off;
  sizes[kFirst ? 0 : 1] = b.getIndexAttr(len);
  SmallVector<int64_t> shape = {ty.getDimSize(0), ty.getDimSize(1)};
  shape[kFirst ? 0 : 1] = len;
  SmallVector<OpFoldResult> strides(2, b.getIndexAttr(1));
  return tensor::ExtractSliceOp::create(
             b, loc, RankedTensorType::get(shape, ty.getElementType()), t, offs,
             sizes, strides)
      .getResult();
}

/// One matrix product rewritten as a parallel loop over (batch..., row
/// tile, column tile): the state its steps share.
struct ContractionTiler {
  ContractionTiler(OpBuilder &b, linalg::GenericOp op, MatmulDims dims,
                   int64_t tileM, int64_t tileN, int64_t width)
      : b(b), loc(op.getLoc()), ix{b, loc}, dims(dims), tileM(tileM),
        tileN(tileN), width(width), maps(op.getIndexingMapsArray()),
        rank(cast<RankedTensorType>(op.getDpsInits()[0].getType()).getRank()),
        kLen(op.getStaticLoopRanges()[dims.k]) {}

  /// Builds the tiled product of `op`; returns its result.
  Value build(linalg::GenericOp op);

  OpBuilder &b;
  Location loc;
  Idx ix;
  MatmulDims dims;
  int64_t tileM, tileN, width;
  SmallVector<AffineMap> maps;
  int64_t rank, kLen;

  // The tile loop and C as it carries it; then the tile of an iteration:
  // the induction variable of each batch loop dimension, the first row and
  // column, the row and column counts (short at the edges), and the
  // operands' slices.
  scf::ForallOp forall;
  Value out;
  DenseMap<unsigned, Value> batchIv;
  Value m0, n0, ms, ns;
  Value aTile, bTile, cTile;
  RankedTensorType cTileTy;

  /// The forall over C's tiles, accumulating into `c`; leaves the builder
  /// in its body and sets the tile's position and size.
  void buildTileLoop(Value c);
  /// The rank-reduced 2-D slice of operand `t` (indexed by `map`) for this
  /// tile.
  Value slice(Value t, AffineMap map, int64_t rows, int64_t cols);
  /// Sets the A, B and C slices of this tile.
  void sliceOperands(Value a, Value bm);
  /// A full tile on the register-blocked micro-kernel; returns C's tile.
  Value buildFullTile(OpBuilder &tb);
  /// B's tile as [k, n], the layout the micro-kernel loads rows of n from.
  Value packB(OpBuilder &tb);
  /// The micro-kernel on k0 .. k0+len of the static tiles `at` ([rows, k])
  /// and `bt`, accumulating into `c` ([rows, tileN]).
  Value buildKernelChunk(OpBuilder &kb, Value at, Value bt, Value c, int64_t k0,
                         Value k0v, int64_t len, int64_t rows);
  /// at [rows, k] x bt [k, tileN] accumulated into ct [rows, tileN] on the
  /// micro-kernel, k in chunks of kChunk.
  Value buildKernel(OpBuilder &tb, Value at, Value bt, Value ct, int64_t rows);
  /// A tile of whole columns but fewer rows (decoding's few rows per
  /// product): the rows in groups of kRows, each zero-padded to a full
  /// group, on the micro-kernel.
  Value buildShortTile(OpBuilder &tb);
  /// The padded row group `at` [kRows, k] times B's tile as stored
  /// transposed ([tileN, k], rows contiguous: the tied embedding of a
  /// language model's head) into `cg` [kRows, tileN]: per column, dot
  /// products of contiguous vectors, B read once and never packed.
  Value buildRowDots(OpBuilder &tb, Value at, Value cg);
  /// A partial tile: the same product on the slices, as loops.
  Value buildPartialTile(OpBuilder &eb);
  /// Inserts this iteration's result `tile` into C.
  void insertTile(Value tile);
};

void ContractionTiler::buildTileLoop(Value c) {
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

  forall = scf::ForallOp::create(b, loc, ubs, ValueRange{c}, std::nullopt);
  b.setInsertionPoint(forall.getTerminator());
  out = forall.getRegionIterArgs()[0];
  // The position of every loop dimension in this iteration.
  for (int64_t r = 0; r + 2 < rank; ++r)
    batchIv[cDims[r]] = forall.getInductionVar(r);
  m0 = ix.mul(forall.getInductionVar(rank - 2), ix.c(tileM));
  n0 = ix.mul(forall.getInductionVar(rank - 1), ix.c(tileN));
  ms = ix.min(ix.c(tileM), ix.sub(val(mSize), m0));
  ns = ix.min(ix.c(tileN), ix.sub(val(nSize), n0));
}

Value ContractionTiler::slice(Value t, AffineMap map, int64_t rows,
                              int64_t cols) {
  SmallVector<OpFoldResult> offs, sizes;
  for (AffineExpr e : map.getResults()) {
    unsigned dim = cast<AffineDimExpr>(e).getPosition();
    if (dim == dims.m) {
      offs.push_back(m0);
      sizes.push_back(ms);
    } else if (dim == dims.n) {
      offs.push_back(n0);
      sizes.push_back(ns);
    } else if (dim == dims.k) {
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
}

Value ContractionTiler::packB(OpBuilder &tb) {
  if (!dims.transposedB)
    return castTo2D(tb, loc, bTile, kLen, tileN);
  // B's tile [n, k] packed as [k, n].
  Value bn = castTo2D(tb, loc, bTile, tileN, kLen);
  auto bty = cast<RankedTensorType>(bn.getType());
  Value init =
      tensor::EmptyOp::create(tb, loc, {kLen, tileN}, bty.getElementType());
  return linalg::TransposeOp::create(tb, loc, bn, init, ArrayRef<int64_t>{1, 0})
      .getResult()[0];
}

Value ContractionTiler::buildKernelChunk(OpBuilder &kb, Value at, Value bt,
                                         Value c, int64_t k0, Value k0v,
                                         int64_t len, int64_t rows) {
  return buildBlockedMatmul(
      kb, loc, kPanel(kb, loc, at, false, k0, k0v, len),
      kPanel(kb, loc, bt, true, k0, k0v, len), c, rows, tileN, len, width,
      [&](OpBuilder &nb, Value o, Value row, Value col) {
        return readF32(nb, loc, o, row, col, width);
      },
      [](OpBuilder &, Value x) { return x; });
}

Value ContractionTiler::buildFullTile(OpBuilder &tb) {
  Value at = castTo2D(tb, loc, aTile, tileM, kLen);
  Value ct = castTo2D(tb, loc, cTile, tileM, tileN);
  Value r = buildKernel(tb, at, packB(tb), ct, tileM);
  return tensor::CastOp::create(tb, loc, cTileTy, r).getResult();
}

Value ContractionTiler::buildRowDots(OpBuilder &tb, Value at, Value cg) {
  Idx ix0{tb, loc};
  Value bn = castTo2D(tb, loc, bTile, tileN, kLen);
  auto vt = VectorType::get({width}, tb.getF32Type());
  Value zero = arith::ConstantOp::create(tb, loc, tb.getZeroAttr(vt));
  auto cols = scf::ForOp::create(tb, loc, ix0.c(0), ix0.c(tileN), ix0.c(1),
                                 ValueRange{cg});
  OpBuilder::InsertionGuard g(tb);
  tb.setInsertionPointToStart(cols.getBody());
  Idx ix{tb, loc};
  Value n = cols.getInductionVar();
  auto red = scf::ForOp::create(tb, loc, ix.c(0), ix.c(kLen - kLen % width),
                                ix.c(width), SmallVector<Value>(kRows, zero));
  {
    OpBuilder::InsertionGuard rg(tb);
    tb.setInsertionPointToStart(red.getBody());
    Value k = red.getInductionVar();
    Value bv = readF32(tb, loc, bn, n, k, width);
    SmallVector<Value> next;
    for (int64_t r = 0; r < kRows; ++r)
      next.push_back(vector::FMAOp::create(
          tb, loc, readF32(tb, loc, at, ix.c(r), k, width), bv,
          red.getRegionIterArgs()[r]));
    scf::YieldOp::create(tb, loc, next);
  }
  Value c = cols.getRegionIterArgs()[0];
  Type ct = cTileTy.getElementType();
  for (int64_t r = 0; r < kRows; ++r) {
    Value sum = vector::ReductionOp::create(tb, loc, vector::CombiningKind::ADD,
                                            red.getResult(r));
    // The k left over past the last whole vector.
    for (int64_t k = kLen - kLen % width; k < kLen; ++k) {
      Value x = toF32(
          tb, loc,
          tensor::ExtractOp::create(tb, loc, at, ValueRange{ix.c(r), ix.c(k)}));
      Value y =
          toF32(tb, loc,
                tensor::ExtractOp::create(tb, loc, bn, ValueRange{n, ix.c(k)}));
      sum = arith::AddFOp::create(tb, loc, sum,
                                  arith::MulFOp::create(tb, loc, x, y));
    }
    Value old = toF32(
        tb, loc, tensor::ExtractOp::create(tb, loc, c, ValueRange{ix.c(r), n}));
    Value v = arith::AddFOp::create(tb, loc, old, sum);
    if (!ct.isF32())
      v = arith::TruncFOp::create(tb, loc, ct, v);
    c = tensor::InsertOp::create(tb, loc, v, c, ValueRange{ix.c(r), n});
  }
  scf::YieldOp::create(tb, loc, c);
  return cols.getResult(0);
}

Value ContractionTiler::buildShortTile(OpBuilder &tb) {
  Idx tix{tb, loc};
  Value bt = dims.transposedB ? Value() : packB(tb);
  Type et = cast<RankedTensorType>(aTile.getType()).getElementType();
  Type ct = cTileTy.getElementType();
  auto zeros = [&](OpBuilder &zb, int64_t cols, Type t) {
    Value e = tensor::EmptyOp::create(zb, loc, {kRows, cols}, t);
    Value z = arith::ConstantOp::create(zb, loc, zb.getZeroAttr(t));
    return linalg::FillOp::create(zb, loc, z, e).getResult(0);
  };
  auto loop = scf::ForOp::create(tb, loc, tix.c(0), ms, tix.c(kRows),
                                 ValueRange{cTile});
  OpBuilder::InsertionGuard g(tb);
  tb.setInsertionPointToStart(loop.getBody());
  Idx lix{tb, loc};
  Value r0 = loop.getInductionVar(), acc = loop.getRegionIterArg(0);
  Value rows = lix.min(lix.c(kRows), lix.sub(ms, r0));
  auto rowsOf = [&](Value t, int64_t cols) {
    return tensor::ExtractSliceOp::create(
               tb, loc, t, ArrayRef<OpFoldResult>{r0, tb.getIndexAttr(0)},
               ArrayRef<OpFoldResult>{rows, tb.getIndexAttr(cols)},
               ArrayRef<OpFoldResult>{tb.getIndexAttr(1), tb.getIndexAttr(1)})
        .getResult();
  };
  auto intoGroup = [&](Value part, Value group, int64_t cols) {
    return tensor::InsertSliceOp::create(
               tb, loc, part, group,
               ArrayRef<OpFoldResult>{tb.getIndexAttr(0), tb.getIndexAttr(0)},
               ArrayRef<OpFoldResult>{rows, tb.getIndexAttr(cols)},
               ArrayRef<OpFoldResult>{tb.getIndexAttr(1), tb.getIndexAttr(1)})
        .getResult();
  };
  Value at = intoGroup(rowsOf(aTile, kLen), zeros(tb, kLen, et), kLen);
  Value cg = intoGroup(rowsOf(acc, tileN), zeros(tb, tileN, ct), tileN);
  Value res = dims.transposedB ? buildRowDots(tb, at, cg)
                               : buildKernel(tb, at, bt, cg, kRows);
  Value back =
      tensor::ExtractSliceOp::create(
          tb, loc, res,
          ArrayRef<OpFoldResult>{tb.getIndexAttr(0), tb.getIndexAttr(0)},
          ArrayRef<OpFoldResult>{rows, tb.getIndexAttr(tileN)},
          ArrayRef<OpFoldResult>{tb.getIndexAttr(1), tb.getIndexAttr(1)})
          .getResult();
  Value next =
      tensor::InsertSliceOp::create(
          tb, loc, back, acc, ArrayRef<OpFoldResult>{r0, tb.getIndexAttr(0)},
          ArrayRef<OpFoldResult>{rows, tb.getIndexAttr(tileN)},
          ArrayRef<OpFoldResult>{tb.getIndexAttr(1), tb.getIndexAttr(1)})
          .getResult();
  scf::YieldOp::create(tb, loc, next);
  return loop.getResult(0);
}

Value ContractionTiler::buildKernel(OpBuilder &tb, Value at, Value bt, Value ct,
                                    int64_t rows) {
  // k in chunks of at most kChunk, accumulating into the C tile, so that
  // the A and B panels of a chunk stay in L2.
  int64_t chunks = kLen / kChunk, rest = kLen % kChunk;
  Value r = ct;
  if (kLen <= kChunk) {
    r = buildKernelChunk(tb, at, bt, r, 0, Value(), kLen, rows);
  } else {
    if (chunks > 0) {
      Idx tix{tb, loc};
      auto loop = scf::ForOp::create(tb, loc, tix.c(0), tix.c(chunks * kChunk),
                                     tix.c(kChunk), ValueRange{r});
      OpBuilder::InsertionGuard g(tb);
      tb.setInsertionPointToStart(loop.getBody());
      scf::YieldOp::create(
          tb, loc,
          buildKernelChunk(tb, at, bt, loop.getRegionIterArg(0), 0,
                           loop.getInductionVar(), kChunk, rows));
      r = loop.getResult(0);
    }
    if (rest > 0)
      r = buildKernelChunk(tb, at, bt, r, chunks * kChunk, Value(), rest, rows);
  }
  return r;
}

Value ContractionTiler::buildPartialTile(OpBuilder &eb) {
  MLIRContext *ctx = eb.getContext();
  AffineMap bMap =
      dims.transposedB ? dimsMap(ctx, 3, {1, 2}) : dimsMap(ctx, 3, {2, 1});
  return linalg::GenericOp::create(
             eb, loc, cTileTy, ValueRange{aTile, bTile}, ValueRange{cTile},
             ArrayRef<AffineMap>{dimsMap(ctx, 3, {0, 2}), bMap,
                                 dimsMap(ctx, 3, {0, 1})},
             ArrayRef<utils::IteratorType>{kPar, kPar, kRed},
             [&](OpBuilder &nb, Location nl, ValueRange args) {
               Value x = toF32(nb, nl, args[0]);
               Value y = toF32(nb, nl, args[1]);
               Value p = arith::MulFOp::create(nb, nl, x, y);
               linalg::YieldOp::create(
                   nb, nl,
                   arith::AddFOp::create(nb, nl, args[2], p).getResult());
             })
      .getResult(0);
}

void ContractionTiler::insertTile(Value tile) {
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
  tensor::ParallelInsertSliceOp::create(b, loc, tile, out, offs, sizes,
                                        strides);
}

void ContractionTiler::sliceOperands(Value a, Value bm) {
  int64_t dyn = ShapedType::kDynamic;
  aTile = slice(a, maps[0], dyn, kLen);
  bTile = dims.transposedB ? slice(bm, maps[1], dyn, kLen)
                           : slice(bm, maps[1], kLen, dyn);
  cTile = slice(out, maps[2], dyn, dyn);
  cTileTy = cast<RankedTensorType>(cTile.getType());
}

Value ContractionTiler::build(linalg::GenericOp op) {
  buildTileLoop(op.getDpsInits()[0]);
  sliceOperands(op.getDpsInputs()[0], op.getDpsInputs()[1]);
  Value full = ix.andI(ix.cmp(arith::CmpIPredicate::eq, ms, ix.c(tileM)),
                       ix.cmp(arith::CmpIPredicate::eq, ns, ix.c(tileN)));
  auto ifOp = scf::IfOp::create(
      b, loc, full,
      [&](OpBuilder &tb, Location) {
        scf::YieldOp::create(tb, loc, buildFullTile(tb));
      },
      [&](OpBuilder &eb, Location) {
        // Whole columns: the rows on the micro-kernel in padded groups;
        // the last, narrower column tile as loops.
        Value wholeCols = Idx{eb, loc}.cmp(arith::CmpIPredicate::eq, ns,
                                           Idx{eb, loc}.c(tileN));
        auto inner = scf::IfOp::create(
            eb, loc, wholeCols,
            [&](OpBuilder &sb, Location) {
              scf::YieldOp::create(sb, loc, buildShortTile(sb));
            },
            [&](OpBuilder &pb, Location) {
              scf::YieldOp::create(pb, loc, buildPartialTile(pb));
            });
        scf::YieldOp::create(eb, loc, inner.getResult(0));
      });
  insertTile(ifOp.getResult(0));
  return forall.getResult(0);
}

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
  ContractionTiler tiler(rewriter, op, *dims, tileM, tileN, width);
  rewriter.replaceOp(op, tiler.build(op));
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
