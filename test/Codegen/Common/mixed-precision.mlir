// RUN: masformer-opt %s --masformer-mixed-precision --split-input-file | FileCheck %s
// RUN: masformer-opt %s --masformer-mixed-precision=attention=0 --split-input-file | FileCheck %s --check-prefix=NOATT
// RUN: masformer-opt %s --masformer-mixed-precision=head-dim-multiple=32 --split-input-file | FileCheck %s --check-prefix=HD32

// A product with an f32 weight: the weight becomes a bf16 constant at
// compile time (rounding to nearest even: 1 + 2^-8 is a tie, to 1.0; 3 +
// 2^-7 too, to 3.0), the activation gets a truncf, the body extends both
// to f32 and the result stays f32.
// CHECK-LABEL: func.func @product(
// CHECK-DAG:   %[[X:.+]] = arith.truncf %arg0 : tensor<4x16xf32> to tensor<4x16xbf16>
// CHECK-DAG:   %[[W:.+]] = arith.constant dense_resource<bf16_weight> : tensor<16x2xbf16>
// CHECK:       linalg.generic {{.*}} ins(%[[X]], %[[W]] : tensor<4x16xbf16>, tensor<16x2xbf16>) outs(%arg1 : tensor<4x2xf32>)
// CHECK-NEXT:  ^bb0(%[[A:.+]]: bf16, %[[B:.+]]: bf16, %[[C:.+]]: f32):
// CHECK-NEXT:    %[[EA:.+]] = arith.extf %[[A]] : bf16 to f32
// CHECK-NEXT:    %[[EB:.+]] = arith.extf %[[B]] : bf16 to f32
// CHECK-NEXT:    %[[M:.+]] = arith.mulf %[[EA]], %[[EB]] : f32
// CHECK-NEXT:    arith.addf %[[C]], %[[M]] : f32
// CHECK:       } -> tensor<4x2xf32>
// CHECK:       bf16_weight: "0x08000000803F0040404000C0{{(0{112})}}"
#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @product(%x: tensor<4x16xf32>, %c: tensor<4x2xf32>) -> tensor<4x2xf32> {
  %w = arith.constant dense<[[1.00390625, 2.0], [3.0078125, -2.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]]> : tensor<16x2xf32>
  %r = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : tensor<4x16xf32>, tensor<16x2xf32>) outs(%c : tensor<4x2xf32>) {
  ^bb0(%in: f32, %in2: f32, %out: f32):
    %m = arith.mulf %in, %in2 : f32
    %s = arith.addf %out, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x2xf32>
  return %r : tensor<4x2xf32>
}

// -----

// Products that keep f32: rotary frequencies times positions (k = 1, a
// constant and an activation: positions past 256 are not integers in
// bf16), a reduction shorter than 16, and two activations.
// CHECK-LABEL: func.func @kept_f32(
// CHECK-NOT:   truncf
// CHECK-NOT:   bf16
// CHECK:       return
#a3 = affine_map<(d0, d1, d2) -> (d0, d2)>
#b3 = affine_map<(d0, d1, d2) -> (d2, d1)>
#c3 = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @kept_f32(%pos: tensor<1x512xf32>, %x: tensor<4x8xf32>, %y: tensor<4x32xf32>, %z: tensor<32x4xf32>,
                    %c1: tensor<32x512xf32>, %c2: tensor<4x8xf32>, %c3: tensor<4x4xf32>) -> (tensor<32x512xf32>, tensor<4x8xf32>, tensor<4x4xf32>) {
  %freq = arith.constant dense<0.5> : tensor<32x1xf32>
  %r1 = linalg.generic {indexing_maps = [#a3, #b3, #c3], iterator_types = ["parallel", "parallel", "reduction"]} ins(%freq, %pos : tensor<32x1xf32>, tensor<1x512xf32>) outs(%c1 : tensor<32x512xf32>) {
  ^bb0(%in: f32, %in2: f32, %out: f32):
    %m = arith.mulf %in, %in2 : f32
    %s = arith.addf %out, %m : f32
    linalg.yield %s : f32
  } -> tensor<32x512xf32>
  %w = arith.constant dense<0.25> : tensor<8x8xf32>
  %r2 = linalg.generic {indexing_maps = [#a3, #b3, #c3], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%c2 : tensor<4x8xf32>) {
  ^bb0(%in: f32, %in2: f32, %out: f32):
    %m = arith.mulf %in, %in2 : f32
    %s = arith.addf %out, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %r3 = linalg.generic {indexing_maps = [#a3, #b3, #c3], iterator_types = ["parallel", "parallel", "reduction"]} ins(%y, %z : tensor<4x32xf32>, tensor<32x4xf32>) outs(%c3 : tensor<4x4xf32>) {
  ^bb0(%in: f32, %in2: f32, %out: f32):
    %m = arith.mulf %in, %in2 : f32
    %s = arith.addf %out, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32>
  return %r1, %r2, %r3 : tensor<32x512xf32>, tensor<4x8xf32>, tensor<4x4xf32>
}

// -----

// An attention's result feeding a product: the product reads the bf16
// result, with no truncf of its extension.
// CHECK-LABEL: func.func @attention_then_product(
// CHECK:       %[[O:.+]] = masformer.attention {{.*}} -> tensor<1x2x8x16xbf16>
// CHECK:       %[[C:.+]] = tensor.collapse_shape %[[O]]
// CHECK-NOT:   arith.truncf %{{.*}} : tensor<16x16xf32>
// CHECK:       linalg.generic {{.*}} ins(%[[C]], %{{.+}} : tensor<16x16xbf16>, tensor<16x16xbf16>)
// With attention=0 (the CPU pipeline on Intel's CPUs without AMX), attention stays f32
// and the product rounds its result like any other activation.
// NOATT-LABEL: func.func @attention_then_product(
// NOATT:       %[[O:.+]] = masformer.attention {{.*}} -> tensor<1x2x8x16xf32>
// NOATT:       %[[T:.+]] = arith.truncf %[[O]] : tensor<1x2x8x16xf32> to tensor<1x2x8x16xbf16>
// NOATT:       %[[C:.+]] = tensor.collapse_shape %[[T]]
// NOATT:       linalg.generic {{.*}} ins(%[[C]], %{{.+}} : tensor<16x16xbf16>, tensor<16x16xbf16>)
#a2 = affine_map<(d0, d1, d2) -> (d0, d2)>
#b2 = affine_map<(d0, d1, d2) -> (d2, d1)>
#c2 = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @attention_then_product(%q: tensor<1x2x8x16xf32>, %c: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %w = arith.constant dense<0.5> : tensor<16x16xf32>
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

// The heads merged back by a transpose (as exporters write it): the
// transpose of the bf16 result, in bf16, with no extension and no truncf;
// a query split off an activation by a transpose: the truncf on the
// activation, before the transpose, which then runs in bf16.
// CHECK-LABEL: func.func @transposed_heads(
// CHECK-SAME:  %[[X:.+]]: tensor<1x8x2x16xf32>
// CHECK:       %[[XL:.+]] = arith.truncf %[[X]] : tensor<1x8x2x16xf32> to tensor<1x8x2x16xbf16>
// CHECK:       %[[E:.+]] = tensor.empty() : tensor<1x2x8x16xbf16>
// CHECK:       %[[Q:.+]] = linalg.transpose ins(%[[XL]] : tensor<1x8x2x16xbf16>) outs(%[[E]] : tensor<1x2x8x16xbf16>) permutation = [0, 2, 1, 3]
// CHECK:       %[[O:.+]] = masformer.attention %[[Q]], %[[Q]], %[[Q]] {{.*}} -> tensor<1x2x8x16xbf16>
// CHECK:       %[[E2:.+]] = tensor.empty() : tensor<1x8x2x16xbf16>
// CHECK:       %[[T:.+]] = linalg.transpose ins(%[[O]] : tensor<1x2x8x16xbf16>) outs(%[[E2]] : tensor<1x8x2x16xbf16>) permutation = [0, 2, 1, 3]
// CHECK:       %[[C:.+]] = tensor.collapse_shape %[[T]]
// CHECK-NOT:   arith.truncf
// CHECK:       linalg.generic {{.*}} ins(%[[C]], %{{.+}} : tensor<8x32xbf16>, tensor<32x16xbf16>)
#a3 = affine_map<(d0, d1, d2) -> (d0, d2)>
#b3 = affine_map<(d0, d1, d2) -> (d2, d1)>
#c3 = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @transposed_heads(%x: tensor<1x8x2x16xf32>, %c: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %w = arith.constant dense<0.5> : tensor<32x16xf32>
  %eq = tensor.empty() : tensor<1x2x8x16xf32>
  %q = linalg.transpose ins(%x : tensor<1x8x2x16xf32>) outs(%eq : tensor<1x2x8x16xf32>) permutation = [0, 2, 1, 3]
  %o = masformer.attention %q, %q, %q {span = #masformer.span<full>, causal = true} : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32> -> tensor<1x2x8x16xf32>
  %eo = tensor.empty() : tensor<1x8x2x16xf32>
  %t = linalg.transpose ins(%o : tensor<1x2x8x16xf32>) outs(%eo : tensor<1x8x2x16xf32>) permutation = [0, 2, 1, 3]
  %f = tensor.collapse_shape %t [[0, 1], [2, 3]] : tensor<1x8x2x16xf32> into tensor<8x32xf32>
  %r = linalg.generic {indexing_maps = [#a3, #b3, #c3], iterator_types = ["parallel", "parallel", "reduction"]} ins(%f, %w : tensor<8x32xf32>, tensor<32x16xf32>) outs(%c : tensor<8x16xf32>) {
  ^bb0(%in: f32, %in2: f32, %out: f32):
    %m = arith.mulf %in, %in2 : f32
    %s = arith.addf %out, %m : f32
    linalg.yield %s : f32
  } -> tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}

// -----

// Query, key and value sliced off one projection (a fused QKV), read only
// through slices: the one truncf on the whole projection, before the
// slices (it then fuses into the op that computes the projection), each
// slice and its head split in bf16. A tensor that something else reads
// whole too keeps its slice's truncf after the slice.
// CHECK-LABEL: func.func @fused_projection(
// CHECK-SAME:  %[[P:.+]]: tensor<1x8x96xf32>, %[[R:.+]]: tensor<1x8x96xf32>
// CHECK:       %[[PL:.+]] = arith.truncf %[[P]] : tensor<1x8x96xf32> to tensor<1x8x96xbf16>
// CHECK-NOT:   arith.truncf %[[P]]
// CHECK-DAG:   tensor.extract_slice %[[PL]][0, 0, 0] [1, 8, 32] [1, 1, 1] : tensor<1x8x96xbf16> to tensor<1x8x32xbf16>
// CHECK-DAG:   tensor.extract_slice %[[PL]][0, 0, 32] [1, 8, 32] [1, 1, 1] : tensor<1x8x96xbf16> to tensor<1x8x32xbf16>
// CHECK-DAG:   %[[RS:.+]] = tensor.extract_slice %[[R]][0, 0, 64] [1, 8, 32] [1, 1, 1] : tensor<1x8x96xf32> to tensor<1x8x32xf32>
// CHECK-DAG:   arith.truncf %[[RS]] : tensor<1x8x32xf32> to tensor<1x8x32xbf16>
// CHECK:       masformer.attention {{.+}} : tensor<1x2x8x16xbf16>, tensor<1x2x8x16xbf16>, tensor<1x2x8x16xbf16> -> tensor<1x2x8x16xbf16>
func.func @fused_projection(%p: tensor<1x8x96xf32>, %r: tensor<1x8x96xf32>) -> (tensor<1x2x8x16xf32>, tensor<1x8x96xf32>) {
  %qs = tensor.extract_slice %p[0, 0, 0] [1, 8, 32] [1, 1, 1] : tensor<1x8x96xf32> to tensor<1x8x32xf32>
  %ks = tensor.extract_slice %p[0, 0, 32] [1, 8, 32] [1, 1, 1] : tensor<1x8x96xf32> to tensor<1x8x32xf32>
  %vs = tensor.extract_slice %r[0, 0, 64] [1, 8, 32] [1, 1, 1] : tensor<1x8x96xf32> to tensor<1x8x32xf32>
  %qe = tensor.expand_shape %qs [[0], [1], [2, 3]] output_shape [1, 8, 2, 16] : tensor<1x8x32xf32> into tensor<1x8x2x16xf32>
  %ke = tensor.expand_shape %ks [[0], [1], [2, 3]] output_shape [1, 8, 2, 16] : tensor<1x8x32xf32> into tensor<1x8x2x16xf32>
  %ve = tensor.expand_shape %vs [[0], [1], [2, 3]] output_shape [1, 8, 2, 16] : tensor<1x8x32xf32> into tensor<1x8x2x16xf32>
  %e = tensor.empty() : tensor<1x2x8x16xf32>
  %q = linalg.transpose ins(%qe : tensor<1x8x2x16xf32>) outs(%e : tensor<1x2x8x16xf32>) permutation = [0, 2, 1, 3]
  %k = linalg.transpose ins(%ke : tensor<1x8x2x16xf32>) outs(%e : tensor<1x2x8x16xf32>) permutation = [0, 2, 1, 3]
  %v = linalg.transpose ins(%ve : tensor<1x8x2x16xf32>) outs(%e : tensor<1x2x8x16xf32>) permutation = [0, 2, 1, 3]
  %o = masformer.attention %q, %k, %v {span = #masformer.span<full>, causal = true} : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32> -> tensor<1x2x8x16xf32>
  return %o, %r : tensor<1x2x8x16xf32>, tensor<1x8x96xf32>
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
// NOATT-LABEL: func.func @attention(
// NOATT-NOT:   truncf
// NOATT:       %[[O:.+]] = masformer.attention %arg0, %arg1, %arg2 mask(%arg3 : tensor<1x1x1x8xf32>) {{.*}} -> tensor<1x2x8x16xf32>
// NOATT-NOT:   extf
// NOATT:       return %[[O]]
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

// -----

// With head-dim-multiple=32 (the CPU pipeline with AMX, whose attention
// tiles take head dimensions that are multiples of 32): head_dim 64 takes
// bf16, head_dim 48 stays f32. By default (16), both take bf16.
// HD32-LABEL: func.func @head_dims(
// HD32:       masformer.attention {{.*}} -> tensor<1x1x8x64xbf16>
// HD32:       masformer.attention {{.*}} -> tensor<1x1x8x48xf32>
// CHECK-LABEL: func.func @head_dims(
// CHECK:       masformer.attention {{.*}} -> tensor<1x1x8x64xbf16>
// CHECK:       masformer.attention {{.*}} -> tensor<1x1x8x48xbf16>
func.func @head_dims(%a: tensor<1x1x8x64xf32>, %b: tensor<1x1x8x48xf32>) -> (tensor<1x1x8x64xf32>, tensor<1x1x8x48xf32>) {
  %x = masformer.attention %a, %a, %a {span = #masformer.span<full>, causal = true} : tensor<1x1x8x64xf32>, tensor<1x1x8x64xf32>, tensor<1x1x8x64xf32> -> tensor<1x1x8x64xf32>
  %y = masformer.attention %b, %b, %b {span = #masformer.span<full>, causal = true} : tensor<1x1x8x48xf32>, tensor<1x1x8x48xf32>, tensor<1x1x8x48xf32> -> tensor<1x1x8x48xf32>
  return %x, %y : tensor<1x1x8x64xf32>, tensor<1x1x8x48xf32>
}
