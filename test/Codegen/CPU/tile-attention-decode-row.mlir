// RUN: masformer-opt %s --masformer-tile-attention="tile-q=64 tile-kv=128 vector-width=16" | FileCheck %s
// RUN: masformer-opt %s --masformer-tile-attention="tile-q=64 tile-kv=128" | FileCheck %s --check-prefix=NOVEC

// A decode step: one query row against a bf16 cache run, queries aligned
// to the end of the keys. The short query tile takes the linalg path for
// every key tile; its P V keeps each query row's 64 accumulators in four
// vector<16xf32> across the tile's keys, each key's row of V read as
// vectors and extended (not a loop nest that LLVM vectorized 4 lanes wide,
// loading and storing the accumulators per key). Without a vector width,
// the linalg contraction.
// Its scores too: the query row's four vectors read once, then per key
// four products of the key's row (extended from bf16) and one reduction.
// CHECK-LABEL: func.func @decode_row
// CHECK: scf.for %[[QI:.+]] = %c0{{.*}} to %{{.+}} step %c1{{.*}} iter_args(%{{.+}}) -> (tensor<?x?xf32>)
// CHECK-COUNT-4: arith.extf %{{.+}} : vector<16xbf16> to vector<16xf32>
// CHECK: scf.for %[[QJ:.+]] = %c0{{.*}} to %{{.+}} step %c1{{.*}} iter_args(%{{.+}}) -> (tensor<?x?xf32>)
// CHECK: arith.mulf %{{.+}}, %{{.+}} : vector<16xf32>
// CHECK-COUNT-3: vector.fma
// CHECK: %[[SUM:.+]] = vector.reduction <add>, %{{.+}} : vector<16xf32> into f32
// CHECK: tensor.insert %[[SUM]] into %{{.+}}[%[[QI]], %[[QJ]]]
// CHECK: scf.for %[[I:.+]] = %c0{{.*}} to %{{.+}} step %c1{{.*}} iter_args(%[[ACC:.+]] = %{{.+}}) -> (tensor<?x64xf32>)
// CHECK-COUNT-4: vector.transfer_read %[[ACC]][%[[I]], %{{.+}}]{{.*}} : tensor<?x64xf32>, vector<16xf32>
// CHECK: scf.for %[[J:.+]] = %c0{{.*}} to %{{.+}} step %c1{{.*}} iter_args(%{{.+}} = %{{.+}}, %{{.+}} = %{{.+}}, %{{.+}} = %{{.+}}, %{{.+}} = %{{.+}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK: %[[P:.+]] = tensor.extract %{{.+}}[%[[I]], %[[J]]] : tensor<?x?xf32>
// CHECK: vector.broadcast %[[P]] : f32 to vector<16xf32>
// CHECK-COUNT-4: arith.extf %{{.+}} : vector<16xbf16> to vector<16xf32>
// CHECK: vector.fma
// CHECK: scf.yield %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} : vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>
// CHECK-COUNT-4: vector.transfer_write
// NOVEC-LABEL: func.func @decode_row
// NOVEC-NOT: vector.fma
// NOVEC: linalg.generic
func.func @decode_row(%q: tensor<1x2x1x64xbf16>, %k: tensor<1x2x?x64xbf16>, %v: tensor<1x2x?x64xbf16>) -> tensor<1x2x1x64xbf16> {
  %o = masformer.attention %q, %k, %v {causal = true, span = #masformer.span<full>} : tensor<1x2x1x64xbf16>, tensor<1x2x?x64xbf16>, tensor<1x2x?x64xbf16> -> tensor<1x2x1x64xbf16>
  return %o : tensor<1x2x1x64xbf16>
}
