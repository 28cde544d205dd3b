// RUN: masformer-opt %s --masformer-vectorize-row-copies --canonicalize --split-input-file | FileCheck %s

// A head split (the sequence and head dimensions swapped, head_dim kept
// innermost): loops over batch, heads and sequence around one vector read
// of the source row and one vector write of the destination's.
// CHECK-LABEL: func.func @head_split
// CHECK-SAME:  (%[[X:.+]]: memref<?x?x12x64xf32>, %[[Y:.+]]: memref<?x12x?x64xf32>)
// CHECK:       scf.for %[[B:.+]] =
// CHECK:         scf.for %[[H:.+]] = %c0 to %c12
// CHECK:           scf.for %[[S:.+]] =
// CHECK:             %[[V:.+]] = vector.transfer_read %[[X]][%[[B]], %[[S]], %[[H]], %c0], %{{.+}} {in_bounds = [true]} : memref<?x?x12x64xf32>, vector<64xf32>
// CHECK:             vector.transfer_write %[[V]], %[[Y]][%[[B]], %[[H]], %[[S]], %c0] {in_bounds = [true]} : vector<64xf32>, memref<?x12x?x64xf32>
// CHECK-NOT:   linalg.generic
func.func @head_split(%x: memref<?x?x12x64xf32>, %y: memref<?x12x?x64xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x : memref<?x?x12x64xf32>) outs(%y : memref<?x12x?x64xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  return
}

// -----

// A head merge that rounds to bf16 as it copies, from a strided view (a
// slice of a wider tensor): the rounding on the vector.
// CHECK-LABEL: func.func @merge_rounding
// CHECK:       %[[V:.+]] = vector.transfer_read {{.+}} : memref<2x4x?x32xf32, strided<[?, ?, 96, 1], offset: ?>>, vector<32xf32>
// CHECK:       %[[R:.+]] = arith.truncf %[[V]] : vector<32xf32> to vector<32xbf16>
// CHECK:       vector.transfer_write %[[R]], {{.+}} : vector<32xbf16>, memref<2x?x4x32xbf16>
// CHECK-NOT:   linalg.generic
func.func @merge_rounding(%x: memref<2x4x?x32xf32, strided<[?, ?, 96, 1], offset: ?>>, %y: memref<2x?x4x32xbf16>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x : memref<2x4x?x32xf32, strided<[?, ?, 96, 1], offset: ?>>) outs(%y : memref<2x?x4x32xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %r = arith.truncf %in : f32 to bf16
    linalg.yield %r : bf16
  }
  return
}

// -----

// Rows longer than 256 elements go in vectors of 64.
// CHECK-LABEL: func.func @long_rows
// CHECK:       scf.for %[[I:.+]] =
// CHECK:         scf.for %[[C:.+]] = %c0 to %c768 step %c64
// CHECK:           %[[V:.+]] = vector.transfer_read %{{.+}}[%[[I]], %[[C]]], %{{.+}} {in_bounds = [true]} : memref<?x768xf32>, vector<64xf32>
// CHECK:           vector.transfer_write %[[V]], %{{.+}}[%[[I]], %[[C]]] {in_bounds = [true]}
func.func @long_rows(%x: memref<?x768xf32>, %y: memref<?x768xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x : memref<?x768xf32>) outs(%y : memref<?x768xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  return
}

// -----

// Left to convert-linalg-to-loops: a transpose of the innermost dimension
// (rows do not stay rows), a dynamic row length, a row of 300 (past 256
// and not a multiple of 64), a broadcast, a body that computes, and a
// buffer strided in its last dimension.
// CHECK-LABEL: func.func @not_row_copies
// CHECK-COUNT-6: linalg.generic
// CHECK-NOT:   vector.transfer_read
func.func @not_row_copies(%a: memref<64x64xf32>, %b: memref<64x64xf32>,
                          %c: memref<?x?xf32>, %d: memref<?x?xf32>,
                          %e: memref<4x300xf32>, %f: memref<4x300xf32>,
                          %g: memref<64xf32>, %h: memref<4x64xf32>,
                          %i: memref<4x64xf32, strided<[1, 4]>>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%a : memref<64x64xf32>) outs(%b : memref<64x64xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%c : memref<?x?xf32>) outs(%d : memref<?x?xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%e : memref<4x300xf32>) outs(%f : memref<4x300xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%g : memref<64xf32>) outs(%h : memref<4x64xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%h : memref<4x64xf32>) outs(%h : memref<4x64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %x = arith.addf %in, %in : f32
    linalg.yield %x : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%i : memref<4x64xf32, strided<[1, 4]>>) outs(%h : memref<4x64xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  return
}
