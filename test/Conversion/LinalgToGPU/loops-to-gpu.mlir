// RUN: masformer-opt %s --pass-pipeline="builtin.module(func.func(masformer-loops-to-gpu),canonicalize,cse)" --split-input-file | FileCheck %s

// One thread per iteration of a 3-D loop: the iteration space linearized,
// 128 threads per block, as many blocks as it takes (at least one); each
// thread checks its index against the trip count and delinearizes it, the
// innermost dimension fastest.
// CHECK-LABEL: func.func @add(
// CHECK-DAG:   %[[D0:.+]] = memref.dim %arg0, %c0
// CHECK-DAG:   %[[D1:.+]] = memref.dim %arg0, %c1
// CHECK:       %[[T0:.+]] = arith.maxsi %[[D0]], %c0
// CHECK:       %[[T1:.+]] = arith.maxsi %[[D1]], %c0
// CHECK:       %[[P:.+]] = arith.muli %[[T0]], %[[T1]]
// CHECK:       %[[N:.+]] = arith.muli %[[P]], %c32
// CHECK:       %[[NB:.+]] = arith.ceildivsi %[[N]], %c128
// CHECK:       %[[G:.+]] = arith.maxsi %[[NB]], %c1
// CHECK:       gpu.launch blocks(%[[BX:.+]], %{{.+}}, %{{.+}}) in (%{{.+}} = %[[G]], %{{.+}} = %c1, %{{.+}} = %c1) threads(%[[TX:.+]], %{{.+}}, %{{.+}}) in (%{{.+}} = %c128, %{{.+}} = %c1, %{{.+}} = %c1)
// CHECK:         %[[B:.+]] = arith.muli %[[BX]], %c128
// CHECK:         %[[LIN:.+]] = arith.addi %[[B]], %[[TX]]
// CHECK:         %[[IN:.+]] = arith.cmpi ult, %[[LIN]], %[[N]]
// CHECK:         scf.if %[[IN]] {
// CHECK:           %[[K:.+]] = arith.remui %[[LIN]], %c32
// CHECK:           %[[R:.+]] = arith.divui %[[LIN]], %c32
// CHECK:           %[[J:.+]] = arith.remui %[[R]], %[[T1]]
// CHECK:           %[[I:.+]] = arith.divui %[[R]], %[[T1]]
// CHECK:           %[[X:.+]] = memref.load %arg0[%[[I]], %[[J]], %[[K]]]
// CHECK:           %[[Y:.+]] = memref.load %arg1[%[[K]]]
// CHECK:           %[[S:.+]] = arith.addf %[[X]], %[[Y]]
// CHECK:           memref.store %[[S]], %arg2[%[[I]], %[[J]], %[[K]]]
// CHECK:         gpu.terminator
// CHECK-NOT:   scf.parallel
func.func @add(%a: memref<?x?x32xf32>, %b: memref<32xf32>, %c: memref<?x?x32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %d0 = memref.dim %a, %c0 : memref<?x?x32xf32>
  %d1 = memref.dim %a, %c1 : memref<?x?x32xf32>
  scf.parallel (%i, %j, %k) = (%c0, %c0, %c0) to (%d0, %d1, %c32) step (%c1, %c1, %c1) {
    %x = memref.load %a[%i, %j, %k] : memref<?x?x32xf32>
    %y = memref.load %b[%k] : memref<32xf32>
    %s = arith.addf %x, %y : f32
    memref.store %s, %c[%i, %j, %k] : memref<?x?x32xf32>
    scf.reduce
  }
  return
}

// -----

// A loop with bounds and steps: iteration i of dimension d is lb + i * step.
// CHECK-LABEL: func.func @strided(
// CHECK:       %[[D:.+]] = arith.subi %arg1, %c2
// CHECK:       %[[T:.+]] = arith.ceildivsi %[[D]], %c3
// CHECK:       %[[N:.+]] = arith.maxsi %[[T]], %c0
// CHECK:       gpu.launch
// CHECK:         %[[LIN:.+]] = arith.addi
// CHECK:         arith.cmpi ult, %[[LIN]], %[[N]]
// CHECK:         %[[O:.+]] = arith.muli %[[LIN]], %c3
// CHECK:         %[[IV:.+]] = arith.addi %[[O]], %c2
// CHECK:         memref.store %{{.+}}, %arg0[%[[IV]]]
func.func @strided(%a: memref<?xf32>, %n: index) {
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %f = arith.constant 1.0 : f32
  scf.parallel (%i) = (%c2) to (%n) step (%c3) {
    memref.store %f, %a[%i] : memref<?xf32>
    scf.reduce
  }
  return
}

// -----

// A copy between buffers (bufferization's copies of slices) is such a loop.
// CHECK-LABEL: func.func @copy(
// CHECK:       gpu.launch
// CHECK:         %[[V:.+]] = memref.load %arg0[%{{.+}}, %{{.+}}] : memref<4x?xf32, strided<[?, 1], offset: ?>>
// CHECK:         memref.store %[[V]], %arg1[%{{.+}}, %{{.+}}] : memref<4x?xf32>
// CHECK-NOT:   memref.copy
func.func @copy(%a: memref<4x?xf32, strided<[?, 1], offset: ?>>, %b: memref<4x?xf32>) {
  memref.copy %a, %b : memref<4x?xf32, strided<[?, 1], offset: ?>> to memref<4x?xf32>
  return
}

// -----

// A reduction to a scalar (a sequential loop) and an op without loops run
// in one thread each.
// CHECK-LABEL: func.func @scalar(
// CHECK:       gpu.launch blocks({{.*}}) in ({{.*}} = %c1, {{.*}} = %c1, {{.*}} = %c1) threads({{.*}}) in ({{.*}} = %c1, {{.*}} = %c1, {{.*}} = %c1)
// CHECK-NEXT:    scf.for
// CHECK:         gpu.terminator
// CHECK:       gpu.launch blocks({{.*}}) in ({{.*}} = %c1, {{.*}} = %c1, {{.*}} = %c1) threads({{.*}}) in ({{.*}} = %c1, {{.*}} = %c1, {{.*}} = %c1)
// CHECK-NEXT:    %[[X:.+]] = memref.load %arg1[]
// CHECK-NEXT:    %[[Y:.+]] = arith.mulf %[[X]], %[[X]]
// CHECK-NEXT:    memref.store %[[Y]], %arg1[]
// CHECK-NEXT:    gpu.terminator
func.func @scalar(%a: memref<8xf32>, %r: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c8 step %c1 {
    %x = memref.load %a[%i] : memref<8xf32>
    %acc = memref.load %r[] : memref<f32>
    %s = arith.addf %x, %acc : f32
    memref.store %s, %r[] : memref<f32>
  }
  %x = memref.load %r[] : memref<f32>
  %y = arith.mulf %x, %x : f32
  memref.store %y, %r[] : memref<f32>
  return
}

// -----

// A reduction over the innermost loop: one warp per output element (4 per
// block). Each lane folds every 32nd element from its own, the warp
// combines the lanes' results with butterfly shuffles, and lane 0 folds
// them into the output's initial value.
// CHECK-LABEL: func.func @sumsq(
// CHECK:       %[[ROWS:.+]] = memref.dim %arg0, %c0
// CHECK:       %[[NB:.+]] = arith.ceildivsi %[[ROWS]], %c4
// CHECK:       %[[G:.+]] = arith.maxsi %[[NB]], %c1
// CHECK:       gpu.launch blocks(%[[BX:.+]], %{{.+}}, %{{.+}}) in (%{{.+}} = %[[G]], {{.*}} threads(%[[TX:.+]], %{{.+}}, %{{.+}}) in (%{{.+}} = %c128,
// CHECK:         %[[W:.+]] = arith.divui %[[TX]], %c32
// CHECK:         %[[LANE:.+]] = arith.remui %[[TX]], %c32
// CHECK:         %[[B:.+]] = arith.muli %[[BX]], %c4
// CHECK:         %[[ROW:.+]] = arith.addi %[[B]], %[[W]]
// CHECK:         %[[IN:.+]] = arith.cmpi ult, %[[ROW]], %[[ROWS]]
// CHECK:         scf.if %[[IN]] {
// CHECK:           %[[P:.+]] = scf.for %[[K:.+]] = %[[LANE]] to %c70 step %c32 iter_args(%[[ACC:.+]] = %cst) -> (f32) {
// CHECK:             %[[X:.+]] = memref.load %arg0[%[[ROW]], %[[K]]]
// CHECK:             %[[SQ:.+]] = arith.mulf %[[X]], %[[X]]
// CHECK:             %[[S:.+]] = arith.addf %[[ACC]], %[[SQ]]
// CHECK:             scf.yield %[[S]]
// CHECK:           %[[R16:.+]], %{{.+}} = gpu.shuffle xor %[[P]], %c16_i32, %c32_i32
// CHECK:           %[[A16:.+]] = arith.addf %[[P]], %[[R16]]
// CHECK-COUNT-4:   gpu.shuffle xor
// CHECK:           %[[FIRST:.+]] = arith.cmpi eq, %[[LANE]], %c0
// CHECK:           scf.if %[[FIRST]] {
// CHECK:             %[[OLD:.+]] = memref.load %arg1[%[[ROW]]]
// CHECK:             %[[NEW:.+]] = arith.addf %[[OLD]], %{{.+}}
// CHECK:             memref.store %[[NEW]], %arg1[%[[ROW]]]
// CHECK-NOT:   linalg.generic
#in = affine_map<(d0, d1) -> (d0, d1)>
#out = affine_map<(d0, d1) -> (d0)>
func.func @sumsq(%x: memref<?x70xf32>, %o: memref<?xf32>) {
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction"]} ins(%x : memref<?x70xf32>) outs(%o : memref<?xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.mulf %in, %in : f32
    %a = arith.addf %s, %out : f32
    linalg.yield %a : f32
  }
  return
}

// -----

// Other linalg ops become parallel loops first, then one thread per
// element; a reduction over a middle dimension is a sequential loop in the
// thread, with the inner parallel dimension a loop too.
// CHECK-LABEL: func.func @middle(
// CHECK:       gpu.launch
// CHECK:         scf.if
// CHECK:           scf.for
// CHECK:             scf.for
// CHECK-NOT:   scf.parallel
// CHECK-NOT:   linalg.generic
#in3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#out3 = affine_map<(d0, d1, d2) -> (d0, d2)>
func.func @middle(%x: memref<?x5x70xf32>, %o: memref<?x70xf32>) {
  linalg.generic {indexing_maps = [#in3, #out3], iterator_types = ["parallel", "reduction", "parallel"]} ins(%x : memref<?x5x70xf32>) outs(%o : memref<?x70xf32>) {
  ^bb0(%in: f32, %out: f32):
    %a = arith.addf %in, %out : f32
    linalg.yield %a : f32
  }
  return
}

// -----

// A copy of a rank-0 buffer: a load and a store in one thread.
// CHECK-LABEL: func.func @copy_scalar(
// CHECK:       gpu.launch blocks({{.*}}) in ({{.*}} = %c1, {{.*}} = %c1, {{.*}} = %c1) threads({{.*}}) in ({{.*}} = %c1, {{.*}} = %c1, {{.*}} = %c1)
// CHECK-NEXT:    %[[V:.+]] = memref.load %arg0[]
// CHECK-NEXT:    memref.store %[[V]], %arg1[]
// CHECK-NOT:   memref.copy
func.func @copy_scalar(%a: memref<f32>, %b: memref<f32>) {
  memref.copy %a, %b : memref<f32> to memref<f32>
  return
}
