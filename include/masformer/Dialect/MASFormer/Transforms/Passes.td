//===- Passes.td - masformer dialect passes -----------------*- tablegen -*-===//
//
// Passes over the masformer dialect: raising attention out of imported
// models, choosing spans, reporting their cost, and the reference
// decomposition.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_DIALECT_MASFORMER_TRANSFORMS_PASSES_TD
#define MASFORMER_DIALECT_MASFORMER_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def RaiseAttention : Pass<"masformer-raise-attention", "::mlir::func::FuncOp"> {
  let summary = "Replace attention subgraphs by masformer.attention";
  let description = [{
    Finds, in an imported model, every attention layer as exporters write it
    (`softmax(scale * Q K^T + masks) V` spread over contractions, transposes,
    casts, `Mul`/`Div` by constants, `Where` and `Add` masks) and replaces it
    with one `masformer.attention` whose `causal`, `scale`, mask and `layer`
    say the same thing. The module computes the same values.

    Recognized shapes: the scale applied to the scores, to Q, to K, or split
    between Q and K (`head_dim^-1/4` each); a causal mask as `Where` with a
    constant lower-triangular condition or as an added constant
    `triu(-inf | float-min)`; other masks (padding, combined causal+padding)
    as additive masks; key/value heads repeated by unsqueeze + expand +
    reshape (grouped-query attention); softmax in f32 with casts around it.

    Layer indices count the raised ops in function order from 0. A softmax
    over the last axis of a rank-4 tensor that cannot be raised is reported
    with its location (a warning, or an error with `strict`).

    ```mlir
    %s = linalg.generic ... (Q K^T) ...
    %p = linalg.softmax dimension(3) ins(%s ...) ...
    %o = linalg.generic ... (P V) ...
    ```
    becomes
    ```mlir
    %o = masformer.attention %q, %k, %v {span = #masformer.span<full>,
           scale = 0.125 : f32, layer = 0 : i64} : ...
    ```
  }];
  let options = [
    Option<"strict", "strict", "bool", /*default=*/"false",
           "Fail on an attention-like softmax that cannot be raised">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::tensor::TensorDialect",
    "::mlir::masformer::MASFormerDialect"
  ];
}

def RewriteSpans : Pass<"masformer-rewrite-spans", "::mlir::ModuleOp"> {
  let summary = "MASFormer: keep full attention in a few layers, block-sparse "
                "or windowed spans in the others";
  let description = [{
    The MASFormer rewrite (Zhang et al., EMNLP 2023): a transformer keeps
    most of its quality at long context with full attention in only a few
    layers and block-sparse attention in the rest, cutting attention cost by
    up to 75% at 8k tokens. This pass sets the `span` of every
    `masformer.attention` (numbered by its `layer` attribute, as
    `--masformer-raise-attention` leaves them) without touching a weight.

    Which layers stay full:
    - `full-layers=0,1,5`: exactly these;
    - `policy=bottom|top|spread` with `num-full=L`: the first L layers (the
      paper's placement), the last L, or L spread evenly;
    - default: `policy=bottom` with `num-full = ceil(layers / 6)`.
    The others get `span=block:B` or `span=window:W`, with `sink=K` the
    first K keys visible to every query besides (attention sinks: windows
    without them lose much more quality on pretrained models; see
    docs/spans.md).

    `plan=plan.json` instead applies a span plan: a versioned JSON file
    that gives listed layers each their own span, or each of their
    key/value heads its own span (`head_spans`), as a calibration chooses
    them; layers it does not list keep their span. Format in
    docs/rewrite.md. `policy=calibrated calibration=plan.json` is the same
    as `plan=plan.json` for a plan that `python -m masformer.calibrate`
    chose from calibration data.

    Errors (each one diagnostic, and the pass fails): no span or a span size
    of 0 or less, a layer index out of range, `num-full` larger than the
    number of layers, `full-layers` together with `policy` or `num-full`, a
    module without attention layers, a plan that cannot be read or does not
    fit the model (each error names the file and the entry).

    ```mlir
    // --masformer-rewrite-spans="span=block:64 full-layers=0"
    %a = masformer.attention ... {layer = 1 : i64, span = #masformer.span<full>}
    // becomes
    %a = masformer.attention ... {layer = 1 : i64, span = #masformer.span<block 64>}
    ```
  }];
  let options = [
    Option<"span", "span", "std::string", /*default=*/"\"\"",
           "Span of the rewritten layers: block:B or window:W">,
    Option<"sink", "sink", "int64_t", /*default=*/"0",
           "Attention sinks of the rewritten layers: their first K keys "
           "stay visible to every query (0: none)">,
    ListOption<"fullLayers", "full-layers", "int64_t",
               "Layers that keep full attention (excludes policy/num-full)">,
    Option<"policy", "policy", "std::string", /*default=*/"\"\"",
           "bottom (default), top or spread">,
    Option<"numFull", "num-full", "int64_t", /*default=*/"-1",
           "How many layers keep full attention (default ceil(layers/6))">,
    Option<"plan", "plan", "std::string", /*default=*/"\"\"",
           "A span plan (JSON, docs/rewrite.md): each listed layer gets its "
           "own span; excludes the other options">,
    Option<"calibration", "calibration", "std::string", /*default=*/"\"\"",
           "The span plan (JSON) that policy=calibrated applies, as "
           "python -m masformer.calibrate writes it">
  ];
}

def SpanReport : Pass<"masformer-span-report", "::mlir::ModuleOp"> {
  let summary = "Print each attention layer's span and attention cost";
  let description = [{
    Prints, for every `masformer.attention` in layer order, its span, causal
    flag, heads and head_dim, the attention FLOPs at sequence length
    `seq-len` (batch 1; 4 * heads * head_dim per computed query/key pair, for
    Q K^T and P V) and the fraction of what full attention with the same
    causal flag computes; then the totals. With `json=path` the same goes to
    a JSON file. The IR is not changed.

    ```
    layer  span          causal  heads  head_dim        GFLOP  of full
        0  full          yes         4         8        0.000    1.000
    ```
  }];
  let options = [
    Option<"seqLen", "seq-len", "int64_t", /*default=*/"0",
           "Sequence length the costs are computed at (required)">,
    Option<"json", "json", "std::string", /*default=*/"\"\"",
           "Also write the report as JSON to this file">
  ];
}

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

def ResolveRowOffsets : Pass<"masformer-resolve-row-offsets"> {
  let summary = "Attention with per-row positions as ops the kernels take";
  let description = [{
    The tiled CPU and GPU kernels take one position layout for every batch
    row; this pass rewrites each `masformer.attention` with a `row_offset`
    into ops without one that compute the same:

    - full spans and windows without sinks (the causal rule, windows and
      full spans compare positions' differences): the offset is dropped;
    - blocks and sinks (any head's): `scf.if` every offset is 0 (one
      sequence, or rows as long as the cache), the op as it is, block-sparse
      work skipped; else the op on a `full` span with the span's rule, at
      each row's positions, as -inf in its additive mask (dense: rows of
      different lengths, e.g. a batched decode step, compute every key).

    ```mlir
    %o = masformer.attention %q, %k, %v mask(%m : tensor<2x1x1x11xf32>)
           row_offset(%off : tensor<2xindex>)
           {causal = true, span = #masformer.span<block 4>}
           : tensor<2x4x1x16xf32>, tensor<2x2x11x16xf32>,
             tensor<2x2x11x16xf32> -> tensor<2x4x1x16xf32>
    ```
    becomes an `scf.if` of the `block 4` op (offsets all zero) and a `full`
    op whose mask adds -inf outside each row's blocks.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

def SplitHeadSpans : Pass<"masformer-split-head-spans"> {
  let summary = "One masformer.attention per run of heads with the same span";
  let description = [{
    Replaces every `masformer.attention` with `head_spans` by one op per run
    of consecutive key/value heads that share a span, on `tensor.extract_slice`
    of the query (and of the mask, where it has a heads dimension), key and
    value, their results inserted into one tensor shaped like the query. The
    CPU tiling and the GPU kernels do this themselves; the pass shows it and
    lets other pipelines lower per-head spans with one span per op.

    ```mlir
    %o = masformer.attention %q, %k, %v {span = #masformer.span<full>,
           head_spans = [#masformer.span<full>, #masformer.span<window 64>,
                         #masformer.span<window 64>]}
           : tensor<1x6x256x32xf32>, tensor<1x3x256x32xf32>,
             tensor<1x3x256x32xf32> -> tensor<1x6x256x32xf32>
    ```
    becomes a full op on query heads 0-1 (key/value head 0) and a
    `window 64` op on query heads 2-5 (key/value heads 1-2).
  }];
  let dependentDialects = ["::mlir::tensor::TensorDialect"];
}

def DeriveDecode : Pass<"masformer-derive-decode", "::mlir::ModuleOp"> {
  let summary = "Derive a decode entry (KV cache buffers updated in place) "
                "from a causal decoder's @main";
  let description = [{
    Adds `@decode` next to `@main` of a raised causal decoder (inputs
    `input_ids`, optionally `attention_mask` and `position_ids`, all
    `[batch, sequence]`): the same outputs for `new` tokens that follow
    `past_length` cached positions (docs/generate.md).

    - Inputs: `input_ids [batch, new]`, `past_length` (a rank-0 i64), then
      per attention layer `past.L.start` and `past.L.rows` (rank-0 i64)
      and its cache buffers `past.L.key` and `past.L.value`, shaped
      `[batch, kv_heads, capacity, head_dim]`: rows
      `[start, start + rows)` of each head hold the kept positions. The
      buffers carry the span their cache must keep as
      `masformer.cache_span` (the layer's span; for per-head spans one
      covering every head) and `masformer.in_place`: the entry writes the
      new tokens' keys and values into rows
      `[start + rows, start + rows + new)`, which the caller must have
      room for, and `--masformer-check-in-place` checks after
      bufferization that this write happened in place.
    - Outputs: `@main`'s, over the new tokens; each per-position output
      (a dimension named as the sequence) over only the last
      `logits_rows` of them, a last rank-0 i64 input clamped to
      `[1, new]`. The ops from the last one that reads every row on (for
      GPT-2 the last layer's residual sum, the final norm and the LM head)
      run on those rows only: their slices are moved up through linalg ops
      (by the tiling interface), reshapes, attentions (the last query
      rows, which keep their positions: queries align to the end of the
      keys) and chains of row-by-row ops over rows flattened to
      `[batch * new]` (recomputed on `[batch * rows]`), while every reader
      of a result takes the same slice. A
      prefill for generation asks for 1
      row: the head's work and its `[batch, new, vocab]` output shrink to
      one row.
    - Positions the model computes from the sequence (a Range over it, a
      slice of a position table from 0, a `position_ids` input) start at
      `past_length`; a position table's rows become
      `masformer.max_length`.
    - Each layer attends to the run `[start, start + rows + new)` of its
      buffers (the kept positions, then the new ones), its queries
      aligned to the end of the keys; masks are dropped, and allowed only where they
      are zero on every pair the layer's causality and model window keep
      when `attention_mask` is all ones (generation runs unpadded
      sequences).

    With `bf16-cache-head-dim-multiple` (what `--masformer-lower-to-cpu`
    passes `--masformer-mixed-precision` as `head-dim-multiple` when
    attention runs on bf16: 32 with AMX, 16 without), a layer whose
    attention will take bf16 operands keeps a bf16 cache: its new keys and
    values are rounded (`arith.truncf`) as they are written, and the
    attention reads the run through an `arith.extf` that the mixed
    precision drops. The cache then costs half the bytes and is not
    converted at each step; the attention's operands are the same bf16
    values as with an f32 cache.

    Anything else (a non-causal layer, a mask with a position bias, an
    input it cannot feed, `attention_mask` read outside the masks, keys
    with a dynamic number of heads or head size) is one error naming it,
    and the module is unchanged.
  }];
  let options = [
    Option<"bf16CacheHeadDimMultiple", "bf16-cache-head-dim-multiple",
           "int64_t", /*default=*/"0",
           "Layers whose attention runs on bf16 operands (static head "
           "dimension a multiple of max(16, this)) keep a bf16 cache; 0: "
           "every cache f32">
  ];
  let dependentDialects = [
    "::mlir::affine::AffineDialect",
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

#endif // MASFORMER_DIALECT_MASFORMER_TRANSFORMS_PASSES_TD
