//===- SliceElementwiseProducers.cpp - Compute each slice apart -*- C++ -*-===//
//
// An element-wise op whose result is only read through disjoint slices (a
// QKV projection's bias add, split into the query, the key and the value)
// computes each slice on its own, from slices of its operands. The result
// is then never materialized whole, and each slice's op fuses with what
// reads it (the head split and its bf16 rounding): one pass over memory
// instead of two.
//
//===----------------------------------------------------------------------===//

#include "masformer/Codegen/Common/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/TilingInterface.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::masformer {
#define GEN_PASS_DEF_SLICEELEMENTWISEPRODUCERS
#include "masformer/Codegen/Common/Passes.h.inc"
} // namespace mlir::masformer

using namespace mlir;

namespace {

/// The slices of `op`'s result, when every use is a slice of unit strides
/// and full rank in `op`'s block (not in a loop), and there is one, or they all
/// lie at offset 0 but along one dimension, where their static ranges do not
/// overlap: computing each apart computes no element twice. Empty otherwise.
SmallVector<tensor::ExtractSliceOp> disjointSlices(linalg::GenericOp op) {
  SmallVector<tensor::ExtractSliceOp> slices;
  for (Operation *user : op->getUsers()) {
    // (A slice inside a loop, a tile's, would compute its part once per
    // iteration.)
    auto s = dyn_cast<tensor::ExtractSliceOp>(user);
    if (!s || s->getBlock() != op->getBlock() || !s.hasUnitStride() ||
        s.getType().getRank() != s.getSourceType().getRank())
      return {};
    slices.push_back(s);
  }
  // One slice: computing it alone computes less.
  if (slices.size() < 2)
    return slices;
  // The one dimension along which the slices start anywhere but 0.
  std::optional<int64_t> along;
  for (tensor::ExtractSliceOp s : slices) {
    for (auto [d, offset] : llvm::enumerate(s.getMixedOffsets())) {
      if (isConstantIntValue(offset, 0))
        continue;
      if (along && *along != static_cast<int64_t>(d))
        return {};
      along = d;
    }
  }
  if (!along)
    return {};
  SmallVector<std::pair<int64_t, int64_t>> ranges;
  for (tensor::ExtractSliceOp s : slices) {
    std::optional<int64_t> offset =
        getConstantIntValue(s.getMixedOffsets()[*along]);
    std::optional<int64_t> size =
        getConstantIntValue(s.getMixedSizes()[*along]);
    if (!offset || !size)
      return {};
    ranges.push_back({*offset, *offset + *size});
  }
  llvm::sort(ranges);
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second)
      return {};
  return slices;
}

struct SliceElementwiseProducer final : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureTensorSemantics() || op->getNumResults() != 1 ||
        op.getNumParallelLoops() != op.getNumLoops() ||
        !op.getMatchingIndexingMap(op.getDpsInitOperand(0)).isIdentity())
      return rewriter.notifyMatchFailure(op, "not an element-wise op");
    SmallVector<tensor::ExtractSliceOp> slices = disjointSlices(op);
    if (slices.empty())
      return rewriter.notifyMatchFailure(op, "not read through slices");
    auto tiling = cast<TilingInterface>(op.getOperation());
    for (tensor::ExtractSliceOp s : slices) {
      rewriter.setInsertionPoint(s);
      FailureOr<TilingResult> part = tiling.generateResultTileValue(
          rewriter, 0, s.getMixedOffsets(), s.getMixedSizes());
      if (failed(part) || part->tiledValues.size() != 1)
        return rewriter.notifyMatchFailure(op, "cannot compute a slice");
      Value v = part->tiledValues.front();
      if (v.getType() != s.getType())
        v = tensor::CastOp::create(rewriter, s.getLoc(), s.getType(), v);
      rewriter.replaceOp(s, v);
    }
    rewriter.eraseOp(op);
    return success();
  }
};

struct SliceElementwiseProducersPass final
    : masformer::impl::SliceElementwiseProducersBase<
          SliceElementwiseProducersPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<SliceElementwiseProducer>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
