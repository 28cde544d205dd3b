//===- ApproximateMath.cpp - Vectorizable math ------------------*- C++ -*-===//
//
// math.exp, tanh and erf as MLIR's polynomial approximations, and powers by
// small constants as multiplications, so that the loops of the softmax and
// of the activations vectorize instead of calling libm per element.
//
//===----------------------------------------------------------------------===//

#include "masformer/Codegen/CPU/Passes.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::masformer {
#define GEN_PASS_DEF_APPROXIMATEMATH
#include "masformer/Codegen/CPU/Passes.h.inc"
} // namespace mlir::masformer

using namespace mlir;

namespace {
struct ApproximateMathPass final
    : masformer::impl::ApproximateMathBase<ApproximateMathPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    // pow(x, 3) with the 3 a scalar operand of the generic: inlined (and
    // folded to a constant), then strength-reduced.
    linalg::populateInlineConstantOperandsPatterns(patterns);
    populateMathAlgebraicSimplificationPatterns(patterns);
    populateMathPolynomialApproximationPatterns(
        patterns, [](StringRef name) {
          return name == "exp" || name == "math.exp" || name == "tanh" ||
                 name == "math.tanh" || name == "erf" || name == "math.erf";
        });
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
