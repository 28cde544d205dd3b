// RUN: masformer-opt %s --masformer-attention-to-gpu --split-input-file -verify-diagnostics

func.func @mask(%q: tensor<1x2x8x16xf16>, %m: tensor<1x1x8x8xf32>) -> tensor<1x2x8x16xf16> {
  // expected-error @+1 {{'masformer.attention' op cannot be lowered to the GPU: an additive mask operand is not supported by the GPU kernels yet (causal, block and window spans are)}}
  %0 = masformer.attention %q, %q, %q mask(%m : tensor<1x1x8x8xf32>) {span = #masformer.span<full>} : tensor<1x2x8x16xf16>, tensor<1x2x8x16xf16>, tensor<1x2x8x16xf16> -> tensor<1x2x8x16xf16>
  return %0 : tensor<1x2x8x16xf16>
}

// -----

func.func @dynamic_head_dim(%q: tensor<1x2x8x?xf16>) -> tensor<1x2x8x?xf16> {
  // expected-error @+1 {{cannot be lowered to the GPU: the head dimension must be static}}
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<full>} : tensor<1x2x8x?xf16>, tensor<1x2x8x?xf16>, tensor<1x2x8x?xf16> -> tensor<1x2x8x?xf16>
  return %0 : tensor<1x2x8x?xf16>
}

// -----

func.func @head_dim_40(%q: tensor<1x2x8x40xbf16>) -> tensor<1x2x8x40xbf16> {
  // expected-error @+1 {{cannot be lowered to the GPU: the head dimension must be a multiple of 16 up to 256, got 40}}
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<full>} : tensor<1x2x8x40xbf16>, tensor<1x2x8x40xbf16>, tensor<1x2x8x40xbf16> -> tensor<1x2x8x40xbf16>
  return %0 : tensor<1x2x8x40xbf16>
}
