//===- Passes.td - masformer passes ------------------------*- tablegen -*-===//
//
// Passes over the masformer dialect.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_DIALECT_MASFORMER_TRANSFORMS_PASSES_TD
#define MASFORMER_DIALECT_MASFORMER_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def DecomposeAttention : Pass<"masformer-decompose-attention"> {
  let summary = "Lower masformer.attention to plain upstream tensor ops";
  let description = [{
    Rewrites every `masformer.attention` into `linalg`, `tensor`, `arith` and
    `math` ops on tensors that compute exactly the semantics of the op: Q K^T
    in f32, the scale, the span and causal masks (from the loop indices, with
    queries aligned to the end of the keys), the additive mask, a softmax
    that gives zero to rows with no allowed key, and the product with V.

    It exists as the semantic reference: it computes every pair densely and
    masks, so it is slow by design, and every faster lowering (tiled CPU and
    GPU kernels, the ONNX export) is tested against it.

    ```mlir
    %o = masformer.attention %q, %k, %v {span = #masformer.span<block 64>}
           : tensor<1x4x128x32xf32>, tensor<1x4x128x32xf32>,
             tensor<1x4x128x32xf32> -> tensor<1x4x128x32xf32>
    ```
    becomes a chain of `linalg.generic` ops ending in a tensor of the same
    type.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

#endif // MASFORMER_DIALECT_MASFORMER_TRANSFORMS_PASSES_TD
