//===- Passes.h - CPU code generation ---------------------------*- C++ -*-===//
//
// Tiled attention and contractions, parallel loops, math approximations.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_CODEGEN_CPU_PASSES_H
#define MASFORMER_CODEGEN_CPU_PASSES_H

#include "masformer/Dialect/MASFormer/IR/MASFormerDialect.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
class RewritePatternSet;
namespace masformer {

#define GEN_PASS_DECL
#include "masformer/Codegen/CPU/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "masformer/Codegen/CPU/Passes.h.inc"

} // namespace masformer
} // namespace mlir

#endif // MASFORMER_CODEGEN_CPU_PASSES_H
