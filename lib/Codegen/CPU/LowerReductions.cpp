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
