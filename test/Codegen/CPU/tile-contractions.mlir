// RUN: masformer-opt %s --masformer-tile-contractions --split-input-file | FileCheck %s
// RUN: not masformer-opt %s --masformer-tile-contractions="tile-m=6" 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: error: --masformer-tile-contractions: tile-m must be a positive multiple of 4 and tile-n of 64, got 6 x 64

// A MatMul with broadcast weights: a parallel loop over (batch, column
// tiles, row tiles), column tiles outside so that a thread's consecutive
// tiles share B's panel; full 64 x 64 tiles copy their panel of B
// contiguous and run the 4 x 4-vector FMA kernel across all of k, starting
// from the fill's zeros (the result is never filled as a whole); partial
// tiles fill their slice and run a generic on it.
// CHECK-LABEL: func.func @broadcast_weights
// CHECK-SAME: (%[[X:.*]]: tensor<?x?x96xf32>, %[[W:.*]]: tensor<96x136xf32>)
// CHECK:     %[[ZERO:.*]] = arith.constant 0.0
// CHECK:     %[[EMPTY:.*]] = tensor.empty
// CHECK:     scf.forall (%[[B:.*]], %[[J:.*]], %[[I:.*]]) in (%{{.*}}, %{{.*}}, %{{.*}}) shared_outs(%[[O:.*]] = %[[EMPTY]])
// CHECK-DAG:   tensor.extract_slice %[[X]][%[[B]], %{{.*}}, 0] [1, %{{.*}}, 96] [1, 1, 1] : tensor<?x?x96xf32> to tensor<?x96xf32>
// CHECK-DAG:   tensor.extract_slice %[[W]][0, %{{.*}}] [96, %{{.*}}] [1, 1] : tensor<96x136xf32> to tensor<96x?xf32>
// CHECK:       scf.if
// CHECK:         scf.for {{.*}} to %c96{{(_[0-9]+)?}} step %c1{{(_[0-9]+)?}} iter_args({{.*}} = %{{.*}}) -> (tensor<96x64xf32>)
// CHECK-COUNT-4:   vector.transfer_write {{.*}} : vector<16xf32>, tensor<96x64xf32>
// CHECK:         scf.for {{.*}} step %c4{{(_[0-9]+)?}} iter_args
// CHECK:           scf.for {{.*}} step %c64{{(_[0-9]+)?}} iter_args
// CHECK-COUNT-16:    vector.broadcast %[[ZERO]] : f32 to vector<16xf32>
// CHECK:             scf.for {{.*}} to %c96{{(_[0-9]+)?}} step %c1{{(_[0-9]+)?}} iter_args
// CHECK-COUNT-16:      vector.fma {{.*}} : vector<16xf32>
// CHECK:       } else {
// CHECK:         linalg.fill ins(%[[ZERO]] : f32) outs(%{{.*}} : tensor<?x?xf32>)
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
// operands are extended to f32 in the kernel. C is not a fill: the kernel
// starts from C's tile.
// CHECK-LABEL: func.func @transposed_b
// CHECK:     scf.forall
// CHECK:       scf.if
// CHECK:         linalg.transpose ins(%{{.*}} : tensor<64x32xbf16>) outs(%{{.*}} : tensor<32x64xbf16>) permutation = [1, 0]
// CHECK:         vector.transfer_read {{.*}} : tensor<64x64xf32>, vector<16xf32>
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

// Constant weights (the model's own) are packed at compile time: one
// contiguous [k, 64] panel per column tile, zeros past the last column
// (136 = 2 x 64 + 8), transposed ones included. Every tile, partial ones
// too, reads the packed constant; the original weights are no longer used.
// CHECK-LABEL: func.func @constant_weights
// CHECK:     %[[P:.*]] = arith.constant dense_resource<packed_weight> : tensor<3x2x64xf32>
// CHECK:     scf.forall (%[[J:.*]], %[[I:.*]]) in
// CHECK:       tensor.extract_slice %[[P]][%[[J]], 0, 0] [1, 2, 64] [1, 1, 1] : tensor<3x2x64xf32> to tensor<2x64xf32>
// CHECK:       scf.if
// CHECK:         vector.fma
// CHECK:       } else {
// CHECK:         tensor.extract_slice {{.*}}[0, 0] [2, %{{.*}}] [1, 1] : tensor<2x64xf32> to tensor<2x?xf32>
// CHECK:     %[[PT:.*]] = arith.constant dense_resource<packed_weight_1> : tensor<3x2x64xf32>
// CHECK:     scf.forall (%[[J2:.*]], %[[I2:.*]]) in
// CHECK:       tensor.extract_slice %[[PT]][%[[J2]], 0, 0] [1, 2, 64] [1, 1, 1] : tensor<3x2x64xf32> to tensor<2x64xf32>
// CHECK-NOT:   linalg.transpose
// CHECK:     scf.forall.in_parallel
// The weights are stored [2, 136] and, for the second product, [136, 2]
// transposed, with the same elements: both pack to the same bytes. The
// first panel starts with row 0 (0.0, 0.5, 1.0); the last ends with the 8
// columns past 128 of row 1, then 56 zeros.
// CHECK: packed_weight: "0x08000000000000000000003F0000803F[[BLOB:[0-9A-F]*]]{{((0{224}){2})}}"
// CHECK: packed_weight_1: "0x08000000000000000000003F0000803F[[BLOB]]{{((0{224}){2})}}"
func.func @constant_weights(%a: tensor<?x2xf32>) -> (tensor<?x136xf32>, tensor<?x136xf32>) {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x2xf32>
  %w = arith.constant dense<[[0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 5.5, 6.0, 6.5, 7.0, 7.5, 8.0, 8.5, 9.0, 9.5, 10.0, 10.5, 11.0, 11.5, 12.0, 12.5, 13.0, 13.5, 14.0, 14.5, 15.0, 15.5, 16.0, 16.5, 17.0, 17.5, 18.0, 18.5, 19.0, 19.5, 20.0, 20.5, 21.0, 21.5, 22.0, 22.5, 23.0, 23.5, 24.0, 24.5, 25.0, 25.5, 26.0, 26.5, 27.0, 27.5, 28.0, 28.5, 29.0, 29.5, 30.0, 30.5, 31.0, 31.5, 32.0, 32.5, 33.0, 33.5, 34.0, 34.5, 35.0, 35.5, 36.0, 36.5, 37.0, 37.5, 38.0, 38.5, 39.0, 39.5, 40.0, 40.5, 41.0, 41.5, 42.0, 42.5, 43.0, 43.5, 44.0, 44.5, 45.0, 45.5, 46.0, 46.5, 47.0, 47.5, 48.0, 48.5, 49.0, 49.5, 50.0, 50.5, 51.0, 51.5, 52.0, 52.5, 53.0, 53.5, 54.0, 54.5, 55.0, 55.5, 56.0, 56.5, 57.0, 57.5, 58.0, 58.5, 59.0, 59.5, 60.0, 60.5, 61.0, 61.5, 62.0, 62.5, 63.0, 63.5, 64.0, 64.5, 65.0, 65.5, 66.0, 66.5, 67.0, 67.5], [68.0, 68.5, 69.0, 69.5, 70.0, 70.5, 71.0, 71.5, 72.0, 72.5, 73.0, 73.5, 74.0, 74.5, 75.0, 75.5, 76.0, 76.5, 77.0, 77.5, 78.0, 78.5, 79.0, 79.5, 80.0, 80.5, 81.0, 81.5, 82.0, 82.5, 83.0, 83.5, 84.0, 84.5, 85.0, 85.5, 86.0, 86.5, 87.0, 87.5, 88.0, 88.5, 89.0, 89.5, 90.0, 90.5, 91.0, 91.5, 92.0, 92.5, 93.0, 93.5, 94.0, 94.5, 95.0, 95.5, 96.0, 96.5, 97.0, 97.5, 98.0, 98.5, 99.0, 99.5, 100.0, 100.5, 101.0, 101.5, 102.0, 102.5, 103.0, 103.5, 104.0, 104.5, 105.0, 105.5, 106.0, 106.5, 107.0, 107.5, 108.0, 108.5, 109.0, 109.5, 110.0, 110.5, 111.0, 111.5, 112.0, 112.5, 113.0, 113.5, 114.0, 114.5, 115.0, 115.5, 116.0, 116.5, 117.0, 117.5, 118.0, 118.5, 119.0, 119.5, 120.0, 120.5, 121.0, 121.5, 122.0, 122.5, 123.0, 123.5, 124.0, 124.5, 125.0, 125.5, 126.0, 126.5, 127.0, 127.5, 128.0, 128.5, 129.0, 129.5, 130.0, 130.5, 131.0, 131.5, 132.0, 132.5, 133.0, 133.5, 134.0, 134.5, 135.0, 135.5]]> : tensor<2x136xf32>
  %wt = arith.constant dense<[[0.0, 68.0], [0.5, 68.5], [1.0, 69.0], [1.5, 69.5], [2.0, 70.0], [2.5, 70.5], [3.0, 71.0], [3.5, 71.5], [4.0, 72.0], [4.5, 72.5], [5.0, 73.0], [5.5, 73.5], [6.0, 74.0], [6.5, 74.5], [7.0, 75.0], [7.5, 75.5], [8.0, 76.0], [8.5, 76.5], [9.0, 77.0], [9.5, 77.5], [10.0, 78.0], [10.5, 78.5], [11.0, 79.0], [11.5, 79.5], [12.0, 80.0], [12.5, 80.5], [13.0, 81.0], [13.5, 81.5], [14.0, 82.0], [14.5, 82.5], [15.0, 83.0], [15.5, 83.5], [16.0, 84.0], [16.5, 84.5], [17.0, 85.0], [17.5, 85.5], [18.0, 86.0], [18.5, 86.5], [19.0, 87.0], [19.5, 87.5], [20.0, 88.0], [20.5, 88.5], [21.0, 89.0], [21.5, 89.5], [22.0, 90.0], [22.5, 90.5], [23.0, 91.0], [23.5, 91.5], [24.0, 92.0], [24.5, 92.5], [25.0, 93.0], [25.5, 93.5], [26.0, 94.0], [26.5, 94.5], [27.0, 95.0], [27.5, 95.5], [28.0, 96.0], [28.5, 96.5], [29.0, 97.0], [29.5, 97.5], [30.0, 98.0], [30.5, 98.5], [31.0, 99.0], [31.5, 99.5], [32.0, 100.0], [32.5, 100.5], [33.0, 101.0], [33.5, 101.5], [34.0, 102.0], [34.5, 102.5], [35.0, 103.0], [35.5, 103.5], [36.0, 104.0], [36.5, 104.5], [37.0, 105.0], [37.5, 105.5], [38.0, 106.0], [38.5, 106.5], [39.0, 107.0], [39.5, 107.5], [40.0, 108.0], [40.5, 108.5], [41.0, 109.0], [41.5, 109.5], [42.0, 110.0], [42.5, 110.5], [43.0, 111.0], [43.5, 111.5], [44.0, 112.0], [44.5, 112.5], [45.0, 113.0], [45.5, 113.5], [46.0, 114.0], [46.5, 114.5], [47.0, 115.0], [47.5, 115.5], [48.0, 116.0], [48.5, 116.5], [49.0, 117.0], [49.5, 117.5], [50.0, 118.0], [50.5, 118.5], [51.0, 119.0], [51.5, 119.5], [52.0, 120.0], [52.5, 120.5], [53.0, 121.0], [53.5, 121.5], [54.0, 122.0], [54.5, 122.5], [55.0, 123.0], [55.5, 123.5], [56.0, 124.0], [56.5, 124.5], [57.0, 125.0], [57.5, 125.5], [58.0, 126.0], [58.5, 126.5], [59.0, 127.0], [59.5, 127.5], [60.0, 128.0], [60.5, 128.5], [61.0, 129.0], [61.5, 129.5], [62.0, 130.0], [62.5, 130.5], [63.0, 131.0], [63.5, 131.5], [64.0, 132.0], [64.5, 132.5], [65.0, 133.0], [65.5, 133.5], [66.0, 134.0], [66.5, 134.5], [67.0, 135.0], [67.5, 135.5]]> : tensor<136x2xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%m) : tensor<?x136xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<?x136xf32>) -> tensor<?x136xf32>
  %r = linalg.generic {
      indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>,
                       affine_map<(m, n, k) -> (m, n)>],
      iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %w : tensor<?x2xf32>, tensor<2x136xf32>) outs(%init : tensor<?x136xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x136xf32>
  %r2 = linalg.generic {
      indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>,
                       affine_map<(m, n, k) -> (m, n)>],
      iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %wt : tensor<?x2xf32>, tensor<136x2xf32>) outs(%init : tensor<?x136xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x136xf32>
  return %r, %r2 : tensor<?x136xf32>, tensor<?x136xf32>
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
