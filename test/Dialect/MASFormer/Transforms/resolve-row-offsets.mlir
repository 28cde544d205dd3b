// RUN: masformer-opt %s --masformer-resolve-row-offsets --split-input-file | FileCheck %s

// Blocks and sinks count from each row's first position: when every offset
// is 0 the op runs as it is (block-sparse); else a full op whose mask adds
// -inf outside each row's blocks and sinks, at positions i + 10 - off and
// j - off, sinks 0 <= j - off < 2 (one unsigned comparison).
// CHECK-LABEL: func @block_sink
// CHECK-SAME: (%[[Q:.+]]: tensor<2x4x1x16xf32>, %[[K:.+]]: tensor<2x2x11x16xf32>, %[[M:.+]]: tensor<2x1x1x11xf32>, %[[O:.+]]: tensor<2xindex>)
// CHECK: %[[ZERO:.+]] = scf.for {{.+}} iter_args({{.+}}) -> (i1)
// CHECK: tensor.extract %[[O]]
// CHECK: arith.cmpi eq
// CHECK: %[[R:.+]] = scf.if %[[ZERO]] -> (tensor<2x4x1x16xf32>)
// CHECK: %[[SAME:.+]] = masformer.attention %[[Q]], %[[K]], %[[K]] mask(%[[M]] : tensor<2x1x1x11xf32>) {causal = true, layer = 1 : i64, span = #masformer.span<block 4, sink 2>}
// CHECK: scf.yield %[[SAME]]
// CHECK: } else {
// CHECK: %[[SMASK:.+]] = linalg.generic {{.+}} ins(%[[O]], %[[M]] : tensor<2xindex>, tensor<2x1x1x11xf32>) outs({{.+}} : tensor<2x1x1x11xf32>)
// CHECK: ^bb0(%[[OFF:.+]]: index, %[[MV:.+]]: f32, %{{.+}}: f32):
// CHECK: %[[I:.+]] = linalg.index 2
// CHECK: %[[J:.+]] = linalg.index 3
// CHECK: %[[IS:.+]] = arith.addi %[[I]], %{{.+}}
// CHECK: %[[QP:.+]] = arith.subi %[[IS]], %[[OFF]]
// CHECK: %[[KP:.+]] = arith.subi %[[J]], %[[OFF]]
// CHECK: arith.cmpi sle, %[[KP]], %[[QP]]
// CHECK: arith.floordivsi %[[QP]]
// CHECK: arith.floordivsi %[[KP]]
// CHECK: arith.cmpi ult, %[[KP]]
// CHECK: %[[NEG:.+]] = arith.select
// CHECK: arith.addf %[[MV]], %[[NEG]]
// CHECK: %[[DENSE:.+]] = masformer.attention %[[Q]], %[[K]], %[[K]] mask(%[[SMASK]] : tensor<2x1x1x11xf32>) {causal = true, layer = 1 : i64, span = #masformer.span<full>}
// CHECK: scf.yield %[[DENSE]]
// CHECK: return %[[R]]
func.func @block_sink(%q: tensor<2x4x1x16xf32>, %k: tensor<2x2x11x16xf32>, %m: tensor<2x1x1x11xf32>, %o: tensor<2xindex>) -> tensor<2x4x1x16xf32> {
  %0 = masformer.attention %q, %k, %k mask(%m : tensor<2x1x1x11xf32>) row_offset(%o : tensor<2xindex>) {span = #masformer.span<block 4, sink 2>, causal = true, layer = 1 : i64} : tensor<2x4x1x16xf32>, tensor<2x2x11x16xf32>, tensor<2x2x11x16xf32> -> tensor<2x4x1x16xf32>
  return %0 : tensor<2x4x1x16xf32>
}

// -----

// Windows (and full spans, and the causal rule) compare positions'
// differences: the offset is dropped.
// CHECK-LABEL: func @window
// CHECK-NOT: scf.if
// CHECK: masformer.attention %{{.+}}, %{{.+}}, %{{.+}} {causal = true, span = #masformer.span<window 4>}
// CHECK-NOT: row_offset
func.func @window(%q: tensor<2x4x1x16xf32>, %k: tensor<2x2x11x16xf32>, %o: tensor<2xindex>) -> tensor<2x4x1x16xf32> {
  %0 = masformer.attention %q, %k, %k row_offset(%o : tensor<2xindex>) {span = #masformer.span<window 4>, causal = true} : tensor<2x4x1x16xf32>, tensor<2x2x11x16xf32>, tensor<2x2x11x16xf32> -> tensor<2x4x1x16xf32>
  return %0 : tensor<2x4x1x16xf32>
}

// -----

// Per-head spans: the dense op's mask has the query heads (bf16, the
// query's type without a mask), each head's rule chosen by its key/value
// head; head_spans are gone from it.
// CHECK-LABEL: func @heads
// CHECK: scf.if
// CHECK: masformer.attention {{.+}} {head_spans = [#masformer.span<window 3>, #masformer.span<block 4>], span = #masformer.span<full>}
// CHECK: } else {
// CHECK: %[[HM:.+]] = linalg.generic {{.+}} outs({{.+}} : tensor<?x4x3x?xbf16>)
// CHECK: linalg.index 1
// CHECK: arith.divui
// CHECK: masformer.attention {{.+}} mask(%[[HM]] : tensor<?x4x3x?xbf16>) {span = #masformer.span<full>}
func.func @heads(%q: tensor<?x4x3x16xbf16>, %k: tensor<?x2x?x16xbf16>, %o: tensor<?xindex>) -> tensor<?x4x3x16xbf16> {
  %0 = masformer.attention %q, %k, %k row_offset(%o : tensor<?xindex>) {span = #masformer.span<full>, head_spans = [#masformer.span<window 3>, #masformer.span<block 4>]} : tensor<?x4x3x16xbf16>, tensor<?x2x?x16xbf16>, tensor<?x2x?x16xbf16> -> tensor<?x4x3x16xbf16>
  return %0 : tensor<?x4x3x16xbf16>
}
