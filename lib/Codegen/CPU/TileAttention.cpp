//===- TileAttention.cpp - Span-aware tiled attention -----------*- C++ -*-===//
//
// masformer.attention as loops over (batch, head, query tile) and, inside, a
// loop over exactly the key tiles that meet the span and the causal
// triangle, with an online softmax. The key-tile bounds are computed from
// the span: tiles outside it are never visited, and tiles entirely inside
// it run without a position mask.
//
//===----------------------------------------------------------------------===//

#include "MicroKernels.h"
#include "masformer/Codegen/CPU/Passes.h"
#include "masformer/Dialect/MASFormer/IR/MASFormerOps.h"
#include "masformer/Dialect/MASFormer/Utils/HeadSpans.h"
#include "masformer/Dialect/MASFormer/Utils/RowOffsets.h"
#include "masformer/Dialect/MASFormer/Utils/SpanUtils.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"
#include "mlir/IR/PatternMatch.h"

#include "llvm/ADT/SetVector.h"

#include <array>
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
  auto fast =
      arith::FastMathFlagsAttr::get(b.getContext(), arith::FastMathFlags::fast);
  Value p = arith::MulFOp::create(b, loc, x.getType(), x, y, fast);
  return arith::AddFOp::create(b, loc, acc.getType(), acc, p, fast);
}

/// A rank-reduced 2-D slice x[lead..., r0:r0+rs, c0:c0+cs] of a 4-D tensor,
/// or with `seqMajor` (x is [batch, seq, heads, head_dim] and lead is
/// (batch, head)), x[lead[0], r0:r0+rs, lead[1], c0:c0+cs].
Value slice2D(OpBuilder &b, Location loc, Value x, ArrayRef<OpFoldResult> lead,
              OpFoldResult r0, OpFoldResult rs, OpFoldResult c0,
              OpFoldResult cs, bool seqMajor = false) {
  auto ty = cast<RankedTensorType>(x.getType());
  assert(lead.size() == 2 && "4-D tensors");
  SmallVector<OpFoldResult> offsets =
      seqMajor ? SmallVector<OpFoldResult>{lead[0], r0, lead[1], c0}
               : SmallVector<OpFoldResult>{lead[0], lead[1], r0, c0};
  SmallVector<OpFoldResult> sizes =
      seqMajor ? SmallVector<OpFoldResult>{b.getIndexAttr(1), rs,
                                           b.getIndexAttr(1), cs}
               : SmallVector<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1),
                                           rs, cs};
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

/// The vector width for `tq` queries: the largest power of two up to `w`
/// that divides tq.
int64_t queryWidth(int64_t tq, int64_t w) {
  int64_t wq = 1;
  while (wq < w && tq % (2 * wq) == 0)
    wq *= 2;
  return wq;
}

/// S^T = scale * K Q^T (softcapped with `softcap`) for a full tile: k is
/// the key tile [tk, d] as stored, qt the query tile transposed [d, tq]
/// (packed once per query tile); a register block holds 16 accumulators,
/// kRows keys x blockVectors(target) vectors of W queries (more keys when tq
/// makes fewer vectors), and runs over the head dimension. Computing the
/// transposed scores reads the keys as they are: no transposed copy of K, which
/// for block spans cost a pass over K through memory per call. With `dot` (bf16
/// operands, W = 16), qt holds the queries' pairs of the head dimension, [d /
/// 2, 2 tq] bf16, and each step is a vdpbf16ps over two of the head dimension.
/// Without `scale` (and then without `softcap`), the scores are stored as
/// summed, for a softmax that applies the scale itself (buildSoftmaxColumns'
/// scoreScale).
Value buildScoresKernel(
    OpBuilder &b, Location loc, Value k, Value qt, Value scale,
    std::optional<float> softcap, int64_t tk, int64_t tq, int64_t d, int64_t w,
    int64_t targetWidth, bool dot,
    llvm::function_ref<void(OpBuilder &, Value, int64_t)> atRows) {
  assert((scale || !softcap) && "a softcap applies to scaled scores");
  auto vt = VectorType::get({w}, b.getF32Type());
  Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(vt));
  Value scaleVec =
      scale ? vector::BroadcastOp::create(b, loc, vt, scale).getResult()
            : Value();
  Value s0 = tensor::EmptyOp::create(b, loc, {tk, tq}, b.getF32Type());
  auto init = [&](OpBuilder &, Value, Value, Value) { return zero; };
  auto scaled = [&](OpBuilder &nb, Value acc, Value) {
    return AttentionOp::applySoftcap(
        nb, loc, arith::MulFOp::create(nb, loc, acc, scaleVec), softcap);
  };
  llvm::function_ref<Value(OpBuilder &, Value, Value)> finish = nullptr;
  if (scale)
    finish = scaled;
  if (dot)
    return buildBlockedDotBF16(b, loc, k, qt, s0, tk, tq, d, init, finish,
                               /*transposedA=*/false, atRows);
  return buildBlockedMatmul(b, loc, k, qt, s0, tk, tq, d, w, targetWidth,
                            init, finish, /*transposedA=*/false, atRows);
}

/// acc * corr + P V for a full tile: pT is P transposed [tk, tq] f32, v
/// [tk, d], acc [tq, d] f32, corr [tq] f32 (the rows' rescaling); the
/// output rows stay in registers across all tk keys. With `dot` (W = 16),
/// pT holds P's pairs of keys, [tk / 2, 2 tq] bf16 (buildSoftmaxColumns),
/// and v V's, [tk / 2, 2 d] bf16 (packRowPairs): each step is a vdpbf16ps
/// over two keys. With `out`, each vector of results goes through
/// `finish(x, row)` into `out` [tq, d] (of finish's element type) instead
/// of back into acc: the last key tile's normalized output, stored
/// straight from the registers.
Value buildPVKernel(
    OpBuilder &b, Location loc, Value pT, Value v, Value acc, Value corr,
    int64_t tq, int64_t tk, int64_t d, int64_t w, int64_t targetWidth,
    bool dot, Value out = {},
    llvm::function_ref<Value(OpBuilder &, Value, Value)> finish = nullptr) {
  auto vt = VectorType::get({w}, b.getF32Type());
  auto init = [&](OpBuilder &nb, Value o, Value row, Value col) {
    Value cr = vector::BroadcastOp::create(
        nb, loc, vt, tensor::ExtractOp::create(nb, loc, corr, ValueRange{row}));
    return arith::MulFOp::create(
               nb, loc, readF32(nb, loc, out ? acc : o, row, col, w), cr)
        .getResult();
  };
  Value dst = out ? out : acc;
  if (dot)
    return buildBlockedDotBF16(b, loc, pT, v, dst, tq, d, tk, init, finish,
                               /*transposedA=*/true);
  return buildBlockedMatmul(b, loc, pT, v, dst, tq, d, tk, w, targetWidth,
                            init, finish, /*transposedA=*/true);
}

/// The pairs of rows of a static [rows, n] bf16 tile side by side, [rows /
/// 2, 2 n] (element (2 p + r, j) at (p, 2 j + r)): the VNNI layout whose
/// vectors of 32 bf16 vdpbf16ps reads as 16 pairs. rows must be even, n a
/// multiple of 16. Per pair of rows, two loads of 16 and one interleave per
/// 16 columns. Written into `into` when given, else into a new tensor.
Value packRowPairs(OpBuilder &b, Location loc, Value x, int64_t rows, int64_t n,
                   Value into = Value()) {
  Idx ix{b, loc};
  Type bf16 = b.getBF16Type();
  auto halfTy = VectorType::get({16}, bf16);
  Value pad = arith::ConstantOp::create(b, loc, b.getZeroAttr(bf16));
  Value init = into ? into
                    : tensor::EmptyOp::create(b, loc, {rows / 2, 2 * n}, bf16)
                          .getResult();
  auto loop = ix.loop(0, rows / 2, 1, ValueRange{init});
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(loop.getBody());
  Idx px{b, loc};
  Value p = loop.getInductionVar();
  Value even = px.mul(p, px.c(2)), odd = px.add(even, px.c(1));
  Value out = loop.getRegionIterArg(0);
  for (int64_t c = 0; c < n; c += 16) {
    auto read = [&](Value row) {
      return vector::TransferReadOp::create(b, loc, halfTy, x,
                                            ValueRange{row, px.c(c)}, pad,
                                            ArrayRef<bool>{true})
          .getResult();
    };
    Value lo = read(even);
    Value hi = read(odd);
    // (Operands built in order: the IR does not depend on the compiler's
    // argument evaluation order.)
    Value pair = vector::InterleaveOp::create(b, loc, lo, hi);
    Value col = px.c(2 * c);
    out = writeVec(b, loc, pair, out, p, col);
  }
  scf::YieldOp::create(b, loc, out);
  return loop.getResult(0);
}

/// A vector<W x f32> of the 1-D tensor `t` from `i`, and its write.
Value read1D(OpBuilder &b, Location loc, Value t, Value i, int64_t w) {
  Value pad = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
  return vector::TransferReadOp::create(
      b, loc, VectorType::get({w}, b.getF32Type()), t, ValueRange{i}, pad,
      ArrayRef<bool>{true});
}
Value write1D(OpBuilder &b, Location loc, Value v, Value t, Value i) {
  return vector::TransferWriteOp::create(b, loc, v, t, ValueRange{i},
                                         ArrayRef<bool>{true})
      .getResult();
}

/// acc[i, :] * corr[i] over a static [rows, d] f32 tile, in vectors of w
/// (d a multiple of w).
Value scaleRows(OpBuilder &b, Location loc, Value acc, Value corr, int64_t rows,
                int64_t d, int64_t w) {
  Idx ix{b, loc};
  auto vt = VectorType::get({w}, b.getF32Type());
  auto loop = ix.loop(0, rows, 1, ValueRange{acc});
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(loop.getBody());
  Value i = loop.getInductionVar();
  Value c = vector::BroadcastOp::create(
      b, loc, vt, tensor::ExtractOp::create(b, loc, corr, ValueRange{i}));
  Value out = loop.getRegionIterArg(0);
  for (int64_t col = 0; col < d; col += w) {
    Value at = ix.c(col);
    Value x = readF32(b, loc, out, i, at, w);
    out = writeVec(b, loc, arith::MulFOp::create(b, loc, x, c), out, i, at);
  }
  scf::YieldOp::create(b, loc, out);
  return loop.getResult(0);
}

/// The online softmax's update of a tile: P (in the layout its product
/// reads), and the new m, l and the rows' rescaling.
struct SoftmaxUpdate {
  Value probs, m, l, corr;
};
constexpr double kLog2e = 1.44269504088896341;
/// A vector constant of `v` in every lane.
Value splatConst(OpBuilder &b, Location loc, VectorType vt, float v) {
  return arith::ConstantOp::create(b, loc, DenseElementsAttr::get(vt, v));
}

/// The online-softmax update of a full tile from its transposed logits
/// [tk, tq] (one column per query), W queries at a time, each query in its
/// own lane: m' = max(m, column max), P = exp(logits - m'),
/// corr = exp(m - m'), l' = l * corr + column sum(P). The maxima and sums
/// run down the columns in kRows independent chains of vertical vector
/// ops: no lane reduction. A query whose running max is still -inf (no key
/// allowed yet) subtracts 0 instead, so that it keeps P = 0 and corr = 0
/// rather than NaN. A NaN logit is left out of the maximum (buildGreater
/// keeps the other operand) and makes its query's P, sum and output NaN
/// through exp. With `pairs`, P is written as bf16 pairs of keys, [tk / 2,
/// 2 tq] (the keys 2 p and 2 p + 1 of query i side by side at (p, 2 i)),
/// the layout of buildPVKernel's vdpbf16ps, and l sums P as rounded to
/// bf16, so that the weights the output is divided by are those it was
/// summed with. With `scoreScale` (a positive constant), logitsT holds the
/// scores before their scale, and the scale joins the exponent's own
/// factor: P = 2^(s c - m' log2(e)) with c = scale log2(e), one FMA where
/// the scaled logits cost a multiplication in the scores kernel and a
/// subtraction and a multiplication here (the maximum of the unscaled
/// scores, times the scale, is the scaled maximum since the scale is
/// positive); m and l stay those of the scaled logits.
static_assert(kRows % 2 == 0, "the pairs of keys lie in one step");
SoftmaxUpdate buildSoftmaxColumns(OpBuilder &b, Location loc, Value logitsT,
                                  Value m, Value l, int64_t tq, int64_t tk,
                                  int64_t w, bool pairs,
                                  std::optional<float> scoreScale) {
  Idx ix{b, loc};
  Type f32 = b.getF32Type(), bf16 = b.getBF16Type();
  auto vt = VectorType::get({w}, f32);
  auto splat = [&](float v) { return splatConst(b, loc, vt, v); };
  float negInf = -std::numeric_limits<float>::infinity();
  Value probs0 = pairs ? tensor::EmptyOp::create(b, loc, {tk / 2, 2 * tq}, bf16)
                       : tensor::EmptyOp::create(b, loc, {tk, tq}, f32);
  Value corr0 = tensor::EmptyOp::create(b, loc, {tq}, f32);
  auto cols = ix.loop(0, tq, w, ValueRange{probs0, m, l, corr0});
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(cols.getBody());
  Value c = cols.getInductionVar();
  Value probs = cols.getRegionIterArg(0), mT = cols.getRegionIterArg(1),
        lT = cols.getRegionIterArg(2), corrT = cols.getRegionIterArg(3);
  Value negInfV = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(vt, b.getF32FloatAttr(negInf)));
  auto maxLoop = ix.loop(0, tk, kRows, SmallVector<Value>(kRows, negInfV));
  {
    OpBuilder::InsertionGuard gm(b);
    b.setInsertionPointToStart(maxLoop.getBody());
    Idx jx{b, loc};
    Value j = maxLoop.getInductionVar();
    SmallVector<Value> next;
    for (int64_t r = 0; r < kRows; ++r)
      next.push_back(buildGreater(
          b, loc, readF32(b, loc, logitsT, jx.add(j, jx.c(r)), c, w),
          maxLoop.getRegionIterArg(r)));
    scf::YieldOp::create(b, loc, next);
  }
  Value vmax = maxLoop.getResult(0);
  for (int64_t r = 1; r < kRows; ++r)
    vmax = buildGreater(b, loc, maxLoop.getResult(r), vmax);
  if (scoreScale)
    vmax = arith::MulFOp::create(b, loc, vmax, splat(*scoreScale));
  Value mOld = read1D(b, loc, mT, c, w);
  Value mNew = buildGreater(b, loc, vmax, mOld);
  Value isInf =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, mNew, negInfV);
  Value zeroV = arith::ConstantOp::create(b, loc, b.getZeroAttr(vt));
  Value sub = arith::SelectOp::create(b, loc, isInf, zeroV, mNew);
  // The exponent in base 2: t = (x - sub) log2(e), or with the scale
  // folded in, t = x c - sub log2(e) as one FMA.
  Value factor =
      splat(static_cast<float>(scoreScale ? *scoreScale * kLog2e : kLog2e));
  Value offset;
  if (scoreScale) {
    Value subLog2 = arith::MulFOp::create(b, loc, sub, splat(kLog2e));
    offset = arith::NegFOp::create(b, loc, subLog2);
  }
  SmallVector<Value> expInit = {probs};
  expInit.append(kRows, zeroV);
  auto expLoop = ix.loop(0, tk, kRows, expInit);
  {
    OpBuilder::InsertionGuard ge(b);
    b.setInsertionPointToStart(expLoop.getBody());
    Idx jx{b, loc};
    Value j = expLoop.getInductionVar();
    Value pt = expLoop.getRegionIterArg(0);
    SmallVector<Value> sums;
    Value pLow;
    for (int64_t r = 0; r < kRows; ++r) {
      Value row = jx.add(j, jx.c(r));
      Value x = readF32(b, loc, logitsT, row, c, w);
      Value t = scoreScale
                    ? math::FmaOp::create(b, loc, x, factor, offset).getResult()
                    : arith::MulFOp::create(
                          b, loc, arith::SubFOp::create(b, loc, x, sub), factor)
                          .getResult();
      Value p = buildExp2NonPositive(b, loc, t);
      if (pairs) {
        // The pair (j + r - 1, j + r) is complete at odd r.
        Value low =
            arith::TruncFOp::create(b, loc, VectorType::get({w}, bf16), p);
        p = arith::ExtFOp::create(b, loc, vt, low);
        if (r % 2 == 0) {
          pLow = low;
        } else {
          Value pair = vector::InterleaveOp::create(b, loc, pLow, low);
          Value pairRow = jx.add(jx.fdiv(j, jx.c(2)), jx.c(r / 2));
          Value pairCol = jx.mul(c, jx.c(2));
          pt = writeVec(b, loc, pair, pt, pairRow, pairCol);
        }
      } else {
        pt = writeVec(b, loc, p, pt, row, c);
      }
      sums.push_back(
          arith::AddFOp::create(b, loc, expLoop.getRegionIterArg(1 + r), p));
    }
    SmallVector<Value> next = {pt};
    next.append(sums);
    scf::YieldOp::create(b, loc, next);
  }
  Value vsum = expLoop.getResult(1);
  for (int64_t r = 1; r < kRows; ++r)
    vsum = arith::AddFOp::create(b, loc, vsum, expLoop.getResult(1 + r));
  Value corr =
      buildExpNonPositive(b, loc, arith::SubFOp::create(b, loc, mOld, sub));
  Value lNew = arith::AddFOp::create(
      b, loc, arith::MulFOp::create(b, loc, read1D(b, loc, lT, c, w), corr),
      vsum);
  scf::YieldOp::create(b, loc,
                       ValueRange{expLoop.getResult(0),
                                  write1D(b, loc, mNew, mT, c),
                                  write1D(b, loc, lNew, lT, c),
                                  write1D(b, loc, corr, corrT, c)});
  return {cols.getResult(0), cols.getResult(1), cols.getResult(2),
          cols.getResult(3)};
}

/// `v` cast to the static shape `shape` (same element type).
Value castTo(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> shape) {
  auto ty = cast<RankedTensorType>(v.getType());
  auto to = RankedTensorType::get(shape, ty.getElementType());
  if (ty == to)
    return v;
  return tensor::CastOp::create(b, loc, to, v);
}

/// `rows` (w vectors of w lanes, w a power of two) reduced across their
/// lanes by `combine` into one vector whose lane i is row i's result: a
/// butterfly of log2(w) levels, each pairing vectors by two shuffles and
/// one `combine` (45 operations for 16 rows, where a tree across each
/// row's lanes takes 8 a row). At each level the rows' partial results
/// sit in blocks of lanes; a pair of vectors combines each block's two
/// halves, so that the result holds twice the rows in blocks half as wide.
Value reduceRows(OpBuilder &b, Location loc, ArrayRef<Value> rows,
                 llvm::function_ref<Value(Value, Value)> combine) {
  SmallVector<Value> level(rows);
  int64_t w = level.size();
  for (int64_t block = w; block > 1; block /= 2) {
    // The first halves of the blocks of the pair's two vectors, in order
    // (the first vector's blocks, then the second's), and the second
    // halves: combined, each block half as wide.
    int64_t half = block / 2;
    SmallVector<int64_t> lo, hi;
    for (int64_t src = 0; src < 2; ++src)
      for (int64_t blk = 0; blk < w / block; ++blk)
        for (int64_t j = 0; j < half; ++j) {
          lo.push_back(src * w + blk * block + j);
          hi.push_back(src * w + blk * block + half + j);
        }
    SmallVector<Value> next;
    for (size_t v = 0; v < level.size(); v += 2) {
      Value x = vector::ShuffleOp::create(b, loc, level[v], level[v + 1], lo);
      Value y = vector::ShuffleOp::create(b, loc, level[v], level[v + 1], hi);
      next.push_back(combine(x, y));
    }
    level = std::move(next);
  }
  return level.front();
}

/// The online-softmax update of a full tile from its logits [tq, tk] (one
/// row per query, keys along the row), for AMX's P V: m' = max(m, row
/// max), P = exp(logits - m') as bf16 [tq, tk] (the rows AMX loads as P V's
/// A), corr = exp(m - m'), l' = l * corr + row sum(P) of P as rounded to
/// bf16 (the weights the output is divided by are those it was summed
/// with). Rows go in groups of w: a first loop takes each row's maximum
/// down its vectors of w keys, a butterfly (reduceRows) takes the group's
/// w maxima across the lanes at once, m, corr and the exponent's offset
/// are computed for the w rows as one vector each, a second loop writes
/// each row's P and sums it down its vectors, and a butterfly takes the
/// sums across. As buildSoftmaxColumns: a row whose running max is still
/// -inf subtracts 0 (P = 0, corr = 0, not NaN); a NaN logit is left out
/// of the maximum and makes its row's P, sum and output NaN; with
/// `scoreScale` the logits are unscaled and the scale joins the exponent's
/// factor. With `dot` (AVX512-BF16, w = 16), each pair of vectors is
/// rounded into 32 bf16 of P's row, stored at once and summed by one
/// vdpbf16ps against ones (exact: the products are the rounded values),
/// where extending each rounded vector to f32 and adding it cost 3
/// operations. tq must be a multiple of w, tk of 2 w.
SoftmaxUpdate buildSoftmaxRows(OpBuilder &b, Location loc, Value logits,
                               Value m, Value l, int64_t tq, int64_t tk,
                               int64_t w, std::optional<float> scoreScale,
                               bool dot) {
  Idx ix{b, loc};
  Type f32 = b.getF32Type(), bf16 = b.getBF16Type();
  auto vt = VectorType::get({w}, f32);
  auto splat = [&](float v) { return splatConst(b, loc, vt, v); };
  float negInf = -std::numeric_limits<float>::infinity();
  Value probs0 = tensor::EmptyOp::create(b, loc, {tq, tk}, bf16);
  Value corr0 = tensor::EmptyOp::create(b, loc, {tq}, f32);
  auto groups = ix.loop(0, tq, w, ValueRange{probs0, m, l, corr0});
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(groups.getBody());
  Value r0 = groups.getInductionVar();
  Value probs = groups.getRegionIterArg(0), mT = groups.getRegionIterArg(1),
        lT = groups.getRegionIterArg(2), corrT = groups.getRegionIterArg(3);
  // One row's w-key vectors of logits.
  auto rowOf = [&](OpBuilder &rb, Value row) {
    Idx rx{rb, loc};
    SmallVector<Value> xs;
    for (int64_t j = 0; j < tk; j += w)
      xs.push_back(readF32(rb, loc, logits, row, rx.c(j), w));
    return xs;
  };
  // A loop over the group's rows, each yielding one vector, whose results
  // are kept in a [w, w] tile and read back as the w vectors; `carried`,
  // when given, is threaded through the loop (P, which the rows write).
  auto perRow = [&](llvm::function_ref<Value(OpBuilder &, Value, Value,
                                             Value &)>
                        body,
                    Value *carried) {
    SmallVector<Value> inits = {tensor::EmptyOp::create(b, loc, {w, w}, f32)};
    if (carried)
      inits.push_back(*carried);
    auto rows = ix.loop(0, w, 1, inits);
    {
      OpBuilder::InsertionGuard gr(b);
      b.setInsertionPointToStart(rows.getBody());
      Idx rx{b, loc};
      Value i = rows.getInductionVar();
      Value c = carried ? rows.getRegionIterArg(1) : Value();
      Value v = body(b, i, rx.add(r0, i), c);
      SmallVector<Value> yields = {
          writeVec(b, loc, v, rows.getRegionIterArg(0), i, rx.c(0))};
      if (carried)
        yields.push_back(c);
      scf::YieldOp::create(b, loc, yields);
    }
    if (carried)
      *carried = rows.getResult(1);
    SmallVector<Value> vs;
    for (int64_t i = 0; i < w; ++i)
      vs.push_back(readF32(b, loc, rows.getResult(0), ix.c(i), ix.c(0), w));
    return vs;
  };
  // Each row's maximum down its vectors: two chains from -inf
  // (buildGreater keeps its second operand where the first is NaN: the
  // chains hold no NaN, so the butterfly orders none).
  SmallVector<Value> maxima = perRow(
      [&](OpBuilder &rb, Value, Value row, Value &) {
        Value chains[2] = {splat(negInf), splat(negInf)};
        for (auto [j, x] : llvm::enumerate(rowOf(rb, row)))
          chains[j % 2] = buildGreater(rb, loc, x, chains[j % 2]);
        return buildGreater(rb, loc, chains[1], chains[0]);
      },
      nullptr);
  Value rowMax = reduceRows(b, loc, maxima, [&](Value x, Value y) {
    return buildGreater(b, loc, x, y);
  });
  if (scoreScale)
    rowMax = arith::MulFOp::create(b, loc, rowMax, splat(*scoreScale));
  Value mOld = read1D(b, loc, mT, r0, w);
  Value mNew = buildGreater(b, loc, rowMax, mOld);
  Value isInf = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, mNew,
                                      splat(negInf));
  Value sub = arith::SelectOp::create(b, loc, isInf, splat(0.0f), mNew);
  // exp(m - sub): m = -inf gives 0.
  Value corr =
      buildExpNonPositive(b, loc, arith::SubFOp::create(b, loc, mOld, sub));
  // The exponent's offset per row: t = x c - sub log2(e) with the scale
  // folded in, else (x - sub) log2(e).
  Value offsets =
      scoreScale
          ? arith::NegFOp::create(
                b, loc, arith::MulFOp::create(b, loc, sub, splat(kLog2e)))
                .getResult()
          : sub;
  Value factor =
      splat(static_cast<float>(scoreScale ? *scoreScale * kLog2e : kLog2e));
  auto pairTy = VectorType::get({2 * w}, bf16);
  Value ones =
      dot ? arith::ConstantOp::create(
                b, loc,
                DenseElementsAttr::get(pairTy, b.getFloatAttr(bf16, 1.0)))
                .getResult()
          : Value();
  SmallVector<Value> sumVecs = perRow(
      [&](OpBuilder &rb, Value i, Value row, Value &probsIn) {
        Value off = vector::BroadcastOp::create(
            rb, loc, vt,
            vector::ExtractOp::create(rb, loc, offsets,
                                      ArrayRef<OpFoldResult>{i}));
        Idx rx{rb, loc};
        Value sums[2] = {splat(0.0f), splat(0.0f)};
        Value pLow;
        for (auto [j, x] : llvm::enumerate(rowOf(rb, row))) {
          Value t =
              scoreScale
                  ? math::FmaOp::create(rb, loc, x, factor, off).getResult()
                  : arith::MulFOp::create(
                        rb, loc, arith::SubFOp::create(rb, loc, x, off), factor)
                        .getResult();
          Value p = buildExp2NonPositive(rb, loc, t);
          if (dot) {
            // The pair (j - 1, j) complete at odd j, rounded as one vector
            // of 32 (two vcvtneps2bf16 and an insert; LLVM does not select
            // vcvtne2ps2bf16 for it).
            if (j % 2 == 0) {
              pLow = p;
              continue;
            }
            SmallVector<int64_t> both =
                llvm::to_vector(llvm::seq<int64_t>(0, 2 * w));
            Value rounded = arith::TruncFOp::create(
                rb, loc, pairTy,
                vector::ShuffleOp::create(rb, loc, pLow, p, both));
            probsIn =
                writeVec(rb, loc, rounded, probsIn, row, rx.c((j - 1) * w));
            sums[j / 2 % 2] = x86vector::DotBF16Op::create(
                rb, loc, vt, sums[j / 2 % 2], rounded, ones);
            continue;
          }
          Value rounded =
              arith::TruncFOp::create(rb, loc, VectorType::get({w}, bf16), p);
          probsIn = writeVec(rb, loc, rounded, probsIn, row, rx.c(j * w));
          sums[j % 2] = arith::AddFOp::create(
              rb, loc, sums[j % 2],
              arith::ExtFOp::create(rb, loc, vt, rounded));
        }
        return arith::AddFOp::create(rb, loc, sums[0], sums[1]).getResult();
      },
      &probs);
  Value rowSum = reduceRows(b, loc, sumVecs, [&](Value x, Value y) {
    return arith::AddFOp::create(b, loc, x, y).getResult();
  });
  Value lNew = arith::AddFOp::create(
      b, loc, arith::MulFOp::create(b, loc, read1D(b, loc, lT, r0, w), corr),
      rowSum);
  scf::YieldOp::create(b, loc,
                       ValueRange{probs, write1D(b, loc, mNew, mT, r0),
                                  write1D(b, loc, lNew, lT, r0),
                                  write1D(b, loc, corr, corrT, r0)});
  return {groups.getResult(0), groups.getResult(1), groups.getResult(2),
          groups.getResult(3)};
}

//===----------------------------------------------------------------------===//
// The tiling, step by step
//===----------------------------------------------------------------------===//

/// What one (batch, head, query tile) iteration works on: its indices, the
/// absolute positions of its first and last query, and its query slice.
struct QueryTile {
  Value batch, head, kvHead;
  /// First query row of the tile and its row count (the last tile may be
  /// short).
  Value q0, rows;
  Value qPos0, qPosLast;
  Value q;
  /// With the micro-kernels, the tile's queries transposed, [head_dim,
  /// rows] f32, or with the bf16 dot their pairs of the head dimension,
  /// [head_dim / 2, 2 rows] bf16 (packQueries; undefined for a short last
  /// tile, which takes the linalg path). Null with AMX, which reads the
  /// queries as stored.
  Value qT;
};

/// One key tile inside a query tile's loop: its index among the key tiles,
/// first key, key count, last key, its K and V slices, and the additive
/// mask's piece with the map that reads it (null without a mask).
struct KeyTile {
  Value index, k0, keys, kLast;
  Value k, v;
  Value mask;
  AffineMap maskMap;
  /// Whether every pair of the tile passes the span and the triangle (null:
  /// always); such a tile evaluates no position mask.
  Value interior;
  /// The first key of the tile this thread visits next (the next step's,
  /// or the next query tile's first), and the first query of its next
  /// query tile: what the whole-tile kernels prefetch. Null: none.
  Value nextK0, nextQ0;
};

/// Whether `op` copies a [batch, seq, heads, head_dim] tensor into [batch,
/// heads, seq, head_dim] or back (a head split or merge: a transpose of the
/// middle two dimensions that computes nothing else).
bool swapsSeqAndHeads(linalg::GenericOp op) {
  if (!op || !op.hasPureTensorSemantics() || op.getNumDpsInputs() != 1 ||
      op.getNumDpsInits() != 1 || op.getNumLoops() != 4)
    return false;
  std::optional<SmallVector<int64_t>> perm =
      linalg::isaTransposeOpInterface(op);
  return perm && *perm == ArrayRef<int64_t>{0, 2, 1, 3};
}

/// The [batch, seq, heads, head_dim] tensor that `v` (an operand of
/// `reader`) is the head split of, when only `reader` reads that split:
/// the tiles then read the rows of each head where they are, and the split
/// is never made. Null otherwise.
Value headSplitSource(Value v, Operation *reader) {
  auto split = v.getDefiningOp<linalg::GenericOp>();
  if (!swapsSeqAndHeads(split) ||
      !llvm::all_of(split->getUsers(),
                    [&](Operation *user) { return user == reader; }))
    return Value();
  return split.getDpsInputs()[0];
}

/// The head merge that is the only reader of `op`'s result, or null: the
/// tiles then write each head's rows where the merge would put them.
linalg::GenericOp headMergeOf(AttentionOp op) {
  if (!op.getResult().hasOneUse())
    return {};
  auto merge = dyn_cast<linalg::GenericOp>(*op.getResult().user_begin());
  return swapsSeqAndHeads(merge) ? merge : linalg::GenericOp();
}

/// The tiled form of one masformer.attention: a parallel loop over (batch,
/// head, query tile) whose body loops over exactly the key tiles that meet
/// the span and the causal triangle, with an online softmax. Each method is
/// one step of the construction.
class AttentionTiler {
public:
  AttentionTiler(AttentionOp op, OpBuilder &b, int64_t tileQ, int64_t tileKV,
                 bool printCounts, int64_t vectorWidth, bool bf16Dot,
                 bool amxTiles, bool readThroughHeadLayouts)
      : op(op), query{op.getQuery()}, key{op.getKey()}, value{op.getValue()},
        b(b), loc(op.getLoc()), ctx(op.getContext()), ix{b, loc}, tileQ(tileQ),
        tileKV(tileKV), printCounts(printCounts), vectorWidth(vectorWidth),
        span(op.getSpan()), causal(op.getCausal()),
        elemTy(op.getQueryType().getElementType()),
        bf16Dot(bf16Dot && vectorWidth == 16) {
    // Sizes as attributes where static (the IR then folds them) and as
    // tensor.dim values where dynamic (the others below, once it is known
    // which tensors the tiles read).
    d = tensor::getMixedSize(b, loc, op.getQuery(), 3);
    // A static scale is a constant inside the tiles' bodies; a run-time one
    // (dynamic head_dim) is computed once here.
    std::optional<float> staticScale = op.getStaticScale();
    scale = staticScale.value_or(0.0f);
    scaleV = staticScale ? Value() : op.buildScale(b, loc);
    // The micro-kernels' softmax applies a positive static scale itself
    // when nothing else stands between the scores and the exponent (a
    // softcap acts on scaled scores, an additive mask adds to them).
    if (staticScale && *staticScale > 0.0f && !op.getSoftcapValue() &&
        !op.getMask())
      softmaxScale = *staticScale;
    // Full tiles use the micro-kernels when the head dimension is static
    // and fits their vectors (P V's columns), and both tile sizes are
    // multiples of their rows (kRows keys of S^T, kRows queries of P V);
    // the queries of S^T take the widest vectors that divide tile-q.
    dStatic = stat(d);
    kernels = dStatic && blockedFits(*dStatic, vectorWidth) &&
              tileQ % kRows == 0 && tileKV % kRows == 0;
    // Edge tiles run in halves when the halves fit the micro-kernels too.
    splitEdges =
        kernels && tileQ % (2 * kRows) == 0 && tileKV % (2 * kRows) == 0;
    // bf16 operands in pairs: 16 queries a vector (also in the edge
    // halves) and the head dimension in vectors of 16 (P V's columns).
    bool pairsFit = kernels && vectorWidth == 16 && elemTy.isBF16() &&
                    *dStatic % 16 == 0 && tileQ % (splitEdges ? 32 : 16) == 0;
    // Both products on AMX tiles: every product's sizes (the tile's, its
    // halves', the head dimension) multiples of 32.
    int64_t amxUnit = splitEdges ? 64 : 32;
    amx = pairsFit && amxTiles && *dStatic % 32 == 0 && tileQ % amxUnit == 0 &&
          tileKV % amxUnit == 0;
    dot = pairsFit && (bf16Dot || amx);
    // With AMX, the tiles read the queries, keys and values through their
    // head splits, and write the result through its head merge: the query
    // rows go to AMX's tile loads, which take any row stride, and the keys
    // and values are packed once (packKeysValues), so that strided rows
    // cost one pass, where the split would have cost a pass through memory
    // of its own (each a bf16 copy of [batch, seq, heads, head_dim]). The
    // other kernels read K and V rows once per query tile, and keep
    // contiguous heads.
    if (amx && readThroughHeadLayouts) {
      auto through = [&](Value v) {
        Value source = headSplitSource(v, op);
        return source ? Operand{source, true} : Operand{v, false};
      };
      query = through(op.getQuery());
      key = through(op.getKey());
      value = through(op.getValue());
      merge = headMergeOf(op);
    }
    batchF = size(query, 0);
    headsF = size(query, 1);
    sqF = size(query, 2);
    skvF = size(key, 2);
    kvHeadsF = size(key, 1);
  }

  /// The head merge the result is written through (its result replaces the
  /// merge's), or null: the result replaces the op's.
  linalg::GenericOp headMerge() const { return merge; }

  /// The attention's result.
  Value build();

private:
  /// A tensor the tiles read or write: [batch, heads, seq, head_dim], or
  /// with `seqMajor` [batch, seq, heads, head_dim].
  struct Operand {
    Value t;
    bool seqMajor = false;
  };
  /// Size `i` of `x` in [batch, heads, seq, head_dim] order.
  OpFoldResult size(const Operand &x, int64_t i) {
    static constexpr int64_t kSeqMajor[] = {0, 2, 1, 3};
    return tensor::getMixedSize(b, loc, x.t, x.seqMajor ? kSeqMajor[i] : i);
  }
  /// The rank-reduced [rs, cs] slice of x at (lead = (batch, head), r0, c0).
  Value slice(OpBuilder &sb, const Operand &x, ArrayRef<OpFoldResult> lead,
              OpFoldResult r0, OpFoldResult rs, OpFoldResult c0,
              OpFoldResult cs) {
    return slice2D(sb, loc, x.t, lead, r0, rs, c0, cs, x.seqMajor);
  }
  /// The indices of x's element (batch, head, row, col).
  static SmallVector<Value> at(const Operand &x, Value batch, Value head,
                               Value row, Value col) {
    if (x.seqMajor)
      return {batch, row, head, col};
    return {batch, head, row, col};
  }
  Value val(OpFoldResult f) {
    return getValueOrCreateConstantIndexOp(b, loc, f);
  }
  static std::optional<int64_t> stat(OpFoldResult f) {
    return getConstantIntValue(f);
  }
  /// ceil(size / tile), folded when `size` is static.
  OpFoldResult tileCount(OpFoldResult size, int64_t tile);
  Value scaleAt(OpBuilder &nb, Location nl) {
    return scaleV ? scaleV : f32Const(nb, nl, scale);
  }

  Value packQueries(const QueryTile &qt);
  std::pair<Value, Value> packKeysValues();
  void prefetchRow(OpBuilder &pb, Value buf, const QueryTile &qt, bool kv,
                   Value row, bool write = false);
  void prefetchNext(OpBuilder &pb, const QueryTile &qt, const KeyTile &kt,
                    int64_t tq, int64_t tk, Value i0, int64_t rows,
                    bool output);
  QueryTile beginQueryTile(scf::ForallOp forall);
  /// The bounds of a query tile's loop over key tiles; with sinks, the
  /// number of sink tiles and the first tile of the span's run.
  struct TileLoop {
    Value lb, ub;
    Value sinkTiles, spanFirst;
  };
  TileLoop keyTileRange(const QueryTile &qt);
  Value tileIndex(Value step, const TileLoop &loop);
  void printTileCount(Value first, Value end);
  /// Key tile `index`'s positions and whether it is interior, without its
  /// slices of K, V and the mask (beginKeyTile adds them).
  KeyTile keyTilePositions(const QueryTile &qt, Value index);
  KeyTile beginKeyTile(const QueryTile &qt, Value index);
  Value sliceMask(const QueryTile &qt, Value k0, Value keys, AffineMap &map);
  Value buildLogits(OpBuilder &bb, const QueryTile &qt, const KeyTile &kt,
                    Value scores, bool masked, bool scaled, bool transposed);
  Value logitsOf(OpBuilder &bb, const QueryTile &qt, const KeyTile &kt,
                 Value scores, bool scaled, bool transposed = false);
  SmallVector<Value> stepLinalg(OpBuilder &bb, const QueryTile &qt,
                                const KeyTile &kt, ValueRange state);
  SmallVector<Value> stepKernels(OpBuilder &bb, const QueryTile &qt,
                                 const KeyTile &kt, ValueRange state,
                                 int64_t tq, int64_t tk,
                                 Value outTile = Value());
  SmallVector<Value> stepAMX(OpBuilder &bb, const QueryTile &qt,
                             const KeyTile &kt, ValueRange state, int64_t tq,
                             int64_t tk, Value outTile);
  std::pair<QueryTile, KeyTile> subTile(const QueryTile &qt, const KeyTile &kt,
                                        Value r0, int64_t rows, Value c0,
                                        int64_t cols);
  SmallVector<Value> stepEdge(const QueryTile &qt, const KeyTile &kt,
                              ValueRange state);
  SmallVector<Value> step(const QueryTile &qt, const KeyTile &kt,
                          ValueRange state);
  Value reciprocals(OpBuilder &bb, Value l);
  Value normalize(Value outTile, Value acc, Value l);
  Value wholeInteriorTile(const QueryTile &qt, Value index);
  Value lastStep(const QueryTile &qt, Value lastIndex, ValueRange state,
                 Value outTile, Value nextFirstK0);

  AttentionOp op;
  /// What the tiles read (the op's operands, or what their head splits
  /// copy), and the head merge they write through.
  Operand query, key, value;
  linalg::GenericOp merge;
  OpBuilder &b;
  Location loc;
  MLIRContext *ctx;
  Idx ix;
  int64_t tileQ, tileKV;
  bool printCounts;
  int64_t vectorWidth;
  SpanAttr span;
  bool causal;
  Type elemTy;
  OpFoldResult batchF, headsF, sqF, d, skvF, kvHeadsF;
  float scale = 0.0f;
  Value scaleV;
  /// The scale the micro-kernels' softmax applies (their scores then
  /// stored unscaled), or none (the scores kernel applies it).
  std::optional<float> softmaxScale;
  std::optional<int64_t> dStatic;
  bool kernels = false;
  bool splitEdges = false;
  /// Whether the micro-kernels run on bf16 pairs: on vdpbf16ps, the
  /// queries packed as pairs of the head dimension, P written as pairs of
  /// keys, V packed as pairs of keys; with `amx`, stepAMX's layouts.
  bool dot = false;
  /// Whether full tiles run both products on AMX tiles (stepAMX).
  bool amx = false;
  /// Whether AVX512-BF16's instructions are available (the softmax of
  /// stepAMX rounds and sums with them).
  bool bf16Dot = false;
  /// The query, key and value tensors' buffers, for prefetches (with the
  /// micro-kernels), and inside the parallel loop the result's.
  Value qBuf, kBuf, vBuf, oBuf;
  /// With `amx`: the keys and values packed as AMX's B operands
  /// (packKeysValues).
  Value kPacked, vPacked;
  static constexpr float kNegInf = -std::numeric_limits<float>::infinity();
};

OpFoldResult AttentionTiler::tileCount(OpFoldResult size, int64_t tile) {
  if (std::optional<int64_t> s = stat(size))
    return b.getIndexAttr(llvm::divideCeil(*s, tile));
  return ix.cdiv(val(size), ix.c(tile));
}

/// The t elements of row `i` of a matrix from column `c0`: f32, or t pairs
/// of bf16 as i32 (transposeTile).
using RowReader =
    llvm::function_ref<Value(OpBuilder &, Value i, Value c0, int64_t t)>;

/// The t x t block whose rows are `rows` (t vectors of t 32-bit elements,
/// t a power of two) transposed in registers by shuffles of two vectors,
/// in the order x86's in-lane shuffles make cheap: with lanes of 4
/// elements (128 bits), (1) rows 2 i and 2 i + 1 interleaved element by
/// element within each lane (unpcklps / unpckhps), (2) the results
/// interleaved by pairs of elements within each lane (shufps): each lane
/// then holds a 4 x 4 block transposed; (3) the t / 4 x t / 4 matrix of
/// lanes transposed, log2(t / 4) rounds of taking the even and the odd
/// lanes of two vectors (vshuff32x4, vperm2f128). t log2(t) shuffles: 24
/// for 8 x 8, 64 for 16 x 16, as MLIR's own lowerings of those two sizes
/// (x86vector's AVX2 8 x 8 and vector's shuffle_16x16), with any other
/// power of two handled the same way (below 4, by interleaves).
///
/// Built as shuffles rather than a vector.transpose: the canonicalizations
/// after bufferization take a vector.transpose of a block of rows apart
/// element by element (vector.to_elements / from_elements) before any
/// lowering of transposes runs, and LLVM then assembled the 16 x 16 ones
/// with spills to the stack.
SmallVector<Value> transposeRows(OpBuilder &b, Location loc,
                                 SmallVector<Value> rows) {
  int64_t t = rows.size();
  assert(llvm::isPowerOf2_64(t) && "expected a power of two");
  auto shuffle = [&](Value x, Value y, ArrayRef<int64_t> mask) -> Value {
    return vector::ShuffleOp::create(b, loc, x, y, mask);
  };
  if (t < 4) {
    // Round after round, row 2 i interleaves the low halves of rows i and
    // i + t / 2, row 2 i + 1 their high halves.
    SmallVector<int64_t> lo, hi;
    for (int64_t e = 0; e < t / 2; ++e) {
      lo.append({e, t + e});
      hi.append({t / 2 + e, t + t / 2 + e});
    }
    for (int64_t round = 1; round < t; round *= 2) {
      SmallVector<Value> next(t);
      for (int64_t i = 0; i < t / 2; ++i) {
        next[2 * i] = shuffle(rows[i], rows[i + t / 2], lo);
        next[2 * i + 1] = shuffle(rows[i], rows[i + t / 2], hi);
      }
      rows = std::move(next);
    }
    return rows;
  }
  int64_t lanes = t / 4;
  // A mask made of `perLane(l)` for each lane l.
  auto byLane = [&](auto perLane) {
    SmallVector<int64_t> mask;
    for (int64_t l = 0; l < lanes; ++l)
      for (int64_t e : perLane(4 * l))
        mask.push_back(e);
    return mask;
  };
  using Four = std::array<int64_t, 4>;
  SmallVector<int64_t> unpackLo = byLane([&](int64_t f) {
    return Four{f, t + f, f + 1, t + f + 1};
  });
  SmallVector<int64_t> unpackHi = byLane([&](int64_t f) {
    return Four{f + 2, t + f + 2, f + 3, t + f + 3};
  });
  SmallVector<int64_t> pairsLo = byLane([&](int64_t f) {
    return Four{f, f + 1, t + f, t + f + 1};
  });
  SmallVector<int64_t> pairsHi = byLane([&](int64_t f) {
    return Four{f + 2, f + 3, t + f + 2, t + f + 3};
  });
  // (1) and (2): u[4 g + j] holds, in lane l, column 4 l + j of rows 4 g to
  // 4 g + 3.
  SmallVector<Value> v(t), u(t);
  for (int64_t i = 0; i < t / 2; ++i) {
    v[2 * i] = shuffle(rows[2 * i], rows[2 * i + 1], unpackLo);
    v[2 * i + 1] = shuffle(rows[2 * i], rows[2 * i + 1], unpackHi);
  }
  for (int64_t g = 0; g < t; g += 4) {
    u[g] = shuffle(v[g], v[g + 2], pairsLo);
    u[g + 1] = shuffle(v[g], v[g + 2], pairsHi);
    u[g + 2] = shuffle(v[g + 1], v[g + 3], pairsLo);
    u[g + 3] = shuffle(v[g + 1], v[g + 3], pairsHi);
  }
  // (3): the even lanes of two vectors, then the odd ones.
  SmallVector<int64_t> even, odd;
  for (int64_t from : {int64_t(0), t})
    for (int64_t l = 0; l < lanes; ++l)
      for (int64_t e = 0; e < 4; ++e)
        (l % 2 ? odd : even).push_back(from + 4 * l + e);
  SmallVector<Value> columns(t);
  for (int64_t j = 0; j < 4; ++j) {
    SmallVector<Value> x;
    for (int64_t k = 0; k < lanes; ++k)
      x.push_back(u[4 * k + j]);
    for (int64_t round = 1; round < lanes; round *= 2) {
      SmallVector<Value> next(lanes);
      for (int64_t k = 0; k < lanes / 2; ++k) {
        next[k] = shuffle(x[2 * k], x[2 * k + 1], even);
        next[lanes / 2 + k] = shuffle(x[2 * k], x[2 * k + 1], odd);
      }
      x = std::move(next);
    }
    for (int64_t l = 0; l < lanes; ++l)
      columns[4 * l + j] = x[l];
  }
  return columns;
}

/// A [rows, cols] matrix read by `readRow`, transposed: [cols, rows] f32,
/// or with `pairs` (a matrix of cols 32-bit pairs of bf16 a row) [cols, 2
/// rows] bf16. Square blocks of t x t (t the widest vector up to w that
/// divides both sizes) are read a row at a time, in the order the rows lie
/// in memory, and transposed in registers (transposeRows: shuffles, where
/// a strided copy would be a gather per column touching every row's line
/// at once). The result is written into `into` when given (a destination
/// of the result's type), else into a new tensor.
Value transposeTile(OpBuilder &b, Location loc, RowReader readRow, int64_t rows,
                    int64_t cols, bool pairs, int64_t w, Value into = Value()) {
  Idx ix{b, loc};
  int64_t t = std::min(queryWidth(rows, w), queryWidth(cols, w));
  auto ty = pairs ? RankedTensorType::get({cols, 2 * rows}, b.getBF16Type())
                  : RankedTensorType::get({cols, rows}, b.getF32Type());
  Value init =
      into ? into
           : tensor::EmptyOp::create(b, loc, ty.getShape(), ty.getElementType())
                 .getResult();
  auto rowLoop = ix.loop(0, rows, t, ValueRange{init});
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(rowLoop.getBody());
  auto colLoop = ix.loop(0, cols, t, ValueRange{rowLoop.getRegionIterArg(0)});
  b.setInsertionPointToStart(colLoop.getBody());
  Value r0 = rowLoop.getInductionVar(), c0 = colLoop.getInductionVar();
  auto pairsTy = VectorType::get({2 * t}, b.getBF16Type());
  SmallVector<Value> block;
  for (int64_t i = 0; i < t; ++i)
    block.push_back(readRow(b, ix.add(r0, ix.c(i)), c0, t));
  SmallVector<Value> columns = transposeRows(b, loc, std::move(block));
  Value out = colLoop.getRegionIterArg(0);
  for (int64_t j = 0; j < t; ++j) {
    Value row = columns[j];
    if (pairs) {
      Value p = vector::BitCastOp::create(b, loc, pairsTy, row);
      Value at = ix.add(c0, ix.c(j));
      out = writeVec(b, loc, p, out, at, ix.mul(r0, ix.c(2)));
    } else {
      out = writeVec(b, loc, row, out, ix.add(c0, ix.c(j)), r0);
    }
  }
  scf::YieldOp::create(b, loc, out);
  b.setInsertionPointAfter(colLoop);
  scf::YieldOp::create(b, loc, colLoop.getResult(0));
  return rowLoop.getResult(0);
}

/// A row of `pairs` of bf16 (transposeTile) read from `x` at `indices`
/// (the element index of the row's pair c0 last): the t pairs as i32.
Value readPairs(OpBuilder &b, Location loc, Value x, ValueRange indices,
                int64_t t) {
  Value pad = arith::ConstantOp::create(b, loc, b.getZeroAttr(b.getBF16Type()));
  Value p = vector::TransferReadOp::create(
      b, loc, VectorType::get({2 * t}, b.getBF16Type()), x, indices, pad,
      ArrayRef<bool>{true});
  return vector::BitCastOp::create(b, loc, VectorType::get({t}, b.getI32Type()),
                                   p);
}

/// The query tile transposed, [head_dim, tile-q] f32, for the scores'
/// micro-kernel (S^T = K Q^T): packed once per query tile and reused by
/// every key tile (with bf16 pairs, the queries' pairs of the head
/// dimension, [head_dim / 2, 2 tile-q] bf16: the same transpose, of 32-bit
/// pairs; transposeTile). The rows are read from the query tensor, those
/// past a short last tile (which takes the linalg path and reads none of
/// them) clamped to its last: no branch, whose result bufferization would
/// give a layout of unknown strides (AMX's tile loads need known unit
/// strides).
Value AttentionTiler::packQueries(const QueryTile &qt) {
  int64_t dd = *dStatic;
  auto readRow = [&](OpBuilder &rb, Value i, Value c0, int64_t t) -> Value {
    Idx rx{rb, loc};
    Value row = rx.add(qt.q0, rx.min(i, rx.sub(qt.rows, rx.c(1))));
    if (dot)
      return readPairs(rb, loc, query.t,
                       at(query, qt.batch, qt.head, row, rx.mul(c0, rx.c(2))),
                       t);
    Type et = elemTy;
    Value pad = arith::ConstantOp::create(rb, loc, rb.getZeroAttr(et));
    Value v = vector::TransferReadOp::create(
        rb, loc, VectorType::get({t}, et), query.t,
        at(query, qt.batch, qt.head, row, c0), pad, ArrayRef<bool>{true});
    if (et.isF32())
      return v;
    return arith::ExtFOp::create(rb, loc, VectorType::get({t}, rb.getF32Type()),
                                 v);
  };
  return transposeTile(b, loc, readRow, tileQ, dot ? dd / 2 : dd, dot,
                       vectorWidth);
}

/// For AMX (stepAMX), the keys' pairs of the head dimension transposed,
/// [batch, kv_heads, head_dim / 2, 2 skv] bf16 (element (n, 2 j + r) of a
/// head is K's (n, 2 j + r) at (j, 2 n + r): S = Q K^T's B operand), and
/// the values' pairs of keys, [batch, kv_heads, skv / 2, 2 head_dim] (P
/// V's), for every full key tile: packed once, by a parallel loop of their
/// own over (batch, kv head, key tile), rather than by every query tile
/// that reads them. With fewer queries than a tile (no full tile reads
/// them: decoding) they are empty and the loop runs no iteration.
std::pair<Value, Value> AttentionTiler::packKeysValues() {
  int64_t dd = *dStatic;
  Type bf16 = b.getBF16Type();
  Value skv = val(skvF);
  // The keys packed: all of them, or none when no query tile is full (a
  // decoding step allocates nothing).
  Value someFull = ix.cmp(arith::CmpIPredicate::sge, val(sqF), ix.c(tileQ));
  std::optional<int64_t> sqStatic = stat(sqF), skvStatic = stat(skvF);
  OpFoldResult twice, half;
  if (sqStatic && skvStatic) {
    int64_t keys = *sqStatic >= tileQ ? *skvStatic : 0;
    twice = b.getIndexAttr(2 * keys);
    half = b.getIndexAttr(keys / 2);
  } else {
    Value keys = arith::SelectOp::create(b, loc, someFull, skv, ix.c(0));
    twice = ix.mul(keys, ix.c(2));
    half = ix.fdiv(keys, ix.c(2));
  }
  Value kp0 = tensor::EmptyOp::create(
      b, loc,
      ArrayRef<OpFoldResult>{batchF, kvHeadsF, b.getIndexAttr(dd / 2), twice},
      bf16);
  Value vp0 = tensor::EmptyOp::create(
      b, loc,
      ArrayRef<OpFoldResult>{batchF, kvHeadsF, half, b.getIndexAttr(2 * dd)},
      bf16);
  Value tiles = arith::SelectOp::create(b, loc, someFull,
                                        ix.fdiv(skv, ix.c(tileKV)), ix.c(0));
  auto forall = scf::ForallOp::create(
      b, loc, ArrayRef<OpFoldResult>{batchF, kvHeadsF, tiles},
      ValueRange{kp0, vp0}, std::nullopt);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(forall.getTerminator());
  Value bi = forall.getInductionVar(0), hi = forall.getInductionVar(1);
  Value k0 = ix.mul(forall.getInductionVar(2), ix.c(tileKV));
  SmallVector<OpFoldResult> lead = {bi, hi};
  Value kTile = castTo(
      b, loc,
      slice(b, key, lead, k0, b.getIndexAttr(tileKV), b.getIndexAttr(0), d),
      {tileKV, dd});
  auto readK = [&](OpBuilder &rb, Value i, Value c0, int64_t t) {
    Idx rx{rb, loc};
    return readPairs(rb, loc, kTile, ValueRange{i, rx.mul(c0, rx.c(2))}, t);
  };
  // Written into their slices of the results (no copy).
  Value kCol = ix.mul(k0, ix.c(2)), vRow = ix.fdiv(k0, ix.c(2));
  Value kInto =
      slice2D(b, loc, forall.getRegionIterArgs()[0], lead, b.getIndexAttr(0),
              b.getIndexAttr(dd / 2), kCol, b.getIndexAttr(2 * tileKV));
  Value vInto = slice2D(b, loc, forall.getRegionIterArgs()[1], lead, vRow,
                        b.getIndexAttr(tileKV / 2), b.getIndexAttr(0),
                        b.getIndexAttr(2 * dd));
  Value kT = transposeTile(b, loc, readK, tileKV, dd / 2, /*pairs=*/true,
                           vectorWidth, kInto);
  Value vTile = castTo(
      b, loc,
      slice(b, value, lead, k0, b.getIndexAttr(tileKV), b.getIndexAttr(0), d),
      {tileKV, dd});
  Value vP = packRowPairs(b, loc, vTile, tileKV, dd, vInto);
  b.setInsertionPointToStart(forall.getTerminator().getBody());
  auto ones = SmallVector<OpFoldResult>(4, b.getIndexAttr(1));
  tensor::ParallelInsertSliceOp::create(
      b, loc, kT, forall.getRegionIterArgs()[0],
      ArrayRef<OpFoldResult>{bi, hi, b.getIndexAttr(0), kCol},
      ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1),
                             b.getIndexAttr(dd / 2),
                             b.getIndexAttr(2 * tileKV)},
      ones);
  tensor::ParallelInsertSliceOp::create(
      b, loc, vP, forall.getRegionIterArgs()[1],
      ArrayRef<OpFoldResult>{bi, hi, vRow, b.getIndexAttr(0)},
      ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1),
                             b.getIndexAttr(tileKV / 2),
                             b.getIndexAttr(2 * dd)},
      ones);
  return {forall.getResult(0), forall.getResult(1)};
}

/// Prefetches every cache line of row `row` (clamped to the last row) of
/// the query or result (`kv` false) or key/value buffer `buf` for the query
/// tile's head, into all cache levels; with `write`, to be written.
void AttentionTiler::prefetchRow(OpBuilder &pb, Value buf, const QueryTile &qt,
                                 bool kv, Value row, bool write) {
  Idx px{pb, loc};
  Value rows = val(kv ? skvF : sqF);
  Value r = px.min(row, px.sub(rows, px.c(1)));
  int64_t bytes = cast<MemRefType>(buf.getType()).getElementTypeBitWidth() / 8;
  int64_t perLine = std::max<int64_t>(1, 64 / bytes);
  bool seqMajor = buf == qBuf   ? query.seqMajor
                  : buf == kBuf ? key.seqMajor
                  : buf == vBuf ? value.seqMajor
                                : static_cast<bool>(merge);
  for (int64_t c = 0; c < *dStatic; c += perLine)
    memref::PrefetchOp::create(pb, loc, buf,
                               at(Operand{buf, seqMajor}, qt.batch,
                                  kv ? qt.kvHead : qt.head, r, px.c(c)),
                               /*isWrite=*/write, /*localityHint=*/3,
                               /*isDataCache=*/true);
}

/// The prefetches of a [tq, tk] part's scores kernel, at its block of
/// `rows` keys from i0: the same rows of the next key tile's K and V, and
/// the next query tile's rows of this part's queries in proportion (tq rows
/// over the tk / rows blocks); with `output` (the query tile's last key
/// tile, whose P V stores the result) also this part's rows of the result,
/// to be written. Spread over the product this way, they overlap with its
/// arithmetic: at long lengths Q, K and V come from memory, and a block
/// span reads each query and key tile for only a few steps, too few to hide
/// the misses of its first reads; the result's lines, written once per
/// query tile, would otherwise be fetched while P V stores them.
void AttentionTiler::prefetchNext(OpBuilder &pb, const QueryTile &qt,
                                  const KeyTile &kt, int64_t tq, int64_t tk,
                                  Value i0, int64_t rows, bool output) {
  Idx px{pb, loc};
  for (int64_t r = 0; r < rows; ++r) {
    Value row = px.add(kt.nextK0, px.add(i0, px.c(r)));
    prefetchRow(pb, kBuf, qt, /*kv=*/true, row);
    prefetchRow(pb, vBuf, qt, /*kv=*/true, row);
  }
  int64_t blocks = tk / rows;
  int64_t perBlock = llvm::divideCeil(tq, blocks);
  Value first =
      px.add(kt.nextQ0, px.mul(px.fdiv(i0, px.c(rows)), px.c(perBlock)));
  for (int64_t r = 0; r < perBlock; ++r)
    prefetchRow(pb, qBuf, qt, /*kv=*/false, px.add(first, px.c(r)));
  if (!output || !oBuf)
    return;
  Value own = px.add(qt.q0, px.mul(px.fdiv(i0, px.c(rows)), px.c(perBlock)));
  for (int64_t r = 0; r < perBlock; ++r)
    prefetchRow(pb, oBuf, qt, /*kv=*/false, px.add(own, px.c(r)),
                /*write=*/true);
}

/// The indices of one iteration of the (batch, head, query tile) loop, the
/// key/value head its query head reads (GQA: heads / kv_heads queries per
/// key head), and the absolute positions of its queries: queries align to
/// the end of the keys (docs/spans.md).
QueryTile AttentionTiler::beginQueryTile(scf::ForallOp forall) {
  QueryTile qt;
  qt.batch = forall.getInductionVar(0);
  qt.head = forall.getInductionVar(1);
  Value group = stat(headsF) && stat(kvHeadsF)
                    ? ix.c(*stat(headsF) / *stat(kvHeadsF))
                    : arith::DivUIOp::create(b, loc, val(headsF), val(kvHeadsF))
                          .getResult();
  qt.kvHead = arith::DivUIOp::create(b, loc, qt.head, group);
  qt.q0 = ix.mul(forall.getInductionVar(2), ix.c(tileQ));
  qt.rows = ix.min(ix.c(tileQ), ix.sub(val(sqF), qt.q0));
  Value offset = stat(sqF) && stat(skvF) ? ix.c(*stat(skvF) - *stat(sqF))
                                         : ix.sub(val(skvF), val(sqF));
  qt.qPos0 = ix.add(qt.q0, offset);
  qt.qPosLast = ix.add(qt.qPos0, ix.sub(qt.rows, ix.c(1)));
  qt.q = slice(b, query, {qt.batch, qt.head}, qt.q0, qt.rows, b.getIndexAttr(0),
               d);
  return qt;
}

/// The loop over the key tiles this query tile visits: the smallest run
/// that covers the keys the span and the triangle allow it and, with sinks,
/// the tiles of the sink keys before it. Without sinks the loop runs
/// [first, end) over the tile indices themselves; with them it runs
/// [0, count) and tileIndex maps the first `sinkTiles` steps to the sink
/// tiles and the rest to the span's run, in ascending order and without
/// visiting a tile twice.
AttentionTiler::TileLoop AttentionTiler::keyTileRange(const QueryTile &qt) {
  auto [lo, hi] = buildSpanKeyRange(ix, span, causal, qt.qPos0, qt.qPosLast,
                                    val(skvF));
  Value first = ix.fdiv(lo, ix.c(tileKV));
  Value end = ix.max(first, ix.cdiv(hi, ix.c(tileKV)));
  Value sinkEnd = buildSinkKeyEnd(ix, span, causal, qt.qPosLast, val(skvF));
  if (!sinkEnd)
    return {first, end, Value(), Value()};
  Value sinkTiles = ix.cdiv(sinkEnd, ix.c(tileKV));
  Value spanFirst = ix.max(first, sinkTiles);
  Value spanEnd = ix.max(spanFirst, end);
  return {ix.c(0), ix.add(sinkTiles, ix.sub(spanEnd, spanFirst)), sinkTiles,
          spanFirst};
}

/// The key tile of loop step `step` (see keyTileRange).
Value AttentionTiler::tileIndex(Value step, const TileLoop &loop) {
  if (!loop.sinkTiles)
    return step;
  Value inSinks = ix.cmp(arith::CmpIPredicate::slt, step, loop.sinkTiles);
  Value spanTile = ix.add(ix.sub(step, loop.sinkTiles), loop.spanFirst);
  return arith::SelectOp::create(b, loc, inSinks, step, spanTile);
}

/// Testing only: prints the number of key tiles a query tile visits.
void AttentionTiler::printTileCount(Value first, Value end) {
  Value n =
      arith::IndexCastOp::create(b, loc, b.getI64Type(), ix.sub(end, first));
  func::CallOp::create(b, loc, "printI64", TypeRange{}, ValueRange{n});
  func::CallOp::create(b, loc, "printNewline", TypeRange{}, ValueRange{});
}

/// The additive mask's piece for the keys [k0, k0 + keys) of the query
/// tile, its broadcast dimensions kept at 0; `map` reads it from the (query,
/// key) loop dimensions of a tile.
Value AttentionTiler::sliceMask(const QueryTile &qt, Value k0, Value keys,
                                AffineMap &map) {
  Value mask = op.getMask();
  auto mTy = cast<RankedTensorType>(mask.getType());
  int64_t r = mTy.getRank();
  SmallVector<OpFoldResult> offs, sizes, strides(r, b.getIndexAttr(1));
  SmallVector<int64_t> resultShape;
  SmallVector<AffineExpr> exprs;
  OpFoldResult pos[4] = {qt.batch, qt.head, qt.q0, k0};
  OpFoldResult ext[4] = {b.getIndexAttr(1), b.getIndexAttr(1), qt.rows, keys};
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
  map = AffineMap::get(2, 0, exprs, ctx);
  return tensor::ExtractSliceOp::create(b, loc, resTy, mask, offs, sizes,
                                        strides);
}

/// The key tile `index` of the query tile: its keys, K and V slices and
/// mask piece.
KeyTile AttentionTiler::keyTilePositions(const QueryTile &qt, Value index) {
  KeyTile kt;
  kt.index = index;
  kt.k0 = ix.mul(index, ix.c(tileKV));
  kt.keys = ix.min(ix.c(tileKV), ix.sub(val(skvF), kt.k0));
  kt.kLast = ix.add(kt.k0, ix.sub(kt.keys, ix.c(1)));
  kt.interior = buildSpanTileInterior(ix, span, causal, qt.qPos0, qt.qPosLast,
                                      kt.k0, kt.kLast);
  return kt;
}

KeyTile AttentionTiler::beginKeyTile(const QueryTile &qt, Value index) {
  KeyTile kt = keyTilePositions(qt, index);
  SmallVector<OpFoldResult> kvLead = {qt.batch, qt.kvHead};
  kt.k = slice(b, key, kvLead, kt.k0, kt.keys, b.getIndexAttr(0), d);
  kt.v = slice(b, value, kvLead, kt.k0, kt.keys, b.getIndexAttr(0), d);
  if (op.getMask())
    kt.mask = sliceMask(qt, kt.k0, kt.keys, kt.maskMap);
  return kt;
}

/// logits = scale * S, softcapped, (+ mask), and with `masked` -inf where
/// the span or the triangle forbids the pair. `scaled`: S already carries
/// the scale and the softcap. `transposed`: S and the logits are [keys,
/// queries].
Value AttentionTiler::buildLogits(OpBuilder &bb, const QueryTile &qt,
                                  const KeyTile &kt, Value scores, bool masked,
                                  bool scaled, bool transposed) {
  // In place over the scores (the step's own tile): a new tensor would
  // make the edge tiles' masked branch yield another buffer than the
  // unmasked one, and bufferization would check the tile's ownership at run
  // time.
  SmallVector<Value> ins;
  SmallVector<AffineMap> maps;
  if (kt.mask) {
    ins.push_back(kt.mask);
    // The mask's map reads (query, key) loop dimensions.
    maps.push_back(transposed ? kt.maskMap.compose(dimsMap(ctx, 2, {1, 0}))
                              : kt.maskMap);
  }
  int64_t queryDim = transposed ? 1 : 0;
  maps.push_back(dimsMap(ctx, 2, {0, 1}));
  return linalg::GenericOp::create(
             bb, loc, scores.getType(), ins, ValueRange{scores}, maps,
             ArrayRef<IteratorType>{kPar, kPar},
             [&](OpBuilder &nb, Location nl, ValueRange a) {
               Value x = a.back();
               if (!scaled)
                 x = AttentionOp::applySoftcap(
                     nb, nl, arith::MulFOp::create(nb, nl, x, scaleAt(nb, nl)),
                     op.getSoftcapValue());
               if (kt.mask)
                 x = arith::AddFOp::create(nb, nl, x, toF32(nb, nl, a[0]));
               if (masked) {
                 Idx nx{nb, nl};
                 Value qp = nx.add(qt.qPos0,
                                   linalg::IndexOp::create(nb, nl, queryDim));
                 Value kp = nx.add(
                     kt.k0, linalg::IndexOp::create(nb, nl, 1 - queryDim));
                 Value ok = buildSpanAllowed(nb, nl, span, causal, qp, kp);
                 if (ok)
                   x = arith::SelectOp::create(nb, nl, ok, x,
                                               f32Const(nb, nl, kNegInf));
               }
               linalg::YieldOp::create(nb, nl, x);
             })
      .getResult(0);
}

/// The logits of a tile: a tile whose every pair passes the span and the
/// triangle skips the position mask (and, when S carries the scale and
/// there is no additive mask, uses S as it is); only boundary tiles
/// evaluate the mask.
Value AttentionTiler::logitsOf(OpBuilder &bb, const QueryTile &qt,
                               const KeyTile &kt, Value scores, bool scaled,
                               bool transposed) {
  auto unmasked = [&](OpBuilder &ub) {
    if (scaled && !kt.mask)
      return scores;
    return buildLogits(ub, qt, kt, scores, /*masked=*/false, scaled,
                       transposed);
  };
  if (!kt.interior)
    return unmasked(bb);
  auto ifOp = scf::IfOp::create(
      bb, loc, kt.interior,
      [&](OpBuilder &tb, Location) {
        scf::YieldOp::create(tb, loc, unmasked(tb));
      },
      [&](OpBuilder &eb, Location) {
        scf::YieldOp::create(eb, loc,
                             buildLogits(eb, qt, kt, scores, /*masked=*/true,
                                         scaled, transposed));
      });
  return ifOp.getResult(0);
}

/// One key tile with linalg ops (any tile): S = Q K^T, logits, then the
/// online softmax: m' = max(m, rowmax), corr = exp(m - m'),
/// l' = l * corr + rowsum(exp(logits - m')), acc' = acc * corr + P V.
SmallVector<Value> AttentionTiler::stepLinalg(OpBuilder &bb,
                                              const QueryTile &qt,
                                              const KeyTile &kt,
                                              ValueRange state) {
  Value m = state[0], l = state[1], acc = state[2];
  Value qs = qt.rows, ks = kt.keys;
  // S = Q K^T in f32, loops (i, j, e): dot products along contiguous rows.
  // With a static head dimension of whole vectors (rowVectors), each
  // query row's vectors are read once and each key's dot product is
  // vector FMAs over its row and one reduction (a decode step's one query
  // row runs every key tile here; LLVM vectorized the loops 4 lanes wide).
  bool rowVectors = dStatic && blockedFits(*dStatic, vectorWidth) &&
                    *dStatic / vectorWidth <= 8;
  // Loops over the tile's query rows and, inside, its keys: `row(i, t)`
  // builds row i's body and returns the carried tensor `t` updated;
  // `key(j, carried)` builds key j's and returns the next carried values.
  using RowBody = llvm::function_ref<Value(Value, Value)>;
  using KeyBody = llvm::function_ref<SmallVector<Value>(Value, ValueRange)>;
  auto forEachRow = [&](Value init, RowBody row) {
    auto rows = Idx{bb, loc}.loop(0, qs, 1, ValueRange{init});
    OpBuilder::InsertionGuard guard(bb);
    bb.setInsertionPointToStart(rows.getBody());
    scf::YieldOp::create(bb, loc,
                         row(rows.getInductionVar(), rows.getRegionIterArg(0)));
    return rows.getResult(0);
  };
  auto forEachKey = [&](ValueRange init, KeyBody key) {
    auto keys = Idx{bb, loc}.loop(0, ks, 1, init);
    OpBuilder::InsertionGuard guard(bb);
    bb.setInsertionPointToStart(keys.getBody());
    scf::YieldOp::create(bb, loc,
                         key(keys.getInductionVar(), keys.getRegionIterArgs()));
    return keys;
  };
  int64_t w = vectorWidth, vecs = rowVectors ? *dStatic / w : 0;
  auto col = [&](int64_t c) { return Idx{bb, loc}.c(c * w); };
  Value s0 = filledF32(bb, loc, {qs, ks}, 0.0f);
  Value scores;
  if (rowVectors) {
    scores = forEachRow(s0, [&](Value i, Value s) {
      SmallVector<Value> q;
      for (int64_t c = 0; c < vecs; ++c)
        q.push_back(readF32(bb, loc, qt.q, i, col(c), w));
      return forEachKey(s,
                        [&](Value j, ValueRange carried) {
                          Value dot;
                          for (int64_t c = 0; c < vecs; ++c) {
                            Value kv = readF32(bb, loc, kt.k, j, col(c), w);
                            dot = c == 0
                                      ? arith::MulFOp::create(bb, loc, q[c], kv)
                                            .getResult()
                                      : vector::FMAOp::create(bb, loc, q[c], kv,
                                                              dot);
                          }
                          Value sum = vector::ReductionOp::create(
                              bb, loc, vector::CombiningKind::ADD, dot);
                          return SmallVector<Value>{
                              tensor::InsertOp::create(bb, loc, sum, carried[0],
                                                       ValueRange{i, j})
                                  .getResult()};
                        })
          .getResult(0);
    });
  } else {
    scores = linalg::GenericOp::create(
                 bb, loc, s0.getType(), ValueRange{qt.q, kt.k}, ValueRange{s0},
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
  }
  Value logits = logitsOf(bb, qt, kt, scores, /*scaled=*/false);
  auto safe = [&](OpBuilder &nb, Location nl, Value x) {
    Value isInf = arith::CmpFOp::create(nb, nl, arith::CmpFPredicate::OEQ, x,
                                        f32Const(nb, nl, kNegInf));
    return arith::SelectOp::create(nb, nl, isInf, f32Const(nb, nl, 0.0f), x)
        .getResult();
  };
  auto generic =
      [&](Type type, ValueRange ins, Value init, ArrayRef<AffineMap> maps,
          ArrayRef<IteratorType> iters,
          llvm::function_ref<Value(OpBuilder &, Location, ValueRange)> body) {
        return linalg::GenericOp::create(
                   bb, loc, type, ins, ValueRange{init}, maps, iters,
                   [&](OpBuilder &nb, Location nl, ValueRange a) {
                     linalg::YieldOp::create(nb, nl, body(nb, nl, a));
                   })
            .getResult(0);
      };
  AffineMap m2 = dimsMap(ctx, 2, {0, 1}), row2 = dimsMap(ctx, 2, {0}),
            id1 = dimsMap(ctx, 1, {0});
  // The tile's row maxima into a buffer of their own, the rescaling from
  // the old maxima, and only then the new maxima over m in place: with m
  // written before the rescaling read it, bufferization copied it to a
  // new buffer per key tile, and every query tile's loop paid run-time
  // ownership checks for the state it carries.
  auto maxOf = [](OpBuilder &nb, Location nl, ValueRange a) {
    return arith::MaximumFOp::create(nb, nl, a[0], a[1]).getResult();
  };
  Value tileMax0 = filledF32(bb, loc, {qs}, kNegInf);
  Value tileMax = generic(tileMax0.getType(), {logits}, tileMax0, {m2, row2},
                          {kPar, kRed}, maxOf);
  Value corrInit = tensor::EmptyOp::create(bb, loc, ArrayRef<OpFoldResult>{qs},
                                           bb.getF32Type());
  Value corr = generic(
      corrInit.getType(), {m, tileMax}, corrInit, {id1, id1, id1}, {kPar},
      [&](OpBuilder &nb, Location nl, ValueRange a) {
        Value mNew = arith::MaximumFOp::create(nb, nl, a[0], a[1]);
        return math::ExpOp::create(
                   nb, nl,
                   arith::SubFOp::create(nb, nl, a[0], safe(nb, nl, mNew)))
            .getResult();
      });
  Value mNew = generic(m.getType(), {tileMax}, m, {id1, id1}, {kPar}, maxOf);
  Value pInit = tensor::EmptyOp::create(bb, loc, ArrayRef<OpFoldResult>{qs, ks},
                                        bb.getF32Type());
  Value probs = generic(
      pInit.getType(), {logits, mNew}, pInit, {m2, row2, m2}, {kPar, kPar},
      [&](OpBuilder &nb, Location nl, ValueRange a) {
        return math::ExpOp::create(
                   nb, nl,
                   arith::SubFOp::create(nb, nl, a[0], safe(nb, nl, a[1])))
            .getResult();
      });
  // l * corr, then + rowsum(P).
  Value lScaled =
      generic(l.getType(), {l, corr}, l, {id1, id1, id1}, {kPar},
              [](OpBuilder &nb, Location nl, ValueRange a) {
                return arith::MulFOp::create(nb, nl, a[0], a[1]).getResult();
              });
  Value lNew =
      generic(l.getType(), {probs}, lScaled, {m2, row2}, {kPar, kRed},
              [](OpBuilder &nb, Location nl, ValueRange a) {
                return arith::AddFOp::create(nb, nl, a[0], a[1]).getResult();
              });
  Value accScaled =
      generic(acc.getType(), {acc, corr}, acc, {m2, row2, m2}, {kPar, kPar},
              [](OpBuilder &nb, Location nl, ValueRange a) {
                return arith::MulFOp::create(nb, nl, a[0], a[1]).getResult();
              });
  // acc += P V. With a static head dimension of whole vectors: per query
  // row, its accumulators in registers across the keys, each key's row of
  // V read as vectors (a decode step's one query row runs every key tile
  // here; LLVM vectorized the loops below 4 lanes wide, with acc loaded
  // and stored per key). Otherwise loops (i, j, e): the innermost loop
  // runs along V's and acc's contiguous rows.
  if (rowVectors) {
    Value accNew = forEachRow(accScaled, [&](Value i, Value accRows) {
      SmallVector<Value> init;
      for (int64_t c = 0; c < vecs; ++c)
        init.push_back(readF32(bb, loc, accRows, i, col(c), w));
      scf::ForOp keys = forEachKey(init, [&](Value j, ValueRange carried) {
        Value p = splatF32(bb, loc, probs, i, j, w);
        SmallVector<Value> next;
        for (int64_t c = 0; c < vecs; ++c)
          next.push_back(vector::FMAOp::create(
              bb, loc, p, readF32(bb, loc, kt.v, j, col(c), w), carried[c]));
        return next;
      });
      Value out = accRows;
      for (int64_t c = 0; c < vecs; ++c)
        out = writeVec(bb, loc, keys.getResult(c), out, i, col(c));
      return out;
    });
    return {mNew, lNew, accNew};
  }
  Value accNew =
      generic(acc.getType(), {probs, kt.v}, accScaled,
              {dimsMap(ctx, 3, {0, 1}), dimsMap(ctx, 3, {1, 2}),
               dimsMap(ctx, 3, {0, 2})},
              {kPar, kRed, kPar}, [](OpBuilder &nb, Location nl, ValueRange a) {
                return fma(nb, nl, a[0], toF32(nb, nl, a[1]), a[2]);
              });
  return {mNew, lNew, accNew};
}

/// A full tile's part [tq, tk] (the whole tile, or a half of its rows
/// against a half or all of its keys) with the micro-kernels: S^T from the
/// keys as stored and the packed queries, logits as above (transposed; left
/// unscaled when the softmax applies the scale, softmaxScale), the
/// softmax update W queries at a time down the columns, and
/// acc * corr + P V with acc in registers. `qt` and `kt` describe exactly
/// that part. With `outTile` (the query tile's [tq, head_dim] part of the
/// result), the tile is the query tile's last: the result is the output
/// tile, normalized as P V's registers are stored, and nothing else.
SmallVector<Value> AttentionTiler::stepKernels(OpBuilder &bb,
                                               const QueryTile &qt,
                                               const KeyTile &kt,
                                               ValueRange state, int64_t tq,
                                               int64_t tk, Value outTile) {
  if (amx)
    return stepAMX(bb, qt, kt, state, tq, tk, outTile);
  Value m = state[0], l = state[1], acc = state[2];
  int64_t dd = *dStatic, w = vectorWidth, wq = queryWidth(tq, w);
  auto prefetch = [&](OpBuilder &pb, Value i0, int64_t rows) {
    prefetchNext(pb, qt, kt, tq, tk, i0, rows, /*output=*/bool(outTile));
  };
  Value scoresT = buildScoresKernel(
      bb, loc, castTo(bb, loc, kt.k, {tk, dd}),
      castTo(bb, loc, qt.qT,
             dot ? ArrayRef<int64_t>{dd / 2, 2 * tq}
                 : ArrayRef<int64_t>{dd, tq}),
      softmaxScale ? Value() : scaleAt(bb, loc), op.getSoftcapValue(), tk, tq,
      dd, wq, vectorWidth, dot,
      kt.nextK0
          ? llvm::function_ref<void(OpBuilder &, Value, int64_t)>(prefetch)
          : nullptr);
  Value logitsT = castTo(
      bb, loc,
      logitsOf(bb, qt, kt, scoresT, /*scaled=*/true, /*transposed=*/true),
      {tk, tq});
  auto [probsT, mNew, lNew, corr] = buildSoftmaxColumns(
      bb, loc, logitsT, castTo(bb, loc, m, {tq}), castTo(bb, loc, l, {tq}), tq,
      tk, wq, dot, softmaxScale);
  Value v = castTo(bb, loc, kt.v, {tk, dd});
  if (dot)
    v = packRowPairs(bb, loc, v, tk, dd);
  Value accIn = castTo(bb, loc, acc, {tq, dd});
  if (!outTile)
    return {mNew, lNew,
            buildPVKernel(bb, loc, probsT, v, accIn, corr, tq, tk, dd, w,
                          vectorWidth, dot)};
  // The last key tile: each vector of P V's results times its row's 1 / l
  // (zero for a row with no allowed key), in the element type, into the
  // output tile (as normalize computes it).
  Value inv = reciprocals(bb, lNew);
  Value sums = lNew; // (A lambda cannot capture a structured binding in C++17.)
  auto normalized = [&](OpBuilder &nb, Value x, Value row) -> Value {
    auto vt = cast<VectorType>(x.getType());
    Value zero = f32Const(nb, loc, 0.0f);
    Value lRow = tensor::ExtractOp::create(nb, loc, sums, ValueRange{row});
    Value empty =
        arith::CmpFOp::create(nb, loc, arith::CmpFPredicate::OEQ, lRow, zero);
    Value invRow = vector::BroadcastOp::create(
        nb, loc, vt, tensor::ExtractOp::create(nb, loc, inv, ValueRange{row}));
    // (Operands built in order: the IR does not depend on the compiler's
    // argument evaluation order.)
    Value scaled = arith::MulFOp::create(nb, loc, x, invRow);
    Value zeros = arith::ConstantOp::create(nb, loc, nb.getZeroAttr(vt));
    Value y = arith::SelectOp::create(nb, loc, empty, zeros, scaled);
    if (elemTy.isF32())
      return y;
    return arith::TruncFOp::create(nb, loc,
                                   VectorType::get(vt.getShape(), elemTy), y);
  };
  return {buildPVKernel(bb, loc, probsT, v, accIn, corr, tq, tk, dd, w,
                        vectorWidth, dot, castTo(bb, loc, outTile, {tq, dd}),
                        normalized)};
}

/// A full tile's part [tq, tk] (as stepKernels) with both products on AMX
/// tiles (tdpbf16ps: 16 x 16 f32 results of 32 pairs of bf16 a tile):
/// S = Q K^T [tq, tk] from the queries' rows as stored and the keys' packed
/// pairs (packKeysValues), unscaled; logits as stepKernels (not
/// transposed); the softmax by rows, in groups of 16 (buildSoftmaxRows), P
/// written as the bf16 rows P V reads; then acc = acc * corr + P V with the
/// values' packed pairs. Nothing is packed per tile. The accumulator stays
/// in memory between key tiles (each product loads and stores its tiles of
/// C). With `outTile`, the result is the normalized output tile.
SmallVector<Value> AttentionTiler::stepAMX(OpBuilder &bb, const QueryTile &qt,
                                           const KeyTile &kt, ValueRange state,
                                           int64_t tq, int64_t tk,
                                           Value outTile) {
  Value m = state[0], l = state[1], acc = state[2];
  int64_t dd = *dStatic;
  Idx bx{bb, loc};
  Type bf16 = bb.getBF16Type();
  // A VNNI panel [rows, 2 n] bf16 viewed as AMX's B operand, [rows, n, 2].
  auto panel = [&](Value x, int64_t rows, int64_t n) -> Value {
    return tensor::ExpandShapeOp::create(
        bb, loc, RankedTensorType::get({rows, n, 2}, bf16),
        castTo(bb, loc, x, {rows, 2 * n}),
        ArrayRef<ReassociationIndices>{{0}, {1, 2}});
  };
  SmallVector<OpFoldResult> kvLead = {qt.batch, qt.kvHead};
  Value keys = slice2D(bb, loc, kPacked, kvLead, bb.getIndexAttr(0),
                       bb.getIndexAttr(dd / 2), bx.mul(kt.k0, bx.c(2)),
                       bb.getIndexAttr(2 * tk));
  Value s0 =
      filledF32(bb, loc, {bb.getIndexAttr(tq), bb.getIndexAttr(tk)}, 0.0f);
  Value scores = buildAMXProduct(bb, loc, castTo(bb, loc, qt.q, {tq, dd}),
                                 panel(keys, dd / 2, tk), s0, tq, tk);
  // The scores carry no scale: the softmax applies it (softmaxScale), or
  // the logits do.
  Value logits = castTo(bb, loc,
                        logitsOf(bb, qt, kt, scores,
                                 /*scaled=*/softmaxScale.has_value()),
                        {tq, tk});
  auto [probs, mNew, lNew, corr] = buildSoftmaxRows(
      bb, loc, logits, castTo(bb, loc, m, {tq}), castTo(bb, loc, l, {tq}), tq,
      tk, 16, softmaxScale, bf16Dot);
  Value values = slice2D(bb, loc, vPacked, kvLead, bx.fdiv(kt.k0, bx.c(2)),
                         bb.getIndexAttr(tk / 2), bb.getIndexAttr(0),
                         bb.getIndexAttr(2 * dd));
  Value accScaled = scaleRows(bb, loc, castTo(bb, loc, acc, {tq, dd}), corr, tq,
                              dd, vectorWidth);
  Value accNew = buildAMXProduct(bb, loc, probs, panel(values, tk / 2, dd),
                                 accScaled, tq, dd);
  if (outTile)
    return {normalize(outTile, accNew, lNew)};
  return {mNew, lNew, accNew};
}

/// The part of a full tile made of the query rows [r0, r0 + rows) and the
/// keys [c0, c0 + cols) (both relative to the tile).
std::pair<QueryTile, KeyTile> AttentionTiler::subTile(const QueryTile &qt,
                                                      const KeyTile &kt,
                                                      Value r0, int64_t rows,
                                                      Value c0, int64_t cols) {
  QueryTile sq = qt;
  sq.q0 = ix.add(qt.q0, r0);
  sq.rows = ix.c(rows);
  sq.qPos0 = ix.add(qt.qPos0, r0);
  sq.qPosLast = ix.add(sq.qPos0, ix.c(rows - 1));
  sq.q = slice(b, query, {qt.batch, qt.head}, sq.q0, b.getIndexAttr(rows),
               b.getIndexAttr(0), d);
  if (qt.qT) {
    auto qTy = cast<RankedTensorType>(qt.qT.getType());
    int64_t per = dot ? 2 : 1;
    sq.qT = tensor::ExtractSliceOp::create(
        b, loc,
        RankedTensorType::get({qTy.getDimSize(0), per * rows},
                              qTy.getElementType()),
        qt.qT,
        ArrayRef<OpFoldResult>{b.getIndexAttr(0),
                               dot ? ix.mul(r0, ix.c(per)) : r0},
        ArrayRef<OpFoldResult>{b.getIndexAttr(qTy.getDimSize(0)),
                               b.getIndexAttr(per * rows)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1)});
  }
  KeyTile sk = kt;
  // The part prefetches the same part of the next tiles.
  if (kt.nextK0) {
    sk.nextK0 = ix.add(kt.nextK0, c0);
    sk.nextQ0 = ix.add(kt.nextQ0, r0);
  }
  sk.k0 = ix.add(kt.k0, c0);
  sk.keys = ix.c(cols);
  sk.kLast = ix.add(sk.k0, ix.c(cols - 1));
  SmallVector<OpFoldResult> kvLead = {qt.batch, qt.kvHead};
  sk.k =
      slice(b, key, kvLead, sk.k0, b.getIndexAttr(cols), b.getIndexAttr(0), d);
  sk.v = slice(b, value, kvLead, sk.k0, b.getIndexAttr(cols), b.getIndexAttr(0),
               d);
  if (op.getMask())
    sk.mask = sliceMask(sq, sk.k0, sk.keys, sk.maskMap);
  sk.interior = buildSpanTileInterior(ix, span, causal, sq.qPos0, sq.qPosLast,
                                      sk.k0, sk.kLast);
  return {sq, sk};
}

/// A full tile on the span's edge, where the span or the triangle cuts
/// across it, in two halves of its query rows: each half computes only the
/// half of the keys its rows may see when that is all they see, and nothing
/// when they see none. A band of W keys then costs W + tile-q/2 keys per
/// query rather than W + tile-q (a window of 256 with tiles of 64: a tenth
/// less work), and the causal diagonal tile three quarters of a tile. The
/// keys a half may see are bounded by buildSpanKeyRange and the sinks'
/// end; skipping keys it may not see changes no result.
SmallVector<Value> AttentionTiler::stepEdge(const QueryTile &qt,
                                            const KeyTile &kt,
                                            ValueRange state) {
  int64_t hq = tileQ / 2, hk = tileKV / 2;
  using P = arith::CmpIPredicate;
  auto halves = ix.loop(0, tileQ, hq, SmallVector<Value>(state));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(halves.getBody());
  Value r0 = halves.getInductionVar();
  ValueRange st = halves.getRegionIterArgs();
  // The keys of this tile the half's rows may see, as [cl, ch) relative to
  // the tile (empty when ch <= cl).
  Value qa = ix.add(qt.qPos0, r0), qb = ix.add(qa, ix.c(hq - 1));
  Value kEnd = ix.add(kt.k0, ix.c(tileKV));
  auto [lo, hi] = buildSpanKeyRange(ix, span, causal, qa, qb, val(skvF));
  Value sLo = ix.max(lo, kt.k0), sHi = ix.min(hi, kEnd);
  Value sSome = ix.cmp(P::slt, sLo, sHi);
  Value needLo = arith::SelectOp::create(b, loc, sSome, sLo, kEnd);
  Value needHi = arith::SelectOp::create(b, loc, sSome, sHi, kt.k0);
  if (Value sinkEnd = buildSinkKeyEnd(ix, span, causal, qb, val(skvF))) {
    Value kHi = ix.min(sinkEnd, kEnd);
    Value kSome = ix.cmp(P::slt, kt.k0, kHi);
    needLo =
        ix.min(needLo, arith::SelectOp::create(b, loc, kSome, kt.k0, kEnd));
    needHi = ix.max(needHi, arith::SelectOp::create(b, loc, kSome, kHi, kt.k0));
  }
  Value cl = ix.sub(needLo, kt.k0), ch = ix.sub(needHi, kt.k0);
  Value none = ix.cmp(P::sle, ch, cl);
  Value mid = ix.c(hk);
  Value upper = ix.cmp(P::sge, cl, mid);
  Value narrow = arith::OrIOp::create(b, loc, upper, ix.cmp(P::sle, ch, mid));
  Value c0 = arith::SelectOp::create(b, loc, upper, mid, ix.c(0));

  // The half's state in, its updated state back into the tile's.
  auto part = [&](int64_t cols, Value col) {
    Value mS = tensor::ExtractSliceOp::create(
        b, loc, RankedTensorType::get({hq}, b.getF32Type()), st[0],
        ArrayRef<OpFoldResult>{r0}, ArrayRef<OpFoldResult>{b.getIndexAttr(hq)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
    Value lS = tensor::ExtractSliceOp::create(
        b, loc, RankedTensorType::get({hq}, b.getF32Type()), st[1],
        ArrayRef<OpFoldResult>{r0}, ArrayRef<OpFoldResult>{b.getIndexAttr(hq)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
    Value aS = tensor::ExtractSliceOp::create(
        b, loc, RankedTensorType::get({hq, *dStatic}, b.getF32Type()), st[2],
        ArrayRef<OpFoldResult>{r0, b.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(hq), b.getIndexAttr(*dStatic)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1)});
    auto [sq, sk] = subTile(qt, kt, r0, hq, col, cols);
    SmallVector<Value> r =
        stepKernels(b, sq, sk, ValueRange{mS, lS, aS}, hq, cols);
    SmallVector<Value> out;
    for (int i = 0; i < 3; ++i) {
      auto ty = cast<RankedTensorType>(st[i].getType());
      SmallVector<OpFoldResult> offs(ty.getRank(), b.getIndexAttr(0));
      SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(b, loc, r[i]);
      offs[0] = r0;
      out.push_back(tensor::InsertSliceOp::create(
          b, loc, r[i], st[i], offs, sizes,
          SmallVector<OpFoldResult>(ty.getRank(), b.getIndexAttr(1))));
    }
    return out;
  };
  auto skip = scf::IfOp::create(b, loc, st.getTypes(), none,
                                /*addThenBlock=*/true, /*addElseBlock=*/true);
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(skip.thenBlock());
    scf::YieldOp::create(b, loc, st);
    b.setInsertionPointToStart(skip.elseBlock());
    auto width = scf::IfOp::create(b, loc, st.getTypes(), narrow, true, true);
    scf::YieldOp::create(b, loc, width.getResults());
    b.setInsertionPointToStart(width.thenBlock());
    scf::YieldOp::create(b, loc, part(hk, c0));
    b.setInsertionPointToStart(width.elseBlock());
    scf::YieldOp::create(b, loc, part(tileKV, ix.c(0)));
  }
  scf::YieldOp::create(b, loc, skip.getResults());
  return SmallVector<Value>(halves.getResults());
}

/// One key tile: the micro-kernels when the tile is full (in halves on the
/// span's edge, see stepEdge), the linalg step otherwise (or always,
/// without micro-kernels).
SmallVector<Value> AttentionTiler::step(const QueryTile &qt, const KeyTile &kt,
                                        ValueRange state) {
  if (!kernels)
    return stepLinalg(b, qt, kt, state);
  using P = arith::CmpIPredicate;
  Value fullQ = ix.cmp(P::eq, qt.rows, ix.c(tileQ));
  Value fullK = ix.cmp(P::eq, kt.keys, ix.c(tileKV));
  Value full = ix.andI(fullQ, fullK);
  auto types = llvm::to_vector(TypeRange(state.getTypes()));
  auto whole = [&](const KeyTile &k) {
    SmallVector<Value> r = stepKernels(b, qt, k, state, tileQ, tileKV);
    for (size_t i = 0; i < r.size(); ++i)
      r[i] = castTo(b, loc, r[i], cast<RankedTensorType>(types[i]).getShape());
    return r;
  };
  auto ifOp = scf::IfOp::create(b, loc, types, full, true, true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.elseBlock());
  scf::YieldOp::create(b, loc, stepLinalg(b, qt, kt, state));
  b.setInsertionPointToStart(ifOp.thenBlock());
  if (!kt.interior || !splitEdges) {
    scf::YieldOp::create(b, loc, whole(kt));
    return SmallVector<Value>(ifOp.getResults());
  }
  // Interior tiles run whole without a position mask; edge tiles in halves.
  auto edge = scf::IfOp::create(b, loc, types, kt.interior, true, true);
  scf::YieldOp::create(b, loc, edge.getResults());
  b.setInsertionPointToStart(edge.thenBlock());
  KeyTile inside = kt;
  inside.interior = Value();
  scf::YieldOp::create(b, loc, whole(inside));
  b.setInsertionPointToStart(edge.elseBlock());
  scf::YieldOp::create(b, loc, stepEdge(qt, kt, state));
  return SmallVector<Value>(ifOp.getResults());
}

/// Each row's 1 / l, [rows] f32: computed once per row, so that the
/// output is a multiplication per element (4 vdivps per query tile of 64
/// rows instead of 256; by published instruction tables, a 512-bit vdivps
/// issues at a tenth or less of vmulps's rate, not measured here), work
/// that a span with few key tiles per query tile (blocks of 256: two) pays
/// at every tile. 1 / l cannot overflow, since l is 0 or at least 1 (the
/// running maximum's own term, exp(0)).
Value AttentionTiler::reciprocals(OpBuilder &bb, Value l) {
  AffineMap id1 = dimsMap(ctx, 1, {0});
  Value init = tensor::EmptyOp::create(
      bb, loc, tensor::getMixedSizes(bb, loc, l), bb.getF32Type());
  return linalg::GenericOp::create(
             bb, loc, init.getType(), ValueRange{l}, ValueRange{init},
             ArrayRef<AffineMap>{id1, id1}, ArrayRef<IteratorType>{kPar},
             [&](OpBuilder &nb, Location nl, ValueRange a) {
               linalg::YieldOp::create(
                   nb, nl,
                   arith::DivFOp::create(nb, nl, f32Const(nb, nl, 1.0f), a[0])
                       .getResult());
             })
      .getResult(0);
}

/// O = acc * (1 / l) (zero for rows with no allowed key) in the element
/// type, written in place into `outTile`, the query tile's part of the
/// output. The result may differ from acc / l in the last bit.
Value AttentionTiler::normalize(Value outTile, Value acc, Value l) {
  Value inv = reciprocals(b, l);
  return linalg::GenericOp::create(
             b, loc, outTile.getType(), ValueRange{acc, l, inv},
             ValueRange{outTile},
             ArrayRef<AffineMap>{dimsMap(ctx, 2, {0, 1}), dimsMap(ctx, 2, {0}),
                                 dimsMap(ctx, 2, {0}), dimsMap(ctx, 2, {0, 1})},
             ArrayRef<IteratorType>{kPar, kPar},
             [&](OpBuilder &nb, Location nl, ValueRange a) {
               Value zero = f32Const(nb, nl, 0.0f);
               Value empty = arith::CmpFOp::create(
                   nb, nl, arith::CmpFPredicate::OEQ, a[1], zero);
               Value x = arith::SelectOp::create(
                   nb, nl, empty, zero,
                   arith::MulFOp::create(nb, nl, a[0], a[2]));
               if (!elemTy.isF32())
                 x = arith::TruncFOp::create(nb, nl, elemTy, x);
               linalg::YieldOp::create(nb, nl, x);
             })
      .getResult(0);
}

/// Whether key tile `index` of the query tile is one that the micro-kernels
/// take whole: both tiles full and, when edge tiles run in halves, the tile
/// inside the span and the triangle. From positions alone: no slice of K
/// or V (`index` need not be a tile: its result is then unused).
Value AttentionTiler::wholeInteriorTile(const QueryTile &qt, Value index) {
  using P = arith::CmpIPredicate;
  KeyTile kt = keyTilePositions(qt, index);
  Value whole = ix.andI(ix.cmp(P::eq, qt.rows, ix.c(tileQ)),
                        ix.cmp(P::eq, kt.keys, ix.c(tileKV)));
  if (!splitEdges || !kt.interior)
    return whole;
  return ix.andI(whole, kt.interior);
}

/// The query tile's last key tile when the micro-kernels take it whole
/// (peeled off the key-tile loop): it writes the normalized output tile
/// straight from P V's registers, so that the accumulator is neither
/// stored nor read again for it. Any other last tile (an edge, a partial
/// tile) runs in the loop like the others, and its state is normalized
/// after it.
Value AttentionTiler::lastStep(const QueryTile &qt, Value lastIndex,
                               ValueRange state, Value outTile,
                               Value nextFirstK0) {
  KeyTile kt = beginKeyTile(qt, lastIndex);
  // What this thread reads next: the first key tile of the next query
  // tile (its neighbor in the parallel loop's static schedule), and that
  // tile's queries.
  kt.nextK0 = nextFirstK0;
  kt.nextQ0 = ix.add(qt.q0, ix.c(tileQ));
  // An interior tile evaluates no position mask (wholeInteriorTile).
  if (splitEdges)
    kt.interior = Value();
  return castTo(b, loc,
                stepKernels(b, qt, kt, state, tileQ, tileKV, outTile)[0],
                cast<RankedTensorType>(outTile.getType()).getShape());
}

Value AttentionTiler::build() {
  // Views of the operands' buffers, read-only and of any layout, so that
  // bufferization aliases them (no copy).
  auto bufferOf = [&](Value t) {
    auto ty = cast<RankedTensorType>(t.getType());
    SmallVector<int64_t> strides(ty.getRank(), ShapedType::kDynamic);
    auto layout = StridedLayoutAttr::get(ctx, ShapedType::kDynamic, strides);
    return bufferization::ToBufferOp::create(
        b, loc, MemRefType::get(ty.getShape(), ty.getElementType(), layout), t,
        /*readOnly=*/true);
  };
  if (kernels) {
    qBuf = bufferOf(query.t);
    kBuf = bufferOf(key.t);
    vBuf = bufferOf(value.t);
  }
  if (amx)
    std::tie(kPacked, vPacked) = packKeysValues();
  // One parallel iteration per (batch, head, query tile), into the result
  // or the head merge's.
  Operand out{Value(), static_cast<bool>(merge)};
  Value out0 = tensor::EmptyOp::create(
      b, loc,
      out.seqMajor ? ArrayRef<OpFoldResult>{batchF, sqF, headsF, d}
                   : ArrayRef<OpFoldResult>{batchF, headsF, sqF, d},
      elemTy);
  auto forall = scf::ForallOp::create(
      b, loc, ArrayRef<OpFoldResult>{batchF, headsF, tileCount(sqF, tileQ)},
      ValueRange{out0}, std::nullopt);
  b.setInsertionPoint(forall.getTerminator());
  // The result's buffer, for the last key tile's prefetches of the lines it
  // writes (a read of the shared result before any of this iteration's
  // writes: bufferization keeps it in place).
  if (kernels)
    oBuf = bufferOf(forall.getRegionIterArgs()[0]);
  QueryTile qt = beginQueryTile(forall);
  // (AMX reads the queries' rows as they are stored.)
  if (kernels && !amx)
    qt.qT = packQueries(qt);
  TileLoop tiles = keyTileRange(qt);
  if (printCounts)
    printTileCount(tiles.lb, tiles.ub);

  // The online softmax's state: row maxima, row sums, the accumulator.
  Value m0 = filledF32(b, loc, {qt.rows}, kNegInf);
  Value l0 = filledF32(b, loc, {qt.rows}, 0.0f);
  Value acc0 = filledF32(b, loc, {qt.rows, d}, 0.0f);
  out.t = forall.getRegionIterArgs()[0];
  Value outTile =
      slice(b, out, {qt.batch, qt.head}, qt.q0, qt.rows, b.getIndexAttr(0), d);
  // The loop over the key tiles, then the output tile. With the
  // micro-kernels, a last key tile that they take whole is left out of the
  // loop: lastStep takes it after the loop, writing the output tile from
  // its registers; otherwise the loop runs to the end and the state is
  // normalized. Each step prefetches what this thread reads next.
  Value kEnd = tiles.ub, nextFirstK0, peel, lastIndex;
  if (kernels) {
    QueryTile next = qt;
    next.qPos0 = ix.add(qt.qPos0, ix.c(tileQ));
    next.qPosLast = ix.add(qt.qPosLast, ix.c(tileQ));
    TileLoop nextTiles = keyTileRange(next);
    Value nextFirst = tileIndex(nextTiles.lb, nextTiles);
    nextFirstK0 = ix.mul(nextFirst, ix.c(tileKV));
    Value lastStepIndex = ix.sub(tiles.ub, ix.c(1));
    lastIndex = tileIndex(lastStepIndex, tiles);
    peel = ix.andI(ix.cmp(arith::CmpIPredicate::sgt, tiles.ub, tiles.lb),
                   wholeInteriorTile(qt, lastIndex));
    kEnd = arith::SelectOp::create(b, loc, peel, lastStepIndex, tiles.ub);
  }
  auto kLoop = scf::ForOp::create(b, loc, tiles.lb, kEnd, ix.c(1),
                                  ValueRange{m0, l0, acc0});
  b.setInsertionPointToStart(kLoop.getBody());
  KeyTile kt = beginKeyTile(qt, tileIndex(kLoop.getInductionVar(), tiles));
  if (kernels) {
    // The next step's key tile, or after the last step the next query
    // tile's first; and the next query tile's queries.
    Value nextStep = ix.add(kLoop.getInductionVar(), ix.c(1));
    Value nextK0 = ix.mul(tileIndex(nextStep, tiles), ix.c(tileKV));
    kt.nextK0 = arith::SelectOp::create(
        b, loc, ix.cmp(arith::CmpIPredicate::slt, nextStep, tiles.ub), nextK0,
        nextFirstK0);
    kt.nextQ0 = ix.add(qt.q0, ix.c(tileQ));
  }
  scf::YieldOp::create(b, loc, step(qt, kt, kLoop.getRegionIterArgs()));
  b.setInsertionPointAfter(kLoop);
  Value oTile;
  if (kernels) {
    auto ifPeel = scf::IfOp::create(b, loc, TypeRange{outTile.getType()}, peel,
                                    true, true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifPeel.thenBlock());
    scf::YieldOp::create(
        b, loc,
        lastStep(qt, lastIndex, kLoop.getResults(), outTile, nextFirstK0));
    // A query tile with no key tile has l = 0: normalize writes zeros.
    b.setInsertionPointToStart(ifPeel.elseBlock());
    scf::YieldOp::create(
        b, loc, normalize(outTile, kLoop.getResult(2), kLoop.getResult(1)));
    oTile = ifPeel.getResult(0);
  } else {
    oTile = normalize(outTile, kLoop.getResult(2), kLoop.getResult(1));
  }
  b.setInsertionPointToStart(forall.getTerminator().getBody());
  auto outSlice = cast<tensor::ExtractSliceOp>(outTile.getDefiningOp());
  tensor::ParallelInsertSliceOp::create(
      b, loc, oTile, out.t, outSlice.getMixedOffsets(),
      outSlice.getMixedSizes(), outSlice.getMixedStrides());
  return forall.getResult(0);
}

/// `op` tiled (per-head spans: one op per run of heads with the same span,
/// each tiled with its own bounds). The head splits and merge the tiles
/// read and write through are erased.
LogicalResult tileAttention(RewriterBase &rewriter, AttentionOp op,
                            const TileAttentionPatternOptions &options) {
  SmallVector<AttentionOp> parts = {op};
  if (op.hasHeadSpans()) {
    FailureOr<SmallVector<AttentionOp>> split = splitHeadSpans(rewriter, op);
    if (failed(split))
      return failure();
    parts = std::move(*split);
  }
  for (AttentionOp part : parts) {
    rewriter.setInsertionPoint(part);
    AttentionTiler tiler(part, rewriter, options.tileQ, options.tileKV,
                         options.printTileCountsForTesting, options.vectorWidth,
                         options.bf16Dot, options.amx,
                         options.readThroughHeadLayouts);
    llvm::SetVector<Operation *> splits;
    for (Value v : part->getOperands())
      if (auto g = v.getDefiningOp<linalg::GenericOp>())
        splits.insert(g);
    Value result = tiler.build();
    if (linalg::GenericOp merge = tiler.headMerge()) {
      Value init = merge.getDpsInits()[0];
      rewriter.replaceOp(merge, result);
      rewriter.eraseOp(part);
      if (init.use_empty() && init.getDefiningOp<tensor::EmptyOp>())
        rewriter.eraseOp(init.getDefiningOp());
    } else {
      rewriter.replaceOp(part, result);
    }
    for (Operation *split : splits) {
      if (!split->use_empty())
        continue;
      Value init = cast<linalg::GenericOp>(split).getDpsInits()[0];
      rewriter.eraseOp(split);
      if (init.use_empty() && init.getDefiningOp<tensor::EmptyOp>())
        rewriter.eraseOp(init.getDefiningOp());
    }
  }
  return success();
}

struct TileAttentionPattern final : OpRewritePattern<AttentionOp> {
  TileAttentionPattern(MLIRContext *ctx,
                       const TileAttentionPatternOptions &options)
      : OpRewritePattern(ctx), options(options) {}

  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    return tileAttention(rewriter, op, options);
  }

  TileAttentionPatternOptions options;
};

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
    TileAttentionPatternOptions options;
    options.tileQ = tileQ;
    options.tileKV = tileKV;
    options.vectorWidth = vectorWidth;
    options.bf16Dot = bf16Dot;
    options.amx = amx;
    options.readThroughHeadLayouts = true;
    // Rows with positions of their own: ops the tiles take.
    resolveAllRowOffsets(getOperation());
    // Each op tiled in turn: the tiling may erase the ops around it (its
    // head splits and merge), which a walk over the ops could be visiting.
    SmallVector<AttentionOp> ops;
    getOperation()->walk([&](AttentionOp op) { ops.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (AttentionOp op : ops)
      if (failed(tileAttention(rewriter, op, options)))
        return signalPassFailure();
  }
};

} // namespace

void mlir::masformer::populateTileAttentionPatterns(
    RewritePatternSet &patterns, const TileAttentionPatternOptions &options) {
  patterns.add<TileAttentionPattern>(patterns.getContext(), options);
}
