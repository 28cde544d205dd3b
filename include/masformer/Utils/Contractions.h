//===- Contractions.h - The model's matrix products -------------*- C++ -*-===//
//
// Recognizes the linalg.generic contractions that the importer makes of
// MatMul, Gemm and Einsum; shared by the CPU tiling and the GPU kernels.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_LIB_DIALECT_MASFORMER_TRANSFORMS_CONTRACTIONS_H
#define MASFORMER_LIB_DIALECT_MASFORMER_TRANSFORMS_CONTRACTIONS_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"

namespace mlir::masformer {

/// The loop dimensions of a generic that computes
/// C[batch..., m, n] += A[batch'..., m, k] * B[batch''..., k, n] (or
/// B[..., n, k]: `transposedB`), batch' and batch'' subsets of the batch
/// dimensions (broadcast operands).
struct MatmulDims {
  unsigned m, n, k;
  bool transposedB;
};

/// Matches a matrix product on tensors with f32, f16 or bf16 operands
/// (extended to the result type in the body) and a static reduction length;
/// the result must be f32 when `f32ResultOnly`, else f32, f16 or bf16.
FailureOr<MatmulDims> matchMatmul(linalg::GenericOp op,
                                  bool f32ResultOnly = true);

/// A product of 8-bit integers accumulated in i32: C[batch..., m, n] +=
/// ext(A[..., m, k]) * ext(B[..., k, n]), each operand extended signed or
/// unsigned (`aUnsigned`, `bUnsigned`): what the importer makes of an ONNX
/// MatMulInteger against constant weights.
struct IntegerMatmul {
  MatmulDims dims;
  bool aUnsigned, bUnsigned;
};

/// Matches an integer matrix product on tensors (i8 operands, i32 result,
/// a static reduction length).
FailureOr<IntegerMatmul> matchIntegerMatmul(linalg::GenericOp op);

/// Whether `--masformer-tile-contractions` runs integer product `op` on
/// AVX512-VNNI's vpdpbusd (with its u8s8-dot): uint8 A by int8 B, B a
/// constant of two dimensions (weights it packs at compile time), k a
/// multiple of 4.
bool isVPDPBUSDProduct(linalg::GenericOp op, const IntegerMatmul &product);

} // namespace mlir::masformer

#endif // MASFORMER_LIB_DIALECT_MASFORMER_TRANSFORMS_CONTRACTIONS_H
