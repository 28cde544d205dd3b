// RUN: masformer-opt %s --masformer-generalize-layout-ops --split-input-file | FileCheck %s
// RUN: masformer-opt %s --masformer-generalize-layout-ops --linalg-fuse-elementwise-ops --split-input-file | FileCheck %s --check-prefix=FUSED

// A transpose and a broadcast outside loops become generics with the
// permuted and the projected input maps.
// CHECK-DAG: #[[PERM:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>
// CHECK-DAG: #[[ID4:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
// CHECK-DAG: #[[BCAST:.+]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG: #[[ID3:.+]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-LABEL: func.func @layout_ops
// CHECK-NOT:   linalg.transpose
// CHECK-NOT:   linalg.broadcast
// CHECK:       linalg.generic {indexing_maps = [#[[PERM]], #[[ID4]]]
// CHECK:       linalg.generic {indexing_maps = [#[[BCAST]], #[[ID3]]]
func.func @layout_ops(%x: tensor<2x8x4x16xf32>, %m: tensor<2x8xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>) {
  %e = tensor.empty() : tensor<2x4x8x16xf32>
  %t = linalg.transpose ins(%x : tensor<2x8x4x16xf32>) outs(%e : tensor<2x4x8x16xf32>) permutation = [0, 2, 1, 3]
  %eb = tensor.empty() : tensor<2x4x8xf32>
  %b = linalg.broadcast ins(%m : tensor<2x8xf32>) outs(%eb : tensor<2x4x8xf32>) dimensions = [1]
  return %t, %b : tensor<2x4x8x16xf32>, tensor<2x4x8xf32>
}

// -----

// A transpose inside a loop (a tiled kernel's, which later passes match
// by name) stays.
// CHECK-LABEL: func.func @in_loop
// CHECK:       scf.forall
// CHECK:         linalg.transpose
func.func @in_loop(%x: tensor<4x8x16xf32>) -> tensor<4x16x8xf32> {
  %e = tensor.empty() : tensor<4x16x8xf32>
  %r = scf.forall (%i) in (4) shared_outs(%o = %e) -> (tensor<4x16x8xf32>) {
    %s = tensor.extract_slice %x[%i, 0, 0] [1, 8, 16] [1, 1, 1] : tensor<4x8x16xf32> to tensor<8x16xf32>
    %d = tensor.empty() : tensor<16x8xf32>
    %t = linalg.transpose ins(%s : tensor<8x16xf32>) outs(%d : tensor<16x8xf32>) permutation = [1, 0]
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %t into %o[%i, 0, 0] [1, 16, 8] [1, 1, 1] : tensor<16x8xf32> into tensor<4x16x8xf32>
    }
  }
  return %r : tensor<4x16x8xf32>
}

// -----

// The point: a head split and its bf16 rounding fuse into one generic that
// reads the activation through the permuted map and writes bf16.
// FUSED-LABEL: func.func @split_and_round
// FUSED:       %[[R:.+]] = linalg.generic {indexing_maps = [#{{.+}}, #{{.+}}], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%{{.+}} : tensor<2x8x4x16xf32>) outs(%{{.+}} : tensor<2x4x8x16xbf16>)
// FUSED:         arith.truncf
// FUSED-NOT:   linalg.generic
// FUSED:       return %[[R]]
func.func @split_and_round(%x: tensor<2x8x4x16xf32>) -> tensor<2x4x8x16xbf16> {
  %e = tensor.empty() : tensor<2x4x8x16xf32>
  %t = linalg.transpose ins(%x : tensor<2x8x4x16xf32>) outs(%e : tensor<2x4x8x16xf32>) permutation = [0, 2, 1, 3]
  %el = tensor.empty() : tensor<2x4x8x16xbf16>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%t : tensor<2x4x8x16xf32>) outs(%el : tensor<2x4x8x16xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %c = arith.truncf %in : f32 to bf16
    linalg.yield %c : bf16
  } -> tensor<2x4x8x16xbf16>
  return %r : tensor<2x4x8x16xbf16>
}
