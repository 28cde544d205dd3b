//===- Passes.h - GPU code generation ---------------------------*- C++ -*-===//
//
// Kernel modules merged, buffers on the device, the host checked.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_CODEGEN_GPU_PASSES_H
#define MASFORMER_CODEGEN_GPU_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
class RewritePatternSet;
namespace masformer {

#define GEN_PASS_DECL
#include "masformer/Codegen/GPU/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "masformer/Codegen/GPU/Passes.h.inc"

} // namespace masformer
} // namespace mlir

#endif // MASFORMER_CODEGEN_GPU_PASSES_H
