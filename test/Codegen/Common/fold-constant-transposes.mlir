// RUN: masformer-opt %s --masformer-fold-constant-transposes | FileCheck %s

// A weight transposed at compile time: the transpose is gone, the new
// constant holds the transposed elements (checked against numpy's
// transpose of the same values, byte for byte).

// CHECK-LABEL: func.func @lm_head
// CHECK-NOT: linalg.transpose
// CHECK: %[[T:.*]] = arith.constant dense_resource<[[W2:.*]]> : tensor<3x2xi32>
// CHECK: return %[[T]]
// CHECK-LABEL: func.func @rank3
// CHECK-NOT: linalg.transpose
// CHECK: %[[T3:.*]] = arith.constant dense_resource<[[W3:.*]]> : tensor<4x2x3xi16>
// CHECK: return %[[T3]]
// CHECK-LABEL: func.func @left_alone
// CHECK: linalg.transpose
// CHECK: [[W2]]: "0x08000000010000000400000002000000050000000300000006000000"
// CHECK: [[W3]]: "0x080000000000040008000C00100014000100050009000D0011001500020006000A000E0012001600030007000B000F0013001700"

func.func @lm_head() -> tensor<3x2xi32> {
  %w = arith.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi32>
  %e = tensor.empty() : tensor<3x2xi32>
  %t = linalg.transpose ins(%w : tensor<2x3xi32>) outs(%e : tensor<3x2xi32>) permutation = [1, 0]
  return %t : tensor<3x2xi32>
}
func.func @rank3(%x: tensor<2x3x4xf32>) -> tensor<4x2x3xi16> {
  %w = arith.constant dense<[[[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]], [[12, 13, 14, 15], [16, 17, 18, 19], [20, 21, 22, 23]]]> : tensor<2x3x4xi16>
  %e = tensor.empty() : tensor<4x2x3xi16>
  %t = linalg.transpose ins(%w : tensor<2x3x4xi16>) outs(%e : tensor<4x2x3xi16>) permutation = [2, 0, 1]
  return %t : tensor<4x2x3xi16>
}
// A transpose of a value that is not a constant stays.
func.func @left_alone(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %e = tensor.empty() : tensor<3x2xf32>
  %t = linalg.transpose ins(%x : tensor<2x3xf32>) outs(%e : tensor<3x2xf32>) permutation = [1, 0]
  return %t : tensor<3x2xf32>
}
