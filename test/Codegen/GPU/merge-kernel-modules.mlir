// RUN: masformer-opt %s --masformer-merge-kernel-modules | FileCheck %s

// Outlined kernels (each @main_kernel in a module of its own) move into the
// first gpu.module under their modules' names; a kernel whose name is free
// keeps it; the launches follow.
// Identical kernels (here @main_kernel_1's and @main_kernel's) are kept
// once.
// CHECK:       gpu.module @masformer_kernels {
// CHECK-NEXT:    gpu.func @masformer_matmul
// CHECK:         gpu.func @main_kernel(
// CHECK:         gpu.func @main_kernel_0(
// CHECK-NOT:     gpu.func
// CHECK:       }
// CHECK-NOT:   gpu.module
// CHECK:       func.func @main
// CHECK:       gpu.launch_func @masformer_kernels::@masformer_matmul
// CHECK:       gpu.launch_func @masformer_kernels::@main_kernel blocks
// CHECK:       gpu.launch_func @masformer_kernels::@main_kernel_0 blocks
// CHECK:       gpu.launch_func @masformer_kernels::@main_kernel blocks
module attributes {gpu.container_module} {
  gpu.module @masformer_kernels {
    gpu.func @masformer_matmul() kernel { gpu.return }
  }
  gpu.module @main_kernel {
    gpu.func @main_kernel(%a: memref<4xf32>) kernel {
      %c0 = arith.constant 0 : index
      %x = memref.load %a[%c0] : memref<4xf32>
      %y = arith.addf %x, %x : f32
      memref.store %y, %a[%c0] : memref<4xf32>
      gpu.return
    }
  }
  gpu.module @main_kernel_0 {
    gpu.func @main_kernel(%a: memref<4xf32>) kernel {
      %c0 = arith.constant 0 : index
      %x = memref.load %a[%c0] : memref<4xf32>
      %y = arith.mulf %x, %x : f32
      memref.store %y, %a[%c0] : memref<4xf32>
      gpu.return
    }
  }
  gpu.module @main_kernel_1 {
    gpu.func @main_kernel(%a: memref<4xf32>) kernel {
      %c0 = arith.constant 0 : index
      %x = memref.load %a[%c0] : memref<4xf32>
      %y = arith.addf %x, %x : f32
      memref.store %y, %a[%c0] : memref<4xf32>
      gpu.return
    }
  }
  func.func @main(%m: memref<4xf32>) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @masformer_kernels::@masformer_matmul blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
    gpu.launch_func @main_kernel::@main_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%m : memref<4xf32>)
    gpu.launch_func @main_kernel_0::@main_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%m : memref<4xf32>)
    gpu.launch_func @main_kernel_1::@main_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%m : memref<4xf32>)
    return
  }
}
