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

} // namespace mlir::masformer

#endif // MASFORMER_LIB_DIALECT_MASFORMER_TRANSFORMS_CONTRACTIONS_H
