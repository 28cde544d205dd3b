//===- Contractions.cpp - The model's matrix products -----------*- C++ -*-===//
//
// matchMatmul: the linalg.generic contractions the importer makes of MatMul,
// Gemm and Einsum, recognized for the CPU tiling, the GPU kernels and the
// mixed-precision rewrite.
//
//===----------------------------------------------------------------------===//

#include "masformer/Utils/Contractions.h"

using namespace mlir;
using namespace mlir::masformer;

/// `v`, or the value it extends, when it is an arith.extf.
static Value stripExt(Value v) {
  if (auto ext = v.getDefiningOp<arith::ExtFOp>())
    return ext.getIn();
  return v;
}

/// The loop dimensions of a generic with two inputs and one init whose maps
/// index a matrix product (matchMatmul's, whatever its body).
static FailureOr<MatmulDims> matchMatmulDims(linalg::GenericOp op) {
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  for (AffineMap map : maps)
    if (!map.isProjectedPermutation())
      return failure();
  auto dimAt = [](AffineMap map, int64_t fromEnd) {
    return cast<AffineDimExpr>(map.getResult(map.getNumResults() - fromEnd))
        .getPosition();
  };
  MatmulDims d;
  d.m = dimAt(maps[2], 2);
  d.n = dimAt(maps[2], 1);
  d.k = dimAt(maps[0], 1);
  if (dimAt(maps[0], 2) != d.m ||
      op.getIteratorTypesArray()[d.k] != utils::IteratorType::reduction)
    return failure();
  if (dimAt(maps[1], 1) == d.n && dimAt(maps[1], 2) == d.k)
    d.transposedB = false;
  else if (dimAt(maps[1], 1) == d.k && dimAt(maps[1], 2) == d.n)
    d.transposedB = true;
  else
    return failure();
  // The leading results of A and B are batch dimensions of C.
  for (AffineMap map : {maps[0], maps[1]})
    for (unsigned r = 0; r + 2 < map.getNumResults(); ++r) {
      unsigned dim = cast<AffineDimExpr>(map.getResult(r)).getPosition();
      if (dim == d.m || dim == d.n || dim == d.k)
        return failure();
    }
  // The reduction runs over a static length (the kernel's loop bound).
  if (ShapedType::isDynamic(op.getStaticLoopRanges()[d.k]))
    return failure();
  return d;
}

FailureOr<MatmulDims> mlir::masformer::matchMatmul(linalg::GenericOp op,
                                                   bool f32ResultOnly) {
  if (op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1 ||
      !op.hasPureTensorSemantics() || op.getNumReductionLoops() != 1)
    return failure();
  auto cTy = dyn_cast<RankedTensorType>(op.getDpsInits()[0].getType());
  auto aTy = dyn_cast<RankedTensorType>(op.getDpsInputs()[0].getType());
  auto bTy = dyn_cast<RankedTensorType>(op.getDpsInputs()[1].getType());
  if (!cTy || !aTy || !bTy || cTy.getRank() < 2 || aTy.getRank() < 2 ||
      bTy.getRank() < 2)
    return failure();
  Type cElem = cTy.getElementType();
  if (f32ResultOnly ? !cElem.isF32()
                    : !(cElem.isF32() || cElem.isF16() || cElem.isBF16()))
    return failure();
  for (Type t : {aTy.getElementType(), bTy.getElementType()})
    if (!t.isF32() && !t.isF16() && !t.isBF16())
      return failure();
  // The body: yield acc + ext(a) * ext(b).
  Block &body = op.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  auto add = yield.getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add)
    return failure();
  Value acc = body.getArgument(2);
  Value prod = add.getLhs() == acc   ? add.getRhs()
               : add.getRhs() == acc ? add.getLhs()
                                     : Value();
  auto mul = prod ? prod.getDefiningOp<arith::MulFOp>() : nullptr;
  if (!mul || stripExt(mul.getLhs()) != body.getArgument(0) ||
      stripExt(mul.getRhs()) != body.getArgument(1))
    return failure();
  // Every op of the body is one of those.
  if (llvm::range_size(body.without_terminator()) !=
      static_cast<size_t>(2 + (mul.getLhs() != body.getArgument(0)) +
                          (mul.getRhs() != body.getArgument(1))))
    return failure();

  return matchMatmulDims(op);
}

FailureOr<IntegerMatmul>
mlir::masformer::matchIntegerMatmul(linalg::GenericOp op) {
  if (op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1 ||
      !op.hasPureTensorSemantics() || op.getNumReductionLoops() != 1)
    return failure();
  auto cTy = dyn_cast<RankedTensorType>(op.getDpsInits()[0].getType());
  auto aTy = dyn_cast<RankedTensorType>(op.getDpsInputs()[0].getType());
  auto bTy = dyn_cast<RankedTensorType>(op.getDpsInputs()[1].getType());
  if (!cTy || !aTy || !bTy || cTy.getRank() < 2 || aTy.getRank() < 2 ||
      bTy.getRank() < 2 || !cTy.getElementType().isInteger(32) ||
      !aTy.getElementType().isInteger(8) || !bTy.getElementType().isInteger(8))
    return failure();
  // The body: yield acc + ext(a) * ext(b), each extension signed or not.
  Block &body = op.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  auto add = yield.getOperand(0).getDefiningOp<arith::AddIOp>();
  if (!add)
    return failure();
  Value acc = body.getArgument(2);
  Value prod = add.getLhs() == acc   ? add.getRhs()
               : add.getRhs() == acc ? add.getLhs()
                                     : Value();
  auto mul = prod ? prod.getDefiningOp<arith::MulIOp>() : nullptr;
  if (!mul)
    return failure();
  // Whether `v` extends block argument `i`, and how.
  auto extension = [&](Value v, unsigned i) -> std::optional<bool> {
    if (auto e = v.getDefiningOp<arith::ExtUIOp>();
        e && e.getIn() == body.getArgument(i))
      return true;
    if (auto e = v.getDefiningOp<arith::ExtSIOp>();
        e && e.getIn() == body.getArgument(i))
      return false;
    return std::nullopt;
  };
  std::optional<bool> aUnsigned = extension(mul.getLhs(), 0);
  std::optional<bool> bUnsigned = extension(mul.getRhs(), 1);
  if (!aUnsigned || !bUnsigned ||
      llvm::range_size(body.without_terminator()) != 4)
    return failure();
  FailureOr<MatmulDims> dims = matchMatmulDims(op);
  if (failed(dims))
    return failure();
  return IntegerMatmul{*dims, *aUnsigned, *bUnsigned};
}

bool mlir::masformer::isVPDPBUSDProduct(linalg::GenericOp op,
                                        const IntegerMatmul &product) {
  Value b = op.getDpsInputs()[1];
  auto bTy = cast<RankedTensorType>(b.getType());
  return product.aUnsigned && !product.bUnsigned && bTy.getRank() == 2 &&
         bTy.hasStaticShape() && b.getDefiningOp<arith::ConstantOp>() &&
         op.getStaticLoopRanges()[product.dims.k] % 4 == 0;
}
