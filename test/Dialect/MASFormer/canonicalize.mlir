// RUN: masformer-opt %s --canonicalize --split-input-file | FileCheck %s

// A block at least as long as the key sequence keeps every pair: full.
// CHECK-LABEL: func @block_covers_sequence
// CHECK: span = #masformer.span<full>
func.func @block_covers_sequence(%q: tensor<1x2x128x16xf32>) -> tensor<1x2x128x16xf32> {
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<block 128>, causal = true} : tensor<1x2x128x16xf32>, tensor<1x2x128x16xf32>, tensor<1x2x128x16xf32> -> tensor<1x2x128x16xf32>
  return %0 : tensor<1x2x128x16xf32>
}

// -----

// CHECK-LABEL: func @window_covers_sequence
// CHECK: {causal = true, layer = 1 : i64, span = #masformer.span<full>}
func.func @window_covers_sequence(%q: tensor<1x2x4x16xf32>, %kv: tensor<1x2x100x16xf32>) -> tensor<1x2x4x16xf32> {
  %0 = masformer.attention %q, %kv, %kv {span = #masformer.span<window 4096>, causal = true, layer = 1} : tensor<1x2x4x16xf32>, tensor<1x2x100x16xf32>, tensor<1x2x100x16xf32> -> tensor<1x2x4x16xf32>
  return %0 : tensor<1x2x4x16xf32>
}

// -----

// One key short of covering the sequence: the span stays.
// CHECK-LABEL: func @block_shorter_than_sequence
// CHECK: span = #masformer.span<block 127>
func.func @block_shorter_than_sequence(%q: tensor<1x2x128x16xf32>) -> tensor<1x2x128x16xf32> {
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<block 127>} : tensor<1x2x128x16xf32>, tensor<1x2x128x16xf32>, tensor<1x2x128x16xf32> -> tensor<1x2x128x16xf32>
  return %0 : tensor<1x2x128x16xf32>
}

// -----

// CHECK-LABEL: func @window_shorter_than_sequence
// CHECK: span = #masformer.span<window 99>
func.func @window_shorter_than_sequence(%q: tensor<1x2x100x16xf32>) -> tensor<1x2x100x16xf32> {
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<window 99>} : tensor<1x2x100x16xf32>, tensor<1x2x100x16xf32>, tensor<1x2x100x16xf32> -> tensor<1x2x100x16xf32>
  return %0 : tensor<1x2x100x16xf32>
}

// -----

// The key sequence length is unknown: nothing to fold.
// CHECK-LABEL: func @dynamic_sequence
// CHECK: span = #masformer.span<block 100000>
func.func @dynamic_sequence(%q: tensor<1x2x?x16xf32>) -> tensor<1x2x?x16xf32> {
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<block 100000>} : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32> -> tensor<1x2x?x16xf32>
  return %0 : tensor<1x2x?x16xf32>
}

// -----

// Attention has no side effect: an unused one is erased.
// CHECK-LABEL: func @dead
// CHECK-NOT: masformer.attention
func.func @dead(%q: tensor<1x2x8x16xf32>) {
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<full>} : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32> -> tensor<1x2x8x16xf32>
  return
}

// -----

// A window that covers the sequence is full whatever its sinks.
// CHECK-LABEL: func @window_sink_covers_sequence
// CHECK: span = #masformer.span<full>
func.func @window_sink_covers_sequence(%q: tensor<1x2x64x16xf32>) -> tensor<1x2x64x16xf32> {
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<window 64, sink 4>, causal = true} : tensor<1x2x64x16xf32>, tensor<1x2x64x16xf32>, tensor<1x2x64x16xf32> -> tensor<1x2x64x16xf32>
  return %0 : tensor<1x2x64x16xf32>
}

// -----

// Sinks that cover every key keep every pair.
// CHECK-LABEL: func @sinks_cover_sequence
// CHECK: span = #masformer.span<full>
func.func @sinks_cover_sequence(%q: tensor<1x2x64x16xf32>) -> tensor<1x2x64x16xf32> {
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<block 8, sink 64>} : tensor<1x2x64x16xf32>, tensor<1x2x64x16xf32>, tensor<1x2x64x16xf32> -> tensor<1x2x64x16xf32>
  return %0 : tensor<1x2x64x16xf32>
}

// -----

// A window shorter than the sequence keeps its sinks.
// CHECK-LABEL: func @window_sink_kept
// CHECK: span = #masformer.span<window 16, sink 4>
func.func @window_sink_kept(%q: tensor<1x2x64x16xf32>) -> tensor<1x2x64x16xf32> {
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<window 16, sink 4>, causal = true} : tensor<1x2x64x16xf32>, tensor<1x2x64x16xf32>, tensor<1x2x64x16xf32> -> tensor<1x2x64x16xf32>
  return %0 : tensor<1x2x64x16xf32>
}

// -----

// Head spans: each one that covers the sequence becomes full; when every
// head then has the same span it is the op's span.
// CHECK-LABEL: func @head_spans_all_cover
// CHECK: masformer.attention
// CHECK-NOT: head_spans
// CHECK-SAME: span = #masformer.span<full>
func.func @head_spans_all_cover(%q: tensor<1x2x64x16xf32>) -> tensor<1x2x64x16xf32> {
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<full>, causal = true, head_spans = [#masformer.span<window 64, sink 4>, #masformer.span<full>]} : tensor<1x2x64x16xf32>, tensor<1x2x64x16xf32>, tensor<1x2x64x16xf32> -> tensor<1x2x64x16xf32>
  return %0 : tensor<1x2x64x16xf32>
}

// -----

// CHECK-LABEL: func @head_spans_same
// CHECK: masformer.attention
// CHECK-NOT: head_spans
// CHECK-SAME: span = #masformer.span<window 8, sink 2>
func.func @head_spans_same(%q: tensor<1x2x64x16xf32>) -> tensor<1x2x64x16xf32> {
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<full>, causal = true, head_spans = [#masformer.span<window 8, sink 2>, #masformer.span<window 8, sink 2>]} : tensor<1x2x64x16xf32>, tensor<1x2x64x16xf32>, tensor<1x2x64x16xf32> -> tensor<1x2x64x16xf32>
  return %0 : tensor<1x2x64x16xf32>
}

// -----

// CHECK-LABEL: func @head_spans_partly_cover
// CHECK: head_spans = [#masformer.span<full>, #masformer.span<block 16>, #masformer.span<full>]
// CHECK-SAME: span = #masformer.span<full>
func.func @head_spans_partly_cover(%q: tensor<1x3x64x16xf32>) -> tensor<1x3x64x16xf32> {
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<full>, head_spans = [#masformer.span<block 100>, #masformer.span<block 16>, #masformer.span<full>]} : tensor<1x3x64x16xf32>, tensor<1x3x64x16xf32>, tensor<1x3x64x16xf32> -> tensor<1x3x64x16xf32>
  return %0 : tensor<1x3x64x16xf32>
}

// -----

// With row offsets a row's positions start below 0: a block as long as the
// keys may split them and keys at negative positions are no sinks, so both
// stay; a window as long as the keys still keeps every pair.
// CHECK-LABEL: func @row_offset_covers
// CHECK: span = #masformer.span<block 11>
// CHECK: span = #masformer.span<window 2, sink 11>
// CHECK: span = #masformer.span<full>
func.func @row_offset_covers(%q: tensor<2x2x1x16xf32>, %kv: tensor<2x2x11x16xf32>, %o: tensor<2xindex>) -> (tensor<2x2x1x16xf32>, tensor<2x2x1x16xf32>, tensor<2x2x1x16xf32>) {
  %0 = masformer.attention %q, %kv, %kv row_offset(%o : tensor<2xindex>) {span = #masformer.span<block 11>, causal = true} : tensor<2x2x1x16xf32>, tensor<2x2x11x16xf32>, tensor<2x2x11x16xf32> -> tensor<2x2x1x16xf32>
  %1 = masformer.attention %q, %kv, %kv row_offset(%o : tensor<2xindex>) {span = #masformer.span<window 2, sink 11>, causal = true} : tensor<2x2x1x16xf32>, tensor<2x2x11x16xf32>, tensor<2x2x11x16xf32> -> tensor<2x2x1x16xf32>
  %2 = masformer.attention %q, %kv, %kv row_offset(%o : tensor<2xindex>) {span = #masformer.span<window 11, sink 3>, causal = true} : tensor<2x2x1x16xf32>, tensor<2x2x11x16xf32>, tensor<2x2x11x16xf32> -> tensor<2x2x1x16xf32>
  return %0, %1, %2 : tensor<2x2x1x16xf32>, tensor<2x2x1x16xf32>, tensor<2x2x1x16xf32>
}
