//===- MicroKernels.cpp - Register-blocked vector micro-kernels -*- C++ -*-===//

#include "MicroKernels.h"
#include "masformer/Codegen/CPU/Passes.h"
#include "masformer/Dialect/MASFormer/IR/MASFormerOps.h"
#include "masformer/Utils/IRBuilders.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"

using namespace mlir;
using namespace mlir::masformer;

Value mlir::masformer::readF32(OpBuilder &b, Location loc, Value t, Value r,
                               Value c, int64_t w) {
  Type et = cast<RankedTensorType>(t.getType()).getElementType();
  Value pad = arith::ConstantOp::create(b, loc, b.getZeroAttr(et));
  auto vt = VectorType::get({w}, et);
  Value v = vector::TransferReadOp::create(b, loc, vt, t, ValueRange{r, c}, pad,
                                           ArrayRef<bool>{true});
  if (et.isF32())
    return v;
  return arith::ExtFOp::create(b, loc, VectorType::get({w}, b.getF32Type()), v);
}

Value mlir::masformer::splatF32(OpBuilder &b, Location loc, Value t, Value r,
                                Value c, int64_t w) {
  Value x =
      toF32(b, loc, tensor::ExtractOp::create(b, loc, t, ValueRange{r, c}));
  return vector::BroadcastOp::create(b, loc,
                                     VectorType::get({w}, b.getF32Type()), x);
}

Value mlir::masformer::writeVec(OpBuilder &b, Location loc, Value v, Value t,
                                Value r, Value c) {
  return vector::TransferWriteOp::create(b, loc, v, t, ValueRange{r, c},
                                         ArrayRef<bool>{true})
      .getResult();
}

/// The register-blocked loop nest of buildBlockedMatmul and
/// buildBlockedDotBF16: rows of the [tq, n] result in blocks, columns in
/// blocks of up to blockVectors(targetWidth) vectors of W, each block's
/// accumulators carried through `steps` steps of the reduction, then `finish`ed
/// (when given) and stored. `step(b, k, rows, cols, acc)` returns the
/// accumulators after step k of the block whose rows and vectors' first columns
/// are `rows` and `cols`.
using BlockStep = llvm::function_ref<SmallVector<Value>(
    OpBuilder &, Value, ArrayRef<Value>, ArrayRef<Value>, ValueRange)>;
static Value buildRegisterBlocks(
    OpBuilder &b, Location loc, Value out, int64_t tq, int64_t n, int64_t w,
    int64_t targetWidth, int64_t steps,
    llvm::function_ref<Value(OpBuilder &, Value, Value, Value)> init,
    llvm::function_ref<Value(OpBuilder &, Value, Value)> finish,
    llvm::function_ref<void(OpBuilder &, Value, int64_t)> atRows,
    BlockStep step) {
  Idx ix{b, loc};
  int64_t maxVecs = blockVectors(targetWidth);
  int64_t vecs = std::min(maxVecs, n / w);
  int64_t blockCols = vecs * w, mainCols = n - n % blockCols;
  // Fewer than maxVecs vectors of columns: more rows, so that the block
  // still holds kRows * maxVecs accumulators (32 columns in vectors of 16:
  // 8 rows x 2 vectors, 2 loads and 8 broadcasts per 16 FMAs, where 4 x 2
  // had 2 loads and 4 broadcasts per 8 FMAs).
  int64_t blockRows = blockRowsFor(targetWidth);
  if (vecs < maxVecs && tq % (kRows * (maxVecs / vecs)) == 0)
    blockRows = kRows * (maxVecs / vecs);
  // Rows past the last whole block (64 rows in blocks of 6: 60, then a
  // block of 4).
  int64_t mainRows = tq - tq % blockRows, tailRows = tq - mainRows;
  // The register blocks of the nRows rows from i0, across the columns.
  auto rowBlock = [&](Value o, Value i0, int64_t nRows) {
    if (atRows)
      atRows(b, i0, nRows);
    SmallVector<Value> rows;
    for (int64_t r = 0; r < nRows; ++r)
      rows.push_back(ix.add(i0, ix.c(r)));
    // One register block: nRows rows x nv vectors of W columns from j0.
    auto block = [&](Value o, Value j0, int64_t nv) {
      SmallVector<Value> cols;
      for (int64_t c = 0; c < nv; ++c)
        cols.push_back(ix.add(j0, ix.c(c * w)));
      SmallVector<Value> acc0;
      for (Value row : rows)
        for (Value col : cols)
          acc0.push_back(init(b, o, row, col));
      auto red = ix.loop(0, steps, 1, acc0);
      {
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPointToStart(red.getBody());
        scf::YieldOp::create(b, loc,
                             step(b, red.getInductionVar(), rows, cols,
                                  red.getRegionIterArgs()));
      }
      // Each column vector's rows as one [nRows, W] write: the tensor's
      // chain of writes is nv long rather than nRows * nv, which One-Shot
      // Bufferize's analysis walks back from every write (its time grew
      // with the square of the chain: half of a fixture's compile). The
      // rows are inserted into an SSA aggregate and written one by one
      // again after bufferization (convert-vector-to-scf{full-unroll}):
      // the same stores.
      SmallVector<Value> done;
      for (int64_t r = 0; r < nRows; ++r)
        for (int64_t c = 0; c < nv; ++c) {
          Value x = red.getResult(r * nv + c);
          done.push_back(finish ? finish(b, x, rows[r]) : x);
        }
      for (int64_t c = 0; c < nv; ++c) {
        if (nRows == 1) {
          o = writeVec(b, loc, done[c], o, rows[0], cols[c]);
          continue;
        }
        auto rowTy = cast<VectorType>(done[c].getType());
        auto tileTy = VectorType::get({nRows, rowTy.getDimSize(0)},
                                      rowTy.getElementType());
        Value tile = arith::ConstantOp::create(b, loc, b.getZeroAttr(tileTy));
        for (int64_t r = 0; r < nRows; ++r)
          tile = vector::InsertOp::create(b, loc, done[r * nv + c], tile,
                                          ArrayRef<int64_t>{r});
        o = vector::TransferWriteOp::create(b, loc, tile, o,
                                            ValueRange{rows[0], cols[c]},
                                            ArrayRef<bool>{true, true})
                .getResult();
      }
      return o;
    };
    auto colLoop = ix.loop(0, mainCols, blockCols, ValueRange{o});
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(colLoop.getBody());
      scf::YieldOp::create(
          b, loc,
          block(colLoop.getRegionIterArg(0), colLoop.getInductionVar(), vecs));
    }
    o = colLoop.getResult(0);
    // The columns left over when n is not a multiple of the block (n = 80
    // with W = 16: one block of 4 vectors, then one of 1).
    if (int64_t tail = (n - mainCols) / w)
      o = block(o, ix.c(mainCols), tail);
    return o;
  };
  Value o = out;
  if (mainRows > 0) {
    auto rowLoop = ix.loop(0, mainRows, blockRows, ValueRange{out});
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(rowLoop.getBody());
    scf::YieldOp::create(b, loc,
                         rowBlock(rowLoop.getRegionIterArg(0),
                                  rowLoop.getInductionVar(), blockRows));
    o = rowLoop.getResult(0);
  }
  if (tailRows > 0)
    o = rowBlock(o, ix.c(mainRows), tailRows);
  return o;
}

Value mlir::masformer::buildBlockedMatmul(
    OpBuilder &b, Location loc, Value a, Value bm, Value out, int64_t tq,
    int64_t n, int64_t kLen, int64_t w, int64_t targetWidth,
    llvm::function_ref<Value(OpBuilder &, Value, Value, Value)> init,
    llvm::function_ref<Value(OpBuilder &, Value, Value)> finish,
    bool transposedA,
    llvm::function_ref<void(OpBuilder &, Value, int64_t)> atRows) {
  auto step = [&](OpBuilder &sb, Value k, ArrayRef<Value> rows,
                  ArrayRef<Value> cols, ValueRange acc) {
    SmallVector<Value> bv;
    for (Value col : cols)
      bv.push_back(readF32(sb, loc, bm, k, col, w));
    SmallVector<Value> next;
    for (auto [r, row] : llvm::enumerate(rows)) {
      Value av = transposedA ? splatF32(sb, loc, a, k, row, w)
                             : splatF32(sb, loc, a, row, k, w);
      for (auto [c, bc] : llvm::enumerate(bv))
        next.push_back(
            vector::FMAOp::create(sb, loc, av, bc, acc[r * cols.size() + c]));
    }
    return next;
  };
  return buildRegisterBlocks(b, loc, out, tq, n, w, targetWidth, kLen, init,
                             finish, atRows, step);
}

/// A step of a VNNI kernel (vdpbf16ps, vpdpbusd) for the register block
/// of `rows` x `cols` (buildRegisterBlocks' step), each 32-bit lane a group
/// of `g` consecutive k of `et` elements: loads the block's vectors of 16
/// groups of `bp` ([kLen / g, g n]) at group kg, broadcasts each row's
/// group of `a` (a[i, g kg]; with `transposedA`, a[kg, g i]) as one
/// 32-bit value, and returns `dot(acc, a, b)` (the instruction) of each
/// accumulator.
static SmallVector<Value>
vnniStep(OpBuilder &sb, Location loc, Value kg, ArrayRef<Value> rows,
         ArrayRef<Value> cols, ValueRange acc, Value a, Value bp, Type et,
         int64_t g, bool transposedA,
         llvm::function_ref<Value(OpBuilder &, Value, Value, Value)> dot) {
  constexpr int64_t w = 16;
  Type i32 = sb.getI32Type();
  auto groupsTy = VectorType::get({g * w}, et);
  Idx kx{sb, loc};
  Value zero = arith::ConstantOp::create(sb, loc, sb.getZeroAttr(et));
  SmallVector<Value> bv;
  for (Value col : cols)
    bv.push_back(vector::TransferReadOp::create(
        sb, loc, groupsTy, bp, ValueRange{kg, kx.mul(col, kx.c(g))}, zero,
        ArrayRef<bool>{true}));
  SmallVector<Value> next;
  for (auto [r, row] : llvm::enumerate(rows)) {
    // The row's group of k as one i32, broadcast to every lane.
    Value group = vector::TransferReadOp::create(
        sb, loc, VectorType::get({g}, et), a,
        transposedA ? ValueRange{kg, kx.mul(row, kx.c(g))}
                    : ValueRange{row, kx.mul(kg, kx.c(g))},
        zero, ArrayRef<bool>{true});
    Value word = vector::ExtractOp::create(
        sb, loc,
        vector::BitCastOp::create(sb, loc, VectorType::get({1}, i32), group),
        ArrayRef<int64_t>{0});
    Value av = vector::BitCastOp::create(
        sb, loc, groupsTy,
        vector::BroadcastOp::create(sb, loc, VectorType::get({w}, i32), word));
    for (auto [c, bc] : llvm::enumerate(bv))
      next.push_back(dot(sb, acc[r * cols.size() + c], av, bc));
  }
  return next;
}

Value mlir::masformer::buildBlockedDotBF16(
    OpBuilder &b, Location loc, Value a, Value bp, Value out, int64_t tq,
    int64_t n, int64_t kLen,
    llvm::function_ref<Value(OpBuilder &, Value, Value, Value)> init,
    llvm::function_ref<Value(OpBuilder &, Value, Value)> finish,
    bool transposedA,
    llvm::function_ref<void(OpBuilder &, Value, int64_t)> atRows) {
  auto dot = [&](OpBuilder &sb, Value acc, Value x, Value y) -> Value {
    return x86vector::DotBF16Op::create(sb, loc, acc.getType(), acc, x, y);
  };
  auto step = [&](OpBuilder &sb, Value k2, ArrayRef<Value> rows,
                  ArrayRef<Value> cols, ValueRange acc) {
    return vnniStep(sb, loc, k2, rows, cols, acc, a, bp, sb.getBF16Type(), 2,
                    transposedA, dot);
  };
  return buildRegisterBlocks(b, loc, out, tq, n, /*w=*/16, /*targetWidth=*/16,
                             kLen / 2, init, finish, atRows, step);
}

Value mlir::masformer::buildBlockedDotU8S8(
    OpBuilder &b, Location loc, Value a, Value bq, Value out, int64_t tq,
    int64_t n, int64_t kLen,
    llvm::function_ref<Value(OpBuilder &, Value, Value, Value)> init) {
  auto dot = [&](OpBuilder &sb, Value acc, Value x, Value y) -> Value {
    return DotU8S8Op::create(sb, loc, acc.getType(), acc, x, y);
  };
  auto step = [&](OpBuilder &sb, Value k4, ArrayRef<Value> rows,
                  ArrayRef<Value> cols, ValueRange acc) {
    return vnniStep(sb, loc, k4, rows, cols, acc, a, bq, sb.getI8Type(), 4,
                    /*transposedA=*/false, dot);
  };
  return buildRegisterBlocks(b, loc, out, tq, n, /*w=*/16, /*targetWidth=*/16,
                             kLen / 4, init, /*finish=*/nullptr,
                             /*atRows=*/nullptr, step);
}

Value mlir::masformer::buildExpNonPositive(OpBuilder &b, Location loc,
                                           Value x) {
  auto vt = cast<VectorType>(x.getType());
  Value log2e = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(vt, 1.44269504088896341f));
  return buildExp2NonPositive(b, loc, arith::MulFOp::create(b, loc, x, log2e));
}

Value mlir::masformer::buildExp2NonPositive(OpBuilder &b, Location loc,
                                            Value t) {
  auto vt = cast<VectorType>(t.getType());
  auto it = VectorType::get(vt.getShape(), b.getI32Type());
  auto splat = [&](float v) -> Value {
    return arith::ConstantOp::create(b, loc, DenseElementsAttr::get(vt, v));
  };
  auto splatI = [&](int32_t v) -> Value {
    return arith::ConstantOp::create(b, loc,
                                     DenseElementsAttr::get(it, APInt(32, v)));
  };
  // t clamped below at -126: -inf (a masked key) becomes -126, a NaN stays
  // (buildGreater's result is its second operand where one is NaN).
  Value tc = buildGreater(b, loc, splat(-126.0f), t);
  // k = roundeven(tc) by the rounding of one add: in [2^23, 2^24) floats are
  // the integers, so y = tc + 1.5 * 2^23 + 126 holds k + 126 in its low
  // mantissa bits and y - (1.5 * 2^23 + 126) is k, exactly.
  Value magic = splat(12582912.0f + 126.0f);
  Value y = arith::AddFOp::create(b, loc, tc, magic);
  Value k = arith::SubFOp::create(b, loc, y, magic);
  Value f = arith::SubFOp::create(b, loc, tc, k);
  // 2 * 2^f on [-1/2, 1/2]: degree 5 with the constant term 1 (exp(0) is
  // 1), fitted to the relative error by iteratively reweighted least
  // squares (Lawson) at Chebyshev nodes; Horner's rule; the coefficients
  // doubled (exactly) so that the scale below is 2^(k-1). Relative error
  // 9.2e-8 in exact arithmetic, 1.7e-7 (1.4 ulp) as evaluated in f32 (a
  // sixth degree gave 7.9e-8 in f32 for one more FMA per element: the
  // rounding of the evaluation, not the fit, dominates).
  static constexpr float kCoeffs[] = {1.32647273e-03f, 9.67151299e-03f,
                                      5.55073358e-02f, 2.40222424e-01f,
                                      6.93147004e-01f, 1.0f};
  Value p = splat(2 * kCoeffs[0]);
  for (float c : ArrayRef<float>(kCoeffs).drop_front())
    p = math::FmaOp::create(b, loc, p, f, splat(2 * c));
  // 2^(k-1): the low bits of y, k + 126, shifted into the exponent field
  // (the bits above them shift out). k = -126 gives the field 0, 0.0: every
  // result is 0 or a normal float, never a subnormal (slow in the P V
  // products on some CPUs). A NaN gives NaN through p.
  // (Operands built in order: the IR does not depend on the compiler's
  // argument evaluation order.)
  Value yBits = arith::BitcastOp::create(b, loc, it, y);
  Value shift = splatI(23);
  Value bits = arith::ShLIOp::create(b, loc, yBits, shift);
  return arith::MulFOp::create(b, loc, p,
                               arith::BitcastOp::create(b, loc, vt, bits));
}

Value mlir::masformer::buildGreater(OpBuilder &b, Location loc, Value x,
                                    Value y) {
  Value gt = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, x, y);
  return arith::SelectOp::create(b, loc, gt, x, y);
}

linalg::GenericOp mlir::masformer::buildGroupsProduct(OpBuilder &b,
                                                      Location loc, Value a,
                                                      Value bGroups, Value c,
                                                      int64_t group) {
  MLIRContext *ctx = b.getContext();
  AffineExpr m, n, kg, kk;
  bindDims(ctx, m, n, kg, kk);
  bool integer =
      cast<RankedTensorType>(c.getType()).getElementType().isInteger(32);
  return linalg::GenericOp::create(
      b, loc, c.getType(), ValueRange{a, bGroups}, ValueRange{c},
      ArrayRef<AffineMap>{AffineMap::get(4, 0, {m, kg * group + kk}, ctx),
                          AffineMap::get(4, 0, {kg, n, kk}, ctx),
                          AffineMap::get(4, 0, {m, n}, ctx)},
      ArrayRef<utils::IteratorType>{kPar, kPar, kRed, kRed},
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        Value sum;
        if (integer) {
          Type i32 = nb.getI32Type();
          Value x = arith::ExtUIOp::create(nb, nl, i32, args[0]);
          Value y = arith::ExtSIOp::create(nb, nl, i32, args[1]);
          Value p = arith::MulIOp::create(nb, nl, x, y);
          sum = arith::AddIOp::create(nb, nl, args[2], p);
        } else {
          Value x = toF32(nb, nl, args[0]);
          Value y = toF32(nb, nl, args[1]);
          Value p = arith::MulFOp::create(nb, nl, x, y);
          sum = arith::AddFOp::create(nb, nl, args[2], p);
        }
        linalg::YieldOp::create(nb, nl, sum);
      });
}

Value mlir::masformer::buildAMXProduct(OpBuilder &b, Location loc, Value a,
                                       Value bGroups, Value c, int64_t m,
                                       int64_t n) {
  int64_t group = cast<RankedTensorType>(bGroups.getType()).getDimSize(2);
  linalg::GenericOp product = buildGroupsProduct(b, loc, a, bGroups, c, group);
  // The tile's static size: folded casts may leave the operands' sizes
  // dynamic after bufferization.
  product->setAttr(kAMXTileAttrName, b.getDenseI64ArrayAttr({m, n}));
  return product.getResult(0);
}
