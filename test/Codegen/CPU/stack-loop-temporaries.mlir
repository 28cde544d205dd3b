// RUN: masformer-opt %s --split-input-file --allow-unregistered-dialect --pass-pipeline="builtin.module(func.func(masformer-stack-loop-temporaries))" | FileCheck %s
// RUN: masformer-opt %s --split-input-file --allow-unregistered-dialect --pass-pipeline="builtin.module(func.func(masformer-stack-loop-temporaries{max-bytes=40000}))" | FileCheck %s --check-prefix=SMALL
// RUN: not masformer-opt %s --split-input-file --allow-unregistered-dialect --pass-pipeline="builtin.module(func.func(masformer-stack-loop-temporaries{max-bytes=-1}))" 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: masformer-stack-loop-temporaries: max-bytes must be non-negative, got -1

// A tile's temporaries: one slot each at the start of the parallel loop's
// body, the per-step ones included (one slot serves every step). A
// dynamic leading size takes its bound's rows (affine.min's constant, an
// arith.minsi's constant operand), viewed and cast back to the buffer's
// type. Under max-bytes=40000 the first two slots (16 KiB + 16 KiB) fit
// and the third stays on the heap.
// CHECK-LABEL: func.func @tile
// CHECK:         scf.forall (%[[I:.+]]) in (63) {
// CHECK-NEXT:      %[[STATE:.+]] = memref.alloca() {alignment = 64 : i64} : memref<64x64xf32>
// CHECK-NEXT:      %[[PACK:.+]] = memref.alloca() {alignment = 64 : i64} : memref<64x64xf32>
// CHECK-NEXT:      %[[SCORES:.+]] = memref.alloca() {alignment = 64 : i64} : memref<128x64xf32>
// CHECK-NEXT:      %[[ROWS:.+]] = affine.min
// CHECK-NEXT:      %[[VIEW:.+]] = memref.subview %[[STATE]][0, 0] [%[[ROWS]], 64] [1, 1] : memref<64x64xf32> to memref<?x64xf32, strided<[64, 1]>>
// CHECK-NEXT:      %[[ACC:.+]] = memref.cast %[[VIEW]] : memref<?x64xf32, strided<[64, 1]>> to memref<?x64xf32>
// CHECK-NEXT:      linalg.fill ins(%{{.+}} : f32) outs(%[[ACC]] : memref<?x64xf32>)
// CHECK-NEXT:      memref.store %{{.+}}, %[[PACK]]
// CHECK:           scf.for
// CHECK-NEXT:        %[[N:.+]] = arith.minsi
// CHECK-NEXT:        %[[SV:.+]] = memref.subview %[[SCORES]][0, 0] [%[[N]], 64] [1, 1]
// CHECK-NEXT:        %[[S:.+]] = memref.cast %[[SV]]
// CHECK-NEXT:        linalg.fill ins(%{{.+}} : f32) outs(%[[S]] : memref<?x64xf32>)
// CHECK-NOT:     memref.alloc(
// CHECK-NOT:     memref.alloc()
// SMALL-LABEL: func.func @tile
// SMALL-COUNT-2: memref.alloca()
// SMALL-NOT:     memref.alloca
// SMALL:         memref.alloc(%{{.+}}) {alignment = 64 : i64} : memref<?x64xf32>
func.func @tile(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %cst = arith.constant 0.0 : f32
  scf.forall (%i) in (63) {
    %rows = affine.min affine_map<(d0) -> (64, 4000 - d0 * 64)>(%i)
    %acc = memref.alloc(%rows) {alignment = 64 : i64} : memref<?x64xf32>
    linalg.fill ins(%cst : f32) outs(%acc : memref<?x64xf32>)
    %pack = memref.alloc() {alignment = 64 : i64} : memref<64x64xf32>
    memref.store %cst, %pack[%c0, %c0] : memref<64x64xf32>
    scf.for %k = %c0 to %n step %c1 {
      %keys = arith.minsi %n, %c128 : index
      %s = memref.alloc(%keys) {alignment = 64 : i64} : memref<?x64xf32>
      linalg.fill ins(%cst : f32) outs(%s : memref<?x64xf32>)
    }
  }
  return
}

// -----

// What stays on the heap: a buffer outside any parallel loop, one that a
// loop yields (it outlives its step), one passed to a call or to an op of
// unknown effects, one whose size has no bound, one whose dynamic size is
// not the leading one (a view of a slot would have another layout), and
// one inside an scf.parallel in the loop (its iterations would share the
// slot at once).
// CHECK-LABEL: func.func @stays
// CHECK-NOT:     memref.alloca
// CHECK-COUNT-7: memref.alloc
// CHECK-NOT:     memref.alloca
func.func private @consume(memref<16xf32>)
func.func @stays(%n: index, %init: memref<16xf32>) {
  %cst0 = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %outside = memref.alloc() : memref<16xf32>
  "test.use"(%outside) : (memref<16xf32>) -> ()
  scf.forall (%i) in (4) {
    %r = scf.for %k = %c0 to %n step %c1 iter_args(%b = %init) -> (memref<16xf32>) {
      %y = memref.alloc() : memref<16xf32>
      scf.yield %y : memref<16xf32>
    }
    memref.copy %r, %init : memref<16xf32> to memref<16xf32>
    %called = memref.alloc() : memref<16xf32>
    func.call @consume(%called) : (memref<16xf32>) -> ()
    %unknown = memref.alloc() : memref<16xf32>
    "test.use"(%unknown) : (memref<16xf32>) -> ()
    %unbounded = memref.alloc(%n) : memref<?xf32>
    memref.store %cst0, %unbounded[%c0] : memref<?xf32>
    %rows = affine.min affine_map<(d0) -> (8, d0)>(%n)
    %inner = memref.alloc(%rows) : memref<4x?xf32>
    memref.store %cst0, %inner[%c0, %c0] : memref<4x?xf32>
    scf.parallel (%j) = (%c0) to (%n) step (%c1) {
      %each = memref.alloc() : memref<16xf32>
      memref.store %cst0, %each[%c0] : memref<16xf32>
    }
  }
  return
}
