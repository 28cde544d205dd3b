// RUN: masformer-opt %s --masformer-tile-attention="tile-q=16 tile-kv=32 vector-width=16" | FileCheck %s

// The softcap, c * tanh(s / c) on the scaled scores, in both paths: in the
// epilogue of the micro-kernels' Q K^T (on vectors of 16 scores, before
// the tile's logits add the mask), and in the linalg step of partial tiles
// (on each score, after the scale, before the mask).
// CHECK-LABEL: func @softcap_mask
// CHECK:     scf.if %{{.+}} -> (tensor<?xf32>, tensor<?xf32>, tensor<?x32xf32>) {
// CHECK:       vector.fma
// CHECK:       %[[S:.+]] = arith.mulf %{{.+}}, %{{.+}} : vector<16xf32>
// CHECK:       %[[D:.+]] = arith.mulf %[[S]], %{{.+}} : vector<16xf32>
// CHECK:       %[[T:.+]] = math.tanh %[[D]] : vector<16xf32>
// CHECK:       arith.mulf %[[T]], %{{.+}} : vector<16xf32>
// CHECK:       linalg.generic
// CHECK:         arith.addf
// CHECK:     } else {
// CHECK:       vector.reduction <add>
// CHECK:       linalg.generic
// CHECK:         %[[LS:.+]] = arith.mulf %{{.+}}, %{{.+}} : f32
// CHECK:         %[[INV:.+]] = arith.constant 0.333333343 : f32
// CHECK:         %[[LD:.+]] = arith.mulf %[[LS]], %[[INV]] : f32
// CHECK:         %[[LT:.+]] = math.tanh %[[LD]] : f32
// CHECK:         %[[C:.+]] = arith.constant 3.000000e+00 : f32
// CHECK:         %[[LC:.+]] = arith.mulf %[[LT]], %[[C]] : f32
// CHECK:         arith.addf %[[LC]], %{{.+}} : f32
func.func @softcap_mask(%q: tensor<1x2x80x32xf32>, %m: tensor<1x1x1x80xf32>) -> tensor<1x2x80x32xf32> {
  %0 = masformer.attention %q, %q, %q mask(%m : tensor<1x1x1x80xf32>) {span = #masformer.span<full>, causal = true, softcap = 3.0 : f32} : tensor<1x2x80x32xf32>, tensor<1x2x80x32xf32>, tensor<1x2x80x32xf32> -> tensor<1x2x80x32xf32>
  return %0 : tensor<1x2x80x32xf32>
}
