// RUN: masformer-opt %s --masformer-tile-contractions --split-input-file | FileCheck %s
// RUN: not masformer-opt %s --masformer-tile-contractions="tile-m=6" 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: error: --masformer-tile-contractions: tile-m must be a positive multiple of 4 and tile-n of 64, got 6 x 64

// A MatMul with broadcast weights: a parallel loop over (batch, row tiles,
// column tiles); full 64 x 64 tiles run the 4 x 4-vector FMA kernel across
// all of k, partial tiles a generic on the slices.
// CHECK-LABEL: func.func @broadcast_weights
// CHECK-SAME: (%[[X:.*]]: tensor<?x?x96xf32>, %[[W:.*]]: tensor<96x136xf32>)
// CHECK:     %[[FILL:.*]] = linalg.fill
// CHECK:     scf.forall (%[[B:.*]], %[[I:.*]], %[[J:.*]]) in (%{{.*}}, %{{.*}}, %{{.*}}) shared_outs(%[[O:.*]] = %[[FILL]])
// CHECK-DAG:   tensor.extract_slice %[[X]][%[[B]], %{{.*}}, 0] [1, %{{.*}}, 96] [1, 1, 1] : tensor<?x?x96xf32> to tensor<?x96xf32>
// CHECK-DAG:   tensor.extract_slice %[[W]][0, %{{.*}}] [96, %{{.*}}] [1, 1] : tensor<96x136xf32> to tensor<96x?xf32>
// CHECK:       scf.if
// CHECK:         scf.for {{.*}} step %c4{{(_[0-9]+)?}} iter_args
// CHECK:           scf.for {{.*}} step %c64{{(_[0-9]+)?}} iter_args
// CHECK:             scf.for {{.*}} to %c96{{(_[0-9]+)?}} step %c1{{(_[0-9]+)?}} iter_args
// CHECK-COUNT-16:      vector.fma {{.*}} : vector<16xf32>
// CHECK:       } else {
// CHECK:         linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]
// CHECK:     scf.forall.in_parallel
// CHECK:       tensor.parallel_insert_slice {{.*}} into %[[O]][%[[B]], %{{.*}}, %{{.*}}] [1, %{{.*}}, %{{.*}}]
// CHECK-NOT: linalg.generic {{.*}}tensor<?x?x96xf32>, tensor<96x136xf32>
func.func @broadcast_weights(%x: tensor<?x?x96xf32>, %w: tensor<96x136xf32>) -> tensor<?x?x136xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %b = tensor.dim %x, %c0 : tensor<?x?x96xf32>
  %m = tensor.dim %x, %c1 : tensor<?x?x96xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%b, %m) : tensor<?x?x136xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<?x?x136xf32>) -> tensor<?x?x136xf32>
  %r = linalg.generic {
      indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>,
                       affine_map<(b, m, n, k) -> (k, n)>,
                       affine_map<(b, m, n, k) -> (b, m, n)>],
      iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<?x?x96xf32>, tensor<96x136xf32>) outs(%init : tensor<?x?x136xf32>) {
  ^bb0(%a: f32, %bb: f32, %acc: f32):
    %p = arith.mulf %a, %bb : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x?x136xf32>
  return %r : tensor<?x?x136xf32>
}

// -----

// Gemm with transB: the [n, k] tile of B is packed to [k, n] first; bf16
// operands are extended to f32 in the kernel.
// CHECK-LABEL: func.func @transposed_b
// CHECK:     scf.forall
// CHECK:       scf.if
// CHECK:         linalg.transpose ins(%{{.*}} : tensor<64x32xbf16>) outs(%{{.*}} : tensor<32x64xbf16>) permutation = [1, 0]
// CHECK:         arith.extf {{.*}} : vector<16xbf16> to vector<16xf32>
// CHECK:         vector.fma
func.func @transposed_b(%a: tensor<128x32xbf16>, %b: tensor<256x32xbf16>, %c: tensor<128x256xf32>) -> tensor<128x256xf32> {
  %r = linalg.generic {
      indexing_maps = [affine_map<(m, n, k) -> (m, k)>,
                       affine_map<(m, n, k) -> (n, k)>,
                       affine_map<(m, n, k) -> (m, n)>],
      iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<128x32xbf16>, tensor<256x32xbf16>) outs(%c : tensor<128x256xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %p = arith.mulf %xf, %yf : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<128x256xf32>
  return %r : tensor<128x256xf32>
}

// -----

// Not matrix products of the kernel: f16 results (accumulated in f16 as
// ONNX says), a dynamic reduction length, and a body that is not a
// multiply-add. They stay as they are.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: scf.forall
// CHECK-COUNT-3: linalg.generic
// CHECK-NOT: scf.forall
func.func @left_alone(%a: tensor<64x32xf16>, %b: tensor<32x64xf16>, %c: tensor<64x64xf16>,
                      %d: tensor<64x?xf32>, %e: tensor<?x64xf32>, %f: tensor<64x64xf32>)
    -> (tensor<64x64xf16>, tensor<64x64xf32>, tensor<64x64xf32>) {
  %r0 = linalg.generic {
      indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>,
                       affine_map<(m, n, k) -> (m, n)>],
      iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<64x32xf16>, tensor<32x64xf16>) outs(%c : tensor<64x64xf16>) {
  ^bb0(%x: f16, %y: f16, %acc: f16):
    %p = arith.mulf %x, %y : f16
    %s = arith.addf %acc, %p : f16
    linalg.yield %s : f16
  } -> tensor<64x64xf16>
  %r1 = linalg.generic {
      indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>,
                       affine_map<(m, n, k) -> (m, n)>],
      iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%d, %e : tensor<64x?xf32>, tensor<?x64xf32>) outs(%f : tensor<64x64xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<64x64xf32>
  %r2 = linalg.generic {
      indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>,
                       affine_map<(m, n, k) -> (m, n)>],
      iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%d, %e : tensor<64x?xf32>, tensor<?x64xf32>) outs(%f : tensor<64x64xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.maximumf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<64x64xf32>
  return %r0, %r1, %r2 : tensor<64x64xf16>, tensor<64x64xf32>, tensor<64x64xf32>
}
