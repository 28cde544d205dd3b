//===- Passes.td - GPU code generation ---------------------*- tablegen -*-===//
//
// GPU code generation after the conversions: kernels merged into one
// module, buffers moved to the device, the host checked.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_CODEGEN_GPU_PASSES_TD
#define MASFORMER_CODEGEN_GPU_PASSES_TD

include "mlir/Pass/PassBase.td"

def MergeKernelModules : Pass<"masformer-merge-kernel-modules", "::mlir::ModuleOp"> {
  let summary = "All gpu.modules of a module as one";
  let description = [{
    `gpu-kernel-outlining` puts each kernel in a `gpu.module` of its own: a
    whole model gets hundreds, each compiled by its own `ptxas` run,
    embedded as its own cubin and loaded by its own `cuModuleLoadData` when
    the library is opened. This pass moves every kernel (and any other
    symbol) of the module's `gpu.module`s into the first one, renaming
    those whose names collide (an outlined kernel takes its module's name),
    and updates the `gpu.launch_func`s: one module, one cubin, one load.
    Identical kernels (the same element-wise op in every layer) are kept
    once.
    The `gpu.module`s must not have targets yet (run it before
    `nvvm-attach-target`).
  }];
}

def BuffersToDevice : Pass<"masformer-buffers-to-device", "::mlir::ModuleOp"> {
  let summary = "A bufferized host function's memory on the GPU";
  let description = [{
    Run on a bufferized module whose functions only launch kernels (after
    `--masformer-loops-to-gpu` and `gpu-kernel-outlining`, or the kernel
    passes). In each function with a body:

    - every `memref.alloc`/`memref.alloca` becomes a `gpu.alloc`;
    - each memref argument is copied to a device buffer at entry;
    - each constant (`memref.get_global`) is copied to the device at entry
      (`constants=copy`), or becomes a trailing argument of the function
      that the caller provides in device memory (`constants=arguments`;
      the function's `masformer.constants` attribute lists their globals,
      in the order of the new arguments);
    - each returned buffer is copied into a new host buffer;
    - every device buffer is freed (`gpu.dealloc`) after its last use.

    The host function keeps its interface: host buffers in, host buffers
    out. `gpu-async-region` then puts its copies, launches and frees on one
    stream. An op left on the host that reads or writes memory is an error
    naming it: its buffers are now device memory.
  }];
  let options = [
    Option<"constants", "constants", "std::string", /*default=*/"\"copy\"",
           "copy: constants are copied to the device in every call; "
           "arguments: they become arguments the caller passes in device "
           "memory (so that it copies them once)">
  ];
  let dependentDialects = [
    "::mlir::gpu::GPUDialect",
    "::mlir::memref::MemRefDialect"
  ];
}

def CheckGPUHost : Pass<"masformer-check-gpu-host", "::mlir::ModuleOp"> {
  let summary = "Refuses host code that computes on device tensors";
  let description = [{
    Run after `--masformer-attention-to-gpu` and
    `--masformer-contractions-to-gpu`: outside the `gpu.module`s, only ops
    that describe, reshape or move tensors, launch kernels, or compute
    scalars may remain. Anything else (a `linalg` op, an element-wise op on
    tensors, a slice, an attention the kernels refused) is an error naming
    the op: its operands would be device memory read on the host.
  }];
}

#endif // MASFORMER_CODEGEN_GPU_PASSES_TD
