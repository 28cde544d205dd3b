// What the CPU pipeline's element-wise fusion makes of the ops between
// a model's kernels, with bf16 products (--masformer-lower-to-cpu
// precision=bf16): each activation a product reads is rounded to bf16 by
// the op that computes it, in the same pass over memory, and a head split
// (a transpose) rounds as it copies. Dynamic shapes: the rounding's sizes
// come from the producer's operands, so they do not count as a second use
// of its result, which would block the fusion.
//
// RUN: masformer-opt %s --masformer-lower-to-cpu="precision=bf16 tile-q=16 tile-kv=16" --mlir-print-ir-after=linalg-fuse-elementwise-ops -o /dev/null 2>&1 | FileCheck %s

// CHECK-LABEL: func.func @norm_then_product
// The norm's scale writes bf16 (no f32 tensor of its result, no generic
// that only rounds).
// CHECK:       %[[N:.+]] = linalg.generic {{.*}} ins(%{{.+}} : tensor<?x?x32xf32>) outs(%{{.+}} : tensor<?x?x32xbf16>)
// CHECK:         arith.mulf
// CHECK:         arith.truncf
// CHECK:       tensor.collapse_shape %[[N]]
// CHECK:       scf.forall
// CHECK-LABEL: func.func @split_heads
// CHECK:       %[[S:.+]] = linalg.generic {{.*}} ins(%{{.+}} : tensor<?x?x2x16xf32>) outs(%{{.+}} : tensor<?x2x?x16xbf16>)
// CHECK:         arith.truncf
// CHECK:       masformer.attention %[[S]], %[[S]], %[[S]]
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @norm_then_product(%x: tensor<?x?x32xf32>) -> tensor<?x64xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %d0 = tensor.dim %x, %c0 : tensor<?x?x32xf32>
  %d1 = tensor.dim %x, %c1 : tensor<?x?x32xf32>
  %e = tensor.empty(%d0, %d1) : tensor<?x?x32xf32>
  %two = arith.constant 2.0 : f32
  %n = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x : tensor<?x?x32xf32>) outs(%e : tensor<?x?x32xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.mulf %in, %two : f32
    linalg.yield %m : f32
  } -> tensor<?x?x32xf32>
  %f = tensor.collapse_shape %n [[0, 1], [2]] : tensor<?x?x32xf32> into tensor<?x32xf32>
  %w = arith.constant dense<0.5> : tensor<32x64xf32>
  %rows = tensor.dim %f, %c0 : tensor<?x32xf32>
  %ec = tensor.empty(%rows) : tensor<?x64xf32>
  %zero = arith.constant 0.0 : f32
  %init = linalg.fill ins(%zero : f32) outs(%ec : tensor<?x64xf32>) -> tensor<?x64xf32>
  %r = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%f, %w : tensor<?x32xf32>, tensor<32x64xf32>) outs(%init : tensor<?x64xf32>) {
  ^bb0(%in: f32, %in2: f32, %out: f32):
    %m = arith.mulf %in, %in2 : f32
    %s = arith.addf %out, %m : f32
    linalg.yield %s : f32
  } -> tensor<?x64xf32>
  return %r : tensor<?x64xf32>
}

func.func @split_heads(%x: tensor<?x?x2x16xf32>) -> tensor<?x2x?x16xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %d0 = tensor.dim %x, %c0 : tensor<?x?x2x16xf32>
  %d1 = tensor.dim %x, %c1 : tensor<?x?x2x16xf32>
  %e = tensor.empty(%d0, %d1) : tensor<?x2x?x16xf32>
  %q = linalg.transpose ins(%x : tensor<?x?x2x16xf32>) outs(%e : tensor<?x2x?x16xf32>) permutation = [0, 2, 1, 3]
  %o = masformer.attention %q, %q, %q {span = #masformer.span<full>, causal = true} : tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32> -> tensor<?x2x?x16xf32>
  return %o : tensor<?x2x?x16xf32>
}
