// RUN: masformer-opt %s --masformer-tile-attention="tile-q=16 tile-kv=8" --split-input-file | FileCheck %s

// Block 32, causal, 64 queries on 64 keys: the key-tile loop of each query
// tile starts at its block's first key and ends at the tile's last query.
// CHECK-LABEL: func @block_causal
// One parallel iteration per (batch, head, query tile): 1 x 2 x 64/16.
// CHECK: scf.forall (%{{.+}}, %{{.+}}, %{{.+}}) in (1, 2, 4) shared_outs(
// The causal end: one past the tile's last query.
// CHECK:   %[[LAST1:.+]] = arith.addi %{{[0-9]+}}, %c1{{.*}} : index
// CHECK-NEXT: %[[HI:.+]] = arith.minsi %c64{{.*}}, %[[LAST1]] : index
// CHECK:   %[[C32:.+]] = arith.constant 32 : index
// CHECK:   %[[QB:.+]] = arith.floordivsi %{{.+}}, %[[C32]] : index
// CHECK:   %[[BSTART:.+]] = arith.muli %[[QB]], %[[C32]] : index
// CHECK:   %[[LO:.+]] = arith.maxsi %{{.+}}, %[[BSTART]] : index
// CHECK:   %[[C8:.+]] = arith.constant 8 : index
// CHECK:   %[[KTLO:.+]] = arith.floordivsi %[[LO]], %[[C8]] : index
// CHECK:   %[[KTHI0:.+]] = arith.ceildivsi %{{.+}}, %{{.+}} : index
// CHECK:   %[[KTHI:.+]] = arith.maxsi %[[KTLO]], %[[KTHI0]] : index
// CHECK:   scf.for %{{.+}} = %[[KTLO]] to %[[KTHI]] step %{{.+}} iter_args(
// Interior tiles take the branch without a position mask.
// CHECK:     %[[IN:.+]] = scf.if %{{.+}} -> (tensor<?x?xf32>) {
// CHECK-NOT:   linalg.index
// CHECK:     } else {
// CHECK:       linalg.index 0
// CHECK:       arith.select
// CHECK:     math.exp
// CHECK:   tensor.parallel_insert_slice
// CHECK-NOT: masformer.attention
func.func @block_causal(%q: tensor<1x2x64x16xf32>) -> tensor<1x2x64x16xf32> {
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<block 32>, causal = true} : tensor<1x2x64x16xf32>, tensor<1x2x64x16xf32>, tensor<1x2x64x16xf32> -> tensor<1x2x64x16xf32>
  return %0 : tensor<1x2x64x16xf32>
}

// -----

// Full and not causal: every key tile, and no position mask anywhere.
// CHECK-LABEL: func @full
// CHECK-NOT: scf.if
// CHECK-NOT: linalg.index
// CHECK: return
func.func @full(%q: tensor<1x2x64x16xf32>) -> tensor<1x2x64x16xf32> {
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<full>} : tensor<1x2x64x16xf32>, tensor<1x2x64x16xf32>, tensor<1x2x64x16xf32> -> tensor<1x2x64x16xf32>
  return %0 : tensor<1x2x64x16xf32>
}
