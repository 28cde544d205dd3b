//===- ExpandShapesAsCasts.cpp - Dynamic reshapes as casts ------*- C++ -*-===//
//
// A memref.expand_shape that splits one dimension into two or more dynamic
// sizes, as a memref.reinterpret_cast of its source's strided metadata.
// expand-strided-metadata of LLVM 22 crashes on the metadata of such an
// expand_shape (rows of batch * sequence expanded to [batch, sequence] and
// read by an AMX tile load, which fold-memref-alias-ops cannot fold); it
// handles the cast.
//
//===----------------------------------------------------------------------===//

#include "masformer/Codegen/Common/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::masformer {
#define GEN_PASS_DEF_EXPANDSHAPESASCASTS
#include "masformer/Codegen/Common/Passes.h.inc"
} // namespace mlir::masformer

using namespace mlir;

namespace {

/// Whether some reassociation group of `op` has two or more dynamic sizes.
bool splitsIntoDynamicSizes(memref::ExpandShapeOp op) {
  MemRefType type = op.getResultType();
  return llvm::any_of(op.getReassociationIndices(),
                      [&](const ReassociationIndices &group) {
                        return llvm::count_if(group, [&](int64_t d) {
                                 return type.isDynamicDim(d);
                               }) >= 2;
                      });
}

struct ExpandShapeAsCast final : OpRewritePattern<memref::ExpandShapeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(memref::ExpandShapeOp op,
                                PatternRewriter &rewriter) const override {
    if (!splitsIntoDynamicSizes(op))
      return failure();
    MemRefType type = op.getResultType();
    SmallVector<int64_t> typeStrides;
    int64_t typeOffset;
    SmallVector<int64_t> srcStrides;
    int64_t srcOffset;
    if (failed(type.getStridesAndOffset(typeStrides, typeOffset)) ||
        failed(op.getSrcType().getStridesAndOffset(srcStrides, srcOffset)))
      return rewriter.notifyMatchFailure(op, "not a strided layout");
    Location loc = op.getLoc();
    auto meta =
        memref::ExtractStridedMetadataOp::create(rewriter, loc, op.getSrc());
    SmallVector<OpFoldResult> sizes = op.getMixedOutputShape();
    SmallVector<OpFoldResult> strides(type.getRank());
    AffineExpr s0, s1;
    bindSymbols(rewriter.getContext(), s0, s1);
    for (auto [srcDim, group] : llvm::enumerate(op.getReassociationIndices())) {
      OpFoldResult stride = meta.getStrides()[srcDim];
      for (int64_t d : llvm::reverse(group)) {
        strides[d] = stride;
        stride = affine::makeComposedFoldedAffineApply(rewriter, loc, s0 * s1,
                                                       {stride, sizes[d]});
      }
    }
    // The cast's static values where the type has them, values where it
    // has none (a folded constant would not match a dynamic type).
    auto match = [&](OpFoldResult v, int64_t typeValue) -> OpFoldResult {
      if (!ShapedType::isDynamic(typeValue))
        return rewriter.getIndexAttr(typeValue);
      return getValueOrCreateConstantIndexOp(rewriter, loc, v);
    };
    for (int64_t d = 0; d < type.getRank(); ++d) {
      sizes[d] = match(sizes[d], type.getDimSize(d));
      strides[d] = match(strides[d], typeStrides[d]);
    }
    OpFoldResult offset = match(meta.getOffset(), typeOffset);
    rewriter.replaceOpWithNewOp<memref::ReinterpretCastOp>(
        op, type, meta.getBaseBuffer(), offset, sizes, strides);
    return success();
  }
};

struct ExpandShapesAsCastsPass final
    : masformer::impl::ExpandShapesAsCastsBase<ExpandShapesAsCastsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<ExpandShapeAsCast>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
