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
// The last two dimensions swapped, batched, across a 64-row block of the
// blocked transpose (rows 0-63, then row 64).
// CHECK-LABEL: func.func @batched_swap
// CHECK-NOT: linalg.transpose
// CHECK: %[[T4:.*]] = arith.constant dense_resource<[[W4:.*]]> : tensor<2x2x65xi8>
// CHECK: return %[[T4]]
// CHECK-LABEL: func.func @left_alone
// CHECK: linalg.transpose
// CHECK: [[W2]]: "0x08000000010000000400000002000000050000000300000006000000"
// CHECK: [[W3]]: "0x080000000000040008000C00100014000100050009000D0011001500020006000A000E0012001600030007000B000F0013001700"
// CHECK: [[W4]]: "0x0800000000020406080A0C0E10121416181A1C1E20222426282A2C2E30323436383A3C3E40424446484A4C4E50525456585A5C5E60626466686A6C6E70727476787A7C7E8001030507090B0D0F11131517191B1D1F21232527292B2D2F31333537393B3D3F41434547494B4D4F51535557595B5D5F61636567696B6D6F71737577797B7D7F81828486888A8C8E90929496989A9C9EA0A2A4A6A8AAACAEB0B2B4B6B8BABCBEC0C2C4C6C8CACCCED0D2D4D6D8DADCDEE0E2E4E6E8EAECEEF0F2F4F6F8FA01030507838587898B8D8F91939597999B9D9FA1A3A5A7A9ABADAFB1B3B5B7B9BBBDBFC1C3C5C7C9CBCDCFD1D3D5D7D9DBDDDFE1E3E5E7E9EBEDEFF1F3F5F7F90002040608"

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
func.func @batched_swap() -> tensor<2x2x65xi8> {
  %w = arith.constant dense<[[[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], [10, 11], [12, 13], [14, 15], [16, 17], [18, 19], [20, 21], [22, 23], [24, 25], [26, 27], [28, 29], [30, 31], [32, 33], [34, 35], [36, 37], [38, 39], [40, 41], [42, 43], [44, 45], [46, 47], [48, 49], [50, 51], [52, 53], [54, 55], [56, 57], [58, 59], [60, 61], [62, 63], [64, 65], [66, 67], [68, 69], [70, 71], [72, 73], [74, 75], [76, 77], [78, 79], [80, 81], [82, 83], [84, 85], [86, 87], [88, 89], [90, 91], [92, 93], [94, 95], [96, 97], [98, 99], [100, 101], [102, 103], [104, 105], [106, 107], [108, 109], [110, 111], [112, 113], [114, 115], [116, 117], [118, 119], [120, 121], [122, 123], [124, 125], [126, 127], [-128, -127]], [[-126, -125], [-124, -123], [-122, -121], [-120, -119], [-118, -117], [-116, -115], [-114, -113], [-112, -111], [-110, -109], [-108, -107], [-106, -105], [-104, -103], [-102, -101], [-100, -99], [-98, -97], [-96, -95], [-94, -93], [-92, -91], [-90, -89], [-88, -87], [-86, -85], [-84, -83], [-82, -81], [-80, -79], [-78, -77], [-76, -75], [-74, -73], [-72, -71], [-70, -69], [-68, -67], [-66, -65], [-64, -63], [-62, -61], [-60, -59], [-58, -57], [-56, -55], [-54, -53], [-52, -51], [-50, -49], [-48, -47], [-46, -45], [-44, -43], [-42, -41], [-40, -39], [-38, -37], [-36, -35], [-34, -33], [-32, -31], [-30, -29], [-28, -27], [-26, -25], [-24, -23], [-22, -21], [-20, -19], [-18, -17], [-16, -15], [-14, -13], [-12, -11], [-10, -9], [-8, -7], [-6, 0], [1, 2], [3, 4], [5, 6], [7, 8]]]> : tensor<2x65x2xi8>
  %e = tensor.empty() : tensor<2x2x65xi8>
  %t = linalg.transpose ins(%w : tensor<2x65x2xi8>) outs(%e : tensor<2x2x65xi8>) permutation = [0, 2, 1]
  return %t : tensor<2x2x65xi8>
}
// A transpose of a value that is not a constant stays.
func.func @left_alone(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %e = tensor.empty() : tensor<3x2xf32>
  %t = linalg.transpose ins(%x : tensor<2x3xf32>) outs(%e : tensor<3x2xf32>) permutation = [1, 0]
  return %t : tensor<3x2xf32>
}
