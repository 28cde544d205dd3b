// RUN: masformer-opt %s --masformer-contractions-to-gpu --masformer-attention-to-gpu --masformer-check-gpu-host --split-input-file -verify-diagnostics
// RUN: not masformer-opt %s --split-input-file --masformer-lower-to-nvvm=host-to-llvm=0 -o %t 2>&1 | FileCheck %s --check-prefix=PIPE
// RUN: not test -e %t

// Attention and a matrix product only: nothing left on the host but
// launches, reshapes and shape arithmetic.
func.func @kernels_only(%q: tensor<1x2x64x64xf16>, %w: tensor<64x64xf16>, %c: tensor<1x2x64x64xf16>) -> tensor<1x2x64x64xf16> {
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<block 32>, causal = true} : tensor<1x2x64x64xf16>, tensor<1x2x64x64xf16>, tensor<1x2x64x64xf16> -> tensor<1x2x64x64xf16>
  %1 = linalg.generic {
      indexing_maps = [affine_map<(b, h, m, n, k) -> (b, h, m, k)>,
                       affine_map<(b, h, m, n, k) -> (k, n)>,
                       affine_map<(b, h, m, n, k) -> (b, h, m, n)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%0, %w : tensor<1x2x64x64xf16>, tensor<64x64xf16>) outs(%c : tensor<1x2x64x64xf16>) {
  ^bb0(%a: f16, %bb: f16, %acc: f16):
    %p = arith.mulf %a, %bb : f16
    %s = arith.addf %acc, %p : f16
    linalg.yield %s : f16
  } -> tensor<1x2x64x64xf16>
  return %1 : tensor<1x2x64x64xf16>
}

// -----

// An element-wise op after the attention would compute on device memory
// on the host: one error, naming it.
// PIPE: error: 'math.tanh' has no GPU lowering yet: the GPU pipeline runs attention and matrix products, and this op would read device memory on the host
func.func @tanh_after(%q: tensor<1x2x64x64xf16>) -> tensor<1x2x64x64xf16> {
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<full>} : tensor<1x2x64x64xf16>, tensor<1x2x64x64xf16>, tensor<1x2x64x64xf16> -> tensor<1x2x64x64xf16>
  // expected-error @+1 {{'math.tanh' has no GPU lowering yet}}
  %1 = math.tanh %0 : tensor<1x2x64x64xf16>
  return %1 : tensor<1x2x64x64xf16>
}

// -----

// An attention whose head dimension the kernels refuse stops the pipeline
// in --masformer-attention-to-gpu, with that op's error.
// PIPE: error: 'masformer.attention' op cannot be lowered to the GPU: the head dimension must be a multiple of 16 up to 256 for f16 and bf16, got 40
func.func @refused(%q: tensor<1x2x8x40xbf16>) -> tensor<1x2x8x40xbf16> {
  // expected-error @+1 {{cannot be lowered to the GPU}}
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<full>} : tensor<1x2x8x40xbf16>, tensor<1x2x8x40xbf16>, tensor<1x2x8x40xbf16> -> tensor<1x2x8x40xbf16>
  return %0 : tensor<1x2x8x40xbf16>
}
