// RUN: masformer-opt %s --masformer-tile-attention="tile-q=64 tile-kv=64 vector-width=16 amx=1" | FileCheck %s --check-prefixes=CHECK,EXT
// RUN: masformer-opt %s --masformer-tile-attention="tile-q=64 tile-kv=64 vector-width=16 amx=1 bf16-dot=1" | FileCheck %s --check-prefixes=CHECK,SUMDOT
// RUN: masformer-opt %s --masformer-tile-attention="tile-q=32 tile-kv=64 vector-width=16 amx=1 bf16-dot=1" | FileCheck %s --check-prefix=DOT
// RUN: masformer-opt %s --masformer-tile-attention="tile-q=64 tile-kv=64 vector-width=8 amx=1" | FileCheck %s --check-prefix=NOAMX

// With amx, bf16 attention's full tiles run both products as AMX tile
// products (linalg.generic marked masformer.amx_tile, lowered by
// --masformer-lower-amx-tiles after bufferization). Head dimension 64,
// tiles of 64 x 64, a block span with the causal triangle: interior tiles
// whole, edge tiles in halves of 32 queries.
// CHECK-LABEL: func @block_causal_bf16
// First, once, a parallel loop over (batch, kv head, full key tile) packs
// the keys' pairs of the head dimension transposed, [64 / 2, 2 * 192], and
// the values' pairs of keys, [192 / 2, 2 * 64], each tile written in place
// into its slice.
// CHECK:       scf.forall (%{{.+}}, %{{.+}}, %{{.+}}) in (1, 2, %{{.+}}) shared_outs({{.+}}) -> (tensor<1x2x32x384xbf16>, tensor<1x2x96x128xbf16>)
// CHECK:         vector.shuffle %{{.+}}, %{{.+}} [0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29] : vector<16xi32>, vector<16xi32>
// CHECK-COUNT-63: vector.shuffle %{{.+}}, %{{.+}} {{\[}}{{.+}}] : vector<16xi32>, vector<16xi32>
// CHECK:         vector.interleave %{{.+}}, %{{.+}} : vector<16xbf16> -> vector<32xbf16>
// CHECK:         tensor.parallel_insert_slice %{{.+}} into %{{.+}}[%{{.+}}, %{{.+}}, 0, %{{.+}}] [1, 1, 32, 128] [1, 1, 1, 1] : tensor<32x128xbf16> into tensor<1x2x32x384xbf16>
// CHECK:         tensor.parallel_insert_slice %{{.+}} into %{{.+}}[%{{.+}}, %{{.+}}, %{{.+}}, 0] [1, 1, 32, 128] [1, 1, 1, 1] : tensor<32x128xbf16> into tensor<1x2x96x128xbf16>
// Then the (batch, head, query tile) loop; the queries are not packed.
// CHECK:       scf.forall (%{{.+}}, %{{.+}}, %{{.+}}) in (1, 2, 3)
// CHECK-NOT:     vector.shuffle {{.+}} : vector<16xi32>, vector<16xi32>
// A whole tile: S = Q K^T [64 queries, 64 keys] from zero, the queries'
// rows as stored (A), the tile's packed keys as AMX's B [32 pairs, 64, 2].
// CHECK:         tensor.empty() : tensor<64x64xf32>
// CHECK:         linalg.fill
// CHECK:         %[[KP:.+]] = tensor.expand_shape %{{.+}} {{\[\[}}0], [1, 2]] output_shape [32, 64, 2] : tensor<32x128xbf16> into tensor<32x64x2xbf16>
// CHECK:         linalg.generic {{.+}} ins(%{{.+}}, %[[KP]] : tensor<64x64xbf16>, tensor<32x64x2xbf16>) outs(%{{.+}} : tensor<64x64xf32>) attrs = {masformer.amx_tile = array<i64: 64, 64>}
// The softmax in groups of 16 rows: a loop takes each row's maximum down
// its vectors (into a 16 x 16 tile), a butterfly of shuffles takes the 16
// maxima across the lanes at once (4 levels of 8, 4, 2, 1 pairs), a second
// loop writes each row's P rounded to bf16 and sums the rounded values: a
// vector at a time, extended back to f32 and added; with AVX512-BF16
// (bf16-dot), two vectors at a time, summed by vdpbf16ps against ones;
// then a butterfly takes the 16 sums across.
// CHECK:         scf.for %{{.+}} = %c0{{.*}} to %c64{{.*}} step %c16{{.*}} iter_args({{.+}}) -> (tensor<64x64xbf16>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>)
// CHECK:           scf.for %{{.+}} = %c0{{.*}} to %c16{{.*}} step %c1{{.*}} iter_args({{.+}}) -> (tensor<16x16xf32>)
// CHECK-COUNT-8:   vector.shuffle %{{.+}}, %{{.+}} [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23]
// CHECK-COUNT-4:   vector.shuffle %{{.+}}, %{{.+}} [0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27]
// CHECK-COUNT-2:   vector.shuffle %{{.+}}, %{{.+}} [0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29]
// CHECK:           vector.shuffle %{{.+}}, %{{.+}} [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30]
// CHECK:           scf.for %{{.+}} = %c0{{.*}} to %c16{{.*}} step %c1{{.*}} iter_args({{.+}}) -> (tensor<16x16xf32>, tensor<64x64xbf16>)
// EXT-COUNT-4:       arith.truncf %{{.+}} : vector<16xf32> to vector<16xbf16>
// SUMDOT:            %[[R0:.+]] = arith.truncf %{{.+}} : vector<32xf32> to vector<32xbf16>
// SUMDOT:            x86vector.avx512.dot %{{.+}}, %[[R0]], %{{.+}} : vector<32xbf16> -> vector<16xf32>
// SUMDOT:            %[[R1:.+]] = arith.truncf %{{.+}} : vector<32xf32> to vector<32xbf16>
// SUMDOT:            x86vector.avx512.dot %{{.+}}, %[[R1]], %{{.+}} : vector<32xbf16> -> vector<16xf32>
// CHECK:           vector.shuffle %{{.+}}, %{{.+}} [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30]
// The accumulator's rows times their rescaling, in memory.
// CHECK:         scf.for %[[I:.+]] = %c0{{.*}} to %c64{{.*}} step %c1{{.*}} iter_args(%{{.+}}) -> (tensor<64x64xf32>)
// CHECK:           %[[CORR:.+]] = vector.broadcast %{{.+}} : f32 to vector<16xf32>
// CHECK-COUNT-4:   arith.mulf %{{.+}}, %[[CORR]] : vector<16xf32>
// acc += P V on AMX: P's rows (A), the tile's packed values as B [32, 64, 2].
// CHECK:         %[[VP:.+]] = tensor.expand_shape %{{.+}} {{\[\[}}0], [1, 2]] output_shape [32, 64, 2] : tensor<32x128xbf16> into tensor<32x64x2xbf16>
// CHECK:         linalg.generic {{.+}} ins(%{{.+}}, %[[VP]] : tensor<64x64xbf16>, tensor<32x64x2xbf16>) outs(%{{.+}} : tensor<64x64xf32>) attrs = {masformer.amx_tile = array<i64: 64, 64>}
// Edge tiles in halves of 32 queries against 32 or 64 keys.
// CHECK:         attrs = {masformer.amx_tile = array<i64: 32, 32>}
// CHECK:         attrs = {masformer.amx_tile = array<i64: 32, 64>}
// CHECK:         attrs = {masformer.amx_tile = array<i64: 32, 64>}
// CHECK:         attrs = {masformer.amx_tile = array<i64: 32, 64>}
// EXT-NOT: x86vector
// CHECK-LABEL: func @head_dim_48

// With tiles of 32 queries the halves (16 queries) are too narrow for AMX:
// vdpbf16ps with bf16-dot.
// DOT-LABEL: func @block_causal_bf16
// DOT-NOT: masformer.amx_tile
// DOT: x86vector.avx512.dot
// DOT-NOT: masformer.amx_tile
// DOT-LABEL: func @head_dim_48

// Vectors of 8: no micro-kernels of bf16 pairs, no AMX.
// NOAMX-LABEL: func @block_causal_bf16
// NOAMX-NOT: masformer.amx_tile
// NOAMX: vector.fma
// NOAMX-NOT: masformer.amx_tile
// NOAMX-LABEL: func @head_dim_48
func.func @block_causal_bf16(%q: tensor<1x2x192x64xbf16>, %k: tensor<1x2x192x64xbf16>, %v: tensor<1x2x192x64xbf16>) -> tensor<1x2x192x64xbf16> {
  %o = masformer.attention %q, %k, %v {span = #masformer.span<block 96>, causal = true} : tensor<1x2x192x64xbf16>, tensor<1x2x192x64xbf16>, tensor<1x2x192x64xbf16> -> tensor<1x2x192x64xbf16>
  return %o : tensor<1x2x192x64xbf16>
}

// A head dimension of 48 (not a multiple of 32): no AMX; vdpbf16ps with
// bf16-dot, FMAs on bf16 extended to f32 without.
// CHECK-NOT: masformer.amx_tile
// CHECK-LABEL: func @f32_full
// DOT-NOT: masformer.amx_tile
// DOT-LABEL: func @f32_full
func.func @head_dim_48(%q: tensor<1x1x128x48xbf16>, %k: tensor<1x1x128x48xbf16>, %v: tensor<1x1x128x48xbf16>) -> tensor<1x1x128x48xbf16> {
  %o = masformer.attention %q, %k, %v {span = #masformer.span<full>} : tensor<1x1x128x48xbf16>, tensor<1x1x128x48xbf16>, tensor<1x1x128x48xbf16> -> tensor<1x1x128x48xbf16>
  return %o : tensor<1x1x128x48xbf16>
}

// f32 attention keeps the FMA kernels with amx set.
// CHECK-NOT: masformer.amx_tile
// CHECK: vector.fma
// CHECK-NOT: masformer.amx_tile
// DOT-NOT: masformer.amx_tile
func.func @f32_full(%q: tensor<1x1x128x64xf32>, %k: tensor<1x1x128x64xf32>, %v: tensor<1x1x128x64xf32>) -> tensor<1x1x128x64xf32> {
  %o = masformer.attention %q, %k, %v {span = #masformer.span<full>} : tensor<1x1x128x64xf32>, tensor<1x1x128x64xf32>, tensor<1x1x128x64xf32> -> tensor<1x1x128x64xf32>
  return %o : tensor<1x1x128x64xf32>
}
