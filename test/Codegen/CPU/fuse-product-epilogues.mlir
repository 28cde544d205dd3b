// RUN: masformer-opt %s --split-input-file --masformer-tile-contractions="vector-width=16" --masformer-fuse-product-epilogues | FileCheck %s

#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
#row = affine_map<(m, n) -> (m, n)>
#bias = affine_map<(m, n) -> (n)>

// A product's bias and ReLU, computed on each 64 x 64 tile in the
// product's loop: the loop's result is the ReLU's. The product's tile goes
// to a temporary of the tile's static size (its slice of the old result
// would be written and never read), viewed at the tile's size; the bias is
// sliced at the tile's columns.
// CHECK-LABEL: func.func @bias_relu
// CHECK-SAME:    (%[[X:.+]]: tensor<?x96xf32>, %[[BIAS:.+]]: tensor<136xf32>)
// CHECK:         %[[LOOP:.+]] = scf.forall ({{.+}}) in ({{.+}}) shared_outs(%[[SHARED:.+]] = %{{.+}}) -> (tensor<?x136xf32>) {
// CHECK:           %[[N0:.+]] = arith.muli %{{.+}}, %c64
// CHECK:           %[[M0:.+]] = arith.muli %{{.+}}, %c64
// CHECK:           %[[MS:.+]] = arith.maxsi
// CHECK:           %[[NS:.+]] = arith.minsi
// CHECK:           %[[WHOLE:.+]] = tensor.empty() : tensor<64x64xf32>
// CHECK-NEXT:      %[[TEMP:.+]] = tensor.extract_slice %[[WHOLE]][0, 0] [%[[MS]], %[[NS]]] [1, 1] : tensor<64x64xf32> to tensor<?x?xf32>
// CHECK:           %[[TILE:.+]] = scf.if
// CHECK:           %[[BIASTILE:.+]] = tensor.extract_slice %[[BIAS]][%[[N0]]] [%[[NS]]] [1] : tensor<136xf32> to tensor<?xf32>
// CHECK-NEXT:      %[[OUTTILE:.+]] = tensor.extract_slice %[[SHARED]][%[[M0]], %[[N0]]] [%[[MS]], %[[NS]]] [1, 1] : tensor<?x136xf32> to tensor<?x?xf32>
// CHECK-NEXT:      %[[RELU:.+]] = linalg.generic {{.+}} ins(%[[TILE]], %[[BIASTILE]] : tensor<?x?xf32>, tensor<?xf32>) outs(%[[OUTTILE]] : tensor<?x?xf32>)
// CHECK:             arith.addf
// CHECK:             arith.maximumf
// CHECK:           scf.forall.in_parallel {
// CHECK-NEXT:        tensor.parallel_insert_slice %[[RELU]] into %[[SHARED]][%[[M0]], %[[N0]]] [%[[MS]], %[[NS]]] [1, 1]
// CHECK:         }
// CHECK-NOT:     masformer.product_tiles
// CHECK-NOT:     linalg.generic
// CHECK:         return %[[LOOP]]
func.func @bias_relu(%x: tensor<?x96xf32>, %bias: tensor<136xf32>) -> tensor<?x136xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %w = arith.constant dense<0.5> : tensor<96x136xf32>
  %m = tensor.dim %x, %c0 : tensor<?x96xf32>
  %e = tensor.empty(%m) : tensor<?x136xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x136xf32>) -> tensor<?x136xf32>
  %p = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : tensor<?x96xf32>, tensor<96x136xf32>) outs(%f : tensor<?x136xf32>) {
  ^bb0(%in: f32, %in2: f32, %acc: f32):
    %0 = arith.mulf %in, %in2 : f32
    %1 = arith.addf %acc, %0 : f32
    linalg.yield %1 : f32
  } -> tensor<?x136xf32>
  %e2 = tensor.empty(%m) : tensor<?x136xf32>
  %r = linalg.generic {indexing_maps = [#row, #bias, #row], iterator_types = ["parallel", "parallel"]} ins(%p, %bias : tensor<?x136xf32>, tensor<136xf32>) outs(%e2 : tensor<?x136xf32>) {
  ^bb0(%in: f32, %bi: f32, %out: f32):
    %0 = arith.addf %in, %bi : f32
    %1 = arith.maximumf %0, %zero : f32
    linalg.yield %1 : f32
  } -> tensor<?x136xf32>
  return %r : tensor<?x136xf32>
}

// -----

#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
#row = affine_map<(m, n) -> (m, n)>
#row3 = affine_map<(b, s, n) -> (b, s, n)>

// A product of rows (batch and sequence collapsed) reshaped back before
// its residual add: the add is collapsed to rows (the residual collapsed
// before the loop, the result expanded after it) and computed on the
// product's tiles, rounded to bf16 there.
// CHECK-LABEL: func.func @reshaped_residual
// CHECK-SAME:    (%[[X:.+]]: tensor<?x64xf32>, %[[RES:.+]]: tensor<?x?x64xf32>
// CHECK:         %[[RROWS:.+]] = tensor.collapse_shape %[[RES]] {{\[}}[0, 1], [2]] : tensor<?x?x64xf32> into tensor<?x64xf32>
// CHECK:         %[[LOOP:.+]] = scf.forall ({{.+}}) shared_outs(%[[SHARED:.+]] = %{{.+}}) -> (tensor<?x64xbf16>) {
// CHECK:           tensor.extract_slice %[[RROWS]]
// CHECK:           linalg.generic
// CHECK:             arith.addf
// CHECK:             arith.truncf
// CHECK:           tensor.parallel_insert_slice %{{.+}} into %[[SHARED]]
// CHECK:         }
// CHECK:         %[[BACK:.+]] = tensor.expand_shape %[[LOOP]] {{\[}}[0, 1], [2]]
// CHECK-NOT:     linalg.generic
// CHECK:         return %[[BACK]]
func.func @reshaped_residual(%x: tensor<?x64xf32>, %res: tensor<?x?x64xf32>, %b: index, %s: index) -> tensor<?x?x64xbf16> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %w = arith.constant dense<0.5> : tensor<64x64xf32>
  %m = tensor.dim %x, %c0 : tensor<?x64xf32>
  %e = tensor.empty(%m) : tensor<?x64xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x64xf32>) -> tensor<?x64xf32>
  %p = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : tensor<?x64xf32>, tensor<64x64xf32>) outs(%f : tensor<?x64xf32>) {
  ^bb0(%in: f32, %in2: f32, %acc: f32):
    %0 = arith.mulf %in, %in2 : f32
    %1 = arith.addf %acc, %0 : f32
    linalg.yield %1 : f32
  } -> tensor<?x64xf32>
  %p3 = tensor.expand_shape %p [[0, 1], [2]] output_shape [%b, %s, 64] : tensor<?x64xf32> into tensor<?x?x64xf32>
  %e2 = tensor.empty(%b, %s) : tensor<?x?x64xbf16>
  %r = linalg.generic {indexing_maps = [#row3, #row3, #row3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%p3, %res : tensor<?x?x64xf32>, tensor<?x?x64xf32>) outs(%e2 : tensor<?x?x64xbf16>) {
  ^bb0(%in: f32, %r0: f32, %out: bf16):
    %0 = arith.addf %in, %r0 : f32
    %1 = arith.truncf %0 : f32 to bf16
    linalg.yield %1 : bf16
  } -> tensor<?x?x64xbf16>
  return %r : tensor<?x?x64xbf16>
}

// -----

#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
#row = affine_map<(m, n) -> (m, n)>
#col = affine_map<(m, n) -> (n, m)>

// What keeps its loop: a product that is also returned (two uses), one
// whose consumer reads it transposed, one whose consumer reads positions
// (linalg.index), and a product that accumulates into its init (no fill:
// not marked at all).
// CHECK-LABEL: func.func @unfused
// CHECK:         } {masformer.product_tiles}
// CHECK-NEXT:    linalg.generic
// CHECK:         } {masformer.product_tiles}
// CHECK-NEXT:    linalg.generic
// CHECK:         } {masformer.product_tiles}
// CHECK-NEXT:    linalg.generic
// CHECK-NOT:     masformer.product_tiles
// CHECK:         scf.forall
// CHECK-NOT:     masformer.product_tiles
// CHECK:         return
func.func @unfused(%x: tensor<64x64xf32>, %init: tensor<64x64xf32>) -> (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>) {
  %zero = arith.constant 0.0 : f32
  %w = arith.constant dense<0.5> : tensor<64x64xf32>
  %e = tensor.empty() : tensor<64x64xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %p1 = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f : tensor<64x64xf32>) {
  ^bb0(%in: f32, %in2: f32, %acc: f32):
    %0 = arith.mulf %in, %in2 : f32
    %1 = arith.addf %acc, %0 : f32
    linalg.yield %1 : f32
  } -> tensor<64x64xf32>
  %r1 = linalg.generic {indexing_maps = [#row, #row], iterator_types = ["parallel", "parallel"]} ins(%p1 : tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.maximumf %in, %zero : f32
    linalg.yield %0 : f32
  } -> tensor<64x64xf32>
  %p2 = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f : tensor<64x64xf32>) {
  ^bb0(%in: f32, %in2: f32, %acc: f32):
    %0 = arith.mulf %in, %in2 : f32
    %1 = arith.addf %acc, %0 : f32
    linalg.yield %1 : f32
  } -> tensor<64x64xf32>
  %r2 = linalg.generic {indexing_maps = [#col, #row], iterator_types = ["parallel", "parallel"]} ins(%p2 : tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.maximumf %in, %zero : f32
    linalg.yield %0 : f32
  } -> tensor<64x64xf32>
  %p3 = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f : tensor<64x64xf32>) {
  ^bb0(%in: f32, %in2: f32, %acc: f32):
    %0 = arith.mulf %in, %in2 : f32
    %1 = arith.addf %acc, %0 : f32
    linalg.yield %1 : f32
  } -> tensor<64x64xf32>
  %r3 = linalg.generic {indexing_maps = [#row, #row], iterator_types = ["parallel", "parallel"]} ins(%p3 : tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %i = linalg.index 0 : index
    %ii = arith.index_cast %i : index to i32
    %fi = arith.sitofp %ii : i32 to f32
    %0 = arith.addf %in, %fi : f32
    linalg.yield %0 : f32
  } -> tensor<64x64xf32>
  %p4 = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : tensor<64x64xf32>, tensor<64x64xf32>) outs(%init : tensor<64x64xf32>) {
  ^bb0(%in: f32, %in2: f32, %acc: f32):
    %0 = arith.mulf %in, %in2 : f32
    %1 = arith.addf %acc, %0 : f32
    linalg.yield %1 : f32
  } -> tensor<64x64xf32>
  %r4 = linalg.generic {indexing_maps = [#row, #row], iterator_types = ["parallel", "parallel"]} ins(%p4 : tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.maximumf %in, %zero : f32
    linalg.yield %0 : f32
  } -> tensor<64x64xf32>
  return %p1, %r1, %r2, %r3, %r4 : tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>
}
