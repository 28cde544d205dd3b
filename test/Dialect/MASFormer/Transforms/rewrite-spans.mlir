// The MASFormer rewrite on seven layers, one check prefix per option set.
// RUN: masformer-opt %s --masformer-rewrite-spans="span=block:4" | FileCheck %s --check-prefix=DEFAULT
// RUN: masformer-opt %s --masformer-rewrite-spans="span=block:4 policy=bottom num-full=3" | FileCheck %s --check-prefix=BOTTOM
// RUN: masformer-opt %s --masformer-rewrite-spans="span=window:2 policy=top num-full=2" | FileCheck %s --check-prefix=TOP
// RUN: masformer-opt %s --masformer-rewrite-spans="span=block:2 policy=spread num-full=2" | FileCheck %s --check-prefix=SPREAD
// RUN: masformer-opt %s --masformer-rewrite-spans="span=block:4 full-layers=6,2" | FileCheck %s --check-prefix=EXPLICIT
// RUN: masformer-opt %s --masformer-rewrite-spans="span=block:4 num-full=0" | FileCheck %s --check-prefix=NONE

// Default: policy=bottom with num-full = ceil(7/6) = 2.
// DEFAULT-COUNT-2: {causal = true, layer = {{[01]}} : i64, span = #masformer.span<full>}
// DEFAULT-COUNT-5: {causal = true, layer = {{[2-6]}} : i64, span = #masformer.span<block 4>}
// BOTTOM-COUNT-3: span = #masformer.span<full>}
// BOTTOM-COUNT-4: span = #masformer.span<block 4>}
// TOP-COUNT-5: {causal = true, layer = {{[0-4]}} : i64, span = #masformer.span<window 2>}
// TOP-COUNT-2: {causal = true, layer = {{[56]}} : i64, span = #masformer.span<full>}
// Spread: the centres of two halves of the stack, layers 1 and 5.
// SPREAD: layer = 0 : i64, span = #masformer.span<block 2>
// SPREAD: layer = 1 : i64, span = #masformer.span<full>
// SPREAD-COUNT-3: span = #masformer.span<block 2>
// SPREAD: layer = 5 : i64, span = #masformer.span<full>
// SPREAD: layer = 6 : i64, span = #masformer.span<block 2>
// EXPLICIT: layer = 1 : i64, span = #masformer.span<block 4>
// EXPLICIT: layer = 2 : i64, span = #masformer.span<full>
// EXPLICIT-COUNT-3: span = #masformer.span<block 4>
// EXPLICIT: layer = 6 : i64, span = #masformer.span<full>
// NONE-COUNT-7: span = #masformer.span<block 4>

// Seven attention layers of 8 tokens (4 heads, head_dim 8), causal.
func.func @seven(%q: tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32> {
  %a0 = masformer.attention %q, %q, %q {span = #masformer.span<full>, causal = true, layer = 0 : i64} : tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32> -> tensor<1x4x8x8xf32>
  %a1 = masformer.attention %a0, %q, %q {span = #masformer.span<full>, causal = true, layer = 1 : i64} : tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32> -> tensor<1x4x8x8xf32>
  %a2 = masformer.attention %a1, %q, %q {span = #masformer.span<full>, causal = true, layer = 2 : i64} : tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32> -> tensor<1x4x8x8xf32>
  %a3 = masformer.attention %a2, %q, %q {span = #masformer.span<full>, causal = true, layer = 3 : i64} : tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32> -> tensor<1x4x8x8xf32>
  %a4 = masformer.attention %a3, %q, %q {span = #masformer.span<full>, causal = true, layer = 4 : i64} : tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32> -> tensor<1x4x8x8xf32>
  %a5 = masformer.attention %a4, %q, %q {span = #masformer.span<full>, causal = true, layer = 5 : i64} : tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32> -> tensor<1x4x8x8xf32>
  %a6 = masformer.attention %a5, %q, %q {span = #masformer.span<full>, causal = true, layer = 6 : i64} : tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32> -> tensor<1x4x8x8xf32>
  return %a6 : tensor<1x4x8x8xf32>
}
