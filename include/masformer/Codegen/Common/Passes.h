//===- Passes.h - code generation for every target --------------*- C++ -*-===//
//
// Passes that the CPU and GPU pipelines share.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_CODEGEN_COMMON_PASSES_H
#define MASFORMER_CODEGEN_COMMON_PASSES_H

#include "masformer/Dialect/MASFormer/IR/MASFormerDialect.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
class RewritePatternSet;
namespace masformer {

#define GEN_PASS_DECL
#include "masformer/Codegen/Common/Passes.h.inc"

/// Patterns that decompose linalg aggregate ops (softmax) and tensor.concat.
void populateDecomposeAggregatesPatterns(RewritePatternSet &patterns);

#define GEN_PASS_REGISTRATION
#include "masformer/Codegen/Common/Passes.h.inc"

} // namespace masformer
} // namespace mlir

#endif // MASFORMER_CODEGEN_COMMON_PASSES_H
