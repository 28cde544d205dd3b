//===- Passes.h - conversions to the gpu dialect ----------------*- C++ -*-===//
//
// masformer.attention and linalg ops to gpu kernels.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_CONVERSION_PASSES_H
#define MASFORMER_CONVERSION_PASSES_H

#include "masformer/Dialect/MASFormer/IR/MASFormerDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
class RewritePatternSet;
namespace masformer {

#define GEN_PASS_DECL
#include "masformer/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "masformer/Conversion/Passes.h.inc"

} // namespace masformer
} // namespace mlir

#endif // MASFORMER_CONVERSION_PASSES_H
