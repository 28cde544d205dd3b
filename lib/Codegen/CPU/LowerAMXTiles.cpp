//===- LowerAMXTiles.cpp - bf16 and 8-bit tile products on AMX -*- C++ -*-===//
//
// The tile products that --masformer-tile-contractions and
// --masformer-tile-attention mark for AMX (a linalg.generic C[m, n] += A[m, g
// kg + kk] * B[kg, n, kk], B in the VNNI layout of groups of g of k: pairs of
// bf16 with f32 sums, or quads of 8-bit integers with i32 sums), after
// bufferization, as AMX tile loads, tdpbf16ps (or tdpbusd and its signed and
// unsigned kin) and stores: blocks of 32 x 32 results held in four tile
// registers while k runs in chunks, so that no tile value crosses a block
// boundary (LLVM's conversion of control flow has no AMX tile type). An A or
// B whose rows are not known to be contiguous is copied first; a C just
// filled with zeros is not filled: k's first chunk starts its accumulators
// from tilezero.
//
//===----------------------------------------------------------------------===//

#include "masformer/Codegen/CPU/Passes.h"

#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::masformer {
#define GEN_PASS_DEF_LOWERAMXTILES
#include "masformer/Codegen/CPU/Passes.h.inc"
} // namespace mlir::masformer

using namespace mlir;
using namespace mlir::masformer;

namespace {

/// AMX's tile shapes: A 16 rows of 64 bytes of k (32 bf16, 64 8-bit
/// integers), B 16 groups of k (pairs of bf16, quads of 8-bit integers) x
/// 16 columns, C 16 x 16 f32 or i32.
constexpr int64_t kTile = 16, kRowBytes = 64;
/// Results per register block: 2 x 2 tiles of C, with 2 of A and 2 of B,
/// use all 8 tile registers.
constexpr int64_t kBlock = 32;
/// The most k steps (of a tile row's k) unrolled between a block's loads
/// and stores of C: a chunk of 256 of k in bf16, 512 in 8 bits.
constexpr int64_t kMaxSteps = 8;

struct AMXTile {
  Value a, b, c;
  int64_t m, n, k;
  /// k side by side in B's groups (2: bf16, 4: 8-bit), and k per tile row
  /// of A (64 bytes).
  int64_t group, depth;
  /// For 8-bit products, whether A's and B's integers are unsigned (the
  /// product's arith.extui) or signed (arith.extsi): tdpbusd is uint8 A
  /// by int8 B.
  bool zextA = false, zextB = false;
  /// Whether A's or B's rows are not known to be contiguous (a view of
  /// unknown strides): the operand is first copied into a buffer of its
  /// own.
  bool copyA = false, copyB = false;
};

/// Whether the body of an integer product extends the block argument
/// `arg` with arith.extui (true) or arith.extsi (false) to i32 before its
/// multiplication; failure when it does neither.
FailureOr<bool> isZeroExtended(linalg::GenericOp op, unsigned arg) {
  Value x = op.getBody()->getArgument(arg);
  if (!x.hasOneUse())
    return failure();
  Operation *user = *x.getUsers().begin();
  if (user->getNumResults() != 1 ||
      !user->getResult(0).getType().isInteger(32))
    return failure();
  if (isa<arith::ExtUIOp>(user))
    return true;
  if (isa<arith::ExtSIOp>(user))
    return false;
  return failure();
}

/// The operands of a marked product on memrefs, or failure with why.
FailureOr<AMXTile> matchTile(linalg::GenericOp op, std::string &why) {
  auto size = dyn_cast<DenseI64ArrayAttr>(op->getAttr(kAMXTileAttrName));
  if (!size || size.size() != 2) {
    why = "expected the tile's size [m, n] as the attribute's value";
    return failure();
  }
  if (op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1 ||
      !op.hasPureBufferSemantics()) {
    why = "expected two inputs and one output, on buffers";
    return failure();
  }
  auto aTy = dyn_cast<MemRefType>(op.getDpsInputs()[0].getType());
  auto bTy = dyn_cast<MemRefType>(op.getDpsInputs()[1].getType());
  auto cTy = dyn_cast<MemRefType>(op.getDpsInits()[0].getType());
  if (!aTy || !bTy || !cTy || aTy.getRank() != 2 || bTy.getRank() != 3 ||
      cTy.getRank() != 2 || ShapedType::isDynamic(aTy.getDimSize(1)) ||
      !bTy.hasStaticShape()) {
    why = "expected A [m, k], B [k / g, n, g] (static), C [m, n]";
    return failure();
  }
  Type aElt = aTy.getElementType(), cElt = cTy.getElementType();
  bool bf16 = aElt.isBF16() && bTy.getElementType().isBF16() && cElt.isF32();
  bool int8 = aElt.isInteger(8) && bTy.getElementType().isInteger(8) &&
              cElt.isInteger(32);
  if (!bf16 && !int8) {
    why = "expected bf16 A and B with an f32 C, or 8-bit A and B with an "
          "i32 C";
    return failure();
  }
  int64_t group = bf16 ? 2 : 4;
  // C[m, n] += A[m, g kg + kk] * B[kg, n, kk] over (m, n, kg, kk).
  MLIRContext *ctx = op.getContext();
  AffineExpr m, n, kg, kk;
  bindDims(ctx, m, n, kg, kk);
  SmallVector<AffineMap> want = {
      AffineMap::get(4, 0, {m, kg * group + kk}, ctx),
      AffineMap::get(4, 0, {kg, n, kk}, ctx),
      AffineMap::get(4, 0, {m, n}, ctx)};
  if (op.getIndexingMapsArray() != want) {
    why = "expected the indexing maps of C[m, n] += A[m, " +
          std::to_string(group) + " kg + kk] * B[kg, n, kk]";
    return failure();
  }
  AMXTile t{op.getDpsInputs()[0],
            op.getDpsInputs()[1],
            op.getDpsInits()[0],
            size[0],
            size[1],
            aTy.getDimSize(1),
            group,
            kRowBytes / (aElt.getIntOrFloatBitWidth() / 8)};
  if (int8) {
    FailureOr<bool> zextA = isZeroExtended(op, 0);
    FailureOr<bool> zextB = isZeroExtended(op, 1);
    if (failed(zextA) || failed(zextB)) {
      why = "expected the 8-bit operands extended to i32 (arith.extui or "
            "arith.extsi) in the body";
      return failure();
    }
    t.zextA = *zextA;
    t.zextB = *zextB;
  }
  auto agrees = [](int64_t dim, int64_t v) {
    return ShapedType::isDynamic(dim) || dim == v;
  };
  if (t.m % kBlock || t.n % kBlock || t.k % t.depth ||
      !agrees(aTy.getDimSize(0), t.m) || !agrees(cTy.getDimSize(0), t.m) ||
      !agrees(cTy.getDimSize(1), t.n) || bTy.getDimSize(0) * group != t.k ||
      bTy.getDimSize(1) != t.n || bTy.getDimSize(2) != group) {
    why = "expected m and n multiples of 32, k of " + std::to_string(t.depth) +
          ", and sizes that agree";
    return failure();
  }
  // Rows must be contiguous: tile loads step only between rows.
  auto innerUnit = [](MemRefType ty, int64_t dims) {
    auto [strides, offset] = ty.getStridesAndOffset();
    for (int64_t d = 0; d < dims; ++d)
      if (strides[strides.size() - 1 - d] !=
          (d == 0 ? 1 : ty.getDimSize(ty.getRank() - d)))
        return false;
    return true;
  };
  if (!innerUnit(cTy, 1)) {
    why = "expected the accumulator's rows contiguous";
    return failure();
  }
  t.copyA = !innerUnit(aTy, 1);
  t.copyB = !innerUnit(bTy, 2);
  return t;
}

/// The linalg.fill of zero that writes `c` right before `op` (only ops
/// without memory effects between them), or null.
linalg::FillOp zeroFillBefore(linalg::GenericOp op, Value c) {
  Operation *prev = op->getPrevNode();
  while (prev && isPure(prev))
    prev = prev->getPrevNode();
  auto fill = dyn_cast_or_null<linalg::FillOp>(prev);
  if (!fill || fill.getOutputs().front() != c ||
      !(matchPattern(fill.getInputs().front(), m_AnyZeroFloat()) ||
        matchPattern(fill.getInputs().front(), m_Zero())))
    return {};
  return fill;
}

/// `x` itself when its rows are contiguous, else a copy of it (static
/// `shape`) in a buffer of its own.
Value contiguous(RewriterBase &rw, Location loc, Value x, bool copy,
                 ArrayRef<int64_t> shape) {
  if (!copy)
    return x;
  auto ty = cast<MemRefType>(x.getType());
  Value buf = memref::AllocOp::create(
      rw, loc, MemRefType::get(shape, ty.getElementType()));
  memref::CopyOp::create(rw, loc, x, buf);
  return buf;
}

/// One chunk of `steps` k steps from k0 for every 32 x 32 block of C: its
/// four accumulators loaded from C (or from tilezero with `fromZero`),
/// accumulated over the chunk, stored.
void emitBlocks(RewriterBase &rw, Location loc, const AMXTile &t, Value aBuf,
                Value b, Value k0, int64_t steps, bool fromZero) {
  auto c = [&](int64_t v) {
    return arith::ConstantIndexOp::create(rw, loc, v).getResult();
  };
  auto elt = [](Value v) {
    return cast<MemRefType>(v.getType()).getElementType();
  };
  auto aTy = amx::TileType::get({kTile, t.depth}, elt(aBuf));
  auto cTy = amx::TileType::get({kTile, kTile}, elt(t.c));
  for (int64_t bi = 0; bi < t.m; bi += kBlock) {
    for (int64_t bj = 0; bj < t.n; bj += kBlock) {
      Value acc[2][2];
      for (int64_t r = 0; r < 2; ++r)
        for (int64_t s = 0; s < 2; ++s)
          acc[r][s] =
              fromZero ? amx::TileZeroOp::create(rw, loc, cTy).getResult()
                       : amx::TileLoadOp::create(
                             rw, loc, cTy, t.c,
                             ValueRange{c(bi + r * kTile), c(bj + s * kTile)})
                             .getResult();
      for (int64_t step = 0; step < steps; ++step) {
        Value k = arith::AddIOp::create(rw, loc, k0, c(step * t.depth));
        Value kg = arith::DivUIOp::create(rw, loc, k, c(t.group));
        Value a[2], bt[2];
        for (int64_t r = 0; r < 2; ++r)
          a[r] = amx::TileLoadOp::create(rw, loc, aTy, aBuf,
                                         ValueRange{c(bi + r * kTile), k});
        for (int64_t s = 0; s < 2; ++s)
          bt[s] = amx::TileLoadOp::create(
              rw, loc, aTy, b, ValueRange{kg, c(t.group * (bj + s * kTile))});
        for (int64_t r = 0; r < 2; ++r)
          for (int64_t s = 0; s < 2; ++s)
            acc[r][s] =
                t.group == 2
                    ? amx::TileMulFOp::create(rw, loc, cTy, a[r], bt[s],
                                              acc[r][s])
                          .getResult()
                    : amx::TileMulIOp::create(rw, loc, cTy, a[r], bt[s],
                                              acc[r][s], t.zextA, t.zextB)
                          .getResult();
      }
      for (int64_t r = 0; r < 2; ++r)
        for (int64_t s = 0; s < 2; ++s)
          amx::TileStoreOp::create(
              rw, loc, t.c, ValueRange{c(bi + r * kTile), c(bj + s * kTile)},
              acc[r][s]);
    }
  }
}

void lowerTile(RewriterBase &rw, linalg::GenericOp op, const AMXTile &t) {
  Location loc = op.getLoc();
  rw.setInsertionPoint(op);
  Value aBuf = contiguous(rw, loc, t.a, t.copyA, {t.m, t.k});
  Value b3 = contiguous(rw, loc, t.b, t.copyB, {t.k / t.group, t.n, t.group});
  auto c = [&](int64_t v) {
    return arith::ConstantIndexOp::create(rw, loc, v).getResult();
  };
  // B as [k / g, g n]: a row is the groups of k of every column.
  Value b = memref::CollapseShapeOp::create(
      rw, loc, b3, ArrayRef<ReassociationIndices>{{0}, {1, 2}});
  int64_t steps = t.k / t.depth;
  int64_t perChunk = kMaxSteps;
  while (steps % perChunk)
    --perChunk;
  // A product into a buffer just filled with zeros (attention's scores, a
  // MatMul's result) is not filled: the first chunk of k, peeled off the
  // chunks' loop, starts its accumulators from tilezero and stores every
  // block of C; the other chunks load them.
  linalg::FillOp zeros = zeroFillBefore(op, t.c);
  if (zeros)
    rw.eraseOp(zeros);
  auto emitChunk = [&](Value k0, bool fromZero) {
    emitBlocks(rw, loc, t, aBuf, b, k0, perChunk, fromZero);
  };
  int64_t firstChunk = 0;
  if (zeros) {
    emitChunk(c(0), /*fromZero=*/true);
    firstChunk = perChunk * t.depth;
  }
  if (firstChunk == t.k) {
    rw.eraseOp(op);
    return;
  }
  // (Bounds built in order: the IR does not depend on the compiler's
  // argument evaluation order.)
  Value lb = c(firstChunk);
  Value ub = c(t.k);
  Value chunkStep = c(perChunk * t.depth);
  auto chunks = scf::ForOp::create(rw, loc, lb, ub, chunkStep);
  {
    OpBuilder::InsertionGuard g(rw);
    rw.setInsertionPoint(chunks.getBody()->getTerminator());
    emitChunk(chunks.getInductionVar(), /*fromZero=*/false);
  }
  rw.eraseOp(op);
}

struct LowerAMXTilesPass final
    : masformer::impl::LowerAMXTilesBase<LowerAMXTilesPass> {
  void runOnOperation() override {
    SmallVector<linalg::GenericOp> tiles;
    getOperation()->walk([&](linalg::GenericOp op) {
      if (op->hasAttr(kAMXTileAttrName))
        tiles.push_back(op);
    });
    IRRewriter rw(&getContext());
    for (linalg::GenericOp op : tiles) {
      std::string why;
      FailureOr<AMXTile> t = matchTile(op, why);
      if (failed(t)) {
        op.emitError() << "--masformer-lower-amx-tiles: a product marked "
                       << kAMXTileAttrName << " cannot run on AMX: " << why;
        return signalPassFailure();
      }
      lowerTile(rw, op, *t);
    }
  }
};

} // namespace
