// RUN: masformer-opt %s --masformer-fold-constant-transposes="into-products=1" | FileCheck %s
// RUN: masformer-opt %s --masformer-fold-constant-transposes | FileCheck %s --check-prefix=COPY

// into-products (the GPU pipeline): a tied LM head, whose weight [vocab, d]
// is transposed only to be a product's B, reads the weight as it is, with
// B's map transposed ([n, k]); no transposed copy. Without the option (the
// CPU pipeline), the copy is made and the product reads it [k, n].

#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>

// CHECK: #[[BT:map[0-9]*]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-LABEL: func.func @lm_head
// CHECK-NOT: linalg.transpose
// CHECK-NOT: dense_resource
// CHECK: %[[W:.*]] = arith.constant dense<{{.*}}> : tensor<5x2xf32>
// CHECK: linalg.generic {indexing_maps = [#{{.*}}, #[[BT]], #{{.*}}]
// CHECK-SAME: ins(%{{.*}}, %[[W]] : tensor<3x2xf32>, tensor<5x2xf32>)
// COPY-LABEL: func.func @lm_head
// COPY: %[[T:.*]] = arith.constant dense_resource<{{.*}}> : tensor<2x5xf32>
// COPY: ins(%{{.*}}, %[[T]] : tensor<3x2xf32>, tensor<2x5xf32>)
func.func @lm_head(%x: tensor<3x2xf32>) -> tensor<3x5xf32> {
  %w = arith.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0], [9.0, 10.0]]> : tensor<5x2xf32>
  %e = tensor.empty() : tensor<2x5xf32>
  %t = linalg.transpose ins(%w : tensor<5x2xf32>) outs(%e : tensor<2x5xf32>) permutation = [1, 0]
  %zero = arith.constant 0.0 : f32
  %c0 = tensor.empty() : tensor<3x5xf32>
  %c = linalg.fill ins(%zero : f32) outs(%c0 : tensor<3x5xf32>) -> tensor<3x5xf32>
  %r = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %t : tensor<3x2xf32>, tensor<2x5xf32>) outs(%c : tensor<3x5xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %mul = arith.mulf %p, %q : f32
    %add = arith.addf %o, %mul : f32
    linalg.yield %add : f32
  } -> tensor<3x5xf32>
  return %r : tensor<3x5xf32>
}

// A transposed weight that is also used elsewhere is still materialized
// (the product then reads the copy).
// CHECK-LABEL: func.func @shared
// CHECK: arith.constant dense_resource<{{.*}}> : tensor<2x5xf32>
// CHECK-NOT: linalg.transpose
func.func @shared(%x: tensor<3x2xf32>) -> (tensor<3x5xf32>, tensor<2x5xf32>) {
  %w = arith.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0], [9.0, 10.0]]> : tensor<5x2xf32>
  %e = tensor.empty() : tensor<2x5xf32>
  %t = linalg.transpose ins(%w : tensor<5x2xf32>) outs(%e : tensor<2x5xf32>) permutation = [1, 0]
  %zero = arith.constant 0.0 : f32
  %c0 = tensor.empty() : tensor<3x5xf32>
  %c = linalg.fill ins(%zero : f32) outs(%c0 : tensor<3x5xf32>) -> tensor<3x5xf32>
  %r = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %t : tensor<3x2xf32>, tensor<2x5xf32>) outs(%c : tensor<3x5xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %mul = arith.mulf %p, %q : f32
    %add = arith.addf %o, %mul : f32
    linalg.yield %add : f32
  } -> tensor<3x5xf32>
  return %r, %t : tensor<3x5xf32>, tensor<2x5xf32>
}
