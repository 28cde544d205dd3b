// RUN: masformer-opt %s --masformer-decompose-attention --split-input-file | FileCheck %s

// Grouped-query heads read key/value head h floordiv 2 through the indexing
// maps; the block and causal masks come from the loop indices, with queries
// aligned to the end of the keys (offset kv_seq - q_seq).
// CHECK-DAG: #[[QMAP:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>
// CHECK-DAG: #[[KMAP:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1 floordiv 2, d3, d4)>
// CHECK-DAG: #[[VMAP:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1 floordiv 2, d4, d3)>
// CHECK-LABEL: func @block_gqa_causal
// CHECK-SAME: (%[[Q:.+]]: tensor<1x4x16x8xf32>, %[[K:.+]]: tensor<1x2x16x8xf32>, %[[V:.+]]: tensor<1x2x16x8xf32>)
// CHECK-NOT: masformer.attention
// CHECK: %[[S:.+]] = linalg.generic {indexing_maps = [#[[QMAP]], #[[KMAP]], {{.*}}], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
// CHECK-SAME: ins(%[[Q]], %[[K]] : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>)
// CHECK: %[[SCALE:.+]] = arith.constant 0.353553385 : f32
// CHECK: %[[L:.+]] = linalg.generic {{.*}} ins(%[[S]] : tensor<1x4x16x16xf32>)
// CHECK:   arith.mulf %{{.*}}, %[[SCALE]]
// CHECK:   %[[I:.+]] = linalg.index 2
// CHECK:   %[[J:.+]] = linalg.index 3
// CHECK:   %[[POS:.+]] = arith.addi %[[I]], %{{.*}} : index
// CHECK:   %[[CAUSAL:.+]] = arith.cmpi sle, %[[J]], %[[POS]]
// CHECK:   %[[C4:.+]] = arith.constant 4 : index
// CHECK:   %[[QB:.+]] = arith.floordivsi %[[POS]], %[[C4]]
// CHECK:   %[[KB:.+]] = arith.floordivsi %[[J]], %[[C4]]
// CHECK:   %[[SAME:.+]] = arith.cmpi eq, %[[QB]], %[[KB]]
// CHECK:   %[[OK:.+]] = arith.andi %[[CAUSAL]], %[[SAME]]
// CHECK:   arith.select %[[OK]], %{{.*}}, %{{.*}} : f32
// CHECK: arith.maximumf
// CHECK: math.exp
// CHECK: linalg.generic {indexing_maps = [#[[QMAP]], #[[VMAP]], {{.*}}]
// CHECK-SAME: tensor<1x2x16x8xf32>
// CHECK: arith.divf
// CHECK: return %{{.*}} : tensor<1x4x16x8xf32>
func.func @block_gqa_causal(%q: tensor<1x4x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>) -> tensor<1x4x16x8xf32> {
  %0 = masformer.attention %q, %k, %v {span = #masformer.span<block 4>, causal = true} : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32> -> tensor<1x4x16x8xf32>
  return %0 : tensor<1x4x16x8xf32>
}

// -----

// A bidirectional window keeps -W < i - j < W.
// CHECK-LABEL: func @window_bidirectional
// CHECK: linalg.index 3
// CHECK: %[[C3:.+]] = arith.constant 3 : index
// CHECK: %[[DIST:.+]] = arith.subi
// CHECK: %[[LT:.+]] = arith.cmpi slt, %[[DIST]], %[[C3]]
// CHECK: %[[CM3:.+]] = arith.constant -3 : index
// CHECK: %[[GT:.+]] = arith.cmpi sgt, %[[DIST]], %[[CM3]]
// CHECK: arith.andi %[[LT]], %[[GT]]
func.func @window_bidirectional(%q: tensor<1x1x8x4xf32>) -> tensor<1x1x8x4xf32> {
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<window 3>} : tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32> -> tensor<1x1x8x4xf32>
  return %0 : tensor<1x1x8x4xf32>
}

// -----

// A causal window keeps 0 <= i - j < W.
// CHECK-LABEL: func @window_causal
// CHECK: linalg.index 3
// CHECK: arith.cmpi sle
// CHECK: %[[DIST:.+]] = arith.subi
// CHECK: arith.cmpi slt, %[[DIST]], %{{.*}}
// CHECK: %[[C0:.+]] = arith.constant 0 : index
// CHECK: arith.cmpi sge, %[[DIST]], %[[C0]]
func.func @window_causal(%q: tensor<1x1x8x4xf32>) -> tensor<1x1x8x4xf32> {
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<window 3>, causal = true} : tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32> -> tensor<1x1x8x4xf32>
  return %0 : tensor<1x1x8x4xf32>
}

// -----

// Full and not causal: no position mask at all, only the scale and the
// additive mask, broadcast over batch, heads and queries.
// CHECK-DAG: #[[MASK:.+]] = affine_map<(d0, d1, d2, d3) -> (0, 0, 0, d3)>
// CHECK-LABEL: func @full_with_mask
// CHECK-SAME: %[[M:[^:]+]]: tensor<1x1x1x8xf32>
// CHECK: linalg.generic {indexing_maps = [#{{.+}}, #[[MASK]], #{{.+}}]
// CHECK-SAME: ins(%{{.*}}, %[[M]] : tensor<2x2x8x8xf32>, tensor<1x1x1x8xf32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.mulf
// CHECK-NEXT: arith.addf
// CHECK-NEXT: linalg.yield
// CHECK-NOT: linalg.index
func.func @full_with_mask(%q: tensor<2x2x8x4xf32>, %m: tensor<1x1x1x8xf32>) -> tensor<2x2x8x4xf32> {
  %0 = masformer.attention %q, %q, %q mask(%m : tensor<1x1x1x8xf32>) {span = #masformer.span<full>, scale = 0.5 : f32} : tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32> -> tensor<2x2x8x4xf32>
  return %0 : tensor<2x2x8x4xf32>
}

// -----

// f16 inputs are extended to f32 for the products and the result truncated
// back.
// CHECK-LABEL: func @f16
// CHECK: ^bb0(%[[A:[^:]+]]: f16, %[[B:[^:]+]]: f16, %{{[^:]+}}: f32):
// CHECK:   %[[AE:.+]] = arith.extf %[[A]] : f16 to f32
// CHECK:   %[[BE:.+]] = arith.extf %[[B]] : f16 to f32
// CHECK:   arith.mulf %[[AE]], %[[BE]] : f32
// CHECK: arith.truncf %{{.*}} : f32 to f16
// CHECK: return %{{.*}} : tensor<1x1x8x4xf16>
func.func @f16(%q: tensor<1x1x8x4xf16>) -> tensor<1x1x8x4xf16> {
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<block 2>} : tensor<1x1x8x4xf16>, tensor<1x1x8x4xf16>, tensor<1x1x8x4xf16> -> tensor<1x1x8x4xf16>
  return %0 : tensor<1x1x8x4xf16>
}

// -----

// Dynamic head counts: the group size is computed at run time and key/value
// heads are repeated with tensor.extract; the scale comes from the dynamic
// head_dim.
// CHECK-LABEL: func @dynamic
// CHECK-SAME: (%[[Q:.+]]: tensor<?x?x?x?xf32>, %[[K:.+]]: tensor<?x?x?x?xf32>, %[[V:.+]]: tensor<?x?x?x?xf32>)
// CHECK: %[[G:.+]] = arith.divui %{{.+}}, %{{.+}} : index
// CHECK: %[[REP:.+]] = tensor.empty
// CHECK-SAME: : tensor<?x?x?x?xf32>
// CHECK: linalg.generic
// CHECK:   %[[H:.+]] = linalg.index 1
// CHECK:   %[[KVH:.+]] = arith.divui %[[H]], %[[G]]
// CHECK:   tensor.extract %[[K]][%{{.+}}, %[[KVH]], %{{.+}}, %{{.+}}]
// CHECK: math.sqrt
// CHECK: return %{{.*}} : tensor<?x?x?x?xf32>
func.func @dynamic(%q: tensor<?x?x?x?xf32>, %k: tensor<?x?x?x?xf32>, %v: tensor<?x?x?x?xf32>) -> tensor<?x?x?x?xf32> {
  %0 = masformer.attention %q, %k, %v {span = #masformer.span<full>, causal = true} : tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32> -> tensor<?x?x?x?xf32>
  return %0 : tensor<?x?x?x?xf32>
}

// -----

// A softcap caps the scaled scores, c * tanh(s / c), before the mask is
// added.
// CHECK-LABEL: func @softcap_mask
// CHECK: linalg.generic {{.+}} ins(%{{.+}}, %{{.+}} : tensor<1x2x8x8xf32>, tensor<1x1x8x8xf32>)
// CHECK:   %[[X:.+]] = arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK:   %[[INV:.+]] = arith.constant 2.000000e-01 : f32
// CHECK:   %[[D:.+]] = arith.mulf %[[X]], %[[INV]] : f32
// CHECK:   %[[T:.+]] = math.tanh %[[D]] : f32
// CHECK:   %[[C:.+]] = arith.constant 5.000000e+00 : f32
// CHECK:   %[[CAP:.+]] = arith.mulf %[[T]], %[[C]] : f32
// CHECK:   arith.addf %[[CAP]], %{{.*}} : f32
func.func @softcap_mask(%q: tensor<1x2x8x4xf32>, %m: tensor<1x1x8x8xf32>) -> tensor<1x2x8x4xf32> {
  %0 = masformer.attention %q, %q, %q mask(%m : tensor<1x1x8x8xf32>) {span = #masformer.span<full>, softcap = 5.0 : f32} : tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32> -> tensor<1x2x8x4xf32>
  return %0 : tensor<1x2x8x4xf32>
}
