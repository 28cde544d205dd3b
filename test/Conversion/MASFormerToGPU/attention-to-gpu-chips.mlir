// Shared memory per block, by chip: 4 tiles of 64 keys x (head_dim + 16
// bytes of padding). f32 at head_dim 256 (266,240 bytes) fits no chip; f32
// at 128 and bf16 at 256 (135,168 bytes) fit sm_80 (163 KiB) and sm_90
// (227 KiB) but not sm_86 or sm_89 (99 KiB). Refused at compile time, with
// the op, the head_dim, the bytes and the chip, rather than failing at
// launch on the GPU.
//
// RUN: not masformer-opt %s --masformer-attention-to-gpu="chip=sm_90" --split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=SM90 --implicit-check-not=error:
// RUN: not masformer-opt %s --masformer-attention-to-gpu="chip=sm_80" --split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=SM80 --implicit-check-not=error:
// RUN: not masformer-opt %s --masformer-attention-to-gpu="chip=sm_86" --split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=SM86 --implicit-check-not=error:
// RUN: not masformer-opt %s --masformer-attention-to-gpu="chip=sm_89" --split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=SM86 --implicit-check-not=error:
// The default chip is sm_90.
// RUN: not masformer-opt %s --masformer-attention-to-gpu --split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=SM90 --implicit-check-not=error:

// SM90: error: 'masformer.attention' op cannot be lowered to the GPU: head_dim 256 in f32 needs 266240 bytes of shared memory per block (K and V tiles of 64 keys, double-buffered), more than the 232448 bytes chip sm_90 allows
// SM80: error: 'masformer.attention' op cannot be lowered to the GPU: head_dim 256 in f32 needs 266240 bytes of shared memory per block (K and V tiles of 64 keys, double-buffered), more than the 166912 bytes chip sm_80 allows
// SM86: error: 'masformer.attention' op cannot be lowered to the GPU: head_dim 256 in f32 needs 266240 bytes of shared memory per block (K and V tiles of 64 keys, double-buffered), more than the 101376 bytes chip sm_8{{[69]}} allows
func.func @f32_d256(%q: tensor<1x2x8x256xf32>) -> tensor<1x2x8x256xf32> {
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<full>} : tensor<1x2x8x256xf32>, tensor<1x2x8x256xf32>, tensor<1x2x8x256xf32> -> tensor<1x2x8x256xf32>
  return %0 : tensor<1x2x8x256xf32>
}

// -----

// SM86: error: 'masformer.attention' op cannot be lowered to the GPU: head_dim 128 in f32 needs 135168 bytes of shared memory per block (K and V tiles of 64 keys, double-buffered), more than the 101376 bytes chip sm_8{{[69]}} allows
func.func @f32_d128(%q: tensor<1x2x8x128xf32>) -> tensor<1x2x8x128xf32> {
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<full>} : tensor<1x2x8x128xf32>, tensor<1x2x8x128xf32>, tensor<1x2x8x128xf32> -> tensor<1x2x8x128xf32>
  return %0 : tensor<1x2x8x128xf32>
}

// -----

// SM86: error: 'masformer.attention' op cannot be lowered to the GPU: head_dim 256 in bf16 needs 135168 bytes of shared memory per block (K and V tiles of 64 keys, double-buffered), more than the 101376 bytes chip sm_8{{[69]}} allows
func.func @bf16_d256(%q: tensor<1x2x8x256xbf16>) -> tensor<1x2x8x256xbf16> {
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<full>} : tensor<1x2x8x256xbf16>, tensor<1x2x8x256xbf16>, tensor<1x2x8x256xbf16> -> tensor<1x2x8x256xbf16>
  return %0 : tensor<1x2x8x256xbf16>
}

// -----

// Fits every chip: 64 x (64 + 8) bf16 x 4 = 36,864 bytes.
func.func @bf16_d64(%q: tensor<1x2x8x64xbf16>) -> tensor<1x2x8x64xbf16> {
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<full>} : tensor<1x2x8x64xbf16>, tensor<1x2x8x64xbf16>, tensor<1x2x8x64xbf16> -> tensor<1x2x8x64xbf16>
  return %0 : tensor<1x2x8x64xbf16>
}
