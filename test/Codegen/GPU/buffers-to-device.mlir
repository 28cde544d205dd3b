// RUN: masformer-opt %s --masformer-buffers-to-device --split-input-file | FileCheck %s
// RUN: masformer-opt %s --masformer-buffers-to-device="constants=arguments" --split-input-file | FileCheck %s --check-prefix=ARGS

// The argument is copied to the device at entry, the weight too (constants
// copied in every call), the intermediate buffer is a device allocation;
// the result is copied into a new host buffer; every device buffer is freed
// after its last use, a view's use included.
// CHECK-LABEL: func.func @main(
// CHECK-SAME:    %[[ARG:.+]]: memref<?x4xf32>) -> memref<?x4xf32>
// CHECK:       %[[N:.+]] = memref.dim %[[ARG]], %c0
// CHECK:       %[[DARG:.+]] = gpu.alloc (%[[N]]) : memref<?x4xf32>
// CHECK:       gpu.memcpy %[[DARG]], %[[ARG]]
// CHECK:       %[[G:.+]] = memref.get_global @w : memref<4xf32>
// CHECK:       %[[DW:.+]] = gpu.alloc () : memref<4xf32>
// CHECK:       gpu.memcpy %[[DW]], %[[G]]
// CHECK:       %[[N2:.+]] = memref.dim %[[DARG]], %c0
// CHECK:       %[[T:.+]] = gpu.alloc (%[[N2]]) : memref<?x4xf32>
// CHECK:       %[[V:.+]] = memref.collapse_shape %[[T]]
// CHECK:       gpu.launch_func @k::@add {{.*}} args(%[[DARG]] : memref<?x4xf32>, %[[DW]] : memref<4xf32>, %[[V]] : memref<?xf32>)
// CHECK-NEXT:  gpu.dealloc %[[DARG]]
// CHECK:       %[[O:.+]] = gpu.alloc (%[[N2]]) : memref<?x4xf32>
// CHECK:       gpu.launch_func @k::@add {{.*}} args(%[[T]] : memref<?x4xf32>
// CHECK-NEXT:  gpu.dealloc %[[T]]
// CHECK-NEXT:  gpu.dealloc %[[DW]]
// CHECK:       %[[N3:.+]] = memref.dim %[[O]], %c0
// CHECK:       %[[H:.+]] = memref.alloc(%[[N3]]) : memref<?x4xf32>
// CHECK:       gpu.memcpy %[[H]], %[[O]]
// CHECK-NEXT:  gpu.dealloc %[[O]]
// CHECK-NEXT:  return %[[H]]

// With constants=arguments, the weight is a trailing argument and the
// function lists the globals of those arguments.
// ARGS-LABEL: func.func @main(
// ARGS-SAME:    %[[ARG:.+]]: memref<?x4xf32>, %[[W:.+]]: memref<4xf32>) -> memref<?x4xf32>
// ARGS-SAME:    masformer.constants = [@w]
// ARGS-NOT:   memref.get_global
// ARGS:       gpu.launch_func @k::@add {{.*}} args(%{{.+}} : memref<?x4xf32>, %[[W]] : memref<4xf32>
// ARGS-NOT:   gpu.dealloc %[[W]]
module attributes {gpu.container_module} {
  memref.global "private" constant @w : memref<4xf32> = dense<[1.0, 2.0, 3.0, 4.0]>
  gpu.module @k {
    gpu.func @add(%a: memref<?x4xf32>, %b: memref<4xf32>, %c: memref<?xf32>) kernel {
      gpu.return
    }
  }
  func.func @main(%x: memref<?x4xf32>) -> memref<?x4xf32> {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %w = memref.get_global @w : memref<4xf32>
    %n = memref.dim %x, %c0 : memref<?x4xf32>
    %t = memref.alloc(%n) : memref<?x4xf32>
    %v = memref.collapse_shape %t [[0, 1]] : memref<?x4xf32> into memref<?xf32>
    gpu.launch_func @k::@add blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%x : memref<?x4xf32>, %w : memref<4xf32>, %v : memref<?xf32>)
    %o = memref.alloc(%n) : memref<?x4xf32>
    %ov = memref.collapse_shape %o [[0, 1]] : memref<?x4xf32> into memref<?xf32>
    gpu.launch_func @k::@add blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%t : memref<?x4xf32>, %w : memref<4xf32>, %ov : memref<?xf32>)
    return %o : memref<?x4xf32>
  }
}
