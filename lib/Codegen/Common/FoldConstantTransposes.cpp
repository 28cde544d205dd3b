//===- FoldConstantTransposes.cpp - Transpose weights at compil -*- C++ -*-===//
//
// linalg.transpose of a constant (an ONNX Transpose of a weight, e.g. the
// tied embedding of an LM head) becomes the transposed constant, so that a
// compiled model does not transpose its weights in every run. Weights kept
// as dense_resource blobs are transposed byte-wise into a new blob.
//
//===----------------------------------------------------------------------===//

#include "masformer/Utils/ConstantData.h"
#include "masformer/Codegen/Common/Passes.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace mlir::masformer {
#define GEN_PASS_DEF_FOLDCONSTANTTRANSPOSES
#include "masformer/Codegen/Common/Passes.h.inc"
} // namespace mlir::masformer

using namespace mlir;

namespace {

struct FoldConstantTranspose final : OpRewritePattern<linalg::TransposeOp> {
  FoldConstantTranspose(MLIRContext *ctx, int64_t minElements)
      : OpRewritePattern(ctx), minElements(minElements) {}

  LogicalResult matchAndRewrite(linalg::TransposeOp op,
                                PatternRewriter &rewriter) const override {
    auto cst = op.getInput().getDefiningOp<arith::ConstantOp>();
    if (!cst)
      return rewriter.notifyMatchFailure(op, "input is not a constant");
    auto inTy = dyn_cast<RankedTensorType>(op.getInput().getType());
    auto outTy = dyn_cast<RankedTensorType>(op.getResult()[0].getType());
    if (!inTy || !outTy || !inTy.hasStaticShape() ||
        inTy.getNumElements() < minElements)
      return rewriter.notifyMatchFailure(op, "small or dynamic");
    Type et = inTy.getElementType();
    if (!et.isIntOrFloat() || et.getIntOrFloatBitWidth() % 8)
      return rewriter.notifyMatchFailure(op, "not whole bytes");
    std::optional<ArrayRef<char>> bytes =
        masformer::constantBytes(cst.getValue());
    int64_t esize = et.getIntOrFloatBitWidth() / 8;
    if (!bytes ||
        static_cast<int64_t>(bytes->size()) != inTy.getNumElements() * esize)
      return rewriter.notifyMatchFailure(op, "no raw data");

    // out[i] = in[i permuted]: walk the output in order, keeping the input
    // offset with the input strides of the permuted dimensions.
    ArrayRef<int64_t> perm = op.getPermutation();
    int64_t rank = inTy.getRank();
    SmallVector<int64_t> inStrides(rank, 1);
    for (int64_t d = rank - 2; d >= 0; --d)
      inStrides[d] = inStrides[d + 1] * inTy.getDimSize(d + 1);
    SmallVector<int64_t> step(rank), idx(rank, 0);
    for (int64_t d = 0; d < rank; ++d)
      step[d] = inStrides[perm[d]];
    AsmResourceBlob blob = HeapAsmResourceBlob::allocate(
        bytes->size(), alignof(uint64_t), /*dataIsMutable=*/true);
    MutableArrayRef<char> out = blob.getMutableData();
    const char *in = bytes->data();
    int64_t src = 0, n = outTy.getNumElements();
    for (int64_t e = 0; e < n; ++e) {
      std::memcpy(out.data() + e * esize, in + src * esize, esize);
      for (int64_t d = rank - 1; d >= 0; --d) {
        src += step[d];
        if (++idx[d] < outTy.getDimSize(d))
          break;
        src -= step[d] * idx[d];
        idx[d] = 0;
      }
    }
    auto attr = DenseResourceElementsAttr::get(outTy, "transposed_weight",
                                               std::move(blob));
    rewriter.replaceOpWithNewOp<arith::ConstantOp>(op, attr);
    return success();
  }

  int64_t minElements;
};

struct FoldConstantTransposesPass final
    : masformer::impl::FoldConstantTransposesBase<
          FoldConstantTransposesPass> {
  using FoldConstantTransposesBase::FoldConstantTransposesBase;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FoldConstantTranspose>(&getContext(), minElements);
    walkAndApplyPatterns(getOperation(), std::move(patterns));
  }
};

} // namespace
