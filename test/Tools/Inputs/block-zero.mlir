func.func @f(%q: tensor<1x1x8x4xf32>) -> tensor<1x1x8x4xf32> {
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<block 0>} : tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32> -> tensor<1x1x8x4xf32>
  return %0 : tensor<1x1x8x4xf32>
}
