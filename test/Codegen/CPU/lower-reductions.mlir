// RUN: masformer-opt %s --masformer-lower-reductions --canonicalize --split-input-file | FileCheck %s

// A row sum: the rows' loop around a reduction loop that carries the sum
// (loaded once, stored once), its add marked reassoc.
// CHECK-LABEL: func.func @row_sum
// CHECK-SAME:  (%[[X:.+]]: memref<?x768xf32>, %[[S:.+]]: memref<?xf32>)
// CHECK:       %[[ROWS:.+]] = memref.dim %[[X]], %c0
// CHECK:       scf.for %[[I:.+]] = %c0 to %[[ROWS]] step %c1 {
// CHECK:         %[[FIRST:.+]] = memref.load %[[S]][%[[I]]]
// CHECK:         %[[SUM:.+]] = scf.for %[[K:.+]] = %c0 to %c768 step %c1 iter_args(%[[ACC:.+]] = %[[FIRST]]) -> (f32) {
// CHECK:           %[[V:.+]] = memref.load %[[X]][%[[I]], %[[K]]]
// CHECK:           %[[NEXT:.+]] = arith.addf %[[V]], %[[ACC]] fastmath<reassoc> : f32
// CHECK:           scf.yield %[[NEXT]]
// CHECK:         memref.store %[[SUM]], %[[S]][%[[I]]]
// CHECK-NOT:   linalg.generic
func.func @row_sum(%x: memref<?x768xf32>, %s: memref<?xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%x : memref<?x768xf32>) outs(%s : memref<?xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %a = arith.addf %in, %acc : f32
    linalg.yield %a : f32
  }
  return
}

// -----

// A sum of squares of the centered rows (a norm's variance) with a
// broadcast operand, a scalar operand and the loop index: only the add
// that combines the sum is reassociated; the product and the subtraction
// keep their flags.
// CHECK-LABEL: func.func @variance
// CHECK:       scf.for %[[B:.+]] = %c0 to %{{.+}} step %c1 {
// CHECK:         scf.for %[[R:.+]] = %c0 to %{{.+}} step %c1 {
// CHECK:           memref.load %{{.+}}[%[[B]], %[[R]], %c0]
// CHECK:           scf.for %[[K:.+]] = %c0 to %c64 step %c1 iter_args(%[[ACC:.+]] = %{{.+}}) -> (f32) {
// CHECK:             %[[X:.+]] = memref.load %{{.+}}[%[[B]], %[[R]], %[[K]]]
// CHECK:             %[[M:.+]] = memref.load %{{.+}}[%[[B]], %[[R]], %c0]
// CHECK:             %[[C:.+]] = arith.subf %[[X]], %[[M]] : f32
// CHECK:             %[[KI:.+]] = arith.index_cast %[[K]]
// CHECK:             %[[SQ:.+]] = arith.mulf %[[C]], %[[C]] : f32
// CHECK:             arith.addf %[[ACC]], %{{.+}} fastmath<reassoc> : f32
// CHECK:           memref.store
func.func @variance(%x: memref<?x?x64xf32>, %mean: memref<?x?x1xf32>, %w: f32, %var: memref<?x?x1xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, 0)>, affine_map<(d0, d1, d2) -> ()>, affine_map<(d0, d1, d2) -> (d0, d1, 0)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %mean, %w : memref<?x?x64xf32>, memref<?x?x1xf32>, f32) outs(%var : memref<?x?x1xf32>) {
  ^bb0(%in: f32, %m: f32, %scale: f32, %acc: f32):
    %c = arith.subf %in, %m : f32
    %k = linalg.index 2 : index
    %ki = arith.index_cast %k : index to i32
    %kf = arith.sitofp %ki : i32 to f32
    %sq = arith.mulf %c, %c : f32
    %t = arith.mulf %sq, %scale : f32
    %u = arith.addf %t, %kf : f32
    %a = arith.addf %acc, %u : f32
    linalg.yield %a : f32
  }
  return
}

// -----

// Left to convert-linalg-to-loops: a reduction over the outer loop (a
// column sum), one whose output the reduction loop indexes, and tensors.
// CHECK-LABEL: func.func @not_rows
// CHECK-COUNT-2: linalg.generic
// CHECK-NOT:   scf.for
func.func @not_rows(%x: memref<?x16xf32>, %cols: memref<16xf32>, %t: tensor<4x16xf32>, %r: tensor<4xf32>) -> tensor<4xf32> {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]} ins(%x : memref<?x16xf32>) outs(%cols : memref<16xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %a = arith.addf %in, %acc : f32
    linalg.yield %a : f32
  }
  %s = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%t : tensor<4x16xf32>) outs(%r : tensor<4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %a = arith.addf %in, %acc : f32
    linalg.yield %a : f32
  } -> tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

// A row minimum (a quantized activation's range): LLVM does not vectorize
// minnum's loop, so the pass does: vectors of 16 through the whole
// vectors of the row, reduced across lanes, the rest one by one.
// CHECK-LABEL: func.func @row_min
// CHECK-SAME:  (%[[X:.+]]: memref<?x40xf32>, %[[S:.+]]: memref<?xf32>)
// CHECK:       scf.for %[[I:.+]] = %c0 to %{{.+}} step %c1 {
// CHECK:         %[[FIRST:.+]] = memref.load %[[S]][%[[I]]]
// CHECK:         %[[SPLAT:.+]] = vector.broadcast %[[FIRST]] : f32 to vector<16xf32>
// CHECK:         %[[VEC:.+]] = scf.for %[[K:.+]] = %c0 to %c32 step %c16 iter_args(%[[ACC:.+]] = %[[SPLAT]]) -> (vector<16xf32>) {
// CHECK:           %[[V:.+]] = vector.transfer_read %[[X]][%[[I]], %[[K]]]{{.*}} : memref<?x40xf32>, vector<16xf32>
// CHECK:           %[[M:.+]] = arith.minnumf %[[ACC]], %[[V]] : vector<16xf32>
// CHECK:           scf.yield %[[M]]
// CHECK:         %[[R:.+]] = vector.reduction <minnumf>, %[[VEC]] : vector<16xf32> into f32
// CHECK:         %[[TAIL:.+]] = scf.for %[[K2:.+]] = %c32 to %c40 step %c1 iter_args(%[[ACC2:.+]] = %[[R]]) -> (f32) {
// CHECK:           %[[X2:.+]] = memref.load %[[X]][%[[I]], %[[K2]]]
// CHECK:           arith.minnumf %[[ACC2]], %[[X2]] : f32
// CHECK:         memref.store %[[TAIL]], %[[S]][%[[I]]]
func.func @row_min(%x: memref<?x40xf32>, %s: memref<?xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%x : memref<?x40xf32>) outs(%s : memref<?xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %a = arith.minnumf %in, %acc : f32
    linalg.yield %a : f32
  }
  return
}

// -----

// A maximum over the rows of a transposed read (the reduction loop is not
// the input's last index): left scalar.
// CHECK-LABEL: func.func @column_max
// CHECK-NOT:   vector.
// CHECK:       arith.maxnumf {{.*}} fastmath<reassoc>
func.func @column_max(%x: memref<40x?xf32>, %s: memref<?xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%x : memref<40x?xf32>) outs(%s : memref<?xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %a = arith.maxnumf %in, %acc : f32
    linalg.yield %a : f32
  }
  return
}

// -----

// A row maximum of a view whose rows are not contiguous (a column of a
// transposed buffer): its vectors would not be plain loads; left scalar.
// CHECK-LABEL: func.func @strided_max
// CHECK-NOT:   vector.
// CHECK:       arith.maxnumf {{.*}} fastmath<reassoc>
func.func @strided_max(%x: memref<?x40xf32, strided<[1, ?]>>, %s: memref<?xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%x : memref<?x40xf32, strided<[1, ?]>>) outs(%s : memref<?xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %a = arith.maxnumf %in, %acc : f32
    linalg.yield %a : f32
  }
  return
}
