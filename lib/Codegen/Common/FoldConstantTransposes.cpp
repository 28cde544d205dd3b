//===- FoldConstantTransposes.cpp - Transpose weights at compil -*- C++ -*-===//
//
// linalg.transpose of a constant (an ONNX Transpose of a weight, e.g. the
// tied embedding of an LM head) becomes the transposed constant, so that a
// compiled model does not transpose its weights in every run. Weights kept
// as dense_resource blobs are transposed byte-wise into a new blob. With
// into-products (the GPU pipeline), a transpose that only feeds matrix
// products' B operands goes into their indexing maps instead.
//
//===----------------------------------------------------------------------===//

#include "masformer/Utils/ConstantData.h"
#include "masformer/Utils/Contractions.h"
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

/// Whether `perm` swaps the last two dimensions and keeps the others.
bool swapsLastTwo(ArrayRef<int64_t> perm) {
  int64_t r = perm.size();
  if (r < 2 || perm[r - 1] != r - 2 || perm[r - 2] != r - 1)
    return false;
  for (int64_t i = 0; i + 2 < r; ++i)
    if (perm[i] != i)
      return false;
  return true;
}

/// With into-products: the products that are `op`'s only users, as its
/// B operand, read its input with B's map's last two results swapped.
LogicalResult foldIntoProducts(linalg::TransposeOp op,
                               PatternRewriter &rewriter) {
  Value result = op.getResult()[0];
  if (!swapsLastTwo(op.getPermutation()) || result.use_empty())
    return failure();
  SmallVector<linalg::GenericOp> products;
  for (OpOperand &use : result.getUses()) {
    auto g = dyn_cast<linalg::GenericOp>(use.getOwner());
    if (!g || g.getNumDpsInputs() != 2 || use.getOperandNumber() != 1 ||
        failed(masformer::matchMatmul(g, /*f32ResultOnly=*/false)))
      return failure();
    products.push_back(g);
  }
  for (linalg::GenericOp g : products) {
    SmallVector<AffineMap> maps = g.getIndexingMapsArray();
    SmallVector<AffineExpr> res(maps[1].getResults());
    std::swap(res[res.size() - 1], res[res.size() - 2]);
    maps[1] = AffineMap::get(maps[1].getNumDims(), maps[1].getNumSymbols(),
                             res, g.getContext());
    rewriter.modifyOpInPlace(g, [&] {
      g->setOperand(1, op.getInput());
      g.setIndexingMapsAttr(rewriter.getAffineMapArrayAttr(maps));
    });
  }
  rewriter.eraseOp(op);
  return success();
}

struct FoldConstantTranspose final : OpRewritePattern<linalg::TransposeOp> {
  FoldConstantTranspose(MLIRContext *ctx, int64_t minElements,
                        bool intoProducts)
      : OpRewritePattern(ctx), minElements(minElements),
        intoProducts(intoProducts) {}

  LogicalResult matchAndRewrite(linalg::TransposeOp op,
                                PatternRewriter &rewriter) const override {
    auto cst = op.getInput().getDefiningOp<arith::ConstantOp>();
    if (!cst)
      return rewriter.notifyMatchFailure(op, "input is not a constant");
    if (intoProducts && succeeded(foldIntoProducts(op, rewriter)))
      return success();
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
  bool intoProducts;
};

struct FoldConstantTransposesPass final
    : masformer::impl::FoldConstantTransposesBase<
          FoldConstantTransposesPass> {
  using FoldConstantTransposesBase::FoldConstantTransposesBase;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FoldConstantTranspose>(&getContext(), minElements,
                                        intoProducts);
    walkAndApplyPatterns(getOperation(), std::move(patterns));
  }
};

} // namespace
