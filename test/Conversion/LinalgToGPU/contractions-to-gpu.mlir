// RUN: masformer-opt %s --masformer-contractions-to-gpu --canonicalize --cse --split-input-file | FileCheck %s
// RUN: masformer-opt %s --masformer-contractions-to-gpu="report-skipped" --split-input-file 2>&1 | FileCheck %s --check-prefix=SKIP

// A MatMul with a weight: the weight is broadcast over A's batch (a unit
// batch added); one launch of 128 threads per (64 columns, 128 rows, batch),
// bf16 products into f32.
// CHECK-LABEL: func.func @weights(
// CHECK-SAME:    %[[X:.+]]: tensor<?x?x96xbf16>, %[[W:.+]]: tensor<96x136xbf16>, %[[C:.+]]: tensor<?x?x136xf32>
// CHECK:       %[[W3:.+]] = tensor.expand_shape %[[W]] {{\[\[}}0, 1], [2]] output_shape [1, 96, 136] : tensor<96x136xbf16> into tensor<1x96x136xbf16>
// CHECK-NOT:   gpu.wait
// CHECK:       %[[OUT:.+]] = gpu.alloc (%{{.+}}, %{{.+}}) : memref<?x?x136xf32>
// CHECK:       %[[ROWS:.+]] = arith.ceildivsi %{{.+}}, %c128
// CHECK:       %[[GY:.+]] = arith.maxsi %[[ROWS]], %c1
// CHECK:       gpu.launch_func @masformer_kernels::@masformer_matmul_bf16_f32_acc blocks in (%c3, %[[GY]], %{{.+}}) threads in (%c128, %c1, %c1) dynamic_shared_memory_size %c29696_i32
// CHECK-NOT:   gpu.wait
// CHECK:       %[[R:.+]] = bufferization.to_tensor %[[OUT]] restrict writable
// CHECK:       return %[[R]]
// The kernel: k in steps of 32 through two shared-memory buffers; A by
// ldmatrix, B stored [k, n] by ldmatrix.trans; 2 x 8 accumulator tiles
// per warp.
// CHECK:       gpu.func @masformer_matmul_bf16_f32_acc(%{{.+}}: memref<?x?x?xbf16>, %{{.+}}: memref<?x?x?xbf16>, %{{.+}}: memref<?x?x?xf32>, %{{.+}}: memref<?x?x?xf32>) kernel
// CHECK:         %[[AS:.+]] = memref.view {{.*}} to memref<2x128x40xbf16, #gpu.address_space<workgroup>>
// CHECK:         %[[BS:.+]] = memref.view {{.*}} to memref<2x32x72xbf16, #gpu.address_space<workgroup>>
// CHECK:         scf.for
// CHECK:           nvvm.cp.async.wait.group 0
// CHECK:           gpu.barrier
// CHECK:           nvgpu.ldmatrix %[[AS]]{{.*}}transpose = false
// CHECK:           nvgpu.ldmatrix %[[BS]]{{.*}}transpose = true
// CHECK-COUNT-4:   nvvm.mma.sync {{.*}}multiplicandAPtxType = #nvvm.mma_type<bf16>
// C's initial value is read and added.
// CHECK:         memref.load %arg2
// CHECK:         memref.store {{.*}} : memref<?x?x?xf32>
func.func @weights(%x: tensor<?x?x96xbf16>, %w: tensor<96x136xbf16>, %c: tensor<?x?x136xf32>) -> tensor<?x?x136xf32> {
  %r = linalg.generic {
      indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>,
                       affine_map<(b, m, n, k) -> (k, n)>,
                       affine_map<(b, m, n, k) -> (b, m, n)>],
      iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<?x?x96xbf16>, tensor<96x136xbf16>) outs(%c : tensor<?x?x136xf32>) {
  ^bb0(%a: bf16, %bb: bf16, %acc: f32):
    %ae = arith.extf %a : bf16 to f32
    %be = arith.extf %bb : bf16 to f32
    %p = arith.mulf %ae, %be : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<?x?x136xf32>
  return %r : tensor<?x?x136xf32>
}

// -----

// Batched, B stored [n, k] (Q K^T-like), rank 4: the batch dimensions
// collapse into one and expand back; f32 runs 3xTF32.
// CHECK-LABEL: func.func @batched_bt(
// CHECK:       tensor.collapse_shape %{{.+}} {{\[\[}}0, 1], [2], [3]] : tensor<2x3x?x32xf32> into tensor<6x?x32xf32>
// CHECK:       gpu.launch_func {{.*}}@masformer_kernels::@masformer_matmul_f32_f32_bt_acc blocks in (%{{.+}}, %{{.+}}, %c6)
// CHECK:       tensor.expand_shape %{{.+}} {{\[\[}}0, 1], [2], [3]] output_shape [2, 3, %{{.+}}, %{{.+}}] : tensor<6x?x?xf32> into tensor<2x3x?x?xf32>
// CHECK:       gpu.func @masformer_matmul_f32_f32_bt_acc(
// CHECK-NOT:     nvgpu.ldmatrix
// CHECK:         nvvm.mma.sync {{.*}}multiplicandAPtxType = #nvvm.mma_type<tf32>{{.*}}shape = #nvvm.shape<m = 16, n = 8, k = 8>
func.func @batched_bt(%q: tensor<2x3x?x32xf32>, %k: tensor<2x3x?x32xf32>, %c: tensor<2x3x?x?xf32>) -> tensor<2x3x?x?xf32> {
  %r = linalg.generic {
      indexing_maps = [affine_map<(b, h, m, n, k) -> (b, h, m, k)>,
                       affine_map<(b, h, m, n, k) -> (b, h, n, k)>,
                       affine_map<(b, h, m, n, k) -> (b, h, m, n)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<2x3x?x32xf32>, tensor<2x3x?x32xf32>) outs(%c : tensor<2x3x?x?xf32>) {
  ^bb0(%a: f32, %bb: f32, %acc: f32):
    %p = arith.mulf %a, %bb : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<2x3x?x?xf32>
  return %r : tensor<2x3x?x?xf32>
}

// -----

// Rows of 36 bytes cannot be copied 16 bytes at a time: the product stays.
// SKIP: remark: matrix product left to the generic GPU mapping: rows of A or B are not a multiple of 16 bytes
// CHECK-LABEL: func.func @odd_k(
// CHECK-NOT:   gpu.launch_func
// CHECK:       linalg.generic
func.func @odd_k(%x: tensor<8x9xf32>, %w: tensor<9x16xf32>, %c: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %r = linalg.generic {
      indexing_maps = [affine_map<(m, n, k) -> (m, k)>,
                       affine_map<(m, n, k) -> (k, n)>,
                       affine_map<(m, n, k) -> (m, n)>],
      iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<8x9xf32>, tensor<9x16xf32>) outs(%c : tensor<8x16xf32>) {
  ^bb0(%a: f32, %bb: f32, %acc: f32):
    %p = arith.mulf %a, %bb : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}

// -----

// A MatMul as the importer writes it, into a zero fill: the kernel never
// reads C, and the fill (host work on a tensor) goes away; C's shape comes
// from the fill's tensor.empty.
// CHECK-LABEL: func.func @zero_init(
// CHECK-NOT:   linalg.fill
// CHECK:       gpu.alloc
// CHECK:       gpu.launch_func {{.*}}@masformer_kernels::@masformer_matmul_f16_f16 blocks
// CHECK-NOT:   linalg.fill
// CHECK:       gpu.func @masformer_matmul_f16_f16(
// CHECK-NOT:     memref.load %arg2
// CHECK:         gpu.return
func.func @zero_init(%x: tensor<?x64xf16>, %w: tensor<64x32xf16>) -> tensor<?x32xf16> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %x, %c0 : tensor<?x64xf16>
  %e = tensor.empty(%m) : tensor<?x32xf16>
  %zero = arith.constant 0.0 : f16
  %init = linalg.fill ins(%zero : f16) outs(%e : tensor<?x32xf16>) -> tensor<?x32xf16>
  %r = linalg.generic {
      indexing_maps = [affine_map<(m, n, k) -> (m, k)>,
                       affine_map<(m, n, k) -> (k, n)>,
                       affine_map<(m, n, k) -> (m, n)>],
      iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<?x64xf16>, tensor<64x32xf16>) outs(%init : tensor<?x32xf16>) {
  ^bb0(%a: f16, %bb: f16, %acc: f16):
    %p = arith.mulf %a, %bb : f16
    %s = arith.addf %acc, %p : f16
    linalg.yield %s : f16
  } -> tensor<?x32xf16>
  return %r : tensor<?x32xf16>
}
