// RUN: masformer-opt %s --masformer-parallelize --split-input-file | FileCheck %s
// RUN: not masformer-opt %s --masformer-parallelize="grain=0" 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: error: --masformer-parallelize: grain must be positive

// An element-wise op over [batch, seq, hidden]: tiles of 1 x 8 rows, the
// hidden dimension whole.
// CHECK-LABEL: func.func @elementwise
// CHECK: scf.forall (%[[B:.*]], %[[S:.*]]) = (0, 0) to (%{{.*}}, %{{.*}}) step (1, 8)
// CHECK:   %[[XS:.*]] = tensor.extract_slice %arg0[%[[B]], %[[S]], 0] [1, %{{.*}}, 768]
// CHECK:   linalg.generic {{.*}} ins(%[[XS]] : tensor<1x?x768xf32>)
// CHECK:   scf.forall.in_parallel
func.func @elementwise(%x: tensor<?x?x768xf32>, %init: tensor<?x?x768xf32>) -> tensor<?x?x768xf32> {
  %r = linalg.generic {
      indexing_maps = [affine_map<(b, s, d) -> (b, s, d)>, affine_map<(b, s, d) -> (b, s, d)>],
      iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : tensor<?x?x768xf32>) outs(%init : tensor<?x?x768xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = math.tanh %a : f32
    linalg.yield %t : f32
  } -> tensor<?x?x768xf32>
  return %r : tensor<?x?x768xf32>
}

// -----

// A row reduction (a LayerNorm mean): the rows in parallel, the reduction
// whole in each task.
// CHECK-LABEL: func.func @row_sum
// CHECK: scf.forall (%{{.*}}) = (0) to (2048) step (8)
// CHECK:   linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK-SAME: ins(%{{.*}} : tensor<8x768xf32>)
func.func @row_sum(%x: tensor<2048x768xf32>, %init: tensor<2048xf32>) -> tensor<2048xf32> {
  %r = linalg.generic {
      indexing_maps = [affine_map<(s, d) -> (s, d)>, affine_map<(s, d) -> (s)>],
      iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<2048x768xf32>) outs(%init : tensor<2048xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %o : f32
    linalg.yield %s : f32
  } -> tensor<2048xf32>
  return %r : tensor<2048xf32>
}

// -----

// Small static ops and ops inside loops stay serial.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: scf.forall
func.func @left_alone(%x: tensor<16x16xf32>, %n: index) -> tensor<16x16xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %x) -> tensor<16x16xf32> {
    %e = tensor.empty() : tensor<16x16xf32>
    %t = linalg.generic {
        indexing_maps = [affine_map<(a, b) -> (a, b)>, affine_map<(a, b) -> (a, b)>],
        iterator_types = ["parallel", "parallel"]}
        ins(%acc : tensor<16x16xf32>) outs(%e : tensor<16x16xf32>) {
    ^bb0(%a: f32, %o: f32):
      %s = arith.addf %a, %a : f32
      linalg.yield %s : f32
    } -> tensor<16x16xf32>
    scf.yield %t : tensor<16x16xf32>
  }
  %e2 = tensor.empty() : tensor<16x16xf32>
  %u = linalg.generic {
      indexing_maps = [affine_map<(a, b) -> (a, b)>, affine_map<(a, b) -> (a, b)>],
      iterator_types = ["parallel", "parallel"]}
      ins(%r : tensor<16x16xf32>) outs(%e2 : tensor<16x16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.mulf %a, %a : f32
    linalg.yield %s : f32
  } -> tensor<16x16xf32>
  return %u : tensor<16x16xf32>
}

// -----

// A layer norm as the importer writes it: the row sums, the centered rows,
// their sum of squares (read through a reshape, as [batch, seq, 1, d]) and
// the scaling. Only the scaling's tiles read the other three: one parallel
// loop whose tile computes the sums, the centered rows and the squares of
// its own 8 rows (the centered rows once, though two ops read them), each
// tile's temporaries of the tile's size; nothing is left outside the loop.
#x3 = affine_map<(b, s, d) -> (b, s, d)>
#r3 = affine_map<(b, s, d) -> (b, s, 0)>
#w3 = affine_map<(b, s, d) -> (d)>
#x4 = affine_map<(b, s, o, d) -> (b, s, o, d)>
#r4 = affine_map<(b, s, o, d) -> (b, s, o)>
// CHECK-LABEL: func.func @layer_norm
// CHECK-SAME:  (%[[X:.+]]: tensor<?x?x768xf32>
// CHECK-NOT:   linalg.
// CHECK:       %[[R:.+]] = scf.forall (%[[B:.+]], %[[S:.+]]) = (0, 0) to (%{{.+}}, %{{.+}}) step (1, 8)
// CHECK:         %[[N:.+]] = affine.min
// CHECK:         tensor.extract_slice %[[X]][%[[B]], %[[S]], 0] [1, %[[N]], 768]
// CHECK:         %[[E1:.+]] = tensor.empty(%[[N]]) : tensor<1x?x1xf32>
// CHECK:         %[[F:.+]] = linalg.fill {{.+}} outs(%[[E1]] : tensor<1x?x1xf32>)
// CHECK:         %[[SUM:.+]] = linalg.generic {{.+}} iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%{{.+}} : tensor<1x?x1x768xf32>) outs(%[[F]] : tensor<1x?x1xf32>)
// CHECK:         %[[E2:.+]] = tensor.empty(%[[N]]) : tensor<1x?x768xf32>
// CHECK:         %[[C:.+]] = linalg.generic {{.+}} ins(%{{.+}}, %[[SUM]] : tensor<1x?x768xf32>, tensor<1x?x1xf32>) outs(%[[E2]] : tensor<1x?x768xf32>)
// CHECK:         %[[CE:.+]] = tensor.expand_shape %[[C]]
// CHECK:         %[[SQ:.+]] = linalg.generic {{.+}} iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%[[CE]] : tensor<1x?x1x768xf32>)
// CHECK-NOT:     linalg.generic {{.+}} ins(%{{.+}}, %[[SUM]]
// CHECK:         linalg.generic {{.+}} ins(%[[C]], %[[SQ]], %{{.+}}, %{{.+}} : tensor<1x?x768xf32>, tensor<1x?x1xf32>, tensor<768xf32>, tensor<768xf32>)
// CHECK:         scf.forall.in_parallel
// CHECK-NOT:   linalg.
// CHECK:       return %[[R]]
func.func @layer_norm(%x: tensor<?x?x768xf32>, %w: tensor<768xf32>, %bias: tensor<768xf32>) -> tensor<?x?x768xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %inv = arith.constant 0.00130208337 : f32
  %eps = arith.constant 1.0e-5 : f32
  %b = tensor.dim %x, %c0 : tensor<?x?x768xf32>
  %s = tensor.dim %x, %c1 : tensor<?x?x768xf32>
  %e0 = tensor.empty(%b, %s) : tensor<?x?x1xf32>
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %x4 = tensor.expand_shape %x [[0], [1], [2, 3]] output_shape [%b, %s, 1, 768] : tensor<?x?x768xf32> into tensor<?x?x1x768xf32>
  %sum = linalg.generic {indexing_maps = [#x4, #r4], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%x4 : tensor<?x?x1x768xf32>) outs(%z0 : tensor<?x?x1xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %a = arith.addf %in, %acc : f32
    linalg.yield %a : f32
  } -> tensor<?x?x1xf32>
  %ec = tensor.empty(%b, %s) : tensor<?x?x768xf32>
  %cen = linalg.generic {indexing_maps = [#x3, #r3, #x3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x, %sum : tensor<?x?x768xf32>, tensor<?x?x1xf32>) outs(%ec : tensor<?x?x768xf32>) {
  ^bb0(%in: f32, %t: f32, %o: f32):
    %m = arith.mulf %t, %inv : f32
    %d = arith.subf %in, %m : f32
    linalg.yield %d : f32
  } -> tensor<?x?x768xf32>
  %e1 = tensor.empty(%b, %s) : tensor<?x?x1xf32>
  %z1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %c4 = tensor.expand_shape %cen [[0], [1], [2, 3]] output_shape [%b, %s, 1, 768] : tensor<?x?x768xf32> into tensor<?x?x1x768xf32>
  %sq = linalg.generic {indexing_maps = [#x4, #r4], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%c4 : tensor<?x?x1x768xf32>) outs(%z1 : tensor<?x?x1xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %p = arith.mulf %in, %in : f32
    %a = arith.addf %p, %acc : f32
    linalg.yield %a : f32
  } -> tensor<?x?x1xf32>
  %eo = tensor.empty(%b, %s) : tensor<?x?x768xf32>
  %y = linalg.generic {indexing_maps = [#x3, #r3, #w3, #w3, #x3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%cen, %sq, %w, %bias : tensor<?x?x768xf32>, tensor<?x?x1xf32>, tensor<768xf32>, tensor<768xf32>) outs(%eo : tensor<?x?x768xf32>) {
  ^bb0(%c: f32, %v: f32, %g: f32, %h: f32, %o: f32):
    %m = arith.mulf %v, %inv : f32
    %a = arith.addf %m, %eps : f32
    %r = math.sqrt %a : f32
    %n = arith.divf %c, %r : f32
    %t = arith.mulf %n, %g : f32
    %u = arith.addf %t, %h : f32
    linalg.yield %u : f32
  } -> tensor<?x?x768xf32>
  return %y : tensor<?x?x768xf32>
}

// -----

// A producer that something else reads too (the row sums, returned) is
// not computed in the consumer's tiles: it keeps a loop of its own, and
// the consumer's tiles read its result.
// CHECK-LABEL: func.func @shared_producer
// CHECK:       %[[SUM:.+]] = scf.forall
// CHECK:         iterator_types = ["parallel", "reduction"]
// CHECK:       %[[Y:.+]] = scf.forall
// CHECK:         tensor.extract_slice %[[SUM]]
// CHECK-NOT:     iterator_types = ["parallel", "reduction"]
// CHECK:       return %[[Y]], %[[SUM]]
func.func @shared_producer(%x: tensor<2048x768xf32>, %init: tensor<2048xf32>, %out: tensor<2048x768xf32>) -> (tensor<2048x768xf32>, tensor<2048xf32>) {
  %sum = linalg.generic {
      indexing_maps = [affine_map<(s, d) -> (s, d)>, affine_map<(s, d) -> (s)>],
      iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<2048x768xf32>) outs(%init : tensor<2048xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %o : f32
    linalg.yield %s : f32
  } -> tensor<2048xf32>
  %y = linalg.generic {
      indexing_maps = [affine_map<(s, d) -> (s, d)>, affine_map<(s, d) -> (s)>, affine_map<(s, d) -> (s, d)>],
      iterator_types = ["parallel", "parallel"]}
      ins(%x, %sum : tensor<2048x768xf32>, tensor<2048xf32>) outs(%out : tensor<2048x768xf32>) {
  ^bb0(%a: f32, %t: f32, %o: f32):
    %d = arith.subf %a, %t : f32
    linalg.yield %d : f32
  } -> tensor<2048x768xf32>
  return %y, %sum : tensor<2048x768xf32>, tensor<2048xf32>
}
