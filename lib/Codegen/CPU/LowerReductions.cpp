//===- LowerReductions.cpp - Row reductions with the sum in a register ---===//
//
// convert-linalg-to-loops lowers a reduction such as a norm's row sum to a
// loop that loads and stores the output element at every step: the sum
// lives in memory, which LLVM cannot keep in a register (the input might
// alias it), and its floating-point adds stay in order, so the loop runs
// one scalar add per store-to-load latency. This pass lowers each
// generic on buffers whose innermost loop is its one reduction to loops
// whose reduction loop carries the partial result as a loop value, stored
// once per output element, with the combining op marked `reassoc`: LLVM
// then vectorizes the reduction (partial sums in vector lanes).
//
//===----------------------------------------------------------------------===//

#include "masformer/Codegen/CPU/Passes.h"
#include "masformer/Utils/IRBuilders.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::masformer {
#define GEN_PASS_DEF_LOWERREDUCTIONS
#include "masformer/Codegen/CPU/Passes.h.inc"
} // namespace mlir::masformer

using namespace mlir;

namespace {

/// Whether `op` is a reduction this pass lowers: on buffers, one output
/// that the innermost loop (the only reduction) does not index, a body
/// that computes its one result from the output's element.
bool isRowReduction(linalg::GenericOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInits() != 1)
    return false;
  SmallVector<utils::IteratorType> iters = op.getIteratorTypesArray();
  if (op.getNumReductionLoops() != 1 ||
      iters.back() != utils::IteratorType::reduction)
    return false;
  AffineMap outMap = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  return !outMap.isFunctionOfDim(iters.size() - 1) &&
         !op.getRegion().front().getArgument(op.getNumDpsInputs()).use_empty();
}

/// The indices `map` gives for the loop indices `ivs`.
SmallVector<Value> applyMap(OpBuilder &b, Location loc, AffineMap map,
                            ValueRange ivs) {
  SmallVector<Value> indices;
  for (AffineExpr e : map.getResults()) {
    if (auto d = dyn_cast<AffineDimExpr>(e)) {
      indices.push_back(ivs[d.getPosition()]);
    } else if (auto c = dyn_cast<AffineConstantExpr>(e)) {
      indices.push_back(arith::ConstantIndexOp::create(b, loc, c.getValue()));
    } else {
      AffineMap one = AffineMap::get(map.getNumDims(), 0, e);
      indices.push_back(affine::AffineApplyOp::create(b, loc, one, ivs));
    }
  }
  return indices;
}

/// Lanes of the vectorized minimum and maximum reductions.
constexpr int64_t kMinMaxLanes = 16;

/// The combining op of a row reduction that is a minimum or maximum
/// (arith.minnumf / maxnumf) of its one f32 input, read along the reduction
/// loop as its last index; null for any other. LLVM does not vectorize
/// those loops, even reassociable (minnum's rule for NaN), so this pass
/// does: a quantized model's every activation range was two scalar passes
/// (40% of an int8 product's time at 2048 x 3072).
Operation *minMaxCombiner(linalg::GenericOp op) {
  if (op.getNumDpsInputs() != 1)
    return nullptr;
  OpOperand *in = op.getDpsInputOperand(0);
  auto inTy = dyn_cast<MemRefType>(in->get().getType());
  if (!inTy || !inTy.getElementType().isF32() || inTy.getRank() == 0)
    return nullptr;
  // Its last dimension contiguous: the vectors are plain loads.
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(inTy.getStridesAndOffset(strides, offset)) || strides.back() != 1)
    return nullptr;
  Block &body = op.getRegion().front();
  if (!llvm::hasSingleElement(body.without_terminator()))
    return nullptr;
  Operation &c = body.front();
  if (!isa<arith::MinNumFOp, arith::MaxNumFOp>(c) ||
      cast<linalg::YieldOp>(body.getTerminator()).getOperand(0) !=
          c.getResult(0))
    return nullptr;
  Value inArg = body.getArgument(0), accArg = body.getArgument(1);
  if (!((c.getOperand(0) == inArg && c.getOperand(1) == accArg) ||
        (c.getOperand(0) == accArg && c.getOperand(1) == inArg)))
    return nullptr;
  // The reduction loop indexes the input's last dimension, and only it.
  AffineMap map = op.getMatchingIndexingMap(in);
  unsigned red = op.getNumLoops() - 1;
  if (map.getNumResults() == 0 ||
      map.getResults().back() != getAffineDimExpr(red, op.getContext()))
    return nullptr;
  for (AffineExpr e : map.getResults().drop_back())
    if (e.isFunctionOfDim(red))
      return nullptr;
  return &c;
}

/// The minimum or maximum of `in` at `ivs` (the reduction index last)
/// from lb to ub, starting at `first`: vectors of kMinMaxLanes carried
/// through the whole vectors, reduced across lanes, then the rest one by
/// one. minnumf / maxnumf ignore NaN whatever the order, so the result is
/// the scalar loop's (up to the sign of a zero, which either may return).
Value buildMinMaxReduction(OpBuilder &b, Location loc, Operation *combiner,
                           Value in, AffineMap map, ValueRange outer, Value lb,
                           Value ub, Value first) {
  bool isMin = isa<arith::MinNumFOp>(combiner);
  auto combine = [&](OpBuilder &nb, Value x, Value y) -> Value {
    if (isMin)
      return arith::MinNumFOp::create(nb, loc, x, y);
    return arith::MaxNumFOp::create(nb, loc, x, y);
  };
  auto indices = [&](OpBuilder &nb, Value k) {
    SmallVector<Value> ivs(outer.begin(), outer.end());
    ivs.push_back(k);
    return applyMap(nb, loc, map, ivs);
  };
  masformer::Idx ix{b, loc};
  Value lanes = ix.c(kMinMaxLanes);
  Value len = ix.sub(ub, lb);
  Value mainUb = ix.sub(ub, arith::RemSIOp::create(b, loc, len, lanes));
  auto vt = VectorType::get({kMinMaxLanes}, b.getF32Type());
  Value acc0 = vector::BroadcastOp::create(b, loc, vt, first);
  auto vloop = scf::ForOp::create(
      b, loc, lb, mainUb, lanes, ValueRange{acc0},
      [&](OpBuilder &lb2, Location, Value k, ValueRange acc) {
        Value pad = arith::ConstantOp::create(lb2, loc, lb2.getF32FloatAttr(0));
        Value v = vector::TransferReadOp::create(
            lb2, loc, vt, in, indices(lb2, k), pad, ArrayRef<bool>{true});
        scf::YieldOp::create(lb2, loc, combine(lb2, acc[0], v));
      });
  Value r = vector::ReductionOp::create(b, loc,
                                        isMin ? vector::CombiningKind::MINNUMF
                                              : vector::CombiningKind::MAXNUMF,
                                        vloop.getResult(0));
  auto tail = scf::ForOp::create(
      b, loc, mainUb, ub, ix.c(1), ValueRange{r},
      [&](OpBuilder &lb2, Location, Value k, ValueRange acc) {
        Value x = memref::LoadOp::create(lb2, loc, in, indices(lb2, k));
        scf::YieldOp::create(lb2, loc, combine(lb2, acc[0], x));
      });
  return tail.getResult(0);
}

void lowerRowReduction(linalg::GenericOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  masformer::OuterLoops loops =
      masformer::outerLoops(b, loc, cast<linalg::LinalgOp>(op.getOperation()));
  auto val = [&](OpFoldResult f) {
    return getValueOrCreateConstantIndexOp(b, loc, f);
  };
  const Range &red = loops.inner;
  Value redLb = val(red.offset), redUb = val(red.size),
        redStep = val(red.stride);
  Block &body = op.getRegion().front();
  OpOperand *init = op.getDpsInitOperand(0);
  AffineMap outMap = op.getMatchingIndexingMap(init);
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);

  scf::buildLoopNest(
      b, loc, loops.lbs, loops.ubs, loops.steps,
      [&](OpBuilder &nb, Location nloc, ValueRange outer) {
        // The output's indices do not use the reduction loop's.
        SmallVector<Value> atZero(outer.begin(), outer.end());
        atZero.push_back(zero);
        SmallVector<Value> outIdx = applyMap(nb, nloc, outMap, atZero);
        Value first =
            memref::LoadOp::create(nb, nloc, init->get(), outIdx).getResult();
        if (Operation *combiner = minMaxCombiner(op)) {
          OpOperand *in = op.getDpsInputOperand(0);
          Value r = buildMinMaxReduction(nb, nloc, combiner, in->get(),
                                         op.getMatchingIndexingMap(in), outer,
                                         redLb, redUb, first);
          memref::StoreOp::create(nb, nloc, r, init->get(), outIdx);
          return;
        }
        auto loop = scf::ForOp::create(
            nb, nloc, redLb, redUb, redStep, ValueRange{first},
            [&](OpBuilder &lb, Location lloc, Value k, ValueRange acc) {
              SmallVector<Value> ivs(outer.begin(), outer.end());
              ivs.push_back(k);
              IRMapping map;
              for (OpOperand *in : op.getDpsInputOperands()) {
                Value arg = body.getArgument(in->getOperandNumber());
                if (!isa<MemRefType>(in->get().getType())) {
                  map.map(arg, in->get());
                  continue;
                }
                SmallVector<Value> idx =
                    applyMap(lb, lloc, op.getMatchingIndexingMap(in), ivs);
                map.map(arg, memref::LoadOp::create(lb, lloc, in->get(), idx)
                                 .getResult());
              }
              Value accArg = body.getArgument(op.getNumDpsInputs());
              map.map(accArg, acc[0]);
              for (Operation &inner : body.without_terminator()) {
                if (auto index = dyn_cast<linalg::IndexOp>(inner)) {
                  map.map(index.getResult(), ivs[index.getDim()]);
                  continue;
                }
                Operation *c = lb.clone(inner, map);
                // The op that combines the partial result may reassociate.
                auto fm = dyn_cast<arith::ArithFastMathInterface>(c);
                if (fm && llvm::is_contained(inner.getOperands(), accArg)) {
                  arith::FastMathFlags flags =
                      fm.getFastMathFlagsAttr().getValue() |
                      arith::FastMathFlags::reassoc;
                  c->setAttr(
                      fm.getFastMathAttrName(),
                      arith::FastMathFlagsAttr::get(c->getContext(), flags));
                }
              }
              Value next = map.lookupOrDefault(
                  cast<linalg::YieldOp>(body.getTerminator()).getOperand(0));
              scf::YieldOp::create(lb, lloc, next);
            });
        memref::StoreOp::create(nb, nloc, loop.getResult(0), init->get(),
                                outIdx);
      });
  op.erase();
}

struct LowerReductionsPass final
    : masformer::impl::LowerReductionsBase<LowerReductionsPass> {
  void runOnOperation() override {
    SmallVector<linalg::GenericOp> ops;
    getOperation()->walk([&](linalg::GenericOp op) {
      if (isRowReduction(op))
        ops.push_back(op);
    });
    for (linalg::GenericOp op : ops)
      lowerRowReduction(op);
  }
};

} // namespace
