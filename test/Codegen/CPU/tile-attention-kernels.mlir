// RUN: masformer-opt %s --masformer-tile-attention="tile-q=16 tile-kv=32 vector-width=16" | FileCheck %s
// RUN: masformer-opt %s --masformer-tile-attention="tile-q=16 tile-kv=32 vector-width=8" | FileCheck %s --check-prefix=AVX2
// RUN: masformer-opt %s --masformer-tile-attention="tile-q=16 tile-kv=32" | FileCheck %s --check-prefix=NOVEC
// RUN: not masformer-opt %s --masformer-tile-attention="vector-width=12" 2>&1 | FileCheck %s --check-prefix=BADWIDTH

// With vector-width, full tiles compute with micro-kernels in the vector
// dialect; partial tiles keep the linalg contractions.
// CHECK-LABEL: func @block_causal
// The keys, packed once as [batch, kv_heads, key tile, head_dim, tile-kv]:
// one parallel iteration per key tile, written in place; a full tile as a
// plain transpose of its slice of K, the last (16 of 32 keys) element by
// element with zeros past the keys.
// CHECK: %[[PACKED:.+]] = scf.forall ({{.+}}) in (1, 2, 3) shared_outs(%{{.+}} = %{{.+}}) -> (tensor<1x2x3x32x32xf32>)
// CHECK:   tensor.extract_slice %{{.+}} : tensor<1x2x3x32x32xf32> to tensor<32x32xf32>
// CHECK:   scf.if %{{.+}} -> (tensor<32x32xf32>) {
// CHECK:     %[[KSLICE:.+]] = tensor.extract_slice %{{.+}} [1, 1, 32, 32] [1, 1, 1, 1] : tensor<1x2x80x32xf32> to tensor<32x32xf32>
// CHECK:     linalg.generic {{.+}} ins(%[[KSLICE]] : tensor<32x32xf32>)
// CHECK-NEXT:  ^bb0(%[[IN:.+]]: f32, %{{.+}}: f32):
// CHECK-NEXT:    linalg.yield %[[IN]] : f32
// CHECK:   } else {
// CHECK:     tensor.extract %{{.+}} : tensor<1x2x80x32xf32>
// The attention: (batch, head, query tile).
// CHECK: scf.forall ({{.+}}) in (1, 2, 5)
// CHECK:   scf.for
// A full tile: 16 queries and 32 keys.
// CHECK:     %[[FULLQ:.+]] = arith.cmpi eq, %{{.+}}, %c16{{.*}} : index
// CHECK:     %[[FULLK:.+]] = arith.cmpi eq, %{{.+}}, %c32{{.*}} : index
// CHECK:     %[[FULL:.+]] = arith.andi %[[FULLQ]], %[[FULLK]] : i1
// CHECK:     scf.if %[[FULL]] -> (tensor<?xf32>, tensor<?xf32>, tensor<?x32xf32>) {
// A tile whose every pair the span allows runs whole, without a position
// mask.
// CHECK:       scf.if %{{.+}} -> (tensor<?xf32>, tensor<?xf32>, tensor<?x32xf32>) {
// CHECK-NOT:     arith.select
// Q K^T: the packed key tile, then 4 query rows x 2 vectors of 16 keys of
// accumulators over the 32 elements of the head dimension.
// CHECK:       tensor.extract_slice %[[PACKED]]{{.+}} : tensor<1x2x3x32x32xf32> to tensor<32x32xf32>
// CHECK:       scf.for %{{.+}} = %c0{{.*}} to %c16{{.*}} step %c4
// CHECK:         scf.for %{{.+}} = %c0{{.*}} to %c32{{.*}} step %c32
// CHECK:           scf.for %{{.+}} = %c0{{.*}} to %c32{{.*}} step %c1{{.*}} iter_args({{.+}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK-COUNT-8:     vector.fma
// The scale is applied as the scores are stored.
// CHECK:           arith.mulf %{{.+}}, %{{.+}} : vector<16xf32>
// CHECK:           vector.transfer_write
// The softmax update, one row at a time. Its maximum: the two vectors'
// (x > y ? x : y, one vmaxps), then four lane rotations of it, each with a
// vmaxps (vector.reduction and arith.maxnumf lower to scalar chains and
// NaN fix-ups on x86).
// CHECK:       %[[GT:.+]] = arith.cmpf ogt, %[[X0:.+]], %[[X1:.+]] : vector<16xf32>
// CHECK-NEXT:  %[[VMAX:.+]] = arith.select %[[GT]], %[[X0]], %[[X1]] : vector<16xi1>, vector<16xf32>
// CHECK:       %[[R8:.+]] = vector.shuffle %[[VMAX]], %[[VMAX]] [8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7]
// CHECK-NEXT:  %[[GT8:.+]] = arith.cmpf ogt, %[[VMAX]], %[[R8]] : vector<16xf32>
// CHECK-NEXT:  %[[M8:.+]] = arith.select %[[GT8]], %[[VMAX]], %[[R8]]
// CHECK-NEXT:  vector.shuffle %[[M8]], %[[M8]] [4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3]
// CHECK:       vector.shuffle %{{.+}} [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1]
// CHECK:       vector.shuffle %{{.+}} [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0]
// CHECK:       vector.extract %{{.+}}[0] : f32 from vector<16xf32>
// CHECK-NOT:   vector.reduction
// CHECK-NOT:   arith.maxnumf {{.+}} : vector<16xf32>
// exp(logit - max) as 2^k 2^f in 13 operations: t = x log2(e) clamped at
// -126 (a vmaxps that keeps a NaN), k rounded by adding and subtracting
// 1.5 * 2^23 + 126 (0x4B40007E), 2 * 2^f by Horner's rule, 2^(k-1) from
// the sum's low bits shifted into the exponent field; no select.
// CHECK:       %[[T:.+]] = arith.mulf %{{.+}}, %{{.+}} : vector<16xf32>
// CHECK-NEXT:  %[[LOW:.+]] = arith.constant dense<-1.260000e+02> : vector<16xf32>
// CHECK-NEXT:  %[[CLAMP:.+]] = arith.cmpf ogt, %[[LOW]], %[[T]] : vector<16xf32>
// CHECK-NEXT:  %[[TC:.+]] = arith.select %[[CLAMP]], %[[LOW]], %[[T]]
// CHECK-NEXT:  %[[MAGIC:.+]] = arith.constant dense<0x4B40007E> : vector<16xf32>
// CHECK-NEXT:  %[[Y:.+]] = arith.addf %[[TC]], %[[MAGIC]] : vector<16xf32>
// CHECK-NEXT:  %[[K:.+]] = arith.subf %[[Y]], %[[MAGIC]] : vector<16xf32>
// CHECK-NEXT:  %[[F:.+]] = arith.subf %[[TC]], %[[K]] : vector<16xf32>
// CHECK-COUNT-6: math.fma {{.+}}, %[[F]], {{.+}} : vector<16xf32>
// CHECK:       %[[YBITS:.+]] = arith.bitcast %[[Y]] : vector<16xf32> to vector<16xi32>
// CHECK:       %[[SBITS:.+]] = arith.shli %[[YBITS]], %{{.+}} : vector<16xi32>
// CHECK-NEXT:  %[[SCALE:.+]] = arith.bitcast %[[SBITS]] : vector<16xi32> to vector<16xf32>
// CHECK-NEXT:  arith.mulf %{{.+}}, %[[SCALE]] : vector<16xf32>
// CHECK-NOT:   math.roundeven
// CHECK-NOT:   arith.fptosi
// The row sum: four lane rotations and adds.
// CHECK-NOT:   vector.reduction
// CHECK:       vector.shuffle %[[SUM:.+]], %[[SUM]] [8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7]
// CHECK-NEXT:  arith.addf %[[SUM]], %{{.+}} : vector<16xf32>
// CHECK:       vector.shuffle %{{.+}} [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0]
// CHECK-NEXT:  %[[S1:.+]] = arith.addf
// CHECK-NEXT:  vector.extract %[[S1]][0] : f32 from vector<16xf32>
// P V: the rescaled output rows stay in registers across the 32 keys.
// CHECK:       arith.mulf %{{.+}}, %{{.+}} : vector<16xf32>
// CHECK:       scf.for %{{.+}} = %c0{{.*}} to %c32{{.*}} step %c1{{.*}} iter_args(
// CHECK-COUNT-8: vector.fma
// A tile on the span's edge (here the causal diagonal): two halves of 8
// query rows. A half whose rows see none of the tile's keys skips it; one
// whose keys all lie in one half of the tile computes just those 16 keys
// (from column 0 or 16 of the packed tile), the other all 32.
// CHECK:       } else {
// CHECK:         scf.for %[[R0:.+]] = %c0{{.*}} to %c16{{.*}} step %c8{{.*}} iter_args(%[[M:[^ ]+]] = %{{[^,]+}}, %[[L:[^ ]+]] = %{{[^,]+}}, %[[ACC:[^ ]+]] = %{{[^)]+}}) -> (tensor<?xf32>, tensor<?xf32>, tensor<?x32xf32>) {
// CHECK:           %[[NONE:.+]] = arith.cmpi sle
// CHECK:           %[[UPPER:.+]] = arith.cmpi sge
// CHECK:           %[[LOWER:.+]] = arith.cmpi sle
// CHECK:           %[[NARROW:.+]] = arith.ori %[[UPPER]], %[[LOWER]] : i1
// CHECK:           %[[COL:.+]] = arith.select %[[UPPER]], %c16{{.*}}, %c0{{.*}} : index
// CHECK:           scf.if %[[NONE]] -> (tensor<?xf32>, tensor<?xf32>, tensor<?x32xf32>) {
// CHECK-NEXT:        scf.yield %[[M]], %[[L]], %[[ACC]] : tensor<?xf32>, tensor<?xf32>, tensor<?x32xf32>
// CHECK-NEXT:      } else {
// CHECK-NEXT:        scf.if %[[NARROW]] -> (tensor<?xf32>, tensor<?xf32>, tensor<?x32xf32>) {
// CHECK:               tensor.extract_slice %[[ACC]][%[[R0]], 0] [8, 32] [1, 1] : tensor<?x32xf32> to tensor<8x32xf32>
// CHECK:               tensor.extract_slice %[[PACKED]][{{.+}}, 0, %[[COL]]] [1, 1, 1, 32, 16] [1, 1, 1, 1, 1] : tensor<1x2x3x32x32xf32> to tensor<32x16xf32>
// CHECK:               scf.for %{{.+}} = %c0{{.*}} to %c8{{.*}} step %c4
// CHECK:                 scf.for %{{.+}} = %c0{{.*}} to %c16{{.*}} step %c16
// CHECK-COUNT-4:             vector.fma
// CHECK:               tensor.insert_slice %{{.+}} into %[[ACC]][%[[R0]], 0] [8, 32] [1, 1] : tensor<8x32xf32> into tensor<?x32xf32>
// CHECK:             } else {
// CHECK:               tensor.extract_slice %[[PACKED]][{{.+}}, 0, %c0{{.*}}] [1, 1, 1, 32, 32] [1, 1, 1, 1, 1] : tensor<1x2x3x32x32xf32> to tensor<32x32xf32>
// CHECK:               tensor.insert_slice %{{.+}} into %[[ACC]][%[[R0]], 0] [8, 32] [1, 1] : tensor<8x32xf32> into tensor<?x32xf32>
// Partial tiles: the linalg step.
// CHECK:     } else {
// CHECK-NOT:   vector.fma
// CHECK:       linalg.generic {{.+}} iterator_types = ["parallel", "parallel", "reduction"]
// CHECK:     }

// AVX2-LABEL: func @block_causal
// AVX2: -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// Eight lanes: three rotations for the row maximum.
// AVX2: vector.shuffle %{{.+}} [4, 5, 6, 7, 0, 1, 2, 3] : vector<8xf32>
// AVX2-NEXT: arith.cmpf ogt
// AVX2: vector.shuffle %{{.+}} [2, 3, 4, 5, 6, 7, 0, 1] : vector<8xf32>
// AVX2: vector.shuffle %{{.+}} [1, 2, 3, 4, 5, 6, 7, 0] : vector<8xf32>
// AVX2-NEXT: arith.cmpf ogt

// Without vector-width: no packing and no vector code.
// NOVEC-LABEL: func @block_causal
// NOVEC-NOT: vector.
// NOVEC-NOT: tensor<1x2x3x32x32xf32>
// NOVEC: return

// BADWIDTH: vector-width must be 0 or a power of two, got 12
func.func @block_causal(%q: tensor<1x2x80x32xf32>) -> tensor<1x2x80x32xf32> {
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<block 32>, causal = true} : tensor<1x2x80x32xf32>, tensor<1x2x80x32xf32>, tensor<1x2x80x32xf32> -> tensor<1x2x80x32xf32>
  return %0 : tensor<1x2x80x32xf32>
}
