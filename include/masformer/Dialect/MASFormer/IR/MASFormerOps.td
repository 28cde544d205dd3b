//===- MASFormerOps.td - masformer operations --------------*- tablegen -*-===//
//
// masformer.attention, and masformer.dot_u8s8 (a CPU kernel's step).
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_DIALECT_MASFORMER_IR_MASFORMEROPS_TD
#define MASFORMER_DIALECT_MASFORMER_IR_MASFORMEROPS_TD

include "masformer/Dialect/MASFormer/IR/MASFormerDialect.td"
include "masformer/Dialect/MASFormer/IR/MASFormerAttrs.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def MASFormer_AttentionOp : MASFormer_Op<"attention",
    [Pure, AttrSizedOperandSegments]> {
  let summary = "Scaled dot-product attention restricted to a span";
  let description = [{
    Computes `softmax(scale * Q K^T + mask) V` per batch and head, where only
    the (query, key) pairs allowed by `span` (and, if `causal`, by
    `j <= i`) take part; the others get probability zero.

    With `softcap = c` the scaled scores are capped before the mask is
    added: `softmax(c * tanh(scale * Q K^T / c) + mask) V` (Gemma 2's
    attention logit softcapping, FlashAttention's `softcap`).

    - `query`: `[batch, q_heads, q_seq, head_dim]`
    - `key`, `value`: `[batch, kv_heads, kv_seq, head_dim]`; `kv_heads`
      divides `q_heads` (multi-head, grouped-query and multi-query
      attention): query head `h` reads key/value head
      `h / (q_heads / kv_heads)`.
    - `mask` (optional): an additive float mask, broadcastable (numpy rules,
      right-aligned, rank at most 4) to `[batch, q_heads, q_seq, kv_seq]`.
    - The result is shaped like `query`.

    Query `i` sits at position `i + kv_seq - q_seq` (queries align to the end
    of the keys), key `j` at position `j`. A query row with no allowed key
    yields zeros.

    `row_offset` (optional, `[batch]` of `index`, each at least 0) moves
    each batch row's positions back: in row `b`, key `j` sits at
    `j - row_offset[b]` and query `i` at
    `i + kv_seq - q_seq - row_offset[b]`. A batch whose rows hold
    sequences of different lengths right-aligned in one tensor (the
    shorter ones after padding, which the mask hides) keeps each
    sequence's own positions so: its blocks start at its first token and
    its sinks are its first tokens. The causal rule and windows compare
    positions' differences and do not change; blocks and sinks do. Keys at
    negative positions (the padding) are never sinks: a sink is a key at
    position `p` with `0 <= p < sink`.
    Element types are `f32`, `f16` or `bf16` (the same for query, key, value
    and the result); accumulation is in `f32`. `scale` defaults to
    `1/sqrt(head_dim)`. `layer` is the index of this attention among the
    model's attention ops in graph order, set by the importer.

    `head_spans` (optional) gives each key/value head its own span (and so
    the whole group of query heads that reads it): a few heads keep the
    whole context, the others a window with sinks (per-head spans, as in
    MoA and DuoAttention). It has one span per key/value head (`kv_heads`
    must be static) and then `span` must be `full`: the head spans replace
    it. Lowerings that handle one span per op split such an op into one op
    per run of consecutive heads with the same span
    (`--masformer-split-head-spans`).

    ```mlir
    %o = masformer.attention %q, %k, %v mask(%m : tensor<1x1x1x128xf32>)
           {span = #masformer.span<block 64>, causal = true, layer = 3 : i64}
           : tensor<1x8x128x64xf16>, tensor<1x2x128x64xf16>,
             tensor<1x2x128x64xf16> -> tensor<1x8x128x64xf16>
    %p = masformer.attention %q, %k, %v
           {span = #masformer.span<full>, causal = true,
            head_spans = [#masformer.span<full>,
                          #masformer.span<window 512, sink 64>]}
           : tensor<1x8x4096x64xf32>, tensor<1x2x4096x64xf32>,
             tensor<1x2x4096x64xf32> -> tensor<1x8x4096x64xf32>
    ```
  }];

  let arguments = (ins
    AnyRankedTensor:$query,
    AnyRankedTensor:$key,
    AnyRankedTensor:$value,
    Optional<AnyRankedTensor>:$mask,
    Optional<1DTensorOf<[Index]>>:$row_offset,
    MASFormer_SpanAttr:$span,
    DefaultValuedAttr<BoolAttr, "false">:$causal,
    OptionalAttr<F32Attr>:$scale,
    OptionalAttr<I64Attr>:$layer,
    OptionalAttr<TypedArrayAttrBase<MASFormer_SpanAttr,
                                    "one span per key/value head">>:$head_spans,
    OptionalAttr<F32Attr>:$softcap
  );
  let results = (outs AnyRankedTensor:$result);

  let assemblyFormat = [{
    $query `,` $key `,` $value (`mask` `(` $mask^ `:` type($mask) `)`)?
    (`row_offset` `(` $row_offset^ `:` type($row_offset) `)`)?
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
    /// The softcap of the scores, if any.
    std::optional<float> getSoftcapValue() {
      if (std::optional<::llvm::APFloat> c = getSoftcap())
        return c->convertToFloat();
      return std::nullopt;
    }
    /// `c * tanh(x / c)` for the op's softcap `c` (`x` itself without one):
    /// the one rule every lowering applies to the scaled scores `x` (an f32
    /// scalar or vector) before the mask.
    static ::mlir::Value applySoftcap(::mlir::OpBuilder &b,
                                      ::mlir::Location loc, ::mlir::Value x,
                                      std::optional<float> softcap);
    /// Whether some span (any head's) depends on where positions start
    /// (blocks, sinks), so that `row_offset` changes which pairs it keeps;
    /// the causal rule, full spans and windows compare differences only.
    bool hasPositionalSpan();
    /// Whether key/value heads have spans of their own (`head_spans`).
    bool hasHeadSpans() { return getHeadSpans().has_value(); }
    /// The span of key/value head `kvHead`: its head span, or `span`.
    SpanAttr getKVHeadSpan(int64_t kvHead);
    /// Whether some (query, key) pair is removed by a span (any head's).
    bool hasSparseSpan();
    /// Pairs kept for `q` queries aligned to the end of `kv` keys, summed
    /// over the query heads (counted once when they are dynamic).
    int64_t countPairs(int64_t q, int64_t kv);
  }];
}

def MASFormer_DotU8S8Op : MASFormer_Op<"dot_u8s8", [Pure,
    AllTypesMatch<["a", "b"]>, AllTypesMatch<["acc", "result"]>]> {
  let summary = "Sums of four products of uint8 by int8, added to i32 lanes";
  let description = [{
    `result[i] = acc[i] + sum_{j < 4} a[4 i + j] * b[4 i + j]`, `a` read as
    uint8 and `b` as int8, in i32 with wrap-around: one AVX512-VNNI
    `vpdpbusd`, the step of `--masformer-tile-contractions`' kernel for a
    quantized model's 8-bit products. A pure operation (the LLVM
    intrinsic call it stands for has no memory effects, which
    `llvm.call_intrinsic` cannot say: bufferization refuses such calls);
    `--masformer-lower-dot-u8s8` makes it that call.

    ```mlir
    %r = masformer.dot_u8s8 %acc, %a, %b : vector<64xi8> -> vector<16xi32>
    ```
  }];
  let arguments = (ins VectorOfLengthAndType<[16], [I32]>:$acc,
                   VectorOfLengthAndType<[64], [I8]>:$a,
                   VectorOfLengthAndType<[64], [I8]>:$b);
  let results = (outs VectorOfLengthAndType<[16], [I32]>:$result);
  let assemblyFormat =
      "$acc `,` $a `,` $b attr-dict `:` type($a) `->` type($acc)";
}

#endif // MASFORMER_DIALECT_MASFORMER_IR_MASFORMEROPS_TD
