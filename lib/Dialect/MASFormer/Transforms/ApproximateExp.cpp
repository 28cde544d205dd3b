//===- ApproximateExp.cpp - Vectorizable exp ---------------------*- C++ -*-===//
//
// math.exp as MLIR's polynomial approximation, so that the softmax loops of
// the tiled attention vectorize instead of calling libm per element.
//
//===----------------------------------------------------------------------===//

#include "masformer/Dialect/MASFormer/Transforms/Passes.h"

#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::masformer {
#define GEN_PASS_DEF_APPROXIMATEEXP
#include "masformer/Dialect/MASFormer/Transforms/Passes.h.inc"
} // namespace mlir::masformer

using namespace mlir;

namespace {
struct ApproximateExpPass final
    : masformer::impl::ApproximateExpBase<ApproximateExpPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateMathPolynomialApproximationPatterns(
        patterns, [](StringRef name) {
          return name == "exp" || name == "math.exp";
        });
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
