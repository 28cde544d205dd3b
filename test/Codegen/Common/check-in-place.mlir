// A decode entry's cache argument, bufferized: written in place when
// nothing reads its old contents after the write (the check passes and
// drops the attribute); copied when something does, or when it is not
// writable (the check fails, naming the argument).
// RUN: masformer-opt %s --split-input-file --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" --masformer-check-in-place -verify-diagnostics | FileCheck %s

// The new rows written after the kept ones, the run read back: in place.
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[C:[a-z0-9]+]]: memref<1x2x?x4xf32> {onnx.name = "past.0.key"}
// CHECK-NOT: memref.alloc
// CHECK: %[[W:.+]] = memref.subview %[[C]][0, 0, %{{.+}}, 0] [1, 2, 3, 4]
// CHECK: memref.copy %{{.+}}, %[[W]]
// CHECK: memref.subview %[[C]][0, 0, %{{.+}}, 0] [1, 2, %{{.+}}, 4]
func.func @step(%cache: tensor<1x2x?x4xf32> {masformer.in_place, bufferization.writable = true, onnx.name = "past.0.key"},
                %new: tensor<1x2x3x4xf32>, %start: index, %rows: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c3 = arith.constant 3 : index
  %end = arith.addi %start, %rows : index
  %total = arith.addi %rows, %c3 : index
  %w = tensor.insert_slice %new into %cache[0, 0, %end, 0] [1, 2, 3, 4] [1, 1, 1, 1]
      : tensor<1x2x3x4xf32> into tensor<1x2x?x4xf32>
  %run = tensor.extract_slice %w[0, 0, %start, 0] [1, 2, %total, 4] [1, 1, 1, 1]
      : tensor<1x2x?x4xf32> to tensor<1x2x?x4xf32>
  %x = tensor.extract %run[%c0, %c0, %c0, %c0] : tensor<1x2x?x4xf32>
  return %x : f32
}

// -----

// The old contents read after the write: bufferization must copy.
// expected-error @+1 {{@stale's argument 0 ('past.0.key') must be updated in place, but bufferization copied it: the caller would not see the update}}
func.func @stale(%cache: tensor<1x2x?x4xf32> {masformer.in_place, bufferization.writable = true, onnx.name = "past.0.key"},
                 %new: tensor<1x2x3x4xf32>, %at: index) -> (f32, f32) {
  %c0 = arith.constant 0 : index
  %w = tensor.insert_slice %new into %cache[0, 0, %at, 0] [1, 2, 3, 4] [1, 1, 1, 1]
      : tensor<1x2x3x4xf32> into tensor<1x2x?x4xf32>
  %x = tensor.extract %w[%c0, %c0, %at, %c0] : tensor<1x2x?x4xf32>
  %y = tensor.extract %cache[%c0, %c0, %at, %c0] : tensor<1x2x?x4xf32>
  return %x, %y : f32, f32
}

// -----

// Not writable (the entry was not prepared for it): copied.
// expected-error @+1 {{@readonly's argument 0 must be updated in place, but bufferization copied it}}
func.func @readonly(%cache: tensor<1x2x?x4xf32> {masformer.in_place, bufferization.writable = false},
                    %new: tensor<1x2x3x4xf32>, %at: index) -> f32 {
  %c0 = arith.constant 0 : index
  %w = tensor.insert_slice %new into %cache[0, 0, %at, 0] [1, 2, 3, 4] [1, 1, 1, 1]
      : tensor<1x2x3x4xf32> into tensor<1x2x?x4xf32>
  %x = tensor.extract %w[%c0, %c0, %at, %c0] : tensor<1x2x?x4xf32>
  return %x : f32
}

