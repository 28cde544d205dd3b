//===- MASFormerOps.td - masformer operations --------------*- tablegen -*-===//
//
// masformer.attention.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_DIALECT_MASFORMER_IR_MASFORMEROPS_TD
#define MASFORMER_DIALECT_MASFORMER_IR_MASFORMEROPS_TD

include "masformer/Dialect/MASFormer/IR/MASFormerDialect.td"
include "masformer/Dialect/MASFormer/IR/MASFormerAttrs.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def MASFormer_AttentionOp : MASFormer_Op<"attention", [Pure]> {
  let summary = "Scaled dot-product attention restricted to a span";
  let description = [{
    Computes `softmax(scale * Q K^T + mask) V` per batch and head, where only
    the (query, key) pairs allowed by `span` (and, if `causal`, by
    `j <= i`) take part; the others get probability zero.

    - `query`: `[batch, q_heads, q_seq, head_dim]`
    - `key`, `value`: `[batch, kv_heads, kv_seq, head_dim]`; `kv_heads`
      divides `q_heads` (multi-head, grouped-query and multi-query
      attention): query head `h` reads key/value head
      `h / (q_heads / kv_heads)`.
    - `mask` (optional): an additive float mask, broadcastable (numpy rules,
      right-aligned, rank at most 4) to `[batch, q_heads, q_seq, kv_seq]`.
    - The result is shaped like `query`.

    Query `i` sits at position `i + kv_seq - q_seq` (queries align to the end
    of the keys). A query row with no allowed key yields zeros.
    Element types are `f32`, `f16` or `bf16` (the same for query, key, value
    and the result); accumulation is in `f32`. `scale` defaults to
    `1/sqrt(head_dim)`. `layer` is the index of this attention among the
    model's attention ops in graph order, set by the importer.

    ```mlir
    %o = masformer.attention %q, %k, %v mask(%m : tensor<1x1x1x128xf32>)
           {span = #masformer.span<block 64>, causal = true, layer = 3 : i64}
           : tensor<1x8x128x64xf16>, tensor<1x2x128x64xf16>,
             tensor<1x2x128x64xf16> -> tensor<1x8x128x64xf16>
    ```
  }];

  let arguments = (ins
    AnyRankedTensor:$query,
    AnyRankedTensor:$key,
    AnyRankedTensor:$value,
    Optional<AnyRankedTensor>:$mask,
    MASFormer_SpanAttr:$span,
    DefaultValuedAttr<BoolAttr, "false">:$causal,
    OptionalAttr<F32Attr>:$scale,
    OptionalAttr<I64Attr>:$layer
  );
  let results = (outs AnyRankedTensor:$result);

  let assemblyFormat = [{
    $query `,` $key `,` $value (`mask` `(` $mask^ `:` type($mask) `)`)?
    attr-dict `:` type($query) `,` type($key) `,` type($value)
    `->` type($result)
  }];

  let hasVerifier = 1;
  let hasCanonicalizeMethod = 1;

  let extraClassDeclaration = [{
    RankedTensorType getQueryType() { return getQuery().getType(); }
    RankedTensorType getKeyType() { return getKey().getType(); }
    RankedTensorType getValueType() { return getValue().getType(); }
    /// The number of query heads sharing one key/value head, if static.
    std::optional<int64_t> getStaticGroupSize();
    /// The scale of the scores when `scale` is absent: 1/sqrt(head_dim),
    /// the one rule every lowering and the ONNX export follow.
    static float getDefaultScale(int64_t headDim);
    /// The scale of the scores: `scale`, or the default of a static
    /// head_dim; none when it is only known at run time.
    std::optional<float> getStaticScale();
    /// The scale as an f32 value built at `b` (1/sqrt of the run-time
    /// head_dim when it is dynamic).
    ::mlir::Value buildScale(::mlir::OpBuilder &b, ::mlir::Location loc);
  }];
}

#endif // MASFORMER_DIALECT_MASFORMER_IR_MASFORMEROPS_TD
