//===- MicroKernels.h - Register-blocked vector micro-kernels ---*- C++ -*-===//
//
// The register-blocked matrix product of full tiles, in the vector dialect on
// tensors: shared by the tiled attention (Q K^T and P V) and the tiled
// contractions (the model's matrix products).
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_LIB_CODEGEN_CPU_MICROKERNELS_H
#define MASFORMER_LIB_CODEGEN_CPU_MICROKERNELS_H

#include "masformer/Utils/IRBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace mlir::masformer {

/// Rows of accumulators of a micro-kernel step.
constexpr int64_t kRows = 4;
/// Vectors of accumulators per row at most, on a target whose widest f32
/// vectors have `targetWidth` lanes: the accumulators, one row of operand
/// vectors and a broadcast must fit its vector registers, 32 with AVX-512
/// (16 lanes: 4 x 4 + 4 + 1 = 21) and 16 with AVX2 (8 lanes: 6 rows
/// (blockRowsFor) x 2 + 2 + 1 = 15; 4 x 4 spilled accumulators to the
/// stack at every step and ran
/// GPT-2's products at 0.45 of the 4 x 2 kernel's speed, on a Zen 4 as
/// code for Zen 3). Narrower vectors on a wide target (a query tile's
/// halves) keep the wide target's budget.
inline int64_t blockVectors(int64_t targetWidth) {
  return targetWidth >= 16 ? 4 : 2;
}

/// Rows of a register block of blockVectors(targetWidth) vectors: 4 with
/// AVX-512 (16 accumulators), 6 with AVX2 (12 accumulators + 2 operand
/// vectors + a broadcast = 15 of its 16 registers, the shape of the AVX2
/// kernels of BLIS and onnxruntime's MLAS: 4 x 2 kept only 8 FMAs in
/// flight, the product of the FMA's latency and its two ports on Zen 3 and
/// Haswell, with no slack for a late load).
inline int64_t blockRowsFor(int64_t targetWidth) {
  return targetWidth >= 16 ? kRows : 6;
}

/// Whether buildBlockedMatmul covers `n` columns with vectors of `w`.
inline bool blockedFits(int64_t n, int64_t w) {
  return w > 0 && n >= w && n % w == 0;
}

/// A vector<W x f32> read from a static 2-D tensor at (r, c), extended to
/// f32.
Value readF32(OpBuilder &b, Location loc, Value t, Value r, Value c, int64_t w);

/// The f32 scalar t[r, c] broadcast to a vector<W x f32>.
Value splatF32(OpBuilder &b, Location loc, Value t, Value r, Value c,
               int64_t w);

/// Writes the vector `v` into the 2-D tensor `t` at (r, c).
Value writeVec(OpBuilder &b, Location loc, Value v, Value t, Value r, Value c);

/// out[i, j] = finish(init(i, j) + sum_k a[i, k] * bm[k, j], i) (no
/// `finish`: the sum itself) over a static [tq, n] tile, register-blocked: each
/// step of the (row block, column block) loops keeps R x vecs vectors of W
/// results in registers while it runs over k (per k: vecs vector loads of bm, R
/// broadcasts of a, R * vecs FMAs), then stores them into `out`; columns left
/// over past the last whole block of vecs = min(blockVectors(targetWidth),
/// n / w) vectors take one narrower block. R is blockRowsFor(targetWidth),
/// or kRows * blockVectors(targetWidth) / vecs when n holds fewer vectors
/// and tq allows; rows past the last whole block of R take one block of
/// the rest. `init(out, row, col)` and
/// `finish(acc, row)` work on one vector of W results; `finish` may return
/// `out`'s element type (a narrower one than the f32 results). tq must be a
/// multiple of kRows, n of w (blockedFits). With `transposedA`, `a` holds A
/// transposed, [kLen, tq] (each broadcast reads a[k, i]). `atRows(i0, R)`,
/// when given, builds side work at the start of each block of R rows from
/// i0 (prefetches spread over the product).
Value buildBlockedMatmul(
    OpBuilder &b, Location loc, Value a, Value bm, Value out, int64_t tq,
    int64_t n, int64_t kLen, int64_t w, int64_t targetWidth,
    llvm::function_ref<Value(OpBuilder &, Value, Value, Value)> init,
    llvm::function_ref<Value(OpBuilder &, Value, Value)> finish,
    bool transposedA = false,
    llvm::function_ref<void(OpBuilder &, Value, int64_t)> atRows = nullptr);

/// out[i, j] = finish(init(i, j) + sum_k a[i, k] * bp[k / 2, 2 j + k % 2],
/// i)
/// (no `finish`: the sum itself)
/// over a static [tq, n] tile with AVX512-BF16's vdpbf16ps: `a` [tq, kLen]
/// bf16, `bp` the VNNI panel [kLen / 2, 2 n] bf16 (pairs of k side by
/// side), 16 f32 results a vector. Each step of the register block (rows
/// as buildBlockedMatmul chooses them x up to blockVectors(16) vectors)
/// loads the block's vectors of 32 bf16 of bp and broadcasts the pair (a[i, k],
/// a[i, k + 1]) of each row as one 32-bit value. With `transposedA`, `a`
/// holds A's pairs by k, [kLen / 2, 2 tq] (the pair of row i at [k / 2,
/// 2 i]). tq must be a multiple of kRows, n of 16, kLen even. `atRows` as
/// in buildBlockedMatmul.
Value buildBlockedDotBF16(
    OpBuilder &b, Location loc, Value a, Value bp, Value out, int64_t tq,
    int64_t n, int64_t kLen,
    llvm::function_ref<Value(OpBuilder &, Value, Value, Value)> init,
    llvm::function_ref<Value(OpBuilder &, Value, Value)> finish = nullptr,
    bool transposedA = false,
    llvm::function_ref<void(OpBuilder &, Value, int64_t)> atRows = nullptr);

/// out[i, j] = init(i, j) + sum_k a[i, k] * bq[k / 4, 4 j + k % 4] over a
/// static [tq, n] tile of i32 sums with AVX512-VNNI's vpdpbusd: `a` [tq,
/// kLen] uint8, `bq` the panel [kLen / 4, 4 n] of int8 quads (four k side
/// by side), 16 sums a vector. Each step of the register block (as
/// buildBlockedMatmul's) loads the block's vectors of 64 bytes of bq and
/// broadcasts the row's four bytes of a as one 32-bit value; each
/// vpdpbusd adds the four products of uint8 by int8 of every lane to it
/// (exact: no saturation, i32 sums wrap as onnxruntime's). tq must be a
/// multiple of kRows, n of 16, kLen of 4.
Value buildBlockedDotU8S8(
    OpBuilder &b, Location loc, Value a, Value bq, Value out, int64_t tq,
    int64_t n, int64_t kLen,
    llvm::function_ref<Value(OpBuilder &, Value, Value, Value)> init);

/// exp(x) for a vector of f32 with x <= 0 (a softmax's logits minus their
/// row maximum): buildExp2NonPositive(x log2(e)).
Value buildExpNonPositive(OpBuilder &b, Location loc, Value x);
/// 2^t for a vector of f32 with t <= 0, in 11 vector operations instead of
/// the ~25 of math.exp's polynomial approximation, which handles the whole
/// f32 range: 2^k 2^f (k = roundeven(t) by a magic-number add, |f| <= 1/2),
/// 2^f a degree-5 polynomial (relative error 1.7e-7, 1.4 ulp, as evaluated
/// in f32), 2^k built in the exponent bits. t < -125.5 (and -inf) gives 0,
/// never a subnormal; a NaN gives NaN; t above 127 is outside its domain.
/// The caller folds log2(e) into its own arithmetic (a softmax: one FMA
/// for scale * log2(e) * s - m log2(e)).
Value buildExp2NonPositive(OpBuilder &b, Location loc, Value t);

/// `x > y ? x : y`, elementwise: one vmaxps (arith.maxnumf costs four x86
/// ops, for its NaN rule). Where x or y is NaN the result is y.
Value buildGreater(OpBuilder &b, Location loc, Value x, Value y);

/// C[m, n] += A[m, g kg + kk] * B[kg, n, kk] over (m, n, kg, kk): the
/// product on a VNNI panel `bGroups` ([k / g, n, g], g = `group`), its
/// operands extended to f32 (bf16 pairs), or, for an i32 C, A as uint8 and
/// B as int8 (vpdpbusd's quads).
linalg::GenericOp buildGroupsProduct(OpBuilder &b, Location loc, Value a,
                                     Value bGroups, Value c, int64_t group);

/// buildGroupsProduct marked for --masformer-lower-amx-tiles as a tile of m x
/// n results: A [m, k] bf16 by B [k / 2, n, 2] bf16 into C [m, n] f32 (k a
/// multiple of 32), or A [m, k] uint8 by B [k / 4, n, 4] int8 into C [m, n]
/// i32 (k a multiple of 64); m and n multiples of 32, rows contiguous once
/// bufferized. Its result.
Value buildAMXProduct(OpBuilder &b, Location loc, Value a, Value bGroups,
                      Value c, int64_t m, int64_t n);

} // namespace mlir::masformer

#endif // MASFORMER_LIB_CODEGEN_CPU_MICROKERNELS_H
