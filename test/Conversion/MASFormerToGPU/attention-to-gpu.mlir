// RUN: masformer-opt %s --masformer-attention-to-gpu --canonicalize --cse --split-input-file | FileCheck %s

// Host side: inputs read in place, the output allocated on the device, one
// launch of 128 threads per (query tile of 64 rows, head, batch) with two
// K and two V tiles of 64 x (64 + 8) bf16 in shared memory. Synchronous
// forms: the pipelines put a function's GPU ops on one stream.
// CHECK-LABEL: func.func @block_causal(
// CHECK-DAG:   %[[Q:.+]] = bufferization.to_buffer %arg0 read_only
// CHECK-DAG:   %[[K:.+]] = bufferization.to_buffer %arg1 read_only
// CHECK-DAG:   %[[V:.+]] = bufferization.to_buffer %arg2 read_only
// CHECK:       %[[SQ:.+]] = tensor.dim %arg0, %c2
// CHECK-NOT:   gpu.wait
// CHECK:       %[[OUT:.+]] = gpu.alloc (%[[SQ]]) : memref<2x8x?x64xbf16>
// CHECK:       %[[NQT:.+]] = arith.ceildivsi %[[SQ]], %c64
// CHECK:       %[[GX:.+]] = arith.maxsi %[[NQT]], %c1
// CHECK:       gpu.launch_func @masformer_kernels::@masformer_attention_bf16_d64_block256_causal blocks in (%[[GX]], %c8, %c2) threads in (%c128, %c1, %c1) dynamic_shared_memory_size %c36864_i32 args(
// CHECK-NOT:   gpu.wait
// CHECK:       %[[R:.+]] = bufferization.to_tensor %[[OUT]] restrict writable
// CHECK:       return %[[R]]

// The kernel: the key tiles of the query tile's blocks only, from
// floor(q0 / 256) * 256 to the tile's last query (+1), in tiles of 64.
// CHECK-LABEL: gpu.module @masformer_kernels
// CHECK:       gpu.func @masformer_attention_bf16_d64_block256_causal({{.*}}) kernel attributes {known_block_size = array<i32: 128, 1, 1>}
// CHECK:         %[[SMEM:.+]] = gpu.dynamic_shared_memory
// CHECK:         %[[KS:.+]] = memref.view %[[SMEM]][%c0][] {{.*}} to memref<2x64x72xbf16, #gpu.address_space<workgroup>>
// CHECK:         %[[VS:.+]] = memref.view %[[SMEM]][%c18432][] {{.*}} to memref<2x64x72xbf16, #gpu.address_space<workgroup>>
// CHECK:         scf.if
// CHECK:           %[[QB:.+]] = arith.floordivsi %{{.+}}, %c256
// CHECK:           %[[LO0:.+]] = arith.muli %[[QB]], %c256
// CHECK:           %[[LO:.+]] = arith.maxsi %[[LO0]], %c0
// CHECK:           %[[KTLO:.+]] = arith.floordivsi %[[LO]], %c64
// CHECK:           %[[KTHI0:.+]] = arith.ceildivsi %{{.+}}, %c64
// CHECK:           %[[KTHI:.+]] = arith.maxsi %[[KTLO]], %[[KTHI0]]
// Q's fragments come from global memory once, as pairs of bf16 in an i32.
// CHECK:           vector.load %arg0[{{.*}}] : memref<?x?x?x64xbf16>, vector<2xbf16>
// The first tile is in flight before the loop: 64 x 64 bf16 of K and of V
// in 16-byte copies, rows past the keys zero-filled.
// CHECK:           scf.if
// CHECK-COUNT-4:     nvgpu.device_async_copy %arg1{{.*}}, 8, %{{.+}} {bypassL1}
// CHECK:             nvvm.cp.async.commit.group
// CHECK:           scf.for %[[KT:.+]] = %[[KTLO]] to %[[KTHI]] step %c1 iter_args(
// CHECK:             nvvm.cp.async.wait.group 0
// CHECK-NEXT:        gpu.barrier
// The next tile loads while this one is computed.
// CHECK:             scf.if
// CHECK:               nvgpu.device_async_copy
// CHECK:               nvvm.cp.async.commit.group
// Interior tiles: no position mask.
// CHECK:             scf.if %{{.+}} -> (f32
// CHECK-NOT:           arith.floordivsi
// CHECK:               nvgpu.ldmatrix %[[KS]]{{.*}}transpose = false
// CHECK:               nvvm.mma.sync {{.*}}multiplicandAPtxType = #nvvm.mma_type<bf16>{{.*}}shape = #nvvm.shape<m = 16, n = 8, k = 16>
// CHECK:               gpu.shuffle  xor
// CHECK:               math.exp2
// CHECK:               nvgpu.ldmatrix %[[VS]]{{.*}}transpose = true
// CHECK:             } else {
// Boundary tiles: the block test of each (query, key) pair.
// CHECK:               arith.floordivsi %{{.+}}, %c256
// CHECK:           vector.store %{{.+}}, %arg3[{{.*}}] : memref<?x?x?x64xbf16>, vector<2xbf16>
func.func @block_causal(%q: tensor<2x8x?x64xbf16>, %k: tensor<2x2x?x64xbf16>, %v: tensor<2x2x?x64xbf16>) -> tensor<2x8x?x64xbf16> {
  %o = masformer.attention %q, %k, %v {span = #masformer.span<block 256>, causal = true} : tensor<2x8x?x64xbf16>, tensor<2x2x?x64xbf16>, tensor<2x2x?x64xbf16> -> tensor<2x8x?x64xbf16>
  return %o : tensor<2x8x?x64xbf16>
}

// -----

// Two ops of one configuration share a kernel; f32 uses tf32 products
// (three per step: hi*hi, hi*lo, lo*hi), a window another kernel, and a
// non-default scale is part of the kernel's name.
// CHECK-LABEL: func.func @shared
// CHECK:       gpu.launch_func @masformer_kernels::@masformer_attention_f32_d32_full
// CHECK:       gpu.launch_func @masformer_kernels::@masformer_attention_f32_d32_full
// CHECK:       gpu.launch_func @masformer_kernels::@masformer_attention_f32_d32_window16_s3e800000
// CHECK:       gpu.module @masformer_kernels
// CHECK:       gpu.func @masformer_attention_f32_d32_full(
// CHECK-NOT:     nvgpu.ldmatrix
// CHECK:         nvvm.mma.sync {{.*}}multiplicandAPtxType = #nvvm.mma_type<tf32>{{.*}}shape = #nvvm.shape<m = 16, n = 8, k = 8>
// CHECK:       gpu.func @masformer_attention_f32_d32_window16_s3e800000(
// CHECK-NOT:   gpu.func
func.func @shared(%q: tensor<1x2x40x32xf32>) -> (tensor<1x2x40x32xf32>, tensor<1x2x40x32xf32>, tensor<1x2x40x32xf32>) {
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<full>} : tensor<1x2x40x32xf32>, tensor<1x2x40x32xf32>, tensor<1x2x40x32xf32> -> tensor<1x2x40x32xf32>
  %1 = masformer.attention %0, %q, %q {span = #masformer.span<full>} : tensor<1x2x40x32xf32>, tensor<1x2x40x32xf32>, tensor<1x2x40x32xf32> -> tensor<1x2x40x32xf32>
  %2 = masformer.attention %q, %q, %q {span = #masformer.span<window 16>, scale = 0.25 : f32} : tensor<1x2x40x32xf32>, tensor<1x2x40x32xf32>, tensor<1x2x40x32xf32> -> tensor<1x2x40x32xf32>
  return %0, %1, %2 : tensor<1x2x40x32xf32>, tensor<1x2x40x32xf32>, tensor<1x2x40x32xf32>
}

// -----

// An additive mask [1, Skv] (one row for every query) goes to the kernel as
// a rank-4 memref (leading unit dimensions); its element is added to each
// logit.
// CHECK-LABEL: func.func @padding_mask(
// CHECK:       %[[M:.+]] = bufferization.to_buffer %arg1 read_only : tensor<1x?xf32> to memref<1x?xf32>
// CHECK:       %[[M4:.+]] = memref.expand_shape %[[M]] {{\[\[}}0, 1, 2], [3]] output_shape [1, 1, 1, %{{.+}}] : memref<1x?xf32> into memref<1x1x1x?xf32>
// CHECK:       %[[MC:.+]] = memref.cast %[[M4]] : memref<1x1x1x?xf32> to memref<?x?x?x?xf32>
// CHECK:       gpu.launch_func {{.*}}@masformer_kernels::@masformer_attention_f16_d64_full_causal_maskf32 {{.*}} args({{.*}}, %[[MC]] : memref<?x?x?x?xf32>)
// CHECK:       gpu.func @masformer_attention_f16_d64_full_causal_maskf32(%{{.+}}: memref<?x?x?x64xf16>, %{{.+}}: memref<?x?x?x64xf16>, %{{.+}}: memref<?x?x?x64xf16>, %{{.+}}: memref<?x?x?x64xf16>, %[[MK:.+]]: memref<?x?x?x?xf32>)
// CHECK:         memref.load %[[MK]]
func.func @padding_mask(%q: tensor<2x4x?x64xf16>, %m: tensor<1x?xf32>) -> tensor<2x4x?x64xf16> {
  %0 = masformer.attention %q, %q, %q mask(%m : tensor<1x?xf32>) {span = #masformer.span<full>, causal = true} : tensor<2x4x?x64xf16>, tensor<2x4x?x64xf16>, tensor<2x4x?x64xf16> -> tensor<2x4x?x64xf16>
  return %0 : tensor<2x4x?x64xf16>
}
