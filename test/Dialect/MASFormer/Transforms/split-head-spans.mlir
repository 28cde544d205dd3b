// RUN: masformer-opt %s --masformer-split-head-spans --split-input-file --verify-diagnostics | FileCheck %s

// Runs of key/value heads with the same span: heads 0 (full) and 1-2
// (window 64, sink 4), each with its two query heads; the per-head mask is
// sliced with the query, the result assembled in query-head order.
// CHECK-LABEL: func @two_runs
// CHECK-SAME: (%[[Q:.*]]: tensor<2x6x256x32xf32>, %[[K:.*]]: tensor<2x3x256x32xf32>, %[[V:.*]]: tensor<2x3x256x32xf32>, %[[M:.*]]: tensor<2x6x256x256xf32>)
// CHECK: %[[OUT:.*]] = tensor.empty() : tensor<2x6x256x32xf32>
// CHECK: %[[Q0:.*]] = tensor.extract_slice %[[Q]][0, 0, 0, 0] [2, 2, 256, 32] [1, 1, 1, 1]
// CHECK: %[[K0:.*]] = tensor.extract_slice %[[K]][0, 0, 0, 0] [2, 1, 256, 32] [1, 1, 1, 1]
// CHECK: %[[V0:.*]] = tensor.extract_slice %[[V]][0, 0, 0, 0] [2, 1, 256, 32] [1, 1, 1, 1]
// CHECK: %[[M0:.*]] = tensor.extract_slice %[[M]][0, 0, 0, 0] [2, 2, 256, 256] [1, 1, 1, 1]
// CHECK: %[[A0:.*]] = masformer.attention %[[Q0]], %[[K0]], %[[V0]] mask(%[[M0]] : tensor<2x2x256x256xf32>) {causal = true, layer = 7 : i64, span = #masformer.span<full>}
// CHECK: %[[O0:.*]] = tensor.insert_slice %[[A0]] into %[[OUT]][0, 0, 0, 0] [2, 2, 256, 32] [1, 1, 1, 1]
// CHECK: %[[Q1:.*]] = tensor.extract_slice %[[Q]][0, 2, 0, 0] [2, 4, 256, 32] [1, 1, 1, 1]
// CHECK: %[[K1:.*]] = tensor.extract_slice %[[K]][0, 1, 0, 0] [2, 2, 256, 32] [1, 1, 1, 1]
// CHECK: %[[V1:.*]] = tensor.extract_slice %[[V]][0, 1, 0, 0] [2, 2, 256, 32] [1, 1, 1, 1]
// CHECK: %[[M1:.*]] = tensor.extract_slice %[[M]][0, 2, 0, 0] [2, 4, 256, 256] [1, 1, 1, 1]
// CHECK: %[[A1:.*]] = masformer.attention %[[Q1]], %[[K1]], %[[V1]] mask(%[[M1]] : tensor<2x4x256x256xf32>) {causal = true, layer = 7 : i64, span = #masformer.span<window 64, sink 4>}
// CHECK: %[[O1:.*]] = tensor.insert_slice %[[A1]] into %[[O0]][0, 2, 0, 0] [2, 4, 256, 32] [1, 1, 1, 1]
// CHECK: return %[[O1]]
func.func @two_runs(%q: tensor<2x6x256x32xf32>, %k: tensor<2x3x256x32xf32>, %v: tensor<2x3x256x32xf32>, %m: tensor<2x6x256x256xf32>) -> tensor<2x6x256x32xf32> {
  %0 = masformer.attention %q, %k, %v mask(%m : tensor<2x6x256x256xf32>) {span = #masformer.span<full>, causal = true, layer = 7 : i64, head_spans = [#masformer.span<full>, #masformer.span<window 64, sink 4>, #masformer.span<window 64, sink 4>]} : tensor<2x6x256x32xf32>, tensor<2x3x256x32xf32>, tensor<2x3x256x32xf32> -> tensor<2x6x256x32xf32>
  return %0 : tensor<2x6x256x32xf32>
}

// -----

// A mask without a heads dimension is shared; dynamic batch and sequence
// sizes are carried over; heads 0 and 2 share a span but are not
// consecutive, so there are three ops.
// CHECK-LABEL: func @broadcast_mask_dynamic
// CHECK-COUNT-3: masformer.attention %{{.*}}, %{{.*}}, %{{.*}} mask(%arg3 : tensor<?x1x1x?xf32>)
// CHECK-NOT: masformer.attention
func.func @broadcast_mask_dynamic(%q: tensor<?x3x?x16xf32>, %k: tensor<?x3x?x16xf32>, %v: tensor<?x3x?x16xf32>, %m: tensor<?x1x1x?xf32>) -> tensor<?x3x?x16xf32> {
  %0 = masformer.attention %q, %k, %v mask(%m : tensor<?x1x1x?xf32>) {span = #masformer.span<full>, head_spans = [#masformer.span<block 8>, #masformer.span<full>, #masformer.span<block 8>]} : tensor<?x3x?x16xf32>, tensor<?x3x?x16xf32>, tensor<?x3x?x16xf32> -> tensor<?x3x?x16xf32>
  return %0 : tensor<?x3x?x16xf32>
}

// -----

// A dynamic number of query heads: the group size is q_heads / kv_heads at
// run time, the query slices start and end at multiples of it.
// CHECK-LABEL: func @dynamic_query_heads
// CHECK: %[[H:.*]] = tensor.dim %arg0, %c1
// CHECK: %[[G:.*]] = arith.divui %[[H]], %c2
// CHECK: tensor.extract_slice %arg0[0, 0, 0, 0] [1, %[[G]], 8, 4]
// CHECK: masformer.attention {{.*}}span = #masformer.span<full>} : tensor<1x?x8x4xf32>, tensor<1x1x8x4xf32>
// CHECK: tensor.extract_slice %arg0[0, %[[G]], 0, 0] [1, %[[G]], 8, 4]
// CHECK: masformer.attention {{.*}}span = #masformer.span<window 2>} : tensor<1x?x8x4xf32>, tensor<1x1x8x4xf32>
func.func @dynamic_query_heads(%q: tensor<1x?x8x4xf32>, %kv: tensor<1x2x8x4xf32>) -> tensor<1x?x8x4xf32> {
  %0 = masformer.attention %q, %kv, %kv {span = #masformer.span<full>, head_spans = [#masformer.span<full>, #masformer.span<window 2>]} : tensor<1x?x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32> -> tensor<1x?x8x4xf32>
  return %0 : tensor<1x?x8x4xf32>
}

// -----

func.func @dynamic_mask_heads(%q: tensor<1x4x8x4xf32>, %kv: tensor<1x2x8x4xf32>, %m: tensor<1x?x8x8xf32>) -> tensor<1x4x8x4xf32> {
  // expected-error @+1 {{with head_spans and a mask whose heads dimension is dynamic cannot be split by head}}
  %0 = masformer.attention %q, %kv, %kv mask(%m : tensor<1x?x8x8xf32>) {span = #masformer.span<full>, head_spans = [#masformer.span<full>, #masformer.span<window 2>]} : tensor<1x4x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32> -> tensor<1x4x8x4xf32>
  return %0 : tensor<1x4x8x4xf32>
}

// -----

// Each part keeps the rows' positions (row_offset) and the discardable
// attributes (the model's span).
// CHECK-LABEL: func @row_offset
// CHECK-SAME: %[[O:[^:]+]]: tensor<2xindex>
// CHECK: masformer.attention {{.+}} row_offset(%[[O]] : tensor<2xindex>) {causal = true, masformer.model_span = #masformer.span<window 8>, span = #masformer.span<block 4>}
// CHECK: masformer.attention {{.+}} row_offset(%[[O]] : tensor<2xindex>) {causal = true, masformer.model_span = #masformer.span<window 8>, span = #masformer.span<window 8>}
func.func @row_offset(%q: tensor<2x4x1x16xf32>, %k: tensor<2x2x11x16xf32>, %o: tensor<2xindex>) -> tensor<2x4x1x16xf32> {
  %0 = masformer.attention %q, %k, %k row_offset(%o : tensor<2xindex>) {span = #masformer.span<full>, causal = true, masformer.model_span = #masformer.span<window 8>, head_spans = [#masformer.span<block 4>, #masformer.span<window 8>]} : tensor<2x4x1x16xf32>, tensor<2x2x11x16xf32>, tensor<2x2x11x16xf32> -> tensor<2x4x1x16xf32>
  return %0 : tensor<2x4x1x16xf32>
}
