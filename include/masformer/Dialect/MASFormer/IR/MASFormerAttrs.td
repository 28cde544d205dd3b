//===- MASFormerAttrs.td - masformer attributes ------------*- tablegen -*-===//
//
// The span attribute.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_DIALECT_MASFORMER_IR_MASFORMERATTRS_TD
#define MASFORMER_DIALECT_MASFORMER_IR_MASFORMERATTRS_TD

include "masformer/Dialect/MASFormer/IR/MASFormerDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def MASFormer_SpanKind : I32EnumAttr<"SpanKind", "kind of attention span", [
    I32EnumAttrCase<"Full", 0, "full">,
    I32EnumAttrCase<"Block", 1, "block">,
    I32EnumAttrCase<"Window", 2, "window">
  ]> {
  let cppNamespace = "::mlir::masformer";
  let genSpecializedAttr = 0;
}

def MASFormer_SpanAttr : AttrDef<MASFormer_Dialect, "Span"> {
  let mnemonic = "span";
  let summary = "Which (query, key) pairs an attention op computes";
  let description = [{
    A span restricts attention to a subset of (query, key) pairs, before the
    model's own masks (causal, padding) are applied on top. For query
    position `i` and key position `j` (0-based):

    - `full`: every `j`.
    - `block B`: `j` is allowed iff `floor(i / B) == floor(j / B)`.
    - `window W`: allowed iff `0 <= i - j < W` when the op is causal, or
      `|i - j| < W` when it is not.

    A block or window span may keep `sink K` attention sinks: the first `K`
    key positions stay visible to every query (StreamingLLM, arXiv
    2309.17453), so `j` is allowed iff `j < K` or the rule above holds.
    Pretrained models put much of their attention mass on the first tokens;
    a window without them loses far more quality than one with them.
    Causality and the model's own masks still apply on top: a causal query
    never sees a sink after it.

    When an op has fewer queries than keys (decoding with a KV cache), query
    `i` sits at position `i + (kv_seq - q_seq)`: queries align to the end of
    the keys, as in FlashAttention.

    The size of a block or window span is a positive integer; `full` takes no
    size and no sinks (it keeps every key already). `sink 0` is the same as
    no sinks and is not printed.

    ```mlir
    #masformer.span<full>
    #masformer.span<block 1024>
    #masformer.span<window 512>
    #masformer.span<window 512, sink 64>
    ```
  }];
  let parameters = (ins
    EnumParameter<MASFormer_SpanKind>:$kind,
    DefaultValuedParameter<"int64_t", "0">:$size,
    DefaultValuedParameter<"int64_t", "0">:$sink
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let builders = [
    AttrBuilder<(ins "::mlir::masformer::SpanKind":$kind), [{
      return $_get($_ctxt, kind, 0, 0);
    }]>,
    AttrBuilder<(ins "::mlir::masformer::SpanKind":$kind, "int64_t":$size), [{
      return $_get($_ctxt, kind, size, 0);
    }]>
  ];
  let extraClassDeclaration = [{
    bool isFull() const { return getKind() == SpanKind::Full; }
    /// Whether the span removes no pair for a key sequence of `kvSeq` keys
    /// (and queries at positions below kvSeq).
    bool coversSequence(int64_t kvSeq) const;
    /// How many (query, key) pairs this span and `causal` keep for `q`
    /// queries aligned to the end of `kv` keys.
    int64_t countPairs(int64_t q, int64_t kv, bool causal) const;
    /// `full`, `block 64`, `window 512`, `window 512, sink 4`.
    std::string str() const;
    /// Whether key `j` is allowed for a query at position `pos` by the span
    /// and its sinks (not by causality): the definition above, for hosts
    /// that check pairs one at a time.
    bool allows(int64_t pos, int64_t j, bool causal) const;
  }];
}

#endif // MASFORMER_DIALECT_MASFORMER_IR_MASFORMERATTRS_TD
