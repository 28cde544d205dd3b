// RUN: masformer-opt %s | masformer-opt | FileCheck %s
// RUN: masformer-opt %s --mlir-print-op-generic | masformer-opt | FileCheck %s

// CHECK-LABEL: func @full_mha
// CHECK: masformer.attention %{{.*}}, %{{.*}}, %{{.*}} {span = #masformer.span<full>}
// CHECK-SAME: : tensor<1x4x16x32xf32>, tensor<1x4x16x32xf32>, tensor<1x4x16x32xf32> -> tensor<1x4x16x32xf32>
func.func @full_mha(%q: tensor<1x4x16x32xf32>, %k: tensor<1x4x16x32xf32>, %v: tensor<1x4x16x32xf32>) -> tensor<1x4x16x32xf32> {
  %0 = masformer.attention %q, %k, %v {span = #masformer.span<full>} : tensor<1x4x16x32xf32>, tensor<1x4x16x32xf32>, tensor<1x4x16x32xf32> -> tensor<1x4x16x32xf32>
  return %0 : tensor<1x4x16x32xf32>
}

// CHECK-LABEL: func @block_gqa_causal
// CHECK-SAME: (%[[Q:.+]]: tensor<2x8x128x64xf16>, %[[K:.+]]: tensor<2x2x128x64xf16>, %[[V:.+]]: tensor<2x2x128x64xf16>)
// CHECK: masformer.attention %[[Q]], %[[K]], %[[V]]
// CHECK-SAME: {causal = true, layer = 3 : i64, scale = 1.250000e-01 : f32, span = #masformer.span<block 64>}
func.func @block_gqa_causal(%q: tensor<2x8x128x64xf16>, %k: tensor<2x2x128x64xf16>, %v: tensor<2x2x128x64xf16>) -> tensor<2x8x128x64xf16> {
  %0 = masformer.attention %q, %k, %v {span = #masformer.span<block 64>, causal = true, scale = 0.125 : f32, layer = 3 : i64} : tensor<2x8x128x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x64xf16> -> tensor<2x8x128x64xf16>
  return %0 : tensor<2x8x128x64xf16>
}

// A causal flag equal to its default (false) is not printed.
// CHECK-LABEL: func @window_mqa_mask
// CHECK-SAME: %[[M:[^:]+]]: tensor<2x1x1x128xf32>
// CHECK: masformer.attention %{{.*}}, %{{.*}}, %{{.*}} mask(%[[M]] : tensor<2x1x1x128xf32>) {span = #masformer.span<window 512>}
// CHECK-SAME: -> tensor<2x4x128x64xbf16>
func.func @window_mqa_mask(%q: tensor<2x4x128x64xbf16>, %k: tensor<2x1x128x64xbf16>, %v: tensor<2x1x128x64xbf16>, %m: tensor<2x1x1x128xf32>) -> tensor<2x4x128x64xbf16> {
  %0 = masformer.attention %q, %k, %v mask(%m : tensor<2x1x1x128xf32>) {span = #masformer.span<window 512>, causal = false} : tensor<2x4x128x64xbf16>, tensor<2x1x128x64xbf16>, tensor<2x1x128x64xbf16> -> tensor<2x4x128x64xbf16>
  return %0 : tensor<2x4x128x64xbf16>
}

// Batch, heads and sequence lengths may be dynamic; the decode shape has one
// query against a longer key sequence.
// CHECK-LABEL: func @dynamic_decode
// CHECK: masformer.attention {{.*}} {causal = true, span = #masformer.span<block 1024>} : tensor<?x?x1x64xf32>, tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32> -> tensor<?x?x1x64xf32>
func.func @dynamic_decode(%q: tensor<?x?x1x64xf32>, %k: tensor<?x?x?x64xf32>, %v: tensor<?x?x?x64xf32>) -> tensor<?x?x1x64xf32> {
  %0 = masformer.attention %q, %k, %v {span = #masformer.span<block 1024>, causal = true} : tensor<?x?x1x64xf32>, tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32> -> tensor<?x?x1x64xf32>
  return %0 : tensor<?x?x1x64xf32>
}

// A rank-2 mask broadcasts over batch and heads.
// CHECK-LABEL: func @rank2_mask
// CHECK: mask(%{{.*}} : tensor<16x16xf16>)
func.func @rank2_mask(%q: tensor<1x2x16x8xf32>, %m: tensor<16x16xf16>) -> tensor<1x2x16x8xf32> {
  %0 = masformer.attention %q, %q, %q mask(%m : tensor<16x16xf16>) {span = #masformer.span<block 4>} : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32> -> tensor<1x2x16x8xf32>
  return %0 : tensor<1x2x16x8xf32>
}

// Sinks: the first keys stay visible to every query; `sink 0` is no sinks.
// CHECK-LABEL: func @window_sink
// CHECK: span = #masformer.span<window 512, sink 64>
// CHECK: span = #masformer.span<block 128, sink 4>
// CHECK: span = #masformer.span<window 16>}
func.func @window_sink(%q: tensor<1x4x16x32xf32>) -> (tensor<1x4x16x32xf32>, tensor<1x4x16x32xf32>, tensor<1x4x16x32xf32>) {
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<window 512, sink 64>, causal = true} : tensor<1x4x16x32xf32>, tensor<1x4x16x32xf32>, tensor<1x4x16x32xf32> -> tensor<1x4x16x32xf32>
  %1 = masformer.attention %q, %q, %q {span = #masformer.span<block 128, sink 4>} : tensor<1x4x16x32xf32>, tensor<1x4x16x32xf32>, tensor<1x4x16x32xf32> -> tensor<1x4x16x32xf32>
  %2 = masformer.attention %q, %q, %q {span = #masformer.span<window 16, sink 0>} : tensor<1x4x16x32xf32>, tensor<1x4x16x32xf32>, tensor<1x4x16x32xf32> -> tensor<1x4x16x32xf32>
  return %0, %1, %2 : tensor<1x4x16x32xf32>, tensor<1x4x16x32xf32>, tensor<1x4x16x32xf32>
}

// Softcapped scores (Gemma 2).
// CHECK-LABEL: func @softcap
// CHECK: masformer.attention %{{.*}}, %{{.*}}, %{{.*}} {causal = true, softcap = 5.000000e+01 : f32, span = #masformer.span<full>}
func.func @softcap(%q: tensor<1x4x16x32xf32>) -> tensor<1x4x16x32xf32> {
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<full>, causal = true, softcap = 50.0 : f32} : tensor<1x4x16x32xf32>, tensor<1x4x16x32xf32>, tensor<1x4x16x32xf32> -> tensor<1x4x16x32xf32>
  return %0 : tensor<1x4x16x32xf32>
}

// Per-row positions (row_offset), after the mask; the generic form keeps
// both optional operands apart (operandSegmentSizes).
// CHECK-LABEL: func @row_offset
// CHECK-SAME: %[[M:[^:]+]]: tensor<2x1x1x11xf32>, %[[O:[^:]+]]: tensor<2xindex>
// CHECK: masformer.attention %{{.*}}, %{{.*}}, %{{.*}} mask(%[[M]] : tensor<2x1x1x11xf32>) row_offset(%[[O]] : tensor<2xindex>) {causal = true, span = #masformer.span<block 4, sink 2>}
// CHECK-LABEL: func @row_offset_no_mask
// CHECK: masformer.attention %{{.*}}, %{{.*}}, %{{.*}} row_offset(%{{.*}} : tensor<?xindex>) {span = #masformer.span<block 4>}
func.func @row_offset(%q: tensor<2x4x1x16xf32>, %k: tensor<2x2x11x16xf32>, %m: tensor<2x1x1x11xf32>, %o: tensor<2xindex>) -> tensor<2x4x1x16xf32> {
  %0 = masformer.attention %q, %k, %k mask(%m : tensor<2x1x1x11xf32>) row_offset(%o : tensor<2xindex>) {span = #masformer.span<block 4, sink 2>, causal = true} : tensor<2x4x1x16xf32>, tensor<2x2x11x16xf32>, tensor<2x2x11x16xf32> -> tensor<2x4x1x16xf32>
  return %0 : tensor<2x4x1x16xf32>
}
func.func @row_offset_no_mask(%q: tensor<?x4x3x16xf32>, %k: tensor<?x2x11x16xf32>, %o: tensor<?xindex>) -> tensor<?x4x3x16xf32> {
  %0 = masformer.attention %q, %k, %k row_offset(%o : tensor<?xindex>) {span = #masformer.span<block 4>} : tensor<?x4x3x16xf32>, tensor<?x2x11x16xf32>, tensor<?x2x11x16xf32> -> tensor<?x4x3x16xf32>
  return %0 : tensor<?x4x3x16xf32>
}

// CHECK-LABEL: func @dot_u8s8
// CHECK: masformer.dot_u8s8 %{{.*}}, %{{.*}}, %{{.*}} : vector<64xi8> -> vector<16xi32>
func.func @dot_u8s8(%acc: vector<16xi32>, %a: vector<64xi8>, %b: vector<64xi8>) -> vector<16xi32> {
  %0 = masformer.dot_u8s8 %acc, %a, %b : vector<64xi8> -> vector<16xi32>
  return %0 : vector<16xi32>
}
