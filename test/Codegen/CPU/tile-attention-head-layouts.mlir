// RUN: masformer-opt %s --masformer-tile-attention="tile-q=64 tile-kv=64 vector-width=16 amx=1" --split-input-file | FileCheck %s
// RUN: masformer-opt %s --masformer-tile-attention="tile-q=64 tile-kv=64 vector-width=16" --split-input-file | FileCheck %s --check-prefix=NOAMX

// With AMX, the tiles read the queries, keys and values through their head
// splits ([batch, seq, heads, head_dim] transposed to [batch, heads, seq,
// head_dim], computing nothing else) and write the result through its head
// merge: the splits and the merge are erased, the keys' and values' packing
// loop and the query tiles take slices [b, rows, h, :] of the tensors the
// splits read (here slices of one fused projection), and the result is
// written as [batch, seq, heads, head_dim] for the merge's reader. Dynamic
// batch and sequence: the sizes come from those tensors.
#split = affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
// CHECK-LABEL: func.func @through_head_layouts
// CHECK-SAME:  (%[[Q:.+]]: tensor<?x?x2x64xbf16>, %[[KV:.+]]: tensor<?x?x256xbf16>)
// CHECK:       %[[KS:.+]] = tensor.extract_slice %[[KV]][0, 0, 0]
// CHECK:       %[[K:.+]] = tensor.expand_shape %[[KS]]
// CHECK:       %[[VS:.+]] = tensor.extract_slice %[[KV]][0, 0, 128]
// CHECK:       %[[V:.+]] = tensor.expand_shape %[[VS]]
// CHECK-NOT:   linalg.generic
// CHECK:       %[[SEQ:.+]] = tensor.dim %[[Q]], %c1
// CHECK:       scf.forall (%[[PB:.+]], %[[PH:.+]], %[[PT:.+]]) in (%{{.+}}, 2, %{{.+}}) shared_outs({{.+}}) -> (tensor<?x2x32x?xbf16>, tensor<?x2x?x128xbf16>)
// CHECK:         tensor.extract_slice %[[K]][%[[PB]], %{{.+}}, %[[PH]], 0] [1, 64, 1, 64] [1, 1, 1, 1] : tensor<?x?x2x64xbf16> to tensor<64x64xbf16>
// CHECK:         tensor.extract_slice %[[V]][%[[PB]], %{{.+}}, %[[PH]], 0] [1, 64, 1, 64] [1, 1, 1, 1] : tensor<?x?x2x64xbf16> to tensor<64x64xbf16>
// CHECK:       %[[OUT:.+]] = tensor.empty(%{{.+}}, %[[SEQ]]) : tensor<?x?x2x64xbf16>
// CHECK:       %[[R:.+]] = scf.forall (%[[B:.+]], %[[H:.+]], %[[T:.+]]) in (%{{.+}}, 2, %{{.+}}) shared_outs(%[[O:.+]] = %[[OUT]]) -> (tensor<?x?x2x64xbf16>)
// CHECK:         tensor.extract_slice %[[Q]][%[[B]], %{{.+}}, %[[H]], 0] [1, %{{.+}}, 1, 64] [1, 1, 1, 1] : tensor<?x?x2x64xbf16> to tensor<?x64xbf16>
// CHECK:         tensor.parallel_insert_slice %{{.+}} into %[[O]][%[[B]], %{{.+}}, %[[H]], 0] [1, %{{.+}}, 1, 64] [1, 1, 1, 1] : tensor<?x64xbf16> into tensor<?x?x2x64xbf16>
// CHECK-NOT:   linalg.generic {indexing_maps = [#{{.+}}, #{{.+}}], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
// CHECK:       return %[[R]] : tensor<?x?x2x64xbf16>
// NOAMX-LABEL: func.func @through_head_layouts
// NOAMX-COUNT-3: linalg.generic {indexing_maps = [#{{.+}}, #{{.+}}], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%{{.+}} : tensor<?x?x2x64xbf16>) outs(%{{.+}} : tensor<?x2x?x64xbf16>)
// NOAMX:       linalg.generic {indexing_maps = [#{{.+}}, #{{.+}}], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%{{.+}} : tensor<?x2x?x64xbf16>) outs(%{{.+}} : tensor<?x?x2x64xbf16>)
func.func @through_head_layouts(%q: tensor<?x?x2x64xbf16>, %kv: tensor<?x?x256xbf16>) -> tensor<?x?x2x64xbf16> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %b = tensor.dim %q, %c0 : tensor<?x?x2x64xbf16>
  %s = tensor.dim %q, %c1 : tensor<?x?x2x64xbf16>
  %ks = tensor.extract_slice %kv[0, 0, 0] [%b, %s, 128] [1, 1, 1] : tensor<?x?x256xbf16> to tensor<?x?x128xbf16>
  %k = tensor.expand_shape %ks [[0], [1], [2, 3]] output_shape [%b, %s, 2, 64] : tensor<?x?x128xbf16> into tensor<?x?x2x64xbf16>
  %vs = tensor.extract_slice %kv[0, 0, 128] [%b, %s, 128] [1, 1, 1] : tensor<?x?x256xbf16> to tensor<?x?x128xbf16>
  %v = tensor.expand_shape %vs [[0], [1], [2, 3]] output_shape [%b, %s, 2, 64] : tensor<?x?x128xbf16> into tensor<?x?x2x64xbf16>
  %e = tensor.empty(%b, %s) : tensor<?x2x?x64xbf16>
  %qt = linalg.generic {indexing_maps = [#split, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%q : tensor<?x?x2x64xbf16>) outs(%e : tensor<?x2x?x64xbf16>) {
  ^bb0(%in: bf16, %out: bf16):
    linalg.yield %in : bf16
  } -> tensor<?x2x?x64xbf16>
  %kt = linalg.generic {indexing_maps = [#split, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%k : tensor<?x?x2x64xbf16>) outs(%e : tensor<?x2x?x64xbf16>) {
  ^bb0(%in: bf16, %out: bf16):
    linalg.yield %in : bf16
  } -> tensor<?x2x?x64xbf16>
  %vt = linalg.generic {indexing_maps = [#split, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%v : tensor<?x?x2x64xbf16>) outs(%e : tensor<?x2x?x64xbf16>) {
  ^bb0(%in: bf16, %out: bf16):
    linalg.yield %in : bf16
  } -> tensor<?x2x?x64xbf16>
  %o = masformer.attention %qt, %kt, %vt {causal = true, span = #masformer.span<block 128>} : tensor<?x2x?x64xbf16>, tensor<?x2x?x64xbf16>, tensor<?x2x?x64xbf16> -> tensor<?x2x?x64xbf16>
  %me = tensor.empty(%b, %s) : tensor<?x?x2x64xbf16>
  %m = linalg.generic {indexing_maps = [#split, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%o : tensor<?x2x?x64xbf16>) outs(%me : tensor<?x?x2x64xbf16>) {
  ^bb0(%in: bf16, %out: bf16):
    linalg.yield %in : bf16
  } -> tensor<?x?x2x64xbf16>
  return %m : tensor<?x?x2x64xbf16>
}

// -----

// A split that something else reads too (a KV cache returns the keys) is
// kept, and the tiles read the keys it makes; a split that rounds as it
// copies computes, and is kept too; a merge that rounds likewise. The
// query's split, read by the attention only, is read through.
#split = affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
// CHECK-LABEL: func.func @kept_layouts
// CHECK-SAME:  (%[[Q:.+]]: tensor<1x128x2x64xbf16>, %[[K:.+]]: tensor<1x128x2x64xbf16>, %[[V:.+]]: tensor<1x128x2x64xf32>)
// CHECK:       %[[KT:.+]] = linalg.generic {{.+}} ins(%[[K]] : tensor<1x128x2x64xbf16>) outs(%{{.+}} : tensor<1x2x128x64xbf16>)
// CHECK:       %[[VT:.+]] = linalg.generic {{.+}} ins(%[[V]] : tensor<1x128x2x64xf32>) outs(%{{.+}} : tensor<1x2x128x64xbf16>)
// CHECK:         arith.truncf
// CHECK:       scf.forall
// CHECK:         tensor.extract_slice %[[KT]][%{{.+}}, %{{.+}}, %{{.+}}, 0] [1, 1, 64, 64] [1, 1, 1, 1] : tensor<1x2x128x64xbf16> to tensor<64x64xbf16>
// CHECK:         tensor.extract_slice %[[VT]][%{{.+}}, %{{.+}}, %{{.+}}, 0] [1, 1, 64, 64] [1, 1, 1, 1] : tensor<1x2x128x64xbf16> to tensor<64x64xbf16>
// CHECK:       %[[R:.+]] = scf.forall {{.+}} -> (tensor<1x2x128x64xbf16>)
// CHECK:         tensor.extract_slice %[[Q]][%{{.+}}, %{{.+}}, %{{.+}}, 0] [1, %{{.+}}, 1, 64] [1, 1, 1, 1] : tensor<1x128x2x64xbf16> to tensor<?x64xbf16>
// CHECK:       %[[M:.+]] = linalg.generic {{.+}} ins(%[[R]] : tensor<1x2x128x64xbf16>) outs(%{{.+}} : tensor<1x128x2x64xf32>)
// CHECK:         arith.extf
// CHECK:       return %[[M]], %[[KT]]
func.func @kept_layouts(%q: tensor<1x128x2x64xbf16>, %k: tensor<1x128x2x64xbf16>, %v: tensor<1x128x2x64xf32>) -> (tensor<1x128x2x64xf32>, tensor<1x2x128x64xbf16>) {
  %e = tensor.empty() : tensor<1x2x128x64xbf16>
  %qt = linalg.generic {indexing_maps = [#split, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%q : tensor<1x128x2x64xbf16>) outs(%e : tensor<1x2x128x64xbf16>) {
  ^bb0(%in: bf16, %out: bf16):
    linalg.yield %in : bf16
  } -> tensor<1x2x128x64xbf16>
  %kt = linalg.generic {indexing_maps = [#split, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%k : tensor<1x128x2x64xbf16>) outs(%e : tensor<1x2x128x64xbf16>) {
  ^bb0(%in: bf16, %out: bf16):
    linalg.yield %in : bf16
  } -> tensor<1x2x128x64xbf16>
  %vt = linalg.generic {indexing_maps = [#split, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%v : tensor<1x128x2x64xf32>) outs(%e : tensor<1x2x128x64xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %r = arith.truncf %in : f32 to bf16
    linalg.yield %r : bf16
  } -> tensor<1x2x128x64xbf16>
  %o = masformer.attention %qt, %kt, %vt {causal = true, span = #masformer.span<full>} : tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16> -> tensor<1x2x128x64xbf16>
  %me = tensor.empty() : tensor<1x128x2x64xf32>
  %m = linalg.generic {indexing_maps = [#split, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%o : tensor<1x2x128x64xbf16>) outs(%me : tensor<1x128x2x64xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %x = arith.extf %in : bf16 to f32
    linalg.yield %x : f32
  } -> tensor<1x128x2x64xf32>
  return %m, %kt : tensor<1x128x2x64xf32>, tensor<1x2x128x64xbf16>
}
