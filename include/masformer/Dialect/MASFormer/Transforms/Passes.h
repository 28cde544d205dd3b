//===- Passes.h - masformer dialect passes ----------------------*- C++ -*-===//
//
// Raising, span rewriting, span report and the reference decomposition.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_DIALECT_MASFORMER_TRANSFORMS_PASSES_H
#define MASFORMER_DIALECT_MASFORMER_TRANSFORMS_PASSES_H

#include "masformer/Dialect/MASFormer/IR/MASFormerDialect.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
class RewritePatternSet;
namespace masformer {

#define GEN_PASS_DECL
#include "masformer/Dialect/MASFormer/Transforms/Passes.h.inc"

/// Patterns that rewrite masformer.attention into upstream tensor ops (the
/// reference decomposition).
void populateDecomposeAttentionPatterns(RewritePatternSet &patterns);

#define GEN_PASS_REGISTRATION
#include "masformer/Dialect/MASFormer/Transforms/Passes.h.inc"

} // namespace masformer
} // namespace mlir

#endif // MASFORMER_DIALECT_MASFORMER_TRANSFORMS_PASSES_H
