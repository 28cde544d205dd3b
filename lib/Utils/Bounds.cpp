//===- Bounds.cpp - Constant bounds of index values -----------------------===//

#include "masformer/Utils/Bounds.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Interfaces/ValueBoundsOpInterface.h"

using namespace mlir;

static std::optional<int64_t> upperBound(Value v, int depth) {
  if (std::optional<int64_t> c = getConstantIntValue(v))
    return c;
  if (depth > 8)
    return std::nullopt;
  Operation *def = v.getDefiningOp();
  if (isa_and_nonnull<arith::MinSIOp, arith::MinUIOp>(def)) {
    std::optional<int64_t> best;
    for (Value x : def->getOperands())
      if (std::optional<int64_t> b = upperBound(x, depth + 1))
        best = best ? std::min(*best, *b) : *b;
    return best;
  }
  if (isa_and_nonnull<arith::MaxSIOp, arith::MaxUIOp>(def)) {
    std::optional<int64_t> l = upperBound(def->getOperand(0), depth + 1);
    std::optional<int64_t> r = upperBound(def->getOperand(1), depth + 1);
    if (l && r)
      return std::max(*l, *r);
    return std::nullopt;
  }
  if (auto select = dyn_cast_if_present<arith::SelectOp>(def)) {
    std::optional<int64_t> t = upperBound(select.getTrueValue(), depth + 1);
    std::optional<int64_t> f = upperBound(select.getFalseValue(), depth + 1);
    if (t && f)
      return std::max(*t, *f);
    return std::nullopt;
  }
  if (auto min = dyn_cast_if_present<affine::AffineMinOp>(def)) {
    std::optional<int64_t> best;
    for (AffineExpr e : min.getAffineMap().getResults())
      if (auto c = dyn_cast<AffineConstantExpr>(e))
        best = best ? std::min(*best, c.getValue()) : c.getValue();
    if (best)
      return best;
  }
  FailureOr<int64_t> bound = ValueBoundsConstraintSet::computeConstantBound(
      presburger::BoundType::UB, v, /*stopCondition=*/nullptr,
      /*closedUB=*/true);
  if (succeeded(bound))
    return *bound;
  return std::nullopt;
}

std::optional<int64_t> mlir::masformer::constantUpperBound(Value v) {
  return upperBound(v, 0);
}
