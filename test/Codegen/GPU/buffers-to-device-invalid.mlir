// RUN: masformer-opt %s --masformer-buffers-to-device --split-input-file --verify-diagnostics

// Host code that reads a buffer: the buffer is device memory now.
func.func @host_read(%x: memref<4xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'memref.load' would access device memory on the host: the GPU pipeline needs every op that reads or writes a buffer in a kernel}}
  %v = memref.load %x[%c0] : memref<4xf32>
  return %v : f32
}

// -----

// Control flow on the host: "last use" needs one block.
// expected-error @+1 {{the GPU pipeline needs straight-line host code, but @branches has 2 blocks}}
func.func @branches(%x: memref<4xf32>) {
  cf.br ^bb1
^bb1:
  return
}

// -----

// A strided argument cannot be copied as one block of memory.
// expected-error @+1 {{argument #0 has type 'memref<4xf32, strided<[2]>>': the GPU pipeline copies only contiguous (identity layout) arguments to the device}}
func.func @strided(%x: memref<4xf32, strided<[2]>>) {
  %c1 = arith.constant 1 : index
  %v = memref.subview %x[0] [2] [1] : memref<4xf32, strided<[2]>> to memref<2xf32, strided<[2]>>
  return
}

