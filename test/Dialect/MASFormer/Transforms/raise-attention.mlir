// RUN: masformer-opt %s --masformer-raise-attention --split-input-file -verify-diagnostics | FileCheck %s
// RUN: not masformer-opt %s --masformer-raise-attention=strict --split-input-file 2>&1 | FileCheck %s --check-prefix=STRICT

// The importer's form of Q K^T, a Mul by 0.125, an added constant
// triu(-inf) mask, softmax and P V: raised with causal = true (the constant
// mask is recognized and dropped) and scale = 0.125.
#qk_q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>
#qk_k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>
#qk_o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#scalar = affine_map<(d0, d1, d2, d3) -> ()>
#mask2d = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
// CHECK-LABEL: func @scale_and_triu_mask
// CHECK-SAME: (%[[Q:.+]]: tensor<1x2x4x8xf32>, %[[K:.+]]: tensor<1x2x4x8xf32>, %[[V:.+]]: tensor<1x2x4x8xf32>)
// CHECK: %[[O:.+]] = masformer.attention %[[Q]], %[[K]], %[[V]] {causal = true, layer = 0 : i64, scale = 1.250000e-01 : f32, span = #masformer.span<full>}
// CHECK-NOT: linalg.softmax
// CHECK: return %[[O]]
func.func @scale_and_triu_mask(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %c = arith.constant dense<0.125> : tensor<f32>
  %triu = arith.constant dense<[[0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %kt_init = tensor.empty() : tensor<1x2x8x4xf32>
  %kt = linalg.transpose ins(%k : tensor<1x2x4x8xf32>) outs(%kt_init : tensor<1x2x8x4xf32>) permutation = [0, 1, 3, 2]
  %s_empty = tensor.empty() : tensor<1x2x4x4xf32>
  %s_init = linalg.fill ins(%zero : f32) outs(%s_empty : tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %s = linalg.generic {indexing_maps = [#qk_q, #qk_k, #qk_o], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %kt : tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) outs(%s_init : tensor<1x2x4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x2x4x4xf32>
  %scaled = linalg.generic {indexing_maps = [#id, #scalar, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s, %c : tensor<1x2x4x4xf32>, tensor<f32>) outs(%s_empty : tensor<1x2x4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.mulf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<1x2x4x4xf32>
  %masked = linalg.generic {indexing_maps = [#id, #mask2d, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%scaled, %triu : tensor<1x2x4x4xf32>, tensor<4x4xf32>) outs(%s_empty : tensor<1x2x4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<1x2x4x4xf32>
  %p = linalg.softmax dimension(3) ins(%masked : tensor<1x2x4x4xf32>) outs(%s_empty : tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %o_empty = tensor.empty() : tensor<1x2x4x8xf32>
  %o_init = linalg.fill ins(%zero : f32) outs(%o_empty : tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  %o = linalg.generic {indexing_maps = [#qk_q, #qk_k, #qk_o], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) outs(%o_init : tensor<1x2x4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// The attention probabilities are also returned (an "output attentions"
// model): raising would lose them, so the layer is reported, not skipped
// silently, and left as it is.
#qk_q = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>
#qk_k = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>
#qk_o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
// CHECK-LABEL: func @probabilities_escape
// CHECK-NOT: masformer.attention
// CHECK: linalg.softmax
// STRICT: error: cannot raise this attention layer to masformer.attention: the attention probabilities have other uses than P*V
func.func @probabilities_escape(%q: tensor<1x2x4x8xf32>, %kt: tensor<1x2x8x4xf32>, %v: tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %s_empty = tensor.empty() : tensor<1x2x4x4xf32>
  %s_init = linalg.fill ins(%zero : f32) outs(%s_empty : tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %s = linalg.generic {indexing_maps = [#qk_q, #qk_k, #qk_o], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %kt : tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) outs(%s_init : tensor<1x2x4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x2x4x4xf32>
  // expected-warning @+1 {{cannot raise this attention layer to masformer.attention: the attention probabilities have other uses than P*V}}
  %p = linalg.softmax dimension(3) ins(%s : tensor<1x2x4x4xf32>) outs(%s_empty : tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %o_empty = tensor.empty() : tensor<1x2x4x8xf32>
  %o_init = linalg.fill ins(%zero : f32) outs(%o_empty : tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  %o = linalg.generic {indexing_maps = [#qk_q, #qk_k, #qk_o], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) outs(%o_init : tensor<1x2x4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x2x4x8xf32>
  return %o, %p : tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>
}

// -----

// A softmax over a classifier's logits is not attention: no report.
// CHECK-LABEL: func @classifier
// CHECK: linalg.softmax
func.func @classifier(%x: tensor<2x10xf32>) -> tensor<2x10xf32> {
  %e = tensor.empty() : tensor<2x10xf32>
  %p = linalg.softmax dimension(1) ins(%x : tensor<2x10xf32>) outs(%e : tensor<2x10xf32>) -> tensor<2x10xf32>
  return %p : tensor<2x10xf32>
}
