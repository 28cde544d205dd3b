func.func @f(%q: tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32> {
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<block 4>, causal = true} : tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32> -> tensor<1x2x8x4xf32>
  return %0 : tensor<1x2x8x4xf32>
}
