// RUN: masformer-opt %s --masformer-approximate-math | FileCheck %s

// GELU (tanh form): x^3 with the 3 a scalar operand becomes two
// multiplications, tanh a polynomial; no libm call is left.
// CHECK-LABEL: func.func @gelu
// CHECK-NOT: math.powf
// CHECK-NOT: math.tanh
// CHECK: linalg.generic
// CHECK-SAME: ins(%arg0 : tensor<4x8xf32>)
// CHECK: %[[SQ:.*]] = arith.mulf %[[IN:.*]], %[[IN]]
// CHECK: arith.mulf %[[IN]], %[[SQ]]
// CHECK-NOT: math.powf
// CHECK-NOT: math.tanh
func.func @gelu(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %three = arith.constant dense<3.0> : tensor<f32>
  %e = tensor.empty() : tensor<4x8xf32>
  %r = linalg.generic {
      indexing_maps = [affine_map<(a, b) -> (a, b)>, affine_map<(a, b) -> ()>,
                       affine_map<(a, b) -> (a, b)>],
      iterator_types = ["parallel", "parallel"]}
      ins(%x, %three : tensor<4x8xf32>, tensor<f32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %p: f32, %o: f32):
    %c = math.powf %a, %p : f32
    %t = math.tanh %c : f32
    linalg.yield %t : f32
  } -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @exp_erf
// CHECK-NOT: math.exp
// CHECK-NOT: math.erf
// CHECK: return
func.func @exp_erf(%x: f32) -> (f32, f32) {
  %e = math.exp %x : f32
  %r = math.erf %x : f32
  return %e, %r : f32, f32
}

// Other powers stay (a libm call).
// CHECK-LABEL: func.func @other_power
// CHECK: math.powf
func.func @other_power(%x: f32) -> f32 {
  %c = arith.constant 2.5 : f32
  %p = math.powf %x, %c : f32
  return %p : f32
}
