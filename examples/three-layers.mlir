// Three attention layers of a small decoder (batch 1, 4 heads, 256 tokens,
// head_dim 32) in the masformer dialect, as the ONNX importer will produce
// them: layer 0 keeps full attention, layer 1 is block-sparse with blocks of
// 64 tokens, and layer 2 asks for a block of 512 tokens, which covers the
// whole sequence and canonicalizes to full.
func.func @decoder_attention(%q0: tensor<1x4x256x32xf32>, %k0: tensor<1x4x256x32xf32>, %v0: tensor<1x4x256x32xf32>,
                             %q1: tensor<1x4x256x32xf32>, %k1: tensor<1x4x256x32xf32>, %v1: tensor<1x4x256x32xf32>,
                             %q2: tensor<1x4x256x32xf32>, %k2: tensor<1x4x256x32xf32>, %v2: tensor<1x4x256x32xf32>)
    -> (tensor<1x4x256x32xf32>, tensor<1x4x256x32xf32>, tensor<1x4x256x32xf32>) {
  %a0 = masformer.attention %q0, %k0, %v0 {span = #masformer.span<full>, causal = true, layer = 0 : i64}
      : tensor<1x4x256x32xf32>, tensor<1x4x256x32xf32>, tensor<1x4x256x32xf32> -> tensor<1x4x256x32xf32>
  %a1 = masformer.attention %q1, %k1, %v1 {span = #masformer.span<block 64>, causal = true, layer = 1 : i64}
      : tensor<1x4x256x32xf32>, tensor<1x4x256x32xf32>, tensor<1x4x256x32xf32> -> tensor<1x4x256x32xf32>
  %a2 = masformer.attention %q2, %k2, %v2 {span = #masformer.span<block 512>, causal = true, layer = 2 : i64}
      : tensor<1x4x256x32xf32>, tensor<1x4x256x32xf32>, tensor<1x4x256x32xf32> -> tensor<1x4x256x32xf32>
  return %a0, %a1, %a2 : tensor<1x4x256x32xf32>, tensor<1x4x256x32xf32>, tensor<1x4x256x32xf32>
}
