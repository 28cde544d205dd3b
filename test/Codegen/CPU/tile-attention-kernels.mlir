// RUN: masformer-opt %s --masformer-tile-attention="tile-q=16 tile-kv=32 vector-width=16" | FileCheck %s
// RUN: masformer-opt %s --masformer-tile-attention="tile-q=16 tile-kv=32 vector-width=8" | FileCheck %s --check-prefix=AVX2
// RUN: masformer-opt %s --masformer-tile-attention="tile-q=16 tile-kv=32" | FileCheck %s --check-prefix=NOVEC
// RUN: not masformer-opt %s --masformer-tile-attention="vector-width=12" 2>&1 | FileCheck %s --check-prefix=BADWIDTH

// With vector-width, full tiles compute with micro-kernels in the vector
// dialect; partial tiles keep the linalg contractions.
// CHECK-LABEL: func @block_causal
// The operands' buffers, for prefetches: read-only views of any layout, so
// that bufferization aliases them instead of copying.
// CHECK: %[[QBUF:.+]] = bufferization.to_buffer %[[ARG:.+]] read_only : tensor<1x2x80x32xf32> to memref<1x2x80x32xf32, strided<[?, ?, ?, ?], offset: ?>>
// CHECK: %[[KBUF:.+]] = bufferization.to_buffer %[[ARG]] read_only
// CHECK: %[[VBUF:.+]] = bufferization.to_buffer %[[ARG]] read_only
// The attention: (batch, head, query tile).
// CHECK: scf.forall ({{.+}}) in (1, 2, 5) shared_outs(%[[OUTS:arg[0-9]+]] =
// The result's buffer, for the last key tile's write prefetches: a
// read-only view of the shared result, before any write of the iteration.
// CHECK:   %[[OBUF:.+]] = bufferization.to_buffer %[[OUTS]] read_only
// The query tile transposed once into [head_dim, tile-q] f32, in 16 x 16
// blocks: 16 rows read as vectors from the query tensor (rows past a short
// last tile clamped to its last, with no branch), transposed in registers
// by 64 shuffles of two rows (transposeRows: rows 0 and 1 interleaved
// within each lane of 4 elements first), 16 columns written. No
// vector.transpose (canonicalization would take it apart element by
// element). No key is packed.
// CHECK:   %[[QT:.+]] = scf.for %[[R:.+]] = %c0{{.*}} to %c16{{.*}} step %c16{{.*}} -> (tensor<32x16xf32>)
// CHECK:     scf.for %[[C:.+]] = %c0{{.*}} to %c32{{.*}} step %c16
// CHECK:       arith.minsi
// CHECK-COUNT-16: vector.transfer_read %{{.+}}[%{{.+}}, %{{.+}}, %{{.+}}, %[[C]]]{{.+}} : tensor<1x2x80x32xf32>, vector<16xf32>
// CHECK-NOT:   vector.transpose
// CHECK:       vector.shuffle %[[ROW0:.+]], %[[ROW1:.+]] [0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29] : vector<16xf32>, vector<16xf32>
// CHECK-NEXT:  vector.shuffle %[[ROW0]], %[[ROW1]] [2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31] : vector<16xf32>, vector<16xf32>
// CHECK-COUNT-62: vector.shuffle %{{.+}}, %{{.+}} {{\[}}{{.+}}] : vector<16xf32>, vector<16xf32>
// CHECK-NOT:   vector.shuffle
// CHECK-COUNT-16: vector.transfer_write %{{.+}}, %{{.+}}[%{{.+}}, %[[R]]] {{.+}} : vector<16xf32>, tensor<32x16xf32>
// The query tile's part of the output, which its last key tile writes.
// CHECK:   %[[OTILE:.+]] = tensor.extract_slice %[[OUTS]][{{.+}}] [1, 1, %{{.+}}, 32] [1, 1, 1, 1] : tensor<1x2x80x32xf32> to tensor<?x32xf32>
// The last key tile, when the micro-kernels take it whole (both tiles full,
// every pair inside the span and the triangle), is left out of the loop.
// CHECK:   %[[LASTSTEP:.+]] = arith.subi %[[UB:.+]], %c1{{.*}} : index
// CHECK:   %[[ANY:.+]] = arith.cmpi sgt, %[[UB]], %[[LB:.+]] : index
// CHECK:   %[[PEEL:.+]] = arith.andi %[[ANY]], %{{.+}} : i1
// CHECK:   %[[KEND:.+]] = arith.select %[[PEEL]], %[[LASTSTEP]], %[[UB]] : index
// CHECK:   scf.for %{{.+}} = %[[LB]] to %[[KEND]] step
// The first key of the tile this thread reads next: the next step's, or
// after the last step the next query tile's first.
// CHECK:     %[[NEXTI:.+]] = arith.addi %{{.+}}, %c1{{.*}} : index
// CHECK:     %[[NEXTKS:.+]] = arith.muli %[[NEXTI]], %c32{{.*}} : index
// CHECK:     %[[MORE:.+]] = arith.cmpi slt, %[[NEXTI]], %[[UB]] : index
// CHECK:     %[[NEXTK:.+]] = arith.select %[[MORE]], %[[NEXTKS]], %{{.+}} : index
// A full tile: 16 queries and 32 keys.
// CHECK:     %[[FULLQ:.+]] = arith.cmpi eq, %{{.+}}, %c16{{.*}} : index
// CHECK:     %[[FULLK:.+]] = arith.cmpi eq, %{{.+}}, %c32{{.*}} : index
// CHECK:     %[[FULL:.+]] = arith.andi %[[FULLQ]], %[[FULLK]] : i1
// CHECK:     scf.if %[[FULL]] -> (tensor<?xf32>, tensor<?xf32>, tensor<?x32xf32>) {
// A tile whose every pair the span allows runs whole, without a position
// mask.
// CHECK:       scf.if %{{.+}} -> (tensor<?xf32>, tensor<?xf32>, tensor<?x32xf32>) {
// CHECK-NOT:     arith.select
// S^T = K Q^T: 16 queries make one vector, so a register block is 16 keys
// x 1 vector (16 accumulators, as 4 x 4 for wider tiles); each block first
// prefetches the same 16 rows of the next key tile's K and V (two 64-byte
// lines a row of 32 f32) and its share of the next query tile's rows (8
// rows), then runs over the 32 elements of the head dimension: a broadcast
// of the key as stored, a vector of the packed queries.
// CHECK:       scf.for %[[J:.+]] = %c0{{.*}} to %c32{{.*}} step %c16
// CHECK:         %[[KROW:.+]] = arith.addi %[[NEXTK]], %{{.+}} : index
// CHECK:         %[[KCLAMP:.+]] = arith.minsi %[[KROW]], %{{.+}} : index
// CHECK:         memref.prefetch %[[KBUF]][%{{.+}}, %{{.+}}, %[[KCLAMP]], %c0{{.*}}], read, locality<3>, data
// CHECK:         memref.prefetch %[[KBUF]][%{{.+}}, %{{.+}}, %[[KCLAMP]], %c16{{.*}}], read, locality<3>, data
// CHECK:         memref.prefetch %[[VBUF]]
// CHECK-COUNT-61: memref.prefetch %{{.+}}[%{{.+}}, %{{.+}}, %{{.+}}, %c{{.+}}], read, locality<3>, data : memref<1x2x80x32xf32, strided<[?, ?, ?, ?], offset: ?>>
// CHECK-COUNT-16: memref.prefetch %[[QBUF]]
// CHECK-NOT:     memref.prefetch
// CHECK:         scf.for %{{.+}} = %c0{{.*}} to %c32{{.*}} step %c1{{.*}} iter_args({{.+}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK:           %[[QV:.+]] = vector.transfer_read %[[QT]]{{.+}} : tensor<32x16xf32>, vector<16xf32>
// CHECK:           %[[KS:.+]] = tensor.extract %{{.+}} : tensor<32x32xf32>
// CHECK:           %[[KV:.+]] = vector.broadcast %[[KS]] : f32 to vector<16xf32>
// CHECK:           vector.fma %[[KV]], %[[QV]], %{{.+}} : vector<16xf32>
// CHECK-COUNT-3:   vector.fma
// The scores are stored as summed: the softmax applies the scale.
// CHECK-NOT:     arith.mulf
// CHECK:         vector.transfer_write
// The softmax update, 16 queries at a time, one per lane: the maxima down
// the 32 keys in 4 chains of x > y ? x : y (one vmaxps each; a NaN logit
// is left out of the maximum), then combined, with no lane reduction.
// CHECK:       scf.for %[[COLS:.+]] = %c0{{.*}} to %c16{{.*}} step %c16
// CHECK:         scf.for %{{.+}} = %c0{{.*}} to %c32{{.*}} step %c4{{.*}} iter_args({{.+}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK:           %[[X:.+]] = vector.transfer_read %{{.+}}[%{{.+}}, %[[COLS]]]{{.+}} : tensor<32x16xf32>, vector<16xf32>
// CHECK-NEXT:      %[[GT:.+]] = arith.cmpf ogt, %[[X]], %[[ACC:.+]] : vector<16xf32>
// CHECK-NEXT:      arith.select %[[GT]], %[[X]], %[[ACC]] : vector<16xi1>, vector<16xf32>
// CHECK-NOT:     vector.reduction
// CHECK-NOT:     vector.shuffle
// CHECK-NOT:     arith.maxnumf
// The maximum of the unscaled scores, times the (positive) scale 1/sqrt(32),
// is the maximum of the logits.
// CHECK:         %[[SCALEV:.+]] = arith.constant dense<0.176776692> : vector<16xf32>
// CHECK-NEXT:    %[[VMAX:.+]] = arith.mulf %{{.+}}, %[[SCALEV]] : vector<16xf32>
// CHECK:         %[[MOLD:.+]] = vector.transfer_read %{{.+}}[%[[COLS]]]{{.+}} : tensor<16xf32>, vector<16xf32>
// CHECK-NEXT:    %[[NEWGT:.+]] = arith.cmpf ogt, %[[VMAX]], %[[MOLD]] : vector<16xf32>
// CHECK-NEXT:    %[[MNEW:.+]] = arith.select %[[NEWGT]], %[[VMAX]], %[[MOLD]]
// A query with no allowed key yet subtracts 0.
// CHECK-NEXT:    %[[EMPTY:.+]] = arith.cmpf oeq, %[[MNEW]], %{{.+}} : vector<16xf32>
// CHECK:         %[[SUB:.+]] = arith.select %[[EMPTY]], %{{.+}}, %[[MNEW]]
// The exponent in base 2 from the unscaled score s: t = s c - m' log2(e),
// c = log2(e) / sqrt(32), one FMA; m' log2(e) once per 16 queries.
// CHECK:         %[[C:.+]] = arith.constant dense<0.255034864> : vector<16xf32>
// CHECK-NEXT:    %[[LOG2E:.+]] = arith.constant dense<1.44269502> : vector<16xf32>
// CHECK-NEXT:    %[[SUBL:.+]] = arith.mulf %[[SUB]], %[[LOG2E]] : vector<16xf32>
// CHECK-NEXT:    %[[OFF:.+]] = arith.negf %[[SUBL]] : vector<16xf32>
// Down the keys again, 4 at a time: exp(logit - max), stored, and summed
// in 4 chains. 2^t as 2^k 2^f in 11 operations: t clamped at -126 (a
// vmaxps that keeps a NaN), k rounded by adding and subtracting
// 1.5 * 2^23 + 126 (0x4B40007E), 2 * 2^f by Horner's rule (degree 5),
// 2^(k-1) from the sum's low bits shifted into the exponent field; no
// select.
// CHECK:         scf.for %{{.+}} = %c0{{.*}} to %c32{{.*}} step %c4{{.*}} iter_args({{.+}}) -> (tensor<32x16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK:           %[[S:.+]] = vector.transfer_read
// CHECK-NEXT:      %[[T:.+]] = math.fma %[[S]], %[[C]], %[[OFF]] : vector<16xf32>
// CHECK-NEXT:      %[[LOW:.+]] = arith.constant dense<-1.260000e+02> : vector<16xf32>
// CHECK-NEXT:      %[[CLAMP:.+]] = arith.cmpf ogt, %[[LOW]], %[[T]] : vector<16xf32>
// CHECK-NEXT:      %[[TC:.+]] = arith.select %[[CLAMP]], %[[LOW]], %[[T]]
// CHECK-NEXT:      %[[MAGIC:.+]] = arith.constant dense<0x4B40007E> : vector<16xf32>
// CHECK-NEXT:      %[[Y:.+]] = arith.addf %[[TC]], %[[MAGIC]] : vector<16xf32>
// CHECK-NEXT:      %[[K:.+]] = arith.subf %[[Y]], %[[MAGIC]] : vector<16xf32>
// CHECK-NEXT:      %[[F:.+]] = arith.subf %[[TC]], %[[K]] : vector<16xf32>
// CHECK-COUNT-5:   math.fma {{.+}}, %[[F]], {{.+}} : vector<16xf32>
// CHECK-NOT:       math.fma
// CHECK:           %[[YBITS:.+]] = arith.bitcast %[[Y]] : vector<16xf32> to vector<16xi32>
// CHECK:           %[[SBITS:.+]] = arith.shli %[[YBITS]], %{{.+}} : vector<16xi32>
// CHECK-NEXT:      %[[SCALE:.+]] = arith.bitcast %[[SBITS]] : vector<16xi32> to vector<16xf32>
// CHECK-NEXT:      %[[P:.+]] = arith.mulf %{{.+}}, %[[SCALE]] : vector<16xf32>
// CHECK-NEXT:      vector.transfer_write %[[P]]
// CHECK-NEXT:      arith.addf %{{.+}}, %[[P]] : vector<16xf32>
// CHECK-NOT:     math.roundeven
// CHECK-NOT:     arith.fptosi
// CHECK-NOT:     vector.reduction
// corr = exp(m - m') by the same exp, then l' = l * corr + the sums, and
// the new state written back 16 queries at a time.
// CHECK:         %[[DM:.+]] = arith.subf %[[MOLD]], %[[SUB]] : vector<16xf32>
// CHECK-NEXT:    arith.constant dense<1.44269502>
// CHECK-NEXT:    arith.mulf %[[DM]], %{{.+}} : vector<16xf32>
// CHECK:         arith.shli
// CHECK-NEXT:    %[[CS:.+]] = arith.bitcast %{{.+}} : vector<16xi32> to vector<16xf32>
// CHECK-NEXT:    %[[CORR:.+]] = arith.mulf %{{.+}}, %[[CS]] : vector<16xf32>
// CHECK:         %[[LOLD:.+]] = vector.transfer_read %{{.+}}[%[[COLS]]]{{.+}} : tensor<16xf32>, vector<16xf32>
// CHECK-NEXT:    %[[LC:.+]] = arith.mulf %[[LOLD]], %[[CORR]] : vector<16xf32>
// CHECK-NEXT:    %[[LNEW:.+]] = arith.addf %[[LC]], %{{.+}} : vector<16xf32>
// CHECK-NEXT:    vector.transfer_write %[[MNEW]], %{{.+}}[%[[COLS]]]
// CHECK-NEXT:    vector.transfer_write %[[LNEW]], %{{.+}}[%[[COLS]]]
// CHECK-NEXT:    vector.transfer_write %[[CORR]], %{{.+}}[%[[COLS]]]
// P V: the rescaled output rows stay in registers across the 32 keys, 8
// rows x 2 vectors of the head dimension of 32; P's element (query i,
// key k) broadcast from the transposed probabilities at [k, i].
// CHECK:       scf.for %[[I0:.+]] = %c0{{.*}} to %c16{{.*}} step %c8
// CHECK:         %[[ROW:.+]] = arith.addi %[[I0]], %c0{{.*}} : index
// CHECK:         arith.mulf %{{.+}}, %{{.+}} : vector<16xf32>
// CHECK:         scf.for %[[KK:.+]] = %c0{{.*}} to %c32{{.*}} step %c1{{.*}} iter_args(
// CHECK:           %[[PS:.+]] = tensor.extract %{{.+}}[%[[KK]], %[[ROW]]] : tensor<32x16xf32>
// CHECK-NEXT:      vector.broadcast %[[PS]] : f32 to vector<16xf32>
// CHECK-COUNT-16:  vector.fma
// A tile on the span's edge (here the causal diagonal): two halves of 8
// query rows. A half whose rows see none of the tile's keys skips it; one
// whose keys all lie in one half of the tile computes just those 16 keys
// (from key 0 or 16 of the tile), the other all 32; 8 queries are one
// vector of 8, a register block 16 keys. A half prefetches the same part
// of the next tiles: its keys' rows from the same column.
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
// CHECK:               tensor.extract_slice %[[QT]][0, %[[R0]]] [32, 8] [1, 1] : tensor<32x16xf32> to tensor<32x8xf32>
// CHECK:               %[[NEXTKH:.+]] = arith.addi %[[NEXTK]], %[[COL]] : index
// CHECK:               %[[K0H:.+]] = arith.addi %{{.+}}, %[[COL]] : index
// CHECK:               tensor.extract_slice %{{.+}}[%{{.+}}, %{{.+}}, %[[K0H]], 0] [1, 1, 16, 32] [1, 1, 1, 1] : tensor<1x2x80x32xf32> to tensor<16x32xf32>
// CHECK:               scf.for %{{.+}} = %c0{{.*}} to %c16{{.*}} step %c16
// CHECK:                 arith.addi %[[NEXTKH]], %{{.+}} : index
// CHECK:                 memref.prefetch %[[KBUF]]
// CHECK:                 scf.for %{{.+}} = %c0{{.*}} to %c8{{.*}} step %c8
// CHECK:                   -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// CHECK-COUNT-16:            vector.fma {{.+}} : vector<8xf32>
// CHECK:               tensor.insert_slice %{{.+}} into %[[ACC]][%[[R0]], 0] [8, 32] [1, 1] : tensor<8x32xf32> into tensor<?x32xf32>
// CHECK:             } else {
// CHECK:               tensor.extract_slice %[[QT]][0, %[[R0]]] [32, 8] [1, 1] : tensor<32x16xf32> to tensor<32x8xf32>
// CHECK:               tensor.insert_slice %{{.+}} into %[[ACC]][%[[R0]], 0] [8, 32] [1, 1] : tensor<8x32xf32> into tensor<?x32xf32>
// Partial tiles: the linalg step, but for its products: each query row's
// scores as vector dot products over the row (one reduction a key), then
// the softmax's linalg ops, then P V with the row's accumulators in vectors.
// CHECK:     } else {
// CHECK:       scf.for
// CHECK-COUNT-2: vector.transfer_read {{.+}} vector<16xf32>
// CHECK:         scf.for
// CHECK:           arith.mulf {{.+}} : vector<16xf32>
// CHECK:           vector.fma
// CHECK:           vector.reduction <add>
// CHECK:           tensor.insert
// CHECK:       linalg.generic {{.+}} iterator_types = ["parallel", "reduction"]
// CHECK:       scf.for
// CHECK:         scf.for
// CHECK:           vector.fma
// CHECK:     }
// The last key tile taken whole, after the loop: it computes each row's
// 1 / l once, and its P V stores the output tile straight from the
// registers: each vector times its row's 1 / l, zero for a row with no
// allowed key. The accumulator is not written back. With each block of 16
// keys, its scores kernel prefetches the next tiles' K, V and Q rows (80
// lines) and then, to be written, 8 of the output rows P V stores (two
// lines each), from the tile's first query.
// CHECK:   %[[RESULT:.+]] = scf.if %[[PEEL]] -> (tensor<?x32xf32>) {
// CHECK:     scf.for %[[PJ:.+]] = %c0{{.*}} to %c32{{.*}} step %c16
// CHECK-COUNT-80: memref.prefetch %{{.+}}, read, locality<3>, data
// CHECK:       %[[PBLK:.+]] = arith.floordivsi %[[PJ]], %c16{{.*}} : index
// CHECK:       %[[POFF:.+]] = arith.muli %[[PBLK]], %c8{{.*}} : index
// CHECK:       %[[PROW0:.+]] = arith.addi %[[Q0:.+]], %[[POFF]] : index
// CHECK:       %[[PCLAMP:.+]] = arith.minsi %{{.+}}, %{{.+}} : index
// CHECK:       memref.prefetch %[[OBUF]][%{{.+}}, %{{.+}}, %[[PCLAMP]], %c0{{.*}}], write, locality<3>, data
// CHECK-COUNT-15: memref.prefetch %[[OBUF]][{{.+}}], write, locality<3>, data
// CHECK-NOT:   memref.prefetch
// CHECK:       scf.for
// CHECK:     %[[SOFTMAX:.+]]:4 = scf.for
// CHECK:     %[[INV:.+]] = linalg.generic {{.+}} ins(%[[SOFTMAX]]#2 : tensor<16xf32>)
// CHECK:       arith.divf
// CHECK:     %[[OSTATIC:.+]] = tensor.cast %[[OTILE]] : tensor<?x32xf32> to tensor<16x32xf32>
// CHECK:     scf.for %[[PI:.+]] = %c0{{.*}} to %c16{{.*}} step %c8{{.*}} iter_args(%{{.+}} = %[[OSTATIC]]) -> (tensor<16x32xf32>)
// CHECK:       %[[PROW:.+]] = arith.addi %[[PI]], %c0{{.*}} : index
// CHECK:       scf.for {{.+}} iter_args(%[[O:[^ ]+]] = %{{.+}}) -> (tensor<16x32xf32>)
// CHECK-COUNT-16: vector.fma
// CHECK:         %[[LROW:.+]] = tensor.extract %[[SOFTMAX]]#2[%[[PROW]]] : tensor<16xf32>
// CHECK-NEXT:    %[[NOKEY:.+]] = arith.cmpf oeq, %[[LROW]], %{{.+}} : f32
// CHECK-NEXT:    %[[IROW:.+]] = tensor.extract %[[INV]][%[[PROW]]] : tensor<16xf32>
// CHECK-NEXT:    %[[IVEC:.+]] = vector.broadcast %[[IROW]] : f32 to vector<16xf32>
// CHECK-NEXT:    %[[SCALED:.+]] = arith.mulf %{{.+}}, %[[IVEC]] : vector<16xf32>
// CHECK-NEXT:    %[[ZEROS:.+]] = arith.constant dense<0.000000e+00> : vector<16xf32>
// CHECK-NEXT:    %[[OUTV:.+]] = arith.select %[[NOKEY]], %[[ZEROS]], %[[SCALED]] : vector<16xf32>
// The block's rows inserted into one [8, 16] tile per vector of columns,
// written at its first row:
// CHECK:         vector.insert %[[OUTV]], %{{.+}} [0] : vector<16xf32> into vector<8x16xf32>
// CHECK-COUNT-7: vector.insert {{.+}} : vector<16xf32> into vector<8x16xf32>
// CHECK-NEXT:    vector.transfer_write %{{.+}}, %[[O]][%[[PROW]], %{{.+}}] {in_bounds = [true, true]} : vector<8x16xf32>, tensor<16x32xf32>
// Any other last tile (an edge, a partial tile) ran in the loop, with no
// second copy of its code here: the state is normalized into the output
// tile (zeros for a query tile with no key tile, whose sums are 0).
// CHECK:   } else {
// CHECK-NOT: vector.fma
// CHECK-NOT: linalg.fill
// CHECK:     arith.divf
// CHECK:     linalg.generic {{.+}} outs(%[[OTILE]] : tensor<?x32xf32>)
// CHECK-NOT: vector.fma
// CHECK-NOT: linalg.fill
// CHECK:   tensor.parallel_insert_slice %[[RESULT]] into %[[OUTS]]

// A softcap acts on the scaled scores: the scores kernel applies the scale
// (and the cap) as it stores them, and the exponent is (x - m') log2(e).
// CHECK-LABEL: func @softcapped
// CHECK:         scf.for %{{.+}} = %c0{{.*}} to %c32{{.*}} step %c1{{.*}} iter_args({{.+}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK-COUNT-16:  vector.fma
// CHECK:         %[[SC:.+]] = arith.mulf %{{.+}}, %{{.+}} : vector<16xf32>
// CHECK:         arith.mulf %[[SC]], %{{.+}} : vector<16xf32>
// CHECK-NEXT:    math.tanh
// CHECK:         vector.transfer_write
// CHECK:       arith.cmpf oeq, %{{.+}}, %{{.+}} : vector<16xf32>
// CHECK:       %[[SSUB:.+]] = arith.select %{{.+}}, %{{.+}}, %{{.+}} : vector<16xi1>, vector<16xf32>
// CHECK-NEXT:  %[[SLOG2E:.+]] = arith.constant dense<1.44269502> : vector<16xf32>
// CHECK:       scf.for %{{.+}} = %c0{{.*}} to %c32{{.*}} step %c4{{.*}} iter_args({{.+}}) -> (tensor<32x16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK:         %[[SX:.+]] = arith.subf %{{.+}}, %[[SSUB]] : vector<16xf32>
// CHECK-NEXT:    arith.mulf %[[SX]], %[[SLOG2E]] : vector<16xf32>
// CHECK-NOT:     math.fma %{{.+}}, %{{.+}}, %{{.+}} : vector<16xf32>
// CHECK:         arith.constant dense<0x4B40007E>
// AVX2-LABEL: func @block_causal
// Vectors of 8 (AVX2, 16 vector registers): 8 accumulators, S^T 4 keys x
// 2 vectors of 8 queries, P V 4 rows x 2 vectors of 8 of the head
// dimension (16 accumulators spilled to the stack).
// AVX2: vector.shuffle %{{.+}}, %{{.+}} [0, 8, 1, 9, 4, 12, 5, 13] : vector<8xf32>, vector<8xf32>
// AVX2-COUNT-23: vector.shuffle %{{.+}}, %{{.+}} {{\[}}{{.+}}] : vector<8xf32>, vector<8xf32>
// AVX2: -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// AVX2: scf.for %{{.+}} = %c0{{.*}} to %c16{{.*}} step %c8
// AVX2: arith.cmpf ogt, %{{.+}}, %{{.+}} : vector<8xf32>
// AVX2: -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)

// Without vector-width: no packing, prefetch or vector code.
// NOVEC-LABEL: func @block_causal
// NOVEC-NOT: vector.
// NOVEC-NOT: bufferization.to_buffer
// NOVEC-NOT: memref.prefetch
// NOVEC: return

// BADWIDTH: vector-width must be 0 or a power of two, got 12
func.func @block_causal(%q: tensor<1x2x80x32xf32>) -> tensor<1x2x80x32xf32> {
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<block 32>, causal = true} : tensor<1x2x80x32xf32>, tensor<1x2x80x32xf32>, tensor<1x2x80x32xf32> -> tensor<1x2x80x32xf32>
  return %0 : tensor<1x2x80x32xf32>
}

func.func @softcapped(%q: tensor<1x2x80x32xf32>) -> tensor<1x2x80x32xf32> {
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<full>, softcap = 30.0 : f32} : tensor<1x2x80x32xf32>, tensor<1x2x80x32xf32>, tensor<1x2x80x32xf32> -> tensor<1x2x80x32xf32>
  return %0 : tensor<1x2x80x32xf32>
}
