// A pipeline option the user got wrong is one diagnostic and a failure,
// never an LLVM fatal error.
//
// RUN: not masformer-opt %s --masformer-model-to-nvvm="chip=sm_70" 2>&1 | FileCheck %s --check-prefix=CHIP
// CHIP: error: --masformer-model-to-nvvm: chip=sm_70: unsupported GPU chip; expected sm_80 or newer
// CHIP-NOT: LLVM ERROR
// RUN: not masformer-opt %s --masformer-model-to-nvvm="precision=f8" 2>&1 | FileCheck %s --check-prefix=PRECISION
// PRECISION: error: --masformer-model-to-nvvm: precision=f8: expected f32 or bf16
// RUN: not masformer-opt %s --masformer-model-to-nvvm="constants=shared" 2>&1 | FileCheck %s --check-prefix=CONSTANTS
// CONSTANTS: error: --masformer-model-to-nvvm: constants=shared: expected copy or arguments
// RUN: not masformer-opt %s --masformer-lower-to-nvvm="chip=gfx90a" 2>&1 | FileCheck %s --check-prefix=LOWER
// LOWER: error: --masformer-lower-to-nvvm: chip=gfx90a: unsupported GPU chip

func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}
