// One cross-attention layer (rewrite-spans-cross.mlir).
func.func @cross_only(%q: tensor<1x4x8x8xf32>, %kv: tensor<1x4x12x8xf32>) -> tensor<1x4x8x8xf32> {
  %c = masformer.attention %q, %kv, %kv {span = #masformer.span<full>, layer = 0 : i64, masformer.cross_attention} : tensor<1x4x8x8xf32>, tensor<1x4x12x8xf32>, tensor<1x4x12x8xf32> -> tensor<1x4x8x8xf32>
  return %c : tensor<1x4x8x8xf32>
}
