// Cross-attention layers (masformer.cross_attention, as
// --masformer-raise-attention marks an encoder-decoder's decoder reading the
// encoder) keep the full span; the policies choose among the other layers.
// RUN: masformer-opt %s --masformer-rewrite-spans="span=block:4 num-full=1" | FileCheck %s
// RUN: masformer-opt %s --masformer-rewrite-spans="span=block:4 policy=top num-full=1" | FileCheck %s --check-prefix=TOP
// RUN: not masformer-opt %s --masformer-rewrite-spans="span=block:4 num-full=4" 2>&1 | FileCheck %s --check-prefix=NUMFULL
// RUN: not masformer-opt %s --masformer-rewrite-spans="plan=%S/Inputs/plan-cross.json" 2>&1 | FileCheck %s --check-prefix=PLAN
// RUN: masformer-opt %s --masformer-rewrite-spans="plan=%S/Inputs/plan-cross-full.json" | FileCheck %s --check-prefix=PLANFULL
// The span report marks them; they cost seq-len x seq-len pairs.
// RUN: masformer-opt %s --masformer-rewrite-spans="span=block:4 num-full=1" --masformer-span-report="seq-len=16 json=%t.json" -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: FileCheck %s --check-prefix=JSON < %t.json
// REPORT: 1  block 4                 yes
// REPORT-NEXT: 2  full (cross)             no      4         8          0.000     1.000
// JSON: "cross": false,
// JSON: "layer": 1,
// JSON: "cross": true,
// JSON: "layer": 2,
// JSON-NEXT: "sink": 0,
// JSON-NEXT: "span": "full",
// A module of cross-attention only has nothing to rewrite.
// RUN: not masformer-opt %S/Inputs/cross-only.mlir --masformer-rewrite-spans="span=block:4" 2>&1 | FileCheck %s --check-prefix=ALLCROSS
// ALLCROSS: error: --masformer-rewrite-spans: the module's 1 attention layers are all cross-attention, which keeps the full span: nothing to rewrite

// Encoder layer 0, decoder self-attention 1 and 3, cross-attention 2 and 4.
// CHECK-LABEL: func.func @seq2seq
// CHECK: layer = 0 : i64, span = #masformer.span<full>}
// CHECK: layer = 1 : i64, span = #masformer.span<block 4>}
// CHECK: layer = 2 : i64, masformer.cross_attention, span = #masformer.span<full>}
// CHECK: layer = 3 : i64, span = #masformer.span<block 4>}
// CHECK: layer = 4 : i64, masformer.cross_attention, span = #masformer.span<full>}
// The top self-attention layer is layer 3, not the cross-attention 4.
// TOP: layer = 0 : i64, span = #masformer.span<block 4>}
// TOP: layer = 1 : i64, span = #masformer.span<block 4>}
// TOP: layer = 2 : i64, masformer.cross_attention, span = #masformer.span<full>}
// TOP: layer = 3 : i64, span = #masformer.span<full>}
// TOP: layer = 4 : i64, masformer.cross_attention, span = #masformer.span<full>}
// NUMFULL: error: --masformer-rewrite-spans: num-full=4 is larger than the number of attention layers (3 self-attention; the 2 cross-attention layers stay full)
// PLAN: error: --masformer-rewrite-spans: plan '{{.*}}plan-cross.json': layers[1]: layer 2 is cross-attention (its keys come from another sequence than its queries), which takes the full span only
// PLANFULL: layer = 1 : i64, span = #masformer.span<window 2>}
// PLANFULL: layer = 2 : i64, masformer.cross_attention, span = #masformer.span<full>}
func.func @seq2seq(%enc: tensor<1x4x12x8xf32>, %dec: tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32> {
  %e = masformer.attention %enc, %enc, %enc {span = #masformer.span<full>, layer = 0 : i64} : tensor<1x4x12x8xf32>, tensor<1x4x12x8xf32>, tensor<1x4x12x8xf32> -> tensor<1x4x12x8xf32>
  %d0 = masformer.attention %dec, %dec, %dec {span = #masformer.span<full>, causal = true, layer = 1 : i64} : tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32> -> tensor<1x4x8x8xf32>
  %c0 = masformer.attention %d0, %e, %e {span = #masformer.span<full>, layer = 2 : i64, masformer.cross_attention} : tensor<1x4x8x8xf32>, tensor<1x4x12x8xf32>, tensor<1x4x12x8xf32> -> tensor<1x4x8x8xf32>
  %d1 = masformer.attention %c0, %c0, %c0 {span = #masformer.span<full>, causal = true, layer = 3 : i64} : tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32> -> tensor<1x4x8x8xf32>
  %c1 = masformer.attention %d1, %e, %e {span = #masformer.span<full>, layer = 4 : i64, masformer.cross_attention} : tensor<1x4x8x8xf32>, tensor<1x4x12x8xf32>, tensor<1x4x12x8xf32> -> tensor<1x4x8x8xf32>
  return %c1 : tensor<1x4x8x8xf32>
}
