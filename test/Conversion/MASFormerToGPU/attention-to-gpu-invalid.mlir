// RUN: masformer-opt %s --masformer-attention-to-gpu --split-input-file -verify-diagnostics

func.func @scalar_mask(%q: tensor<1x2x8x16xf16>, %m: tensor<f32>) -> tensor<1x2x8x16xf16> {
  // expected-error @+1 {{'masformer.attention' op cannot be lowered to the GPU: a rank-0 mask is not supported; give it shape [1]}}
  %0 = masformer.attention %q, %q, %q mask(%m : tensor<f32>) {span = #masformer.span<full>} : tensor<1x2x8x16xf16>, tensor<1x2x8x16xf16>, tensor<1x2x8x16xf16> -> tensor<1x2x8x16xf16>
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
  // expected-error @+1 {{cannot be lowered to the GPU: the head dimension must be a multiple of 16 up to 256 for f16 and bf16, got 40}}
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<full>} : tensor<1x2x8x40xbf16>, tensor<1x2x8x40xbf16>, tensor<1x2x8x40xbf16> -> tensor<1x2x8x40xbf16>
  return %0 : tensor<1x2x8x40xbf16>
}

// -----

func.func @f32_head_dim_12(%q: tensor<1x2x8x12xf32>) -> tensor<1x2x8x12xf32> {
  // expected-error @+1 {{cannot be lowered to the GPU: the head dimension must be a multiple of 8 up to 256 for f32, got 12}}
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<full>} : tensor<1x2x8x12xf32>, tensor<1x2x8x12xf32>, tensor<1x2x8x12xf32> -> tensor<1x2x8x12xf32>
  return %0 : tensor<1x2x8x12xf32>
}
