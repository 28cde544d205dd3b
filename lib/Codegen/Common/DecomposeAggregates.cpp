//===- DecomposeAggregates.cpp - softmax and concat decompositi -*- C++ -*-===//
//
// Decomposes linalg ops that implement AggregatedOpInterface (softmax) and
// tensor.concat, which upstream bufferization and loop lowering do not take.
//
//===----------------------------------------------------------------------===//

#include "masformer/Codegen/Common/Passes.h"

#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace mlir::masformer {
#define GEN_PASS_DEF_DECOMPOSEAGGREGATES
#include "masformer/Codegen/Common/Passes.h.inc"
} // namespace mlir::masformer

using namespace mlir;

namespace {

struct DecomposeAggregatedOp final
    : OpInterfaceRewritePattern<linalg::AggregatedOpInterface> {
  using OpInterfaceRewritePattern::OpInterfaceRewritePattern;

  LogicalResult matchAndRewrite(linalg::AggregatedOpInterface op,
                                PatternRewriter &rewriter) const override {
    FailureOr<SmallVector<Value>> values =
        op.decomposeOperation(rewriter);
    if (failed(values))
      return rewriter.notifyMatchFailure(op, "cannot decompose");
    rewriter.replaceOp(op, *values);
    return success();
  }
};

struct DecomposeAggregatesPass final
    : masformer::impl::DecomposeAggregatesBase<DecomposeAggregatesPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    masformer::populateDecomposeAggregatesPatterns(patterns);
    walkAndApplyPatterns(getOperation(), std::move(patterns));
  }
};

} // namespace

void mlir::masformer::populateDecomposeAggregatesPatterns(
    RewritePatternSet &patterns) {
  patterns.add<DecomposeAggregatedOp>(patterns.getContext());
  tensor::populateDecomposeTensorConcatPatterns(patterns);
}
