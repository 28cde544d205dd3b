// RUN: masformer-opt %s --masformer-slice-elementwise-producers --canonicalize --split-input-file | FileCheck %s

// A bias add read only as three disjoint parts (query, key, value): each
// part computed on its own from the parts of the sum's operands; the
// whole sum is never made.
// CHECK-LABEL: func.func @qkv_bias
// CHECK-SAME:  (%[[X:.+]]: tensor<?x?x96xf32>, %[[B:.+]]: tensor<96xf32>)
// CHECK-DAG:   %[[XQ:.+]] = tensor.extract_slice %[[X]][0, 0, 0] [%{{.+}}, %{{.+}}, 32] [1, 1, 1]
// CHECK-DAG:   %[[BQ:.+]] = tensor.extract_slice %[[B]][0] [32] [1]
// CHECK:       linalg.generic {{.*}} ins(%[[XQ]], %[[BQ]] : tensor<?x?x32xf32>, tensor<32xf32>)
// CHECK-DAG:   %[[XK:.+]] = tensor.extract_slice %[[X]][0, 0, 32] [%{{.+}}, %{{.+}}, 32] [1, 1, 1]
// CHECK-DAG:   %[[BK:.+]] = tensor.extract_slice %[[B]][32] [32] [1]
// CHECK:       linalg.generic {{.*}} ins(%[[XK]], %[[BK]] : tensor<?x?x32xf32>, tensor<32xf32>)
// CHECK-DAG:   %[[XV:.+]] = tensor.extract_slice %[[X]][0, 0, 64] [%{{.+}}, %{{.+}}, 32] [1, 1, 1]
// CHECK-DAG:   %[[BV:.+]] = tensor.extract_slice %[[B]][64] [32] [1]
// CHECK:       linalg.generic {{.*}} ins(%[[XV]], %[[BV]] : tensor<?x?x32xf32>, tensor<32xf32>)
// CHECK-NOT:   tensor<?x?x96xf32>) outs
#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#bias = affine_map<(d0, d1, d2) -> (d2)>
func.func @qkv_bias(%x: tensor<?x?x96xf32>, %b: tensor<96xf32>) -> (tensor<?x?x32xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %d0 = tensor.dim %x, %c0 : tensor<?x?x96xf32>
  %d1 = tensor.dim %x, %c1 : tensor<?x?x96xf32>
  %e = tensor.empty(%d0, %d1) : tensor<?x?x96xf32>
  %s = linalg.generic {indexing_maps = [#id, #bias, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x, %b : tensor<?x?x96xf32>, tensor<96xf32>) outs(%e : tensor<?x?x96xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %t = arith.addf %a, %c : f32
    linalg.yield %t : f32
  } -> tensor<?x?x96xf32>
  %q = tensor.extract_slice %s[0, 0, 0] [%d0, %d1, 32] [1, 1, 1] : tensor<?x?x96xf32> to tensor<?x?x32xf32>
  %k = tensor.extract_slice %s[0, 0, 32] [%d0, %d1, 32] [1, 1, 1] : tensor<?x?x96xf32> to tensor<?x?x32xf32>
  %v = tensor.extract_slice %s[0, 0, 64] [%d0, %d1, 32] [1, 1, 1] : tensor<?x?x96xf32> to tensor<?x?x32xf32>
  return %q, %k, %v : tensor<?x?x32xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>
}

// -----

// Overlapping parts, a part along two dimensions, or a use other than a
// slice: the op stays whole (computing the parts would compute elements
// twice, or the whole is needed anyway).
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-3: linalg.generic {{.*}} ins(%{{.+}} : tensor<4x96xf32>)
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @kept(%x: tensor<4x96xf32>) -> (tensor<4x64xf32>, tensor<4x64xf32>, tensor<2x32xf32>, tensor<2x32xf32>, tensor<4x96xf32>, tensor<4x32xf32>) {
  %e = tensor.empty() : tensor<4x96xf32>
  %s = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x96xf32>) outs(%e : tensor<4x96xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = arith.mulf %a, %a : f32
    linalg.yield %t : f32
  } -> tensor<4x96xf32>
  %p = tensor.extract_slice %s[0, 0] [4, 64] [1, 1] : tensor<4x96xf32> to tensor<4x64xf32>
  %r = tensor.extract_slice %s[0, 32] [4, 64] [1, 1] : tensor<4x96xf32> to tensor<4x64xf32>
  %s2 = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x96xf32>) outs(%e : tensor<4x96xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = arith.addf %a, %a : f32
    linalg.yield %t : f32
  } -> tensor<4x96xf32>
  %u = tensor.extract_slice %s2[2, 0] [2, 32] [1, 1] : tensor<4x96xf32> to tensor<2x32xf32>
  %w = tensor.extract_slice %s2[0, 32] [2, 32] [1, 1] : tensor<4x96xf32> to tensor<2x32xf32>
  %s3 = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x96xf32>) outs(%e : tensor<4x96xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = arith.subf %a, %a : f32
    linalg.yield %t : f32
  } -> tensor<4x96xf32>
  %y = tensor.extract_slice %s3[0, 0] [4, 32] [1, 1] : tensor<4x96xf32> to tensor<4x32xf32>
  return %p, %r, %u, %w, %s3, %y : tensor<4x64xf32>, tensor<4x64xf32>, tensor<2x32xf32>, tensor<2x32xf32>, tensor<4x96xf32>, tensor<4x32xf32>
}

// -----

// One part alone (the last position's logits, say): only that part is
// computed.
// CHECK-LABEL: func.func @one_part
// CHECK:       %[[XS:.+]] = tensor.extract_slice %{{.+}}[3, 0] [1, 96] [1, 1]
// CHECK:       linalg.generic {{.*}} ins(%[[XS]] : tensor<1x96xf32>)
#id3 = affine_map<(d0, d1) -> (d0, d1)>
func.func @one_part(%x: tensor<4x96xf32>) -> tensor<1x96xf32> {
  %e = tensor.empty() : tensor<4x96xf32>
  %s = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x96xf32>) outs(%e : tensor<4x96xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = arith.mulf %a, %a : f32
    linalg.yield %t : f32
  } -> tensor<4x96xf32>
  %l = tensor.extract_slice %s[3, 0] [1, 96] [1, 1] : tensor<4x96xf32> to tensor<1x96xf32>
  return %l : tensor<1x96xf32>
}

// -----

// A slice in a loop (a product's row tile): computing the part there
// would compute it once per iteration; the op stays whole.
// CHECK-LABEL: func.func @in_loop
// CHECK:       %[[R:.+]] = linalg.generic {{.*}} ins(%{{.+}} : tensor<256x96xf32>)
// CHECK:       scf.forall
// CHECK:         tensor.extract_slice %[[R]]
#id4 = affine_map<(d0, d1) -> (d0, d1)>
func.func @in_loop(%x: tensor<256x96xf32>) -> tensor<256x96xbf16> {
  %e = tensor.empty() : tensor<256x96xbf16>
  %r = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<256x96xf32>) outs(%e : tensor<256x96xbf16>) {
  ^bb0(%a: f32, %o: bf16):
    %t = arith.truncf %a : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<256x96xbf16>
  %o = tensor.empty() : tensor<256x96xbf16>
  %y = scf.forall (%i) in (4) shared_outs(%out = %o) -> (tensor<256x96xbf16>) {
    %off = arith.muli %i, %i : index
    %t = tensor.extract_slice %r[%off, 0] [64, 96] [1, 1] : tensor<256x96xbf16> to tensor<64x96xbf16>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %t into %out[%off, 0] [64, 96] [1, 1] : tensor<64x96xbf16> into tensor<256x96xbf16>
    }
  }
  return %y : tensor<256x96xbf16>
}
