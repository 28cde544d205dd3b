//===- TileContractions.cpp - Tiled, vectorized matrix products -*- C++ -*-===//
//
// The model's matrix products (the linalg.generic contractions that the
// importer makes of MatMul, Gemm and Einsum) as a parallel loop over
// (batch..., column tile, row tile) whose full tiles run the register-blocked
// micro-kernel of the tiled attention on contiguous panels of B (the model's
// weights packed at compile time); partial tiles at the edges run a
// linalg.generic on the slices.
//
//===----------------------------------------------------------------------===//

#include "MicroKernels.h"
#include "masformer/Codegen/CPU/Passes.h"
#include "masformer/Utils/ConstantData.h"
#include "masformer/Utils/Contractions.h"
#include "masformer/Utils/IRBuilders.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace mlir::masformer {
#define GEN_PASS_DEF_TILECONTRACTIONS
#include "masformer/Codegen/CPU/Passes.h.inc"
} // namespace mlir::masformer

using namespace mlir;
using namespace mlir::masformer;

namespace {

/// The longest run of k a micro-kernel call accumulates over: the chunk of
/// B's packed panel, 128 x 64 f32 (32 KiB), stays in L1 while every row
/// group of the tile streams over it. (On the Xeon of bench/RESULTS.md,
/// 256 and 512 ran within the run-to-run spread of 128.)
constexpr int64_t kChunk = 128;
/// Row tiles run in groups of up to kMaxRowGroup whose rows of A take at
/// most half of a thread's L2 (the pass's l2-bytes), so that a group's rows
/// stay in L2, beside B's panel, while its iterations run over every column
/// tile (bench/RESULTS.md, "Products in groups of row tiles").
constexpr int64_t kMaxRowGroup = 4;

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

/// Weights B (a constant [k, n], or [n, k] when `transposed`, of whole
/// bytes per element and at least `tileN` columns) packed at compile time
/// as the constant [ceil(n / tileN), k, tileN]: the panel of each column
/// tile contiguous, in the layout the micro-kernel reads, zeros past n. A
/// model's products then neither copy nor transpose their weights per
/// tile; null when B is not such a constant. With `group` g of 2 (AMX,
/// vdpbf16ps) or 4 (vpdpbusd), each panel holds g consecutive k side by
/// side, VNNI's layout: [ceil(n / tileN), k / g, tileN, g], k a multiple of
/// g.
Value packConstantB(OpBuilder &b, Location loc, Value bm, bool transposed,
                    int64_t tileN, int64_t group = 1) {
  auto cst = bm.getDefiningOp<arith::ConstantOp>();
  auto ty = dyn_cast<RankedTensorType>(bm.getType());
  if (!cst || !ty || ty.getRank() != 2 || !ty.hasStaticShape())
    return {};
  Type et = ty.getElementType();
  if (!et.isIntOrFloat() || et.getIntOrFloatBitWidth() % 8)
    return {};
  int64_t kLen = ty.getDimSize(transposed ? 1 : 0);
  int64_t n = ty.getDimSize(transposed ? 0 : 1);
  int64_t es = et.getIntOrFloatBitWidth() / 8;
  std::optional<ArrayRef<char>> bytes = constantBytes(cst.getValue());
  // (Fewer columns than a tile are packed for vpdpbusd only, which has no
  // other path.)
  if ((n < tileN && group != 4) || !bytes ||
      static_cast<int64_t>(bytes->size()) != kLen * n * es || kLen % group)
    return {};
  int64_t tiles = llvm::divideCeil(n, tileN);
  AsmResourceBlob blob = HeapAsmResourceBlob::allocate(
      tiles * kLen * tileN * es, alignof(uint64_t), /*dataIsMutable=*/true);
  MutableArrayRef<char> out = blob.getMutableData();
  std::memset(out.data(), 0, out.size());
  const char *in = bytes->data();
  for (int64_t t = 0; t < tiles; ++t) {
    int64_t cols = std::min(tileN, n - t * tileN);
    char *panel = out.data() + t * kLen * tileN * es;
    for (int64_t k = 0; k < kLen; ++k) {
      char *row = panel + k * tileN * es;
      if (group > 1) {
        // (k, j) at [k / g, j, k % g].
        char *groups = panel + ((k / group) * tileN * group + k % group) * es;
        for (int64_t j = 0; j < cols; ++j) {
          int64_t from = transposed ? (t * tileN + j) * kLen + k
                                    : k * n + t * tileN + j;
          std::memcpy(groups + j * group * es, in + from * es, es);
        }
        continue;
      }
      if (!transposed) {
        std::memcpy(row, in + (k * n + t * tileN) * es, cols * es);
        continue;
      }
      for (int64_t j = 0; j < cols; ++j)
        std::memcpy(row + j * es, in + ((t * tileN + j) * kLen + k) * es, es);
    }
  }
  auto packedTy =
      group > 1 ? RankedTensorType::get({tiles, kLen / group, tileN, group}, et)
                : RankedTensorType::get({tiles, kLen, tileN}, et);
  return arith::ConstantOp::create(
             b, loc,
             DenseResourceElementsAttr::get(packedTy, "packed_weight",
                                            std::move(blob)))
      .getResult();
}

/// One matrix product rewritten as a parallel loop over (batch..., row
/// tile, column tile): the state its steps share.
struct ContractionTiler {
  ContractionTiler(OpBuilder &b, linalg::GenericOp op, MatmulDims dims,
                   int64_t tileM, int64_t tileN, int64_t width, bool amx,
                   bool bf16Dot, int64_t rowGroupBytes)
      : b(b), loc(op.getLoc()), ix{b, loc}, dims(dims), tileM(tileM),
        tileN(tileN), width(width), rowGroupBytes(rowGroupBytes), amx(amx),
        bf16Dot(bf16Dot), maps(op.getIndexingMapsArray()),
        rank(cast<RankedTensorType>(op.getDpsInits()[0].getType()).getRank()),
        kLen(op.getStaticLoopRanges()[dims.k]) {}

  /// Builds the tiled product of `op`; returns its result.
  Value build(linalg::GenericOp op);

  OpBuilder &b;
  Location loc;
  Idx ix;
  MatmulDims dims;
  int64_t tileM, tileN, width;
  /// The most bytes of A a group of row tiles may read: half the L2.
  int64_t rowGroupBytes;
  /// Whether bf16 products with constant weights may run on AMX, or on
  /// AVX512-BF16's vdpbf16ps.
  bool amx, bf16Dot;
  SmallVector<AffineMap> maps;
  int64_t rank, kLen;
  /// B packed at compile time (packConstantB), or null; in the VNNI
  /// layout (rank 4) for AMX.
  Value packedB;
  bool vnni = false;
  /// The VNNI panels run on vdpbf16ps or vpdpbusd (else on AMX).
  bool dot = false;
  /// An integer product of uint8 A and int8 B (constant, packed in quads)
  /// on vpdpbusd: i32 sums.
  bool u8s8 = false;
  /// Whether such products may run on AMX tiles (tdpbusd) instead.
  bool amxInt8 = false;
  /// k side by side in B's packed panel: 1, 2 (bf16) or 4 (8-bit).
  int64_t group = 1;
  /// The scalar C starts at when the product's init is a linalg.fill (a
  /// MatMul's zeros): full tiles then never read C, and the fill's pass
  /// over the whole result is gone.
  Value fill;

  // The tile loop and C as it carries it; then the tile of an iteration:
  // the induction variable of each batch loop dimension, the first row and
  // column, the row and column counts (short at the edges), and the
  // operands' slices.
  scf::ForallOp forall;
  Value out;
  DenseMap<unsigned, Value> batchIv;
  /// The column tile's index (B's packed panel), and whether row tiles run
  /// in groups (an iteration past the last row tile then has ms = 0).
  Value nTile;
  bool rowGroups = false;
  Value m0, n0, ms, ns;
  Value aTile, bTile, cTile;
  RankedTensorType cTileTy;

  /// The forall over C's tiles, accumulating into `c`; leaves the builder
  /// in its body and sets the tile's position and size. `aRowBytes`: the
  /// bytes of one row of A over all of k.
  void buildTileLoop(Value c, int64_t aRowBytes);
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
  /// With `fromFill`, the accumulators start at `fill` rather than at c.
  Value buildKernelChunk(OpBuilder &kb, Value at, Value bt, Value c, int64_t k0,
                         Value k0v, int64_t len, int64_t rows,
                         bool fromFill = false);
  /// at [rows, k] x bt [k, tileN] accumulated into ct [rows, tileN] on the
  /// micro-kernel, k in chunks of kChunk.
  /// With `fromFill`, C's tile is not read: the product starts at `fill`.
  Value buildKernel(OpBuilder &tb, Value at, Value bt, Value ct, int64_t rows,
                    bool fromFill = false);
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
  /// Whether this product runs on AMX: bf16 A and constant B, f32 C, k a
  /// multiple of 32; or an 8-bit product (u8s8) with amxInt8, k a
  /// multiple of 64.
  bool amxApplies(linalg::GenericOp op);
  /// Whether it runs on vdpbf16ps: bf16 A and B, f32 C, k even, AVX-512.
  bool dotApplies(linalg::GenericOp op);
  /// The tile on AMX: C's tile (padded to tileM x tileN at the edges) +=
  /// A's rows (padded with zeros) x B's VNNI panel, as the product marked
  /// for --masformer-lower-amx-tiles.
  Value buildAMXTile(OpBuilder &tb, bool fullTile);
  /// This iteration's tile of C, computed.
  Value buildTile();
  /// Inserts this iteration's result `tile` into C.
  void insertTile(Value tile);
};

void ContractionTiler::buildTileLoop(Value c, int64_t aRowBytes) {
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
  // Row tiles in groups, column tiles inside a group, a group's row tiles
  // innermost: (group, column tile, row tile in the group). The iterations
  // a thread runs share a group's rows of A (in L2 after the first column
  // tile), and B's column panel across the group's row tiles; B is read
  // once per group rather than once per row tile. Without groups (a row
  // of A too long for two tiles' rows in L2), column tiles outside row
  // tiles: a thread's iterations share B's panel and A's row panels (the
  // activations, smaller than the weights) stream instead; a tied LM
  // head's weights are then read from memory once. A group counts
  // ceil(tiles / ceil(tiles / kMaxRowGroup)) row tiles, so that the groups
  // of a short product are as full as they can be; the iterations past
  // the last row tile (fewer than one per group) compute nothing.
  int64_t maxGroup = std::min<int64_t>(
      kMaxRowGroup, rowGroupBytes / std::max<int64_t>(1, tileM * aRowBytes));
  rowGroups = maxGroup > 1;
  Value rowTiles = ix.cdiv(val(mSize), ix.c(tileM));
  Value groups, group;
  if (rowGroups) {
    groups = ix.cdiv(rowTiles, ix.c(maxGroup));
    // (No division by zero groups: a product of no rows has no iteration.)
    group = ix.cdiv(rowTiles, ix.max(groups, ix.c(1)));
    ubs.push_back(groups);
    ubs.push_back(ix.cdiv(val(nSize), ix.c(tileN)));
    ubs.push_back(group);
  } else {
    ubs.push_back(ix.cdiv(val(nSize), ix.c(tileN)));
    ubs.push_back(rowTiles);
  }

  forall = scf::ForallOp::create(b, loc, ubs, ValueRange{c}, std::nullopt);
  b.setInsertionPoint(forall.getTerminator());
  out = forall.getRegionIterArgs()[0];
  // The position of every loop dimension in this iteration.
  for (int64_t r = 0; r + 2 < rank; ++r)
    batchIv[cDims[r]] = forall.getInductionVar(r);
  Value rowTile;
  if (rowGroups) {
    nTile = forall.getInductionVar(rank - 1);
    rowTile = ix.add(ix.mul(forall.getInductionVar(rank - 2), group),
                     forall.getInductionVar(rank));
  } else {
    nTile = forall.getInductionVar(rank - 2);
    rowTile = forall.getInductionVar(rank - 1);
  }
  n0 = ix.mul(nTile, ix.c(tileN));
  m0 = ix.mul(rowTile, ix.c(tileM));
  ms = ix.min(ix.c(tileM), ix.sub(val(mSize), m0));
  if (rowGroups)
    ms = ix.max(ms, ix.c(0));
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
  if (dot) // [k / g, tileN, g] as rows of groups [k / g, g tileN]
    return tensor::CollapseShapeOp::create(
               tb, loc, bTile, ArrayRef<ReassociationIndices>{{0}, {1, 2}})
        .getResult();
  if (packedB)
    return bTile;
  if (!dims.transposedB) {
    // Rows of B lie a whole row of the weights apart (often a multiple of
    // 4 KiB: the same L1 sets); copied contiguous, as vectors.
    Value bk = castTo2D(tb, loc, bTile, kLen, tileN);
    Type et = cast<RankedTensorType>(bk.getType()).getElementType();
    Value init = tensor::EmptyOp::create(tb, loc, {kLen, tileN}, et);
    Idx tix{tb, loc};
    auto rowsLoop = tix.loop(0, kLen, 1, ValueRange{init});
    OpBuilder::InsertionGuard g(tb);
    tb.setInsertionPointToStart(rowsLoop.getBody());
    Value k = rowsLoop.getInductionVar(), acc = rowsLoop.getRegionIterArg(0);
    Value pad = arith::ConstantOp::create(tb, loc, tb.getZeroAttr(et));
    auto vt = VectorType::get({width}, et);
    for (int64_t c = 0; c < tileN; c += width) {
      Value col = tix.c(c);
      Value v = vector::TransferReadOp::create(
          tb, loc, vt, bk, ValueRange{k, col}, pad, ArrayRef<bool>{true});
      acc = writeVec(tb, loc, v, acc, k, col);
    }
    scf::YieldOp::create(tb, loc, acc);
    return rowsLoop.getResult(0);
  }
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
                                         int64_t len, int64_t rows,
                                         bool fromFill) {
  // A vector of accumulators starts at the fill, or at C's tile.
  auto init = [&](OpBuilder &nb, Value o, Value row, Value col) -> Value {
    if (u8s8) {
      auto vt = VectorType::get({width}, nb.getI32Type());
      if (fromFill)
        return vector::BroadcastOp::create(nb, loc, vt, fill);
      Value pad = arith::ConstantOp::create(nb, loc, nb.getI32IntegerAttr(0));
      return vector::TransferReadOp::create(
          nb, loc, vt, o, ValueRange{row, col}, pad, ArrayRef<bool>{true});
    }
    if (fromFill)
      return vector::BroadcastOp::create(
          nb, loc, VectorType::get({width}, nb.getF32Type()),
          toF32(nb, loc, fill));
    return readF32(nb, loc, o, row, col, width);
  };
  if (dot) {
    // Rows k0 / g .. (k0 + len) / g of the panel of groups of k.
    Idx kx{kb, loc};
    OpFoldResult row = k0v ? OpFoldResult(kx.fdiv(k0v, kx.c(group)))
                           : OpFoldResult(kb.getIndexAttr(k0 / group));
    auto bty = cast<RankedTensorType>(bt.getType());
    Value groups = tensor::ExtractSliceOp::create(
        kb, loc,
        RankedTensorType::get({len / group, group * tileN},
                              bty.getElementType()),
        bt, ArrayRef<OpFoldResult>{row, kb.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{kb.getIndexAttr(len / group),
                               kb.getIndexAttr(group * tileN)},
        ArrayRef<OpFoldResult>{kb.getIndexAttr(1), kb.getIndexAttr(1)});
    if (u8s8)
      return buildBlockedDotU8S8(kb, loc,
                                 kPanel(kb, loc, at, false, k0, k0v, len),
                                 groups, c, rows, tileN, len, init);
    return buildBlockedDotBF16(kb, loc,
                               kPanel(kb, loc, at, false, k0, k0v, len), groups,
                               c, rows, tileN, len, init);
  }
  return buildBlockedMatmul(kb, loc, kPanel(kb, loc, at, false, k0, k0v, len),
                            kPanel(kb, loc, bt, true, k0, k0v, len), c, rows,
                            tileN, len, width, width, init,
                            /*finish=*/nullptr);
}

Value ContractionTiler::buildFullTile(OpBuilder &tb) {
  Value at = castTo2D(tb, loc, aTile, tileM, kLen);
  Value ct = castTo2D(tb, loc, cTile, tileM, tileN);
  Value r = buildKernel(tb, at, packB(tb), ct, tileM, /*fromFill=*/!!fill);
  return tensor::CastOp::create(tb, loc, cTileTy, r).getResult();
}

Value ContractionTiler::buildRowDots(OpBuilder &tb, Value at, Value cg) {
  Idx ix0{tb, loc};
  Value bn = castTo2D(tb, loc, bTile, tileN, kLen);
  auto vt = VectorType::get({width}, tb.getF32Type());
  Value zero = arith::ConstantOp::create(tb, loc, tb.getZeroAttr(vt));
  auto cols = ix0.loop(0, tileN, 1, ValueRange{cg});
  OpBuilder::InsertionGuard g(tb);
  tb.setInsertionPointToStart(cols.getBody());
  Idx ix{tb, loc};
  Value n = cols.getInductionVar();
  auto red =
      ix.loop(0, kLen - kLen % width, width, SmallVector<Value>(kRows, zero));
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
  bool rowDots = dims.transposedB && !packedB;
  Value bt = rowDots ? Value() : packB(tb);
  Type et = cast<RankedTensorType>(aTile.getType()).getElementType();
  Type ct = cTileTy.getElementType();
  auto zeros = [&](OpBuilder &zb, int64_t cols, Type t) {
    Value e = tensor::EmptyOp::create(zb, loc, {kRows, cols}, t);
    Value z = arith::ConstantOp::create(zb, loc, zb.getZeroAttr(t));
    return linalg::FillOp::create(zb, loc, z, e).getResult(0);
  };
  auto loop = tix.loop(0, ms, kRows, ValueRange{cTile});
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
  Value res =
      rowDots ? buildRowDots(tb, at, cg) : buildKernel(tb, at, bt, cg, kRows);
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
                                    int64_t rows, bool fromFill) {
  // k in chunks of at most kChunk, accumulating into the C tile, so that
  // the chunk of B's panel stays in L1. Starting from a fill, the
  // first chunk is peeled: it alone starts from the fill value.
  // (8-bit B: four times the k in the same bytes of B's panel.)
  int64_t chunk = u8s8 ? 4 * kChunk : kChunk;
  int64_t first = fromFill ? std::min(chunk, kLen) : 0;
  Value r = ct;
  if (first > 0)
    r = buildKernelChunk(tb, at, bt, r, 0, Value(), first, rows, true);
  int64_t chunks = (kLen - first) / chunk, rest = (kLen - first) % chunk;
  if (chunks == 1) {
    r = buildKernelChunk(tb, at, bt, r, first, Value(), chunk, rows);
  } else if (chunks > 1) {
    Idx tix{tb, loc};
    auto loop = tix.loop(first, first + chunks * chunk, chunk, ValueRange{r});
    OpBuilder::InsertionGuard g(tb);
    tb.setInsertionPointToStart(loop.getBody());
    scf::YieldOp::create(tb, loc,
                         buildKernelChunk(tb, at, bt, loop.getRegionIterArg(0),
                                          0, loop.getInductionVar(), chunk,
                                          rows));
    r = loop.getResult(0);
  }
  if (rest > 0)
    r = buildKernelChunk(tb, at, bt, r, first + chunks * chunk, Value(), rest,
                         rows);
  return r;
}

Value ContractionTiler::buildPartialTile(OpBuilder &eb) {
  MLIRContext *ctx = eb.getContext();
  if (vnni) {
    // The panel's first ns columns of groups: C[m, n] += A[m, g kg + kk] *
    // B[kg, n, kk].
    Value bt = tensor::ExtractSliceOp::create(
        eb, loc, bTile,
        ArrayRef<OpFoldResult>{eb.getIndexAttr(0), eb.getIndexAttr(0),
                               eb.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{eb.getIndexAttr(kLen / group), ns,
                               eb.getIndexAttr(group)},
        SmallVector<OpFoldResult>(3, eb.getIndexAttr(1)));
    return buildGroupsProduct(eb, loc, aTile, bt, cTile, group).getResult(0);
  }
  bool transposed = dims.transposedB && !packedB;
  AffineMap bMap =
      transposed ? dimsMap(ctx, 3, {1, 2}) : dimsMap(ctx, 3, {2, 1});
  Value bt = bTile;
  if (packedB) // the panel's first ns columns
    bt = tensor::ExtractSliceOp::create(
        eb, loc, bTile,
        ArrayRef<OpFoldResult>{eb.getIndexAttr(0), eb.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{eb.getIndexAttr(kLen), ns},
        ArrayRef<OpFoldResult>{eb.getIndexAttr(1), eb.getIndexAttr(1)});
  return linalg::GenericOp::create(
             eb, loc, cTileTy, ValueRange{aTile, bt}, ValueRange{cTile},
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

bool ContractionTiler::dotApplies(linalg::GenericOp op) {
  auto elem = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getElementType();
  };
  return bf16Dot && width == 16 && maps[1].getNumResults() == 2 &&
         elem(op.getDpsInputs()[0]).isBF16() &&
         elem(op.getDpsInputs()[1]).isBF16() &&
         elem(op.getDpsInits()[0]).isF32() && kLen % 2 == 0;
}

bool ContractionTiler::amxApplies(linalg::GenericOp op) {
  if (u8s8)
    return amxInt8 && kLen % 64 == 0 && tileM % 32 == 0 && tileN % 32 == 0;
  auto elem = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getElementType();
  };
  return amx && maps[1].getNumResults() == 2 &&
         elem(op.getDpsInputs()[0]).isBF16() &&
         elem(op.getDpsInputs()[1]).isBF16() &&
         elem(op.getDpsInits()[0]).isF32() && kLen % 32 == 0 &&
         tileM % 32 == 0 && tileN % 32 == 0;
}

Value ContractionTiler::buildAMXTile(OpBuilder &tb, bool fullTile) {
  // (bf16 A and f32 C, or 8-bit A and i32 C.)
  Type aElt = cast<RankedTensorType>(aTile.getType()).getElementType();
  Type cElt = cTileTy.getElementType();
  SmallVector<OpFoldResult> zero2(2, tb.getIndexAttr(0)),
      one2(2, tb.getIndexAttr(1));
  auto filled = [&](int64_t rows, int64_t cols, Type t, Value v) {
    Value e = tensor::EmptyOp::create(tb, loc, {rows, cols}, t);
    if (!v)
      v = arith::ConstantOp::create(tb, loc, tb.getZeroAttr(t));
    return linalg::FillOp::create(tb, loc, v, e).getResult(0);
  };
  Value at, ct;
  if (fullTile) {
    at = castTo2D(tb, loc, aTile, tileM, kLen);
    ct = castTo2D(tb, loc, cTile, tileM, tileN);
    if (fill)
      ct = linalg::FillOp::create(tb, loc, fill, ct).getResult(0);
  } else {
    // The rows past ms are zeros; the columns past ns multiply the
    // panel's zero padding.
    at = tensor::InsertSliceOp::create(
        tb, loc, aTile, filled(tileM, kLen, aElt, Value()), zero2,
        ArrayRef<OpFoldResult>{ms, tb.getIndexAttr(kLen)}, one2);
    ct = filled(tileM, tileN, cElt, fill);
    if (!fill)
      ct = tensor::InsertSliceOp::create(tb, loc, cTile, ct, zero2,
                                         ArrayRef<OpFoldResult>{ms, ns}, one2);
  }
  Value r = buildAMXProduct(tb, loc, at, bTile, ct, tileM, tileN);
  if (fullTile)
    return tensor::CastOp::create(tb, loc, cTileTy, r).getResult();
  // Copied into C's slice, as the full tile writes it: both branches then
  // yield C's slice, bufferized in place, and the result is not copied
  // again after them (a copy of every tile onto itself, 2.4% of GPT-2
  // small's bf16 profile).
  Value part = tensor::ExtractSliceOp::create(
      tb, loc, cTileTy, r, zero2, ArrayRef<OpFoldResult>{ms, ns}, one2);
  return linalg::CopyOp::create(tb, loc, part, cTile).getResult(0);
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
  if (vnni) {
    auto pty = cast<RankedTensorType>(packedB.getType());
    bTile = tensor::ExtractSliceOp::create(
        b, loc,
        RankedTensorType::get({kLen / group, tileN, group},
                              pty.getElementType()),
        packedB,
        ArrayRef<OpFoldResult>{nTile, b.getIndexAttr(0), b.getIndexAttr(0),
                               b.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(kLen / group),
                               b.getIndexAttr(tileN), b.getIndexAttr(group)},
        SmallVector<OpFoldResult>(4, b.getIndexAttr(1)));
  } else if (packedB) {
    auto pty = cast<RankedTensorType>(packedB.getType());
    bTile = tensor::ExtractSliceOp::create(
        b, loc, RankedTensorType::get({kLen, tileN}, pty.getElementType()),
        packedB,
        ArrayRef<OpFoldResult>{nTile, b.getIndexAttr(0), b.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(kLen),
                               b.getIndexAttr(tileN)},
        SmallVector<OpFoldResult>(3, b.getIndexAttr(1)));
  } else {
    bTile = dims.transposedB ? slice(bm, maps[1], dyn, kLen)
                             : slice(bm, maps[1], kLen, dyn);
  }
  cTile = slice(out, maps[2], dyn, dyn);
  cTileTy = cast<RankedTensorType>(cTile.getType());
}

Value ContractionTiler::build(linalg::GenericOp op) {
  // Weights shared by every batch (B indexed by k and n alone) are packed
  // at compile time.
  if (u8s8) {
    // (The pattern checked that B is such a constant.)
    group = 4;
    packedB = packConstantB(b, loc, op.getDpsInputs()[1], dims.transposedB,
                            tileN, group);
    vnni = true;
    dot = !amxApplies(op);
  } else if (amxApplies(op) || dotApplies(op)) {
    packedB = packConstantB(b, loc, op.getDpsInputs()[1], dims.transposedB,
                            tileN, /*group=*/2);
    vnni = !!packedB;
    dot = vnni && !amxApplies(op);
    if (vnni)
      group = 2;
  }
  if (!packedB && maps[1].getNumResults() == 2) {
    packedB =
        packConstantB(b, loc, op.getDpsInputs()[1], dims.transposedB, tileN);
  }
  Value init = op.getDpsInits()[0];
  if (auto f = init.getDefiningOp<linalg::FillOp>()) {
    fill = f.getInputs()[0];
    init = f.getOutputs()[0];
  }
  auto aTy = cast<RankedTensorType>(op.getDpsInputs()[0].getType());
  buildTileLoop(
      init,
      kLen * llvm::divideCeil(aTy.getElementType().getIntOrFloatBitWidth(), 8));
  sliceOperands(op.getDpsInputs()[0], op.getDpsInputs()[1]);
  // Every tile starts from the fill: the loop's result does not depend on
  // the prior contents of C, and a consumer may take each tile instead.
  if (fill)
    forall->setAttr(kProductTilesAttrName, b.getUnitAttr());
  if (!rowGroups) {
    insertTile(buildTile());
    return forall.getResult(0);
  }
  // An iteration past the last row tile (ms = 0) computes nothing.
  Value some = ix.cmp(arith::CmpIPredicate::sgt, ms, ix.c(0));
  auto ifSome = scf::IfOp::create(b, loc, TypeRange{cTileTy}, some, true, true);
  {
    // (buildTile may replace cTile by values of its own regions.)
    Value empty = cTile;
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifSome.thenBlock());
    scf::YieldOp::create(b, loc, buildTile());
    b.setInsertionPointToStart(ifSome.elseBlock());
    scf::YieldOp::create(b, loc, empty);
  }
  insertTile(ifSome.getResult(0));
  return forall.getResult(0);
}

Value ContractionTiler::buildTile() {
  // (The two comparisons built in order: the IR, and the object cache's
  // keys, do not depend on the C++ compiler's argument evaluation order.)
  Value fullM = ix.cmp(arith::CmpIPredicate::eq, ms, ix.c(tileM));
  Value fullN = ix.cmp(arith::CmpIPredicate::eq, ns, ix.c(tileN));
  if (vnni && !dot) {
    Value full = ix.andI(fullM, fullN);
    auto ifOp = scf::IfOp::create(
        b, loc, full,
        [&](OpBuilder &tb, Location) {
          scf::YieldOp::create(tb, loc, buildAMXTile(tb, true));
        },
        [&](OpBuilder &eb, Location) {
          if (!u8s8 && (!bf16Dot || width != 16)) {
            scf::YieldOp::create(eb, loc, buildAMXTile(eb, false));
            return;
          }
          // At most kRows rows of whole columns (a decode step's): the
          // same VNNI panel on vdpbf16ps or vpdpbusd, B streamed once, where an
          // AMX tile would compute tileM rows of zero padding (zeroed first:
          // the padding's memset took 6% of a GPT-2 small bf16 decode
          // step, the products ran at half the memory's rate).
          Idx eix{eb, loc};
          Value shortM = eix.cmp(arith::CmpIPredicate::sle, ms, eix.c(kRows));
          Value wholeN = eix.cmp(arith::CmpIPredicate::eq, ns, eix.c(tileN));
          Value fewRows = eix.andI(shortM, wholeN);
          auto inner = scf::IfOp::create(
              eb, loc, fewRows,
              [&](OpBuilder &sb, Location) {
                Value saved = cTile;
                if (fill)
                  cTile =
                      linalg::FillOp::create(sb, loc, fill, cTile).getResult(0);
                dot = true;
                Value r = buildShortTile(sb);
                dot = false;
                cTile = saved;
                scf::YieldOp::create(sb, loc, r);
              },
              [&](OpBuilder &pb, Location) {
                scf::YieldOp::create(pb, loc, buildAMXTile(pb, false));
              });
          scf::YieldOp::create(eb, loc, inner.getResult(0));
        });
    return ifOp.getResult(0);
  }
  Value full = ix.andI(fullM, fullN);
  auto ifOp = scf::IfOp::create(
      b, loc, full,
      [&](OpBuilder &tb, Location) {
        scf::YieldOp::create(tb, loc, buildFullTile(tb));
      },
      [&](OpBuilder &eb, Location) {
        if (fill)
          cTile = linalg::FillOp::create(eb, loc, fill, cTile).getResult(0);
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
  return ifOp.getResult(0);
}

struct TileContractionPattern final : OpRewritePattern<linalg::GenericOp> {
  TileContractionPattern(MLIRContext *ctx, int64_t tileM, int64_t tileN,
                         int64_t width, bool amx, bool bf16Dot, bool u8s8Dot,
                         bool amxInt8, int64_t rowGroupBytes)
      : OpRewritePattern(ctx), tileM(tileM), tileN(tileN), width(width),
        rowGroupBytes(rowGroupBytes), amx(amx), bf16Dot(bf16Dot),
        u8s8Dot(u8s8Dot), amxInt8(amxInt8) {}

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override;

  int64_t tileM, tileN, width, rowGroupBytes;
  bool amx, bf16Dot, u8s8Dot, amxInt8;
};

LogicalResult
TileContractionPattern::matchAndRewrite(linalg::GenericOp op,
                                        PatternRewriter &rewriter) const {
  FailureOr<MatmulDims> dims = matchMatmul(op);
  bool integer = false;
  if (failed(dims)) {
    FailureOr<IntegerMatmul> product = matchIntegerMatmul(op);
    if (failed(product) || !u8s8Dot || width != 16 ||
        !isVPDPBUSDProduct(op, *product) ||
        !constantBytes(
            op.getDpsInputs()[1].getDefiningOp<arith::ConstantOp>().getValue()))
      return rewriter.notifyMatchFailure(op, "not a matrix product");
    dims = product->dims;
    integer = true;
  }
  ContractionTiler tiler(rewriter, op, *dims, tileM, tileN, width, amx, bf16Dot,
                         rowGroupBytes);
  tiler.u8s8 = integer;
  tiler.amxInt8 = amxInt8;
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
    int64_t step =
        std::min<int64_t>(blockVectors(w), std::max<int64_t>(1, tileN / w)) *
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
    if (l2Bytes <= 0) {
      emitError(getOperation()->getLoc())
          << "--masformer-tile-contractions: l2-bytes must be positive, got "
          << static_cast<int64_t>(l2Bytes);
      return signalPassFailure();
    }
    RewritePatternSet patterns(&getContext());
    patterns.add<TileContractionPattern>(&getContext(), tileM, tileN, w, amx,
                                         bf16Dot, u8s8Dot, amxInt8,
                                         l2Bytes / 2);
    walkAndApplyPatterns(getOperation(), std::move(patterns));
  }
};

} // namespace
