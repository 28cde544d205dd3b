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

/// out = in with its last two dimensions [rows, cols] swapped, for each
/// index of the leading ones, in square blocks: a walk of the output in
/// order reads the input a column at a time, a cache miss per element on a
/// large weight (the LM head's 50257 x 768 f32 took over a second).
template <typename T>
void transposeBlocked(const char *in, char *out, int64_t batches, int64_t rows,
                      int64_t cols) {
  constexpr int64_t kBlock = 64;
  for (int64_t b = 0; b < batches; ++b) {
    const char *src = in + b * rows * cols * sizeof(T);
    char *dst = out + b * rows * cols * sizeof(T);
    for (int64_t r0 = 0; r0 < rows; r0 += kBlock)
      for (int64_t c0 = 0; c0 < cols; c0 += kBlock)
        for (int64_t r = r0, re = std::min(rows, r0 + kBlock); r < re; ++r)
          for (int64_t c = c0, ce = std::min(cols, c0 + kBlock); c < ce; ++c)
            std::memcpy(dst + (c * rows + r) * sizeof(T),
                        src + (r * cols + c) * sizeof(T), sizeof(T));
  }
}

/// The blocked swap of the last two dimensions of `shape` for elements of
/// 1, 2, 4 or 8 bytes; false for another size.
bool transposeLastTwo(const char *in, char *out, ArrayRef<int64_t> shape,
                      int64_t esize) {
  int64_t rows = shape[shape.size() - 2], cols = shape.back();
  int64_t batches = 1;
  for (int64_t d : shape.drop_back(2))
    batches *= d;
  switch (esize) {
  case 1:
    transposeBlocked<uint8_t>(in, out, batches, rows, cols);
    return true;
  case 2:
    transposeBlocked<uint16_t>(in, out, batches, rows, cols);
    return true;
  case 4:
    transposeBlocked<uint32_t>(in, out, batches, rows, cols);
    return true;
  case 8:
    transposeBlocked<uint64_t>(in, out, batches, rows, cols);
    return true;
  default:
    return false;
  }
}

/// out[i] = in[i permuted], any permutation: walk the output in order,
/// keeping the input offset with the input strides of the permuted
/// dimensions.
void transposeAny(const char *in, char *out, RankedTensorType inTy,
                  RankedTensorType outTy, ArrayRef<int64_t> perm,
                  int64_t esize) {
  int64_t rank = inTy.getRank();
  SmallVector<int64_t> inStrides(rank, 1);
  for (int64_t d = rank - 2; d >= 0; --d)
    inStrides[d] = inStrides[d + 1] * inTy.getDimSize(d + 1);
  SmallVector<int64_t> step(rank), idx(rank, 0);
  for (int64_t d = 0; d < rank; ++d)
    step[d] = inStrides[perm[d]];
  int64_t src = 0, n = outTy.getNumElements();
  for (int64_t e = 0; e < n; ++e) {
    std::memcpy(out + e * esize, in + src * esize, esize);
    for (int64_t d = rank - 1; d >= 0; --d) {
      src += step[d];
      if (++idx[d] < outTy.getDimSize(d))
        break;
      src -= step[d] * idx[d];
      idx[d] = 0;
    }
  }
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

    AsmResourceBlob blob = HeapAsmResourceBlob::allocate(
        bytes->size(), alignof(uint64_t), /*dataIsMutable=*/true);
    MutableArrayRef<char> out = blob.getMutableData();
    ArrayRef<int64_t> perm = op.getPermutation();
    if (!swapsLastTwo(perm) ||
        !transposeLastTwo(bytes->data(), out.data(), inTy.getShape(), esize))
      transposeAny(bytes->data(), out.data(), inTy, outTy, perm, esize);
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
