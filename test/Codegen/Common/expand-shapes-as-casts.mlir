// RUN: masformer-opt %s --masformer-expand-shapes-as-casts --split-input-file | FileCheck %s
// After the rewrite, expand-strided-metadata (which crashed on the first
// two functions' expand_shapes) resolves every stride:
// RUN: masformer-opt %s --masformer-expand-shapes-as-casts --expand-strided-metadata --canonicalize --split-input-file | FileCheck %s --check-prefix=META

// Rows of batch * sequence expanded to [batch, sequence]: two dynamic sizes
// in one group. The outer size's stride is the inner size times the row's.
// CHECK: #[[MUL:.+]] = affine_map<()[s0, s1] -> (s0 * s1)>
// CHECK-LABEL: func.func @rows_to_batch_sequence(
// CHECK-SAME: %[[A:[a-z0-9]+]]: memref<?x384xbf16>, %[[B:[a-z0-9]+]]: index, %[[S:[a-z0-9]+]]: index
// CHECK: %[[BASE:[a-z_0-9]+]], %{{.+}} = memref.extract_strided_metadata %[[A]]
// CHECK: %[[OUTER:.+]] = affine.apply #[[MUL]]()[%c384, %[[S]]]
// CHECK: memref.reinterpret_cast %[[BASE]] to offset: [0], sizes: [%[[B]], %[[S]], 384], strides: [%[[OUTER]], 384, 1] : memref<bf16> to memref<?x?x384xbf16>
// CHECK-NOT: memref.expand_shape
// META-LABEL: func.func @rows_to_batch_sequence(
// META-SAME: %{{.+}}: memref<?x384xbf16>, %{{.+}}: index, %[[S:[a-z0-9]+]]: index
// META: %[[R:.+]] = affine.apply #{{.+}}()[%[[S]]]
// META: return %[[R]]
func.func @rows_to_batch_sequence(%a: memref<?x384xbf16>, %b: index, %s: index) -> index {
  %e = memref.expand_shape %a [[0, 1], [2]] output_shape [%b, %s, 384] : memref<?x384xbf16> into memref<?x?x384xbf16>
  %base, %off, %sz:3, %st:3 = memref.extract_strided_metadata %e : memref<?x?x384xbf16> -> memref<bf16>, index, index, index, index, index, index, index
  return %st#0 : index
}

// -----

// A strided source (a slice of the rows) with an offset, and a group whose
// sizes are dynamic, static, dynamic: each stride is the source's times the
// sizes inside it; the offset is the source's.
// CHECK: #[[MUL:.+]] = affine_map<()[s0, s1] -> (s0 * s1)>
// CHECK: #[[MUL4:.+]] = affine_map<()[s0, s1] -> ((s0 * s1) * 4)>
// CHECK-LABEL: func.func @strided_source(
// CHECK-SAME: %[[V:[a-z0-9]+]]: memref<?x?xf32, strided<[?, 1], offset: ?>>, %[[X:[a-z0-9]+]]: index, %[[Y:[a-z0-9]+]]: index, %[[N:[a-z0-9]+]]: index
// CHECK: %[[BASE:[a-z_0-9]+]], %[[OFF:[a-z_0-9]+]], %{{[a-z_0-9]+}}:2, %[[ST:[a-z_0-9]+]]:2 = memref.extract_strided_metadata %[[V]]
// CHECK-DAG: %[[S1:.+]] = affine.apply #[[MUL]]()[%[[ST]]#0, %[[Y]]]
// CHECK-DAG: %[[S0:.+]] = affine.apply #[[MUL4]]()[%[[ST]]#0, %[[Y]]]
// CHECK: memref.reinterpret_cast %[[BASE]] to offset: [%[[OFF]]], sizes: [%[[X]], 4, %[[Y]], %[[N]]], strides: [%[[S0]], %[[S1]], %[[ST]]#0, 1]
func.func @strided_source(%v: memref<?x?xf32, strided<[?, 1], offset: ?>>, %x: index, %y: index, %n: index) -> memref<?x4x?x?xf32, strided<[?, ?, ?, 1], offset: ?>> {
  %e = memref.expand_shape %v [[0, 1, 2], [3]] output_shape [%x, 4, %y, %n] : memref<?x?xf32, strided<[?, 1], offset: ?>> into memref<?x4x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>
  return %e : memref<?x4x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>
}

// -----

// One dynamic size per group: expand-strided-metadata takes these, and
// they stay.
// CHECK-LABEL: func.func @one_dynamic_size(
// CHECK: memref.expand_shape %{{.+}} {{\[\[}}0, 1], [2, 3]] output_shape [%{{.+}}, 4, 2, 64]
// CHECK-NOT: memref.reinterpret_cast
func.func @one_dynamic_size(%a: memref<?x128xf32>, %b: index) -> memref<?x4x2x64xf32> {
  %e = memref.expand_shape %a [[0, 1], [2, 3]] output_shape [%b, 4, 2, 64] : memref<?x128xf32> into memref<?x4x2x64xf32>
  return %e : memref<?x4x2x64xf32>
}
