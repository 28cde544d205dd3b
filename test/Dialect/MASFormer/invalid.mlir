// RUN: masformer-opt %s -split-input-file -verify-diagnostics

// A block of zero keys would leave every query with nothing to attend to.
func.func @block_zero(%q: tensor<1x1x8x4xf32>) -> tensor<1x1x8x4xf32> {
  // expected-error @+1 {{block span size must be a positive integer, got 0}}
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<block 0>} : tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32> -> tensor<1x1x8x4xf32>
  return %0 : tensor<1x1x8x4xf32>
}

// -----

func.func @window_negative(%q: tensor<1x1x8x4xf32>) -> tensor<1x1x8x4xf32> {
  // expected-error @+1 {{window span size must be a positive integer, got -3}}
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<window -3>} : tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32> -> tensor<1x1x8x4xf32>
  return %0 : tensor<1x1x8x4xf32>
}

// -----

func.func @block_missing_size(%q: tensor<1x1x8x4xf32>) -> tensor<1x1x8x4xf32> {
  // expected-error @+1 {{expected the block span's size, a positive integer}}
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<block>} : tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32> -> tensor<1x1x8x4xf32>
  return %0 : tensor<1x1x8x4xf32>
}

// -----

func.func @block_float_size(%q: tensor<1x1x8x4xf32>) -> tensor<1x1x8x4xf32> {
  // expected-error @+1 {{expected the block span's size, a positive integer}}
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<block 2.5>} : tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32> -> tensor<1x1x8x4xf32>
  return %0 : tensor<1x1x8x4xf32>
}

// -----

func.func @block_huge_size(%q: tensor<1x1x8x4xf32>) -> tensor<1x1x8x4xf32> {
  // expected-error @+1 {{block span size is too large}}
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<block 99999999999999999999999>} : tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32> -> tensor<1x1x8x4xf32>
  return %0 : tensor<1x1x8x4xf32>
}

// -----

// `full` has no size: a size there is almost certainly a typo for block.
func.func @full_with_size(%q: tensor<1x1x8x4xf32>) -> tensor<1x1x8x4xf32> {
  // expected-error @+1 {{expected '>'}}
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<full 4>} : tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32> -> tensor<1x1x8x4xf32>
  return %0 : tensor<1x1x8x4xf32>
}

// -----

func.func @unknown_kind(%q: tensor<1x1x8x4xf32>) -> tensor<1x1x8x4xf32> {
  // expected-error @+1 {{unknown span kind 'strided', expected one of: full, block, window}}
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<strided 4>} : tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32> -> tensor<1x1x8x4xf32>
  return %0 : tensor<1x1x8x4xf32>
}

// -----

func.func @missing_span(%q: tensor<1x1x8x4xf32>) -> tensor<1x1x8x4xf32> {
  // expected-error @+1 {{requires attribute 'span'}}
  %0 = masformer.attention %q, %q, %q : tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32> -> tensor<1x1x8x4xf32>
  return %0 : tensor<1x1x8x4xf32>
}

// -----

// Every lowering assumes the [batch, heads, seq, head_dim] layout.
func.func @query_rank(%q: tensor<8x4xf32>, %k: tensor<1x1x8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{query must have rank 4 ([batch, heads, seq, head_dim]), got rank 2}}
  %0 = masformer.attention %q, %k, %k {span = #masformer.span<full>} : tensor<8x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32> -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

func.func @key_rank(%q: tensor<1x1x8x4xf32>, %k: tensor<1x8x4xf32>) -> tensor<1x1x8x4xf32> {
  // expected-error @+1 {{key must have rank 4 ([batch, heads, seq, head_dim]), got rank 3}}
  %0 = masformer.attention %q, %k, %q {span = #masformer.span<full>} : tensor<1x1x8x4xf32>, tensor<1x8x4xf32>, tensor<1x1x8x4xf32> -> tensor<1x1x8x4xf32>
  return %0 : tensor<1x1x8x4xf32>
}

// -----

func.func @value_rank(%q: tensor<1x1x8x4xf32>, %v: tensor<1x1x1x8x4xf32>) -> tensor<1x1x8x4xf32> {
  // expected-error @+1 {{value must have rank 4 ([batch, heads, seq, head_dim]), got rank 5}}
  %0 = masformer.attention %q, %q, %v {span = #masformer.span<full>} : tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x1x8x4xf32> -> tensor<1x1x8x4xf32>
  return %0 : tensor<1x1x8x4xf32>
}

// -----

func.func @element_type(%q: tensor<1x1x8x4xf64>) -> tensor<1x1x8x4xf64> {
  // expected-error @+1 {{query element type must be f32, f16 or bf16, got 'f64'}}
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<full>} : tensor<1x1x8x4xf64>, tensor<1x1x8x4xf64>, tensor<1x1x8x4xf64> -> tensor<1x1x8x4xf64>
  return %0 : tensor<1x1x8x4xf64>
}

// -----

func.func @key_element_type(%q: tensor<1x1x8x4xf32>, %k: tensor<1x1x8x4xf16>) -> tensor<1x1x8x4xf32> {
  // expected-error @+1 {{key element type ('f16') must match query element type ('f32')}}
  %0 = masformer.attention %q, %k, %q {span = #masformer.span<full>} : tensor<1x1x8x4xf32>, tensor<1x1x8x4xf16>, tensor<1x1x8x4xf32> -> tensor<1x1x8x4xf32>
  return %0 : tensor<1x1x8x4xf32>
}

// -----

func.func @value_element_type(%q: tensor<1x1x8x4xf32>, %v: tensor<1x1x8x4xbf16>) -> tensor<1x1x8x4xf32> {
  // expected-error @+1 {{value element type ('bf16') must match query element type ('f32')}}
  %0 = masformer.attention %q, %q, %v {span = #masformer.span<full>} : tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xbf16> -> tensor<1x1x8x4xf32>
  return %0 : tensor<1x1x8x4xf32>
}

// -----

func.func @result_type(%q: tensor<1x1x8x4xf32>) -> tensor<1x1x8x8xf32> {
  // expected-error @+1 {{result type 'tensor<1x1x8x8xf32>' must equal query type 'tensor<1x1x8x4xf32>'}}
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<full>} : tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32> -> tensor<1x1x8x8xf32>
  return %0 : tensor<1x1x8x8xf32>
}

// -----

func.func @batch(%q: tensor<2x1x8x4xf32>, %k: tensor<3x1x8x4xf32>) -> tensor<2x1x8x4xf32> {
  // expected-error @+1 {{key batch (3) must equal query batch (2)}}
  %0 = masformer.attention %q, %k, %k {span = #masformer.span<full>} : tensor<2x1x8x4xf32>, tensor<3x1x8x4xf32>, tensor<3x1x8x4xf32> -> tensor<2x1x8x4xf32>
  return %0 : tensor<2x1x8x4xf32>
}

// -----

func.func @key_head_dim(%q: tensor<1x1x8x4xf32>, %k: tensor<1x1x8x6xf32>, %v: tensor<1x1x8x4xf32>) -> tensor<1x1x8x4xf32> {
  // expected-error @+1 {{key head_dim (6) must equal query head_dim (4)}}
  %0 = masformer.attention %q, %k, %v {span = #masformer.span<full>} : tensor<1x1x8x4xf32>, tensor<1x1x8x6xf32>, tensor<1x1x8x4xf32> -> tensor<1x1x8x4xf32>
  return %0 : tensor<1x1x8x4xf32>
}

// -----

func.func @value_batch(%q: tensor<2x1x8x4xf32>, %v: tensor<1x1x8x4xf32>) -> tensor<2x1x8x4xf32> {
  // expected-error @+1 {{value batch (1) must equal key batch (2)}}
  %0 = masformer.attention %q, %q, %v {span = #masformer.span<full>} : tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>, tensor<1x1x8x4xf32> -> tensor<2x1x8x4xf32>
  return %0 : tensor<2x1x8x4xf32>
}

// -----

func.func @value_heads(%q: tensor<1x4x8x4xf32>, %k: tensor<1x2x8x4xf32>, %v: tensor<1x4x8x4xf32>) -> tensor<1x4x8x4xf32> {
  // expected-error @+1 {{value kv_heads (4) must equal key kv_heads (2)}}
  %0 = masformer.attention %q, %k, %v {span = #masformer.span<full>} : tensor<1x4x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x4x8x4xf32> -> tensor<1x4x8x4xf32>
  return %0 : tensor<1x4x8x4xf32>
}

// -----

func.func @value_seq(%q: tensor<1x1x8x4xf32>, %v: tensor<1x1x9x4xf32>) -> tensor<1x1x8x4xf32> {
  // expected-error @+1 {{value kv_seq (9) must equal key kv_seq (8)}}
  %0 = masformer.attention %q, %q, %v {span = #masformer.span<full>} : tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x9x4xf32> -> tensor<1x1x8x4xf32>
  return %0 : tensor<1x1x8x4xf32>
}

// -----

// The output has query's head_dim, so value must have it too.
func.func @value_head_dim(%q: tensor<1x1x8x4xf32>, %v: tensor<1x1x8x2xf32>) -> tensor<1x1x8x4xf32> {
  // expected-error @+1 {{value head_dim (2) must equal query head_dim (4)}}
  %0 = masformer.attention %q, %q, %v {span = #masformer.span<full>} : tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x2xf32> -> tensor<1x1x8x4xf32>
  return %0 : tensor<1x1x8x4xf32>
}

// -----

// Grouped-query attention: each key/value head serves a whole group of
// query heads.
func.func @gqa_divides(%q: tensor<1x6x8x4xf32>, %k: tensor<1x4x8x4xf32>) -> tensor<1x6x8x4xf32> {
  // expected-error @+1 {{kv_heads (4) must divide q_heads (6)}}
  %0 = masformer.attention %q, %k, %k {span = #masformer.span<full>} : tensor<1x6x8x4xf32>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32> -> tensor<1x6x8x4xf32>
  return %0 : tensor<1x6x8x4xf32>
}

// -----

func.func @mask_rank(%q: tensor<1x1x8x4xf32>, %m: tensor<1x1x1x8x8xf32>) -> tensor<1x1x8x4xf32> {
  // expected-error @+1 {{mask rank (5) must be at most 4}}
  %0 = masformer.attention %q, %q, %q mask(%m : tensor<1x1x1x8x8xf32>) {span = #masformer.span<full>} : tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32> -> tensor<1x1x8x4xf32>
  return %0 : tensor<1x1x8x4xf32>
}

// -----

// The mask is additive: a boolean mask must be turned into 0 / -inf first.
func.func @mask_element_type(%q: tensor<1x1x8x4xf32>, %m: tensor<1x1x8x8xi1>) -> tensor<1x1x8x4xf32> {
  // expected-error @+1 {{mask element type must be f32, f16 or bf16, got 'i1'}}
  %0 = masformer.attention %q, %q, %q mask(%m : tensor<1x1x8x8xi1>) {span = #masformer.span<full>} : tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32> -> tensor<1x1x8x4xf32>
  return %0 : tensor<1x1x8x4xf32>
}

// -----

func.func @mask_broadcast(%q: tensor<1x2x8x4xf32>, %m: tensor<1x3x8x8xf32>) -> tensor<1x2x8x4xf32> {
  // expected-error @+1 {{mask dim 1 (size 3) is not broadcastable to q_heads (2)}}
  %0 = masformer.attention %q, %q, %q mask(%m : tensor<1x3x8x8xf32>) {span = #masformer.span<full>} : tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32> -> tensor<1x2x8x4xf32>
  return %0 : tensor<1x2x8x4xf32>
}

// -----

// Masks align to the right, as in numpy: a rank-1 mask spans the keys.
func.func @mask_broadcast_right_aligned(%q: tensor<1x2x8x4xf32>, %m: tensor<7xf32>) -> tensor<1x2x8x4xf32> {
  // expected-error @+1 {{mask dim 0 (size 7) is not broadcastable to kv_seq (8)}}
  %0 = masformer.attention %q, %q, %q mask(%m : tensor<7xf32>) {span = #masformer.span<full>} : tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32> -> tensor<1x2x8x4xf32>
  return %0 : tensor<1x2x8x4xf32>
}

// -----

func.func @scale_zero(%q: tensor<1x1x8x4xf32>) -> tensor<1x1x8x4xf32> {
  // expected-error @+1 {{scale must be a finite positive number, got 0}}
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<full>, scale = 0.0 : f32} : tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32> -> tensor<1x1x8x4xf32>
  return %0 : tensor<1x1x8x4xf32>
}

// -----

func.func @scale_f64(%q: tensor<1x1x8x4xf32>) -> tensor<1x1x8x4xf32> {
  // expected-error @+1 {{attribute 'scale' failed to satisfy constraint: 32-bit float attribute}}
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<full>, scale = 0.5 : f64} : tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32> -> tensor<1x1x8x4xf32>
  return %0 : tensor<1x1x8x4xf32>
}

// -----

func.func @softcap_zero(%q: tensor<1x1x8x4xf32>) -> tensor<1x1x8x4xf32> {
  // expected-error @+1 {{softcap must be a finite positive number, got 0}}
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<full>, softcap = 0.0 : f32} : tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32> -> tensor<1x1x8x4xf32>
  return %0 : tensor<1x1x8x4xf32>
}

// -----

func.func @softcap_negative(%q: tensor<1x1x8x4xf32>) -> tensor<1x1x8x4xf32> {
  // expected-error @+1 {{softcap must be a finite positive number, got -3}}
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<full>, softcap = -3.0 : f32} : tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32> -> tensor<1x1x8x4xf32>
  return %0 : tensor<1x1x8x4xf32>
}

// -----

func.func @layer_negative(%q: tensor<1x1x8x4xf32>) -> tensor<1x1x8x4xf32> {
  // expected-error @+1 {{layer index must be non-negative, got -1}}
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<full>, layer = -1 : i64} : tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32> -> tensor<1x1x8x4xf32>
  return %0 : tensor<1x1x8x4xf32>
}

// -----

// Queries align to the end of the keys; with more queries than keys the
// first would sit before position 0, where causal and span masks mean
// nothing.
func.func @more_queries_than_keys(%q: tensor<1x1x8x4xf32>, %k: tensor<1x1x4x4xf32>) -> tensor<1x1x8x4xf32> {
  // expected-error @+1 {{q_seq (8) must not exceed kv_seq (4) when the attention is causal or its span is not full}}
  %0 = masformer.attention %q, %k, %k {span = #masformer.span<full>, causal = true} : tensor<1x1x8x4xf32>, tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32> -> tensor<1x1x8x4xf32>
  return %0 : tensor<1x1x8x4xf32>
}

// -----

// Cross-attention with more queries than keys is fine when nothing depends
// on positions.
func.func @cross_attention_ok(%q: tensor<1x1x8x4xf32>, %k: tensor<1x1x4x4xf32>) -> tensor<1x1x8x4xf32> {
  %0 = masformer.attention %q, %k, %k {span = #masformer.span<full>} : tensor<1x1x8x4xf32>, tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32> -> tensor<1x1x8x4xf32>
  return %0 : tensor<1x1x8x4xf32>
}

// -----

// Sinks add keys back to a span that removed them; a full span removed none.
func.func @full_with_sink(%q: tensor<1x1x8x4xf32>) -> tensor<1x1x8x4xf32> {
  // expected-error @+1 {{a full span keeps every key and takes no sinks, got sink 4}}
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<full, sink 4>} : tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32> -> tensor<1x1x8x4xf32>
  return %0 : tensor<1x1x8x4xf32>
}

// -----

func.func @negative_sink(%q: tensor<1x1x8x4xf32>) -> tensor<1x1x8x4xf32> {
  // expected-error @+1 {{the sink count must be non-negative, got -1}}
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<window 4, sink -1>} : tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32> -> tensor<1x1x8x4xf32>
  return %0 : tensor<1x1x8x4xf32>
}

// -----

func.func @sink_without_count(%q: tensor<1x1x8x4xf32>) -> tensor<1x1x8x4xf32> {
  // expected-error @+1 {{expected the number of sink keys, a non-negative integer}}
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<window 4, sink>} : tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32> -> tensor<1x1x8x4xf32>
  return %0 : tensor<1x1x8x4xf32>
}

// -----

func.func @head_spans_with_sparse_span(%q: tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32> {
  // expected-error @+1 {{span must be #masformer.span<full> when head_spans gives each key/value head its span, got #masformer.span<window 4>}}
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<window 4>, head_spans = [#masformer.span<full>, #masformer.span<window 2>]} : tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32> -> tensor<1x2x8x4xf32>
  return %0 : tensor<1x2x8x4xf32>
}

// -----

func.func @head_spans_count(%q: tensor<1x4x8x4xf32>, %kv: tensor<1x2x8x4xf32>) -> tensor<1x4x8x4xf32> {
  // expected-error @+1 {{head_spans has 4 spans, expected one per key/value head (2)}}
  %0 = masformer.attention %q, %kv, %kv {span = #masformer.span<full>, head_spans = [#masformer.span<full>, #masformer.span<window 2>, #masformer.span<full>, #masformer.span<full>]} : tensor<1x4x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32> -> tensor<1x4x8x4xf32>
  return %0 : tensor<1x4x8x4xf32>
}

// -----

func.func @head_spans_dynamic_heads(%q: tensor<1x?x8x4xf32>) -> tensor<1x?x8x4xf32> {
  // expected-error @+1 {{head_spans needs a static number of key/value heads}}
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<full>, head_spans = [#masformer.span<full>, #masformer.span<window 2>]} : tensor<1x?x8x4xf32>, tensor<1x?x8x4xf32>, tensor<1x?x8x4xf32> -> tensor<1x?x8x4xf32>
  return %0 : tensor<1x?x8x4xf32>
}

// -----

func.func @head_spans_not_spans(%q: tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32> {
  // expected-error @+1 {{attribute 'head_spans' failed to satisfy constraint: one span per key/value head}}
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<full>, head_spans = [#masformer.span<full>, 3 : i64]} : tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32> -> tensor<1x2x8x4xf32>
  return %0 : tensor<1x2x8x4xf32>
}

// -----

func.func @head_spans_more_queries_than_keys(%q: tensor<1x2x8x4xf32>, %kv: tensor<1x2x4x4xf32>) -> tensor<1x2x8x4xf32> {
  // expected-error @+1 {{q_seq (8) must not exceed kv_seq (4) when the attention is causal or its span is not full}}
  %0 = masformer.attention %q, %kv, %kv {span = #masformer.span<full>, head_spans = [#masformer.span<full>, #masformer.span<window 2>]} : tensor<1x2x8x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32> -> tensor<1x2x8x4xf32>
  return %0 : tensor<1x2x8x4xf32>
}

// -----

// Cross-attention's keys are positions of another sequence: no block or
// window span pairs them with the queries.
func.func @cross_block(%q: tensor<1x2x8x4xf32>, %kv: tensor<1x2x12x4xf32>) -> tensor<1x2x8x4xf32> {
  // expected-error @+1 {{is cross-attention ('masformer.cross_attention'): its keys come from another sequence than its queries, so it takes the full span only, not a block or window span}}
  %0 = masformer.attention %q, %kv, %kv {span = #masformer.span<block 4>, masformer.cross_attention} : tensor<1x2x8x4xf32>, tensor<1x2x12x4xf32>, tensor<1x2x12x4xf32> -> tensor<1x2x8x4xf32>
  return %0 : tensor<1x2x8x4xf32>
}

// -----

func.func @cross_head_spans(%q: tensor<1x2x8x4xf32>, %kv: tensor<1x2x12x4xf32>) -> tensor<1x2x8x4xf32> {
  // expected-error @+1 {{so it takes the full span only, not head_spans}}
  %0 = masformer.attention %q, %kv, %kv {span = #masformer.span<full>, head_spans = [#masformer.span<full>, #masformer.span<window 2>], masformer.cross_attention} : tensor<1x2x8x4xf32>, tensor<1x2x12x4xf32>, tensor<1x2x12x4xf32> -> tensor<1x2x8x4xf32>
  return %0 : tensor<1x2x8x4xf32>
}

// -----

func.func @cross_causal(%q: tensor<1x2x8x4xf32>, %kv: tensor<1x2x12x4xf32>) -> tensor<1x2x8x4xf32> {
  // expected-error @+1 {{is cross-attention ('masformer.cross_attention') and cannot be causal}}
  %0 = masformer.attention %q, %kv, %kv {span = #masformer.span<full>, causal = true, masformer.cross_attention} : tensor<1x2x8x4xf32>, tensor<1x2x12x4xf32>, tensor<1x2x12x4xf32> -> tensor<1x2x8x4xf32>
  return %0 : tensor<1x2x8x4xf32>
}

// -----

func.func @cross_not_unit(%q: tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32> {
  // expected-error @+1 {{'masformer.cross_attention' must be a unit attribute}}
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<full>, masformer.cross_attention = 1 : i64} : tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32> -> tensor<1x2x8x4xf32>
  return %0 : tensor<1x2x8x4xf32>
}

// -----

func.func @cross_elsewhere(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'masformer.cross_attention' is only valid on masformer.attention}}
  %0 = arith.addf %x, %x {masformer.cross_attention} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @model_span_not_span(%q: tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32> {
  // expected-error @+1 {{'masformer.model_span' must be a span}}
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<full>, masformer.model_span = 4 : i64} : tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32> -> tensor<1x2x8x4xf32>
  return %0 : tensor<1x2x8x4xf32>
}

// -----

func.func @row_offset_rows(%q: tensor<2x1x8x4xf32>, %o: tensor<3xindex>) -> tensor<2x1x8x4xf32> {
  // expected-error @+1 {{row_offset has 3 rows, the query's batch is 2}}
  %0 = masformer.attention %q, %q, %q row_offset(%o : tensor<3xindex>) {span = #masformer.span<block 4>} : tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32> -> tensor<2x1x8x4xf32>
  return %0 : tensor<2x1x8x4xf32>
}

// -----

func.func @row_offset_type(%q: tensor<2x1x8x4xf32>, %o: tensor<2xi64>) -> tensor<2x1x8x4xf32> {
  // expected-error @+1 {{'masformer.attention' op operand #3 must be 1D tensor of index values, but got 'tensor<2xi64>'}}
  %0 = masformer.attention %q, %q, %q row_offset(%o : tensor<2xi64>) {span = #masformer.span<block 4>} : tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32> -> tensor<2x1x8x4xf32>
  return %0 : tensor<2x1x8x4xf32>
}

// -----

// vpdpbusd's shapes: 16 sums of four byte products each.
func.func @dot_u8s8_lanes(%acc: vector<8xi32>, %a: vector<64xi8>) -> vector<8xi32> {
  // expected-error @+1 {{'masformer.dot_u8s8' op operand #0 must be vector of 32-bit signless integer values of length 16, but got 'vector<8xi32>'}}
  %0 = masformer.dot_u8s8 %acc, %a, %a : vector<64xi8> -> vector<8xi32>
  return %0 : vector<8xi32>
}
