// RUN: masformer-opt %s --masformer-outline-kernels --split-input-file -allow-unregistered-dialect | FileCheck %s

// Two layers' identical nests (different buffers, same types): one kernel,
// called twice with each layer's buffers; the constants are copied in, the
// buffers and the dynamic size are arguments. A nest that differs (another
// scale) gets its own kernel. The nested forall stays inside its kernel.

// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[A:.+]]: memref<16x8xf32>, %[[B:.+]]: memref<16x8xf32>, %[[C:.+]]: memref<16x8xf32>, %[[N:.+]]: index)
// CHECK-NOT: scf.forall
// CHECK: call @masformer_kernel_0(%[[A]], %[[N]], %[[B]])
// CHECK-NEXT: call @masformer_kernel_0(%[[B]], %[[N]], %[[C]])
// CHECK-NEXT: call @masformer_kernel_1(%[[C]], %[[N]], %[[A]])
// CHECK-NEXT: return
// CHECK: func.func private @masformer_kernel_0(%[[X:.+]]: memref<16x8xf32>, %[[M:.+]]: index, %[[Y:.+]]: memref<16x8xf32>)
// CHECK-DAG: %[[TWO:.+]] = arith.constant 2.0
// CHECK-DAG: %[[EIGHT:.+]] = arith.constant 8 : index
// CHECK: scf.forall (%[[I:.+]]) in (16)
// CHECK: scf.forall (%[[J:.+]]) in (%[[EIGHT]])
// CHECK: memref.load %[[X]][%[[I]], %[[J]]]
// CHECK: arith.mulf %{{.+}}, %[[TWO]]
// CHECK: arith.index_cast %[[M]]
// CHECK: memref.store %{{.+}}, %[[Y]][%[[I]], %[[J]]]
// CHECK: return
// CHECK: func.func private @masformer_kernel_1
// CHECK: arith.constant 3.0
// CHECK-NOT: func.func
func.func @main(%a: memref<16x8xf32>, %b: memref<16x8xf32>, %c: memref<16x8xf32>, %n: index) {
  %c8 = arith.constant 8 : index
  %two = arith.constant 2.0 : f32
  %three = arith.constant 3.0 : f32
  scf.forall (%i) in (16) {
    scf.forall (%j) in (%c8) {
      %x = memref.load %a[%i, %j] : memref<16x8xf32>
      %y = arith.mulf %x, %two : f32
      %z = arith.addf %y, %y : f32
      %u = arith.index_cast %n : index to i32
      memref.store %z, %b[%i, %j] : memref<16x8xf32>
    }
  }
  scf.forall (%i) in (16) {
    scf.forall (%j) in (%c8) {
      %x = memref.load %b[%i, %j] : memref<16x8xf32>
      %y = arith.mulf %x, %two : f32
      %z = arith.addf %y, %y : f32
      %u = arith.index_cast %n : index to i32
      memref.store %z, %c[%i, %j] : memref<16x8xf32>
    }
  }
  scf.forall (%i) in (16) {
    scf.forall (%j) in (%c8) {
      %x = memref.load %c[%i, %j] : memref<16x8xf32>
      %y = arith.mulf %x, %three : f32
      %z = arith.addf %y, %y : f32
      %u = arith.index_cast %n : index to i32
      memref.store %z, %a[%i, %j] : memref<16x8xf32>
    }
  }
  return
}

// -----

// Two entries share a kernel; a forall on tensors (with results) stays.

// CHECK-LABEL: func.func @main
// CHECK: call @masformer_kernel_0(%{{.+}})
// CHECK-LABEL: func.func @decode
// CHECK: call @masformer_kernel_0(%{{.+}})
// CHECK: scf.forall {{.*}} shared_outs
// CHECK: func.func private @masformer_kernel_0(
// CHECK-NOT: func.func
func.func @main(%a: memref<4xf32>) {
  %zero = arith.constant 0.0 : f32
  scf.forall (%i) in (4) {
    memref.store %zero, %a[%i] : memref<4xf32>
  }
  return
}
func.func @decode(%a: memref<4xf32>, %t: tensor<4xf32>) -> tensor<4xf32> {
  %zero = arith.constant 0.0 : f32
  scf.forall (%i) in (4) {
    memref.store %zero, %a[%i] : memref<4xf32>
  }
  %r = scf.forall (%i) in (4) shared_outs(%o = %t) -> tensor<4xf32> {
    %s = tensor.from_elements %zero : tensor<1xf32>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %s into %o[%i] [1] [1] : tensor<1xf32> into tensor<4xf32>
    }
  }
  return %r : tensor<4xf32>
}

// -----

// A module that already has the name: the kernel is renamed.

// CHECK-LABEL: func.func @main
// CHECK: call @[[K:masformer_kernel_0_[0-9]+]](
// CHECK: func.func private @masformer_kernel_0()
// CHECK: func.func private @[[K]](
func.func @main(%a: memref<4xf32>) {
  %zero = arith.constant 0.0 : f32
  scf.forall (%i) in (4) {
    memref.store %zero, %a[%i] : memref<4xf32>
  }
  return
}
func.func private @masformer_kernel_0() {
  return
}

// -----

// A view is recomputed inside from the buffer it views (its loads then fold
// onto that buffer, and no reassociated view crosses the call): the kernel
// takes the allocation and the dynamic sizes of its shape.

// CHECK-LABEL: func.func @views
// CHECK-SAME: (%[[SRC:.+]]: memref<?x96xf32>, %[[B:.+]]: index, %[[S:.+]]: index)
// CHECK: %[[E:.+]] = memref.expand_shape %[[SRC]]
// CHECK: call @masformer_kernel_0(%[[SRC]], %[[B]], %[[S]])
// CHECK: "test.use"(%[[E]])
// CHECK: func.func private @masformer_kernel_0(%[[KSRC:.+]]: memref<?x96xf32>, %[[KB:.+]]: index, %[[KS:.+]]: index)
// CHECK: %[[KE:.+]] = memref.expand_shape %[[KSRC]] {{\[}}[0, 1], [2]] output_shape [%[[KB]], %[[KS]], 96]
// CHECK: %[[KSUB:.+]] = memref.subview %[[KE]]
// CHECK: scf.forall
// CHECK: memref.store %{{.+}}, %[[KSUB]]
func.func @views(%src: memref<?x96xf32>, %b: index, %s: index) {
  %e = memref.expand_shape %src [[0, 1], [2]] output_shape [%b, %s, 96] : memref<?x96xf32> into memref<?x?x96xf32>
  %sub = memref.subview %e[0, 0, 0] [1, 1, 96] [1, 1, 1] : memref<?x?x96xf32> to memref<96xf32, strided<[1]>>
  %zero = arith.constant 0.0 : f32
  scf.forall (%i) in (96) {
    memref.store %zero, %sub[%i] : memref<96xf32, strided<[1]>>
  }
  "test.use"(%e) : (memref<?x?x96xf32>) -> ()
  return
}
