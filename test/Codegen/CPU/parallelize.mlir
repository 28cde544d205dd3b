// RUN: masformer-opt %s --masformer-parallelize --split-input-file | FileCheck %s
// RUN: not masformer-opt %s --masformer-parallelize="grain=0" 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: error: --masformer-parallelize: grain must be positive

// An element-wise op over [batch, seq, hidden]: tiles of 1 x 8 rows, the
// hidden dimension whole.
// CHECK-LABEL: func.func @elementwise
// CHECK: scf.forall (%[[B:.*]], %[[S:.*]]) = (0, 0) to (%{{.*}}, %{{.*}}) step (1, 8)
// CHECK:   %[[XS:.*]] = tensor.extract_slice %arg0[%[[B]], %[[S]], 0] [1, %{{.*}}, 768]
// CHECK:   linalg.generic {{.*}} ins(%[[XS]] : tensor<1x?x768xf32>)
// CHECK:   scf.forall.in_parallel
func.func @elementwise(%x: tensor<?x?x768xf32>, %init: tensor<?x?x768xf32>) -> tensor<?x?x768xf32> {
  %r = linalg.generic {
      indexing_maps = [affine_map<(b, s, d) -> (b, s, d)>, affine_map<(b, s, d) -> (b, s, d)>],
      iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : tensor<?x?x768xf32>) outs(%init : tensor<?x?x768xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = math.tanh %a : f32
    linalg.yield %t : f32
  } -> tensor<?x?x768xf32>
  return %r : tensor<?x?x768xf32>
}

// -----

// A row reduction (a LayerNorm mean): the rows in parallel, the reduction
// whole in each task.
// CHECK-LABEL: func.func @row_sum
// CHECK: scf.forall (%{{.*}}) = (0) to (2048) step (8)
// CHECK:   linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK-SAME: ins(%{{.*}} : tensor<8x768xf32>)
func.func @row_sum(%x: tensor<2048x768xf32>, %init: tensor<2048xf32>) -> tensor<2048xf32> {
  %r = linalg.generic {
      indexing_maps = [affine_map<(s, d) -> (s, d)>, affine_map<(s, d) -> (s)>],
      iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<2048x768xf32>) outs(%init : tensor<2048xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %o : f32
    linalg.yield %s : f32
  } -> tensor<2048xf32>
  return %r : tensor<2048xf32>
}

// -----

// Small static ops and ops inside loops stay serial.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: scf.forall
func.func @left_alone(%x: tensor<16x16xf32>, %n: index) -> tensor<16x16xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %x) -> tensor<16x16xf32> {
    %e = tensor.empty() : tensor<16x16xf32>
    %t = linalg.generic {
        indexing_maps = [affine_map<(a, b) -> (a, b)>, affine_map<(a, b) -> (a, b)>],
        iterator_types = ["parallel", "parallel"]}
        ins(%acc : tensor<16x16xf32>) outs(%e : tensor<16x16xf32>) {
    ^bb0(%a: f32, %o: f32):
      %s = arith.addf %a, %a : f32
      linalg.yield %s : f32
    } -> tensor<16x16xf32>
    scf.yield %t : tensor<16x16xf32>
  }
  %e2 = tensor.empty() : tensor<16x16xf32>
  %u = linalg.generic {
      indexing_maps = [affine_map<(a, b) -> (a, b)>, affine_map<(a, b) -> (a, b)>],
      iterator_types = ["parallel", "parallel"]}
      ins(%r : tensor<16x16xf32>) outs(%e2 : tensor<16x16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.mulf %a, %a : f32
    linalg.yield %s : f32
  } -> tensor<16x16xf32>
  return %u : tensor<16x16xf32>
}
