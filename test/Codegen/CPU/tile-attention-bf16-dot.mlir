// RUN: masformer-opt %s --masformer-tile-attention="tile-q=64 tile-kv=64 vector-width=16 bf16-dot=1" | FileCheck %s
// RUN: masformer-opt %s --masformer-tile-attention="tile-q=64 tile-kv=64 vector-width=16" | FileCheck %s --check-prefix=NODOT
// RUN: masformer-opt %s --masformer-tile-attention="tile-q=64 tile-kv=64 vector-width=8 bf16-dot=1" | FileCheck %s --check-prefix=NODOT
// RUN: masformer-opt %s --masformer-tile-attention="tile-q=16 tile-kv=64 vector-width=16 bf16-dot=1" | FileCheck %s --check-prefix=NODOT

// With bf16-dot, bf16 attention's full tiles run both products on
// vdpbf16ps (x86vector.avx512.dot): 16 f32 results a vector, each step a
// pair of the reduction. Head dimension 32, tiles of 64 x 64.
// CHECK-LABEL: func @block_causal_bf16
// The query tile packed once as pairs of the head dimension, [32 / 2, 2 *
// 64] bf16: each row read as 16 pairs (one i32 each), a 16 x 16 transpose
// of the pairs, each column written as 32 bf16.
// CHECK:   scf.for %{{.+}} -> (tensor<16x128xbf16>) {
// CHECK-COUNT-16: vector.bitcast %{{.+}} : vector<32xbf16> to vector<16xi32>
// CHECK:         vector.shuffle %{{.+}}, %{{.+}} [0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29] : vector<16xi32>, vector<16xi32>
// CHECK-COUNT-63: vector.shuffle %{{.+}}, %{{.+}} {{\[}}{{.+}}] : vector<16xi32>, vector<16xi32>
// CHECK-COUNT-16: vector.bitcast %{{.+}} : vector<16xi32> to vector<32xbf16>
// The scores S^T = K Q^T of a whole tile: blocks of 4 keys x 4 vectors of
// 16 queries over the 16 pairs of the head dimension; per step, 4 vectors
// of the packed queries, and each key's pair broadcast as one i32.
// CHECK:       scf.for %{{.+}} = %c0{{.*}} to %c64{{.*}} step %c4{{.*}} -> (tensor<64x64xf32>)
// CHECK:         scf.for %[[P:.+]] = %c0{{.*}} to %c16{{.*}} step %c1{{.*}} iter_args({{.+}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK-COUNT-4: vector.transfer_read %{{.+}}[%[[P]], %{{.+}}], %{{.+}} {in_bounds = [true]} : tensor<16x128xbf16>, vector<32xbf16>
// CHECK:           vector.transfer_read %{{.+}} : tensor<64x32xbf16>, vector<2xbf16>
// CHECK:           vector.bitcast %{{.+}} : vector<2xbf16> to vector<1xi32>
// CHECK:           vector.broadcast %{{.+}} : i32 to vector<16xi32>
// CHECK-COUNT-16:  x86vector.avx512.dot %{{.+}} : vector<32xbf16> -> vector<16xf32>
// The softmax writes P as bf16 pairs of keys, [64 / 2, 2 * 64], two
// rounded rows interleaved (and sums the rounded values).
// CHECK:       tensor.empty() : tensor<32x128xbf16>
// CHECK:           %[[LO:.+]] = arith.truncf %{{.+}} : vector<16xf32> to vector<16xbf16>
// CHECK:           arith.extf %[[LO]] : vector<16xbf16> to vector<16xf32>
// CHECK:           %[[HI:.+]] = arith.truncf %{{.+}} : vector<16xf32> to vector<16xbf16>
// CHECK:           arith.extf %[[HI]] : vector<16xbf16> to vector<16xf32>
// CHECK:           %[[PAIR:.+]] = vector.interleave %[[LO]], %[[HI]] : vector<16xbf16> -> vector<32xbf16>
// CHECK:           vector.transfer_write %[[PAIR]], {{.+}} : vector<32xbf16>, tensor<32x128xbf16>
// V packed per key tile as pairs of keys, [64 / 2, 2 * 32]: rows 2p and
// 2p + 1 interleaved, 16 columns at a time.
// CHECK:       tensor.empty() : tensor<32x64xbf16>
// CHECK:       scf.for %[[VP:.+]] = %c0{{.*}} to %c32{{.*}} step %c1{{.*}} iter_args(%{{.+}}) -> (tensor<32x64xbf16>)
// CHECK:         vector.transfer_read {{.+}} : tensor<64x32xbf16>, vector<16xbf16>
// CHECK:         vector.transfer_read {{.+}} : tensor<64x32xbf16>, vector<16xbf16>
// CHECK:         vector.interleave %{{.+}}, %{{.+}} : vector<16xbf16> -> vector<32xbf16>
// CHECK:         vector.transfer_write %{{.+}}, %{{.+}}[%[[VP]], %c0{{.*}}] {{.+}} : vector<32xbf16>, tensor<32x64xbf16>
// CHECK:         vector.interleave
// CHECK:         vector.transfer_write %{{.+}}, %{{.+}}[%[[VP]], %c32{{.*}}] {{.+}} : vector<32xbf16>, tensor<32x64xbf16>
// acc * corr + P V: 8 rows x 2 vectors of the head dimension over the 32
// pairs of keys, each row's pair of P read at [p, 2 i] and broadcast.
// CHECK:       scf.for %{{.+}} = %c0{{.*}} to %c64{{.*}} step %c8{{.*}} -> (tensor<64x32xf32>)
// CHECK:         scf.for %[[K2:.+]] = %c0{{.*}} to %c32{{.*}} step %c1{{.*}} iter_args(
// CHECK-COUNT-2:   vector.transfer_read %{{.+}}[%[[K2]], %{{.+}}], %{{.+}} : tensor<32x64xbf16>, vector<32xbf16>
// CHECK:           vector.transfer_read %{{.+}}[%[[K2]], %{{.+}}], %{{.+}} : tensor<32x128xbf16>, vector<2xbf16>
// CHECK-COUNT-16:  x86vector.avx512.dot %{{.+}} : vector<32xbf16> -> vector<16xf32>
// Edge tiles in halves of 32 queries read their half of the packed queries.
// CHECK:   tensor.extract_slice %{{.+}}[0, %{{.+}}] [16, 64] [1, 1] : tensor<16x128xbf16> to tensor<16x64xbf16>
// CHECK:   x86vector.avx512.dot

// Without bf16-dot, with vectors of 8, or with query tiles too narrow for
// halves of 16 queries, the kernels extend bf16 to f32 and use FMAs.
// NODOT-LABEL: func @block_causal_bf16
// NODOT-NOT: x86vector
// NODOT-NOT: vector.interleave
// NODOT: vector.fma
// NODOT-NOT: x86vector
func.func @block_causal_bf16(%q: tensor<1x2x192x32xbf16>, %k: tensor<1x2x192x32xbf16>, %v: tensor<1x2x192x32xbf16>) -> tensor<1x2x192x32xbf16> {
  %o = masformer.attention %q, %k, %v {span = #masformer.span<block 96>, causal = true} : tensor<1x2x192x32xbf16>, tensor<1x2x192x32xbf16>, tensor<1x2x192x32xbf16> -> tensor<1x2x192x32xbf16>
  return %o : tensor<1x2x192x32xbf16>
}

// f32 and f16 attention keep the FMA kernels with bf16-dot set.
// NODOT-LABEL: func @f16_full
// CHECK-LABEL: func @f16_full
// CHECK-NOT: x86vector
// CHECK: vector.fma
// CHECK-NOT: x86vector
func.func @f16_full(%q: tensor<1x1x128x32xf16>, %k: tensor<1x1x128x32xf16>, %v: tensor<1x1x128x32xf16>) -> tensor<1x1x128x32xf16> {
  %o = masformer.attention %q, %k, %v {span = #masformer.span<full>} : tensor<1x1x128x32xf16>, tensor<1x1x128x32xf16>, tensor<1x1x128x32xf16> -> tensor<1x1x128x32xf16>
  return %o : tensor<1x1x128x32xf16>
}
