// RUN: masformer-opt %s --split-input-file --allow-unregistered-dialect --pass-pipeline="builtin.module(func.func(masformer-free-buffers-early))" | FileCheck %s

// Each buffer is freed after its last use, views included, so that the
// second buffer is allocated after the first is gone.
// CHECK-LABEL: func.func @chain
// CHECK:         %[[A:.*]] = memref.alloc()
// CHECK:         %[[V:.*]] = memref.subview %[[A]]
// CHECK:         "test.use"(%[[V]])
// CHECK-NEXT:    memref.dealloc %[[A]]
// CHECK-NEXT:    %[[B:.*]] = memref.alloc()
// CHECK:         %[[C:.*]] = memref.collapse_shape %[[B]]
// CHECK-NEXT:    "test.use"(%[[C]])
// CHECK-NEXT:    memref.dealloc %[[B]]
// CHECK-NEXT:    return
func.func @chain() {
  %a = memref.alloc() : memref<4x8xf32>
  %v = memref.subview %a[0, 0] [2, 8] [1, 1] : memref<4x8xf32> to memref<2x8xf32, strided<[8, 1]>>
  "test.use"(%v) : (memref<2x8xf32, strided<[8, 1]>>) -> ()
  %b = memref.alloc() : memref<4x8xf32>
  %c = memref.collapse_shape %b [[0, 1]] : memref<4x8xf32> into memref<32xf32>
  "test.use"(%c) : (memref<32xf32>) -> ()
  memref.dealloc %a : memref<4x8xf32>
  memref.dealloc %b : memref<4x8xf32>
  return
}

// -----

// A use inside a loop: the dealloc goes after the whole loop.
// CHECK-LABEL: func.func @nested
// CHECK:         scf.forall
// CHECK:           memref.store
// CHECK:         }
// CHECK-NEXT:    memref.dealloc
// CHECK-NEXT:    "test.other"()
func.func @nested(%f: f32) {
  %a = memref.alloc() : memref<8xf32>
  scf.forall (%i) in (8) {
    memref.store %f, %a[%i] : memref<8xf32>
  }
  "test.other"() : () -> ()
  memref.dealloc %a : memref<8xf32>
  return
}

// -----

// A buffer whose address leaves as an index keeps its dealloc where it was;
// one that flows through a region result is freed after that result's last
// use.
// CHECK-LABEL: func.func @stays
// CHECK:         memref.extract_aligned_pointer_as_index
// CHECK:         "test.other"()
// CHECK-NEXT:    memref.dealloc
func.func @stays() -> index {
  %a = memref.alloc() : memref<8xf32>
  %p = memref.extract_aligned_pointer_as_index %a : memref<8xf32> -> index
  "test.other"() : () -> ()
  memref.dealloc %a : memref<8xf32>
  return %p : index
}

// CHECK-LABEL: func.func @escapes
// CHECK:         scf.if
// CHECK:         "test.use"
// CHECK-NEXT:    memref.dealloc
func.func @escapes(%c: i1) {
  %a = memref.alloc() : memref<8xf32>
  %r = scf.if %c -> memref<8xf32> {
    scf.yield %a : memref<8xf32>
  } else {
    scf.yield %a : memref<8xf32>
  }
  "test.other"() : () -> ()
  "test.use"(%r) : (memref<8xf32>) -> ()
  memref.dealloc %a : memref<8xf32>
  return
}
