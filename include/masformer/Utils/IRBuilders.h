//===- IRBuilders.h - Small IR builders the lowerings share -----*- C++ -*-===//
//
// Index arithmetic with short names, f32 constants and fills, affine maps
// of loop dimensions: the vocabulary of every lowering that builds linalg,
// vector or gpu code by hand (attention, contractions, loops).
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_UTILS_IRBUILDERS_H
#define MASFORMER_UTILS_IRBUILDERS_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace mlir::masformer {

/// Index arithmetic with short names.
struct Idx {
  OpBuilder &b;
  Location loc;
  Value c(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubIOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulIOp::create(b, loc, x, y); }
  Value min(Value x, Value y) { return arith::MinSIOp::create(b, loc, x, y); }
  Value max(Value x, Value y) { return arith::MaxSIOp::create(b, loc, x, y); }
  Value fdiv(Value x, Value y) {
    return arith::FloorDivSIOp::create(b, loc, x, y);
  }
  Value cdiv(Value x, Value y) {
    return arith::CeilDivSIOp::create(b, loc, x, y);
  }
  Value cmp(arith::CmpIPredicate p, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, p, x, y);
  }
  Value andI(Value x, Value y) { return arith::AndIOp::create(b, loc, x, y); }
  /// scf.for from `lb` to `ub` by `step`, its bounds' constants built in
  /// that order (nested in the create call, their order would be the C++
  /// compiler's argument evaluation order: GCC's IR and Clang's differ).
  scf::ForOp loop(int64_t lb, int64_t ub, int64_t step,
                  ValueRange iterArgs = {}) {
    Value l = c(lb);
    Value u = c(ub);
    Value s = c(step);
    return scf::ForOp::create(b, loc, l, u, s, iterArgs);
  }
  scf::ForOp loop(int64_t lb, Value ub, int64_t step,
                  ValueRange iterArgs = {}) {
    Value l = c(lb);
    Value s = c(step);
    return scf::ForOp::create(b, loc, l, ub, s, iterArgs);
  }
};

/// The bounds and steps of `op`'s loops but the innermost, as values (for
/// a loop nest built around a hand-written innermost loop), and that
/// innermost loop's range.
struct OuterLoops {
  SmallVector<Value> lbs, ubs, steps;
  Range inner;
};
inline OuterLoops outerLoops(OpBuilder &b, Location loc, linalg::LinalgOp op) {
  SmallVector<Range, 4> ranges = op.createLoopRanges(b, loc);
  auto val = [&](OpFoldResult f) {
    return getValueOrCreateConstantIndexOp(b, loc, f);
  };
  OuterLoops loops;
  for (const Range &r : ArrayRef<Range>(ranges).drop_back()) {
    loops.lbs.push_back(val(r.offset));
    loops.ubs.push_back(val(r.size));
    loops.steps.push_back(val(r.stride));
  }
  loops.inner = ranges.back();
  return loops;
}

using utils::IteratorType;
constexpr IteratorType kPar = IteratorType::parallel;
constexpr IteratorType kRed = IteratorType::reduction;

/// An f32 constant.
inline Value f32Const(OpBuilder &b, Location loc, float v) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
}

/// A tensor.empty of f32 with `sizes` (static or dynamic) filled with
/// `value`.
inline Value filledF32(OpBuilder &b, Location loc, ArrayRef<OpFoldResult> sizes,
                       float value) {
  Value empty = tensor::EmptyOp::create(b, loc, sizes, b.getF32Type());
  return linalg::FillOp::create(b, loc, f32Const(b, loc, value), empty)
      .getResult(0);
}

/// The affine map from `n` loop dims to the dims `ds`.
inline AffineMap dimsMap(MLIRContext *ctx, unsigned n, ArrayRef<unsigned> ds) {
  SmallVector<AffineExpr> e;
  for (unsigned d : ds)
    e.push_back(getAffineDimExpr(d, ctx));
  return AffineMap::get(n, 0, e, ctx);
}

/// Extends a float scalar to f32 (no-op for f32).
inline Value toF32(OpBuilder &b, Location loc, Value v) {
  if (v.getType().isF32())
    return v;
  return arith::ExtFOp::create(b, loc, b.getF32Type(), v);
}

/// `f` of each element of the tensor `x`, a tensor of element type `et` of
/// x's shape (a linalg.generic of identity maps).
inline Value
mapElements(OpBuilder &b, Location loc, Value x, Type et,
            llvm::function_ref<Value(OpBuilder &, Location, Value)> f) {
  auto ty = cast<RankedTensorType>(x.getType());
  int64_t rank = ty.getRank();
  AffineMap id = AffineMap::getMultiDimIdentityMap(rank, b.getContext());
  Value init =
      tensor::EmptyOp::create(b, loc, tensor::getMixedSizes(b, loc, x), et);
  return linalg::GenericOp::create(
             b, loc, init.getType(), ValueRange{x}, ValueRange{init},
             ArrayRef<AffineMap>{id, id},
             SmallVector<utils::IteratorType>(rank,
                                              utils::IteratorType::parallel),
             [&](OpBuilder &nb, Location nloc, ValueRange args) {
               linalg::YieldOp::create(nb, nloc, f(nb, nloc, args[0]));
             })
      .getResult(0);
}

/// The float tensor `x` extended elementwise to the wider float type `et`
/// (a linalg.generic of arith.extf).
inline Value extendElements(OpBuilder &b, Location loc, Value x, Type et) {
  return mapElements(b, loc, x, et,
                     [&](OpBuilder &nb, Location nloc, Value v) -> Value {
                       return arith::ExtFOp::create(nb, nloc, et, v);
                     });
}

} // namespace mlir::masformer

#endif // MASFORMER_UTILS_IRBUILDERS_H
