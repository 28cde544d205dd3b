// RUN: masformer-opt %s --masformer-mixed-precision --split-input-file | FileCheck %s

// A product with an f32 weight: the weight becomes a bf16 constant at
// compile time (rounding to nearest even: 1 + 2^-8 is a tie, to 1.0; 3 +
// 2^-7 too, to 3.0), the activation gets a truncf, the body extends both
// to f32 and the result stays f32.
// CHECK-LABEL: func.func @product(
// CHECK-DAG:   %[[X:.+]] = arith.truncf %arg0 : tensor<4x2xf32> to tensor<4x2xbf16>
// CHECK-DAG:   %[[W:.+]] = arith.constant dense_resource<bf16_weight> : tensor<2x2xbf16>
// CHECK:       linalg.generic {{.*}} ins(%[[X]], %[[W]] : tensor<4x2xbf16>, tensor<2x2xbf16>) outs(%arg1 : tensor<4x2xf32>)
// CHECK-NEXT:  ^bb0(%[[A:.+]]: bf16, %[[B:.+]]: bf16, %[[C:.+]]: f32):
// CHECK-NEXT:    %[[EA:.+]] = arith.extf %[[A]] : bf16 to f32
// CHECK-NEXT:    %[[EB:.+]] = arith.extf %[[B]] : bf16 to f32
// CHECK-NEXT:    %[[M:.+]] = arith.mulf %[[EA]], %[[EB]] : f32
// CHECK-NEXT:    arith.addf %[[C]], %[[M]] : f32
// CHECK:       } -> tensor<4x2xf32>
// CHECK:       bf16_weight: "0x08000000803F0040404000C0"
#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @product(%x: tensor<4x2xf32>, %c: tensor<4x2xf32>) -> tensor<4x2xf32> {
  %w = arith.constant dense<[[1.00390625, 2.0], [3.0078125, -2.0]]> : tensor<2x2xf32>
  %r = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : tensor<4x2xf32>, tensor<2x2xf32>) outs(%c : tensor<4x2xf32>) {
  ^bb0(%in: f32, %in2: f32, %out: f32):
    %m = arith.mulf %in, %in2 : f32
    %s = arith.addf %out, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x2xf32>
  return %r : tensor<4x2xf32>
}

// -----

// An attention's result feeding a product: the product reads the bf16
// result, with no truncf of its extension.
// CHECK-LABEL: func.func @attention_then_product(
// CHECK:       %[[O:.+]] = masformer.attention {{.*}} -> tensor<1x2x8x16xbf16>
// CHECK:       %[[C:.+]] = tensor.collapse_shape %[[O]]
// CHECK-NOT:   arith.truncf %{{.*}} : tensor<16x16xf32>
// CHECK:       linalg.generic {{.*}} ins(%[[C]], %{{.+}} : tensor<16x16xbf16>, tensor<16x16xbf16>)
#a2 = affine_map<(d0, d1, d2) -> (d0, d2)>
#b2 = affine_map<(d0, d1, d2) -> (d2, d1)>
#c2 = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @attention_then_product(%q: tensor<1x2x8x16xf32>, %w: tensor<16x16xf32>, %c: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %o = masformer.attention %q, %q, %q {span = #masformer.span<full>, causal = true} : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32> -> tensor<1x2x8x16xf32>
  %f = tensor.collapse_shape %o [[0, 1, 2], [3]] : tensor<1x2x8x16xf32> into tensor<16x16xf32>
  %r = linalg.generic {indexing_maps = [#a2, #b2, #c2], iterator_types = ["parallel", "parallel", "reduction"]} ins(%f, %w : tensor<16x16xf32>, tensor<16x16xf32>) outs(%c : tensor<16x16xf32>) {
  ^bb0(%in: f32, %in2: f32, %out: f32):
    %m = arith.mulf %in, %in2 : f32
    %s = arith.addf %out, %m : f32
    linalg.yield %s : f32
  } -> tensor<16x16xf32>
  return %r : tensor<16x16xf32>
}

// -----

// Attention with head_dim 16: bf16 query, key and value (one truncf each),
// the f32 mask as it is, the result extended back to f32. With head_dim 8
// (not a multiple of the bf16 kernel's 16) it stays f32.
// CHECK-LABEL: func.func @attention(
// CHECK-DAG:   %[[Q:.+]] = arith.truncf %arg0 : tensor<1x2x8x16xf32> to tensor<1x2x8x16xbf16>
// CHECK-DAG:   %[[K:.+]] = arith.truncf %arg1 : tensor<1x2x8x16xf32> to tensor<1x2x8x16xbf16>
// CHECK-DAG:   %[[V:.+]] = arith.truncf %arg2 : tensor<1x2x8x16xf32> to tensor<1x2x8x16xbf16>
// CHECK:       %[[O:.+]] = masformer.attention %[[Q]], %[[K]], %[[V]] mask(%arg3 : tensor<1x1x1x8xf32>) {{.*}} -> tensor<1x2x8x16xbf16>
// CHECK:       %[[R:.+]] = arith.extf %[[O]] : tensor<1x2x8x16xbf16> to tensor<1x2x8x16xf32>
// CHECK:       return %[[R]]
// CHECK-LABEL: func.func @small_head(
// CHECK-NOT:   truncf
// CHECK:       masformer.attention {{.*}} -> tensor<1x2x8x8xf32>
func.func @attention(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>, %m: tensor<1x1x1x8xf32>) -> tensor<1x2x8x16xf32> {
  %o = masformer.attention %q, %k, %v mask(%m : tensor<1x1x1x8xf32>) {span = #masformer.span<full>, causal = true} : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32> -> tensor<1x2x8x16xf32>
  return %o : tensor<1x2x8x16xf32>
}
func.func @small_head(%q: tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32> {
  %o = masformer.attention %q, %q, %q {span = #masformer.span<full>, causal = true} : tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32> -> tensor<1x2x8x8xf32>
  return %o : tensor<1x2x8x8xf32>
}
