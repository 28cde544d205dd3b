//===- Passes.td - Conversions to the gpu dialect ----------*- tablegen -*-===//
//
// Conversions to the gpu dialect: masformer.attention to flash-attention
// kernels (MASFormerToGPU), the model's matrix products and every other
// linalg op to kernels (LinalgToGPU).
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_CONVERSION_PASSES_TD
#define MASFORMER_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def AttentionToGPU : Pass<"masformer-attention-to-gpu", "::mlir::ModuleOp"> {
  let summary = "masformer.attention as span-aware flash-attention kernels "
                "on NVIDIA tensor cores";
  let description = [{
    Replaces every `masformer.attention` by a `gpu.launch_func` of a kernel
    in the `gpu.module @masformer_kernels` (created on first use), one
    kernel per element type, head dimension, span, causal flag and scale.

    The kernel: one thread block of 4 warps per (64 query rows, head,
    batch), each warp owning 16 rows; a loop over exactly the key tiles of
    64 keys that meet the span and the causal triangle (tiles outside are
    never loaded); key and value tiles staged in shared memory by
    double-buffered `cp.async`; `Q K^T` and `P V` on tensor cores by
    `mma.sync` (m16n8k16 for f16/bf16 with f32 accumulation; m16n8k8 on
    tf32 with a high/low split for f32, which keeps f32 accuracy); the online
    softmax in registers. Only tiles crossing the span's or the triangle's
    boundary evaluate the position mask.

    An additive mask (rank 1 to 4, broadcast by numpy rules) is read per
    score from global memory and added to the logits, which are then kept
    in natural units so that a large finite mask stays finite.

    Operands are read through `bufferization.to_buffer` and must be device
    memory at run time; the result is a `gpu.alloc`. The head dimension must
    be static, at most 256, and a multiple of 16 (f16, bf16) or 8 (f32),
    and the kernel's shared memory (4 tiles of 64 keys by the padded head
    dimension) must fit what `chip` allows one block (227 KiB on sm_90,
    163 KiB on sm_80, 99 KiB on sm_86 and sm_89): f32 at head_dim 256
    fits no chip, f32 at 128 and bf16/f16 at 256 only sm_80 and sm_90.
    Other cases are refused with an error naming the op (and the chip),
    never compiled into a kernel that fails at launch.
  }];
  let options = [
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90\"",
           "The GPU the kernels are for (sm_80, sm_86, sm_89, sm_90, ...): "
           "bounds their shared memory">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::nvgpu::NVGPUDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect"
  ];
}

def ContractionsToGPU : Pass<"masformer-contractions-to-gpu", "::mlir::ModuleOp"> {
  let summary = "The model's matrix products as tiled tensor-core kernels";
  let description = [{
    Replaces every matrix product (the `linalg.generic` contractions that
    the importer makes of MatMul, Gemm and Einsum: `C[b..., m, n] +=
    A[b..., m, k] * B[b..., k, n]` or `B[b..., n, k]`, f16, bf16 or f32
    operands, f32/f16/bf16 result) by a `gpu.launch_func` of a kernel in
    `gpu.module @masformer_kernels`, one per element types and layout of B.

    Batch dimensions collapse into one, and an operand without them (a
    weight) is broadcast. One thread block of 4 warps per 128 x 64 tile of C and batch, each
    warp owning 32 rows (two m16 tiles share each B fragment); k in steps
    of 32 with A and B tiles in shared
    memory by double-buffered `cp.async`, fragments by `ldmatrix`
    (`.trans` for B stored [k, n]) and `mma.sync` (m16n8k16 on f16/bf16
    with f32 accumulation, 3xTF32 m16n8k8 on f32). The result is
    `Cinit + A B`, rounded to C's type; when C starts as a zero
    `linalg.fill` (MatMul as imported) it is not read, and the fill goes.

    Products whose rows are not a multiple of 16 bytes (K, and N for B
    stored [k, n]), whose A and B types differ, or whose operands broadcast
    only some batch dimensions are left as they are (`report-skipped`
    says why).
  }];
  let options = [
    Option<"reportSkipped", "report-skipped", "bool", /*default=*/"false",
           "Emit a remark on each matrix product left unconverted, with the "
           "reason">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::nvgpu::NVGPUDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect",
    "::mlir::vector::VectorDialect"
  ];
}

def LoopsToGPU : Pass<"masformer-loops-to-gpu", "::mlir::func::FuncOp"> {
  let summary = "A bufferized function's linalg ops and loops as GPU kernels";
  let description = [{
    Every top-level `linalg` op on buffers becomes a `gpu.launch`:

    - a reduction over its innermost loop whose body folds into the output
      with `addf`, `mulf`, `maxnumf`, `maximumf`, `minnumf` or `minimumf`
      (a norm's mean and variance, a softmax's max and sum): one warp per
      output element, 4 per block. Each lane folds every 32nd element from
      its own, so that a warp reads 32 consecutive elements at a time, then
      butterfly shuffles combine the lanes and lane 0 folds the result into
      the output's initial value;
    - any other op: its parallel loops (`linalg::linalgOpToParallelLoops`)
      with one thread per iteration, over the linearized iteration space,
      128 threads per block along it, the innermost dimension fastest (so
      that neighbouring threads touch neighbouring elements); loops nested
      in the body (the reduction dimensions) run in sequence in the thread.

    Top-level `scf.parallel` loops get the second form too, and a
    `memref.copy` (bufferization's copies of slices, concatenations and
    pads) becomes such a loop first. A top-level `scf.for` that touches
    memory, and the loads, arithmetic and stores of an op without loops
    (rank 0), run as one thread. `gpu-kernel-outlining` then makes kernels
    of the launches.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect"
  ];
}

#endif // MASFORMER_CONVERSION_PASSES_TD
