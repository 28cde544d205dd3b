//===- IntegerProductsToFloat.cpp - 8-bit products in f32 -------*- C++ -*-===//
//
// The integer matrix products of a quantized model (matchIntegerMatmul: i8
// operands, i32 sums) as f32 products on the converted operands, for the
// targets without an integer kernel: the GPU, and CPUs without AVX512-VNNI.
// A constant operand (the weights) is converted at compile time.
//
//===----------------------------------------------------------------------===//

#include "masformer/Codegen/Common/Passes.h"
#include "masformer/Utils/ConstantData.h"
#include "masformer/Utils/Contractions.h"
#include "masformer/Utils/IRBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace mlir::masformer {
#define GEN_PASS_DEF_INTEGERPRODUCTSTOFLOAT
#include "masformer/Codegen/Common/Passes.h.inc"
} // namespace mlir::masformer

using namespace mlir;
using namespace mlir::masformer;

namespace {

/// An i8 operand as f32: a constant converted now, into a new constant;
/// anything else by a generic.
Value operandToF32(OpBuilder &b, Location loc, Value v, bool isUnsigned) {
  Type f32 = b.getF32Type();
  auto ty = cast<RankedTensorType>(v.getType());
  if (auto cst = v.getDefiningOp<arith::ConstantOp>();
      cst && ty.hasStaticShape()) {
    std::optional<ArrayRef<char>> bytes = constantBytes(cst.getValue());
    if (bytes && static_cast<int64_t>(bytes->size()) == ty.getNumElements()) {
      AsmResourceBlob blob = HeapAsmResourceBlob::allocate(
          bytes->size() * sizeof(float), alignof(uint64_t),
          /*dataIsMutable=*/true);
      auto *out = reinterpret_cast<float *>(blob.getMutableData().data());
      for (auto [i, c] : llvm::enumerate(*bytes))
        out[i] = isUnsigned ? static_cast<float>(static_cast<uint8_t>(c))
                            : static_cast<float>(static_cast<int8_t>(c));
      auto outTy = RankedTensorType::get(ty.getShape(), f32);
      return arith::ConstantOp::create(
                 b, loc,
                 DenseResourceElementsAttr::get(outTy, "float_weight",
                                                std::move(blob)))
          .getResult();
    }
  }
  return mapElements(
      b, loc, v, f32, [&](OpBuilder &nb, Location l, Value x) -> Value {
        if (isUnsigned)
          return arith::UIToFPOp::create(nb, l, nb.getF32Type(), x);
        return arith::SIToFPOp::create(nb, l, nb.getF32Type(), x);
      });
}

struct IntegerProductToFloat final : OpRewritePattern<linalg::GenericOp> {
  IntegerProductToFloat(MLIRContext *ctx, bool keepVPDPBUSD)
      : OpRewritePattern(ctx), keepVPDPBUSD(keepVPDPBUSD) {}
  bool keepVPDPBUSD;

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    FailureOr<IntegerMatmul> product = matchIntegerMatmul(op);
    if (failed(product))
      return rewriter.notifyMatchFailure(op, "not an integer matrix product");
    if (keepVPDPBUSD && isVPDPBUSDProduct(op, *product))
      return rewriter.notifyMatchFailure(op, "kept for vpdpbusd");
    Location loc = op.getLoc();
    Type f32 = rewriter.getF32Type();
    Value a =
        operandToF32(rewriter, loc, op.getDpsInputs()[0], product->aUnsigned);
    Value b =
        operandToF32(rewriter, loc, op.getDpsInputs()[1], product->bUnsigned);
    // The accumulator's start: a fill's value converted, else C converted.
    Value c = op.getDpsInits()[0], init;
    if (auto fill = c.getDefiningOp<linalg::FillOp>()) {
      Value v =
          arith::SIToFPOp::create(rewriter, loc, f32, fill.getInputs()[0]);
      Value empty = tensor::EmptyOp::create(
          rewriter, loc, tensor::getMixedSizes(rewriter, loc, c), f32);
      init = linalg::FillOp::create(rewriter, loc, v, empty).getResult(0);
    } else {
      init = mapElements(rewriter, loc, c, f32,
                         [](OpBuilder &nb, Location l, Value x) -> Value {
                           return arith::SIToFPOp::create(nb, l,
                                                          nb.getF32Type(), x);
                         });
    }
    Value sum =
        linalg::GenericOp::create(
            rewriter, loc, init.getType(), ValueRange{a, b}, ValueRange{init},
            op.getIndexingMapsArray(), op.getIteratorTypesArray(),
            [](OpBuilder &nb, Location l, ValueRange args) {
              Value p = arith::MulFOp::create(nb, l, args[0], args[1]);
              linalg::YieldOp::create(
                  nb, l, arith::AddFOp::create(nb, l, args[2], p).getResult());
            })
            .getResult(0);
    rewriter.replaceOp(
        op, mapElements(rewriter, loc, sum, rewriter.getI32Type(),
                        [](OpBuilder &nb, Location l, Value x) -> Value {
                          return arith::FPToSIOp::create(nb, l, nb.getI32Type(),
                                                         x);
                        }));
    return success();
  }
};

struct IntegerProductsToFloatPass final
    : masformer::impl::IntegerProductsToFloatBase<IntegerProductsToFloatPass> {
  using IntegerProductsToFloatBase::IntegerProductsToFloatBase;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<IntegerProductToFloat>(&getContext(), keepVPDPBUSD);
    walkAndApplyPatterns(getOperation(), std::move(patterns));
  }
};

} // namespace
