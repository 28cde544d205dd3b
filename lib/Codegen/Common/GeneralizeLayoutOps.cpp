//===- GeneralizeLayoutOps.cpp - Transposes as fusable generics -*- C++ -*-===//
//
// A model's transposes and broadcasts outside the kernels (the heads split
// off a QKV projection and merged back after attention, a mask broadcast
// over the heads) as linalg.generic, so that the element-wise fusion puts
// each into the op that produces or consumes it: a head split and the bf16
// rounding of its result then take one pass over memory instead of two.
// Named ops inside loops (the tiled products' fills and transposed tiles,
// which later passes match by name) are left alone.
//
//===----------------------------------------------------------------------===//

#include "masformer/Codegen/Common/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

namespace mlir::masformer {
#define GEN_PASS_DEF_GENERALIZELAYOUTOPS
#include "masformer/Codegen/Common/Passes.h.inc"
} // namespace mlir::masformer

using namespace mlir;

namespace {

struct GeneralizeLayoutOpsPass final
    : masformer::impl::GeneralizeLayoutOpsBase<GeneralizeLayoutOpsPass> {
  void runOnOperation() override {
    SmallVector<linalg::LinalgOp> ops;
    getOperation()->walk([&](Operation *op) {
      if (isa<linalg::TransposeOp, linalg::BroadcastOp>(op) &&
          isa<FunctionOpInterface>(op->getParentOp()) &&
          cast<linalg::LinalgOp>(op).hasPureTensorSemantics())
        ops.push_back(cast<linalg::LinalgOp>(op));
    });
    IRRewriter rewriter(&getContext());
    for (linalg::LinalgOp op : ops) {
      rewriter.setInsertionPoint(op);
      if (failed(linalg::generalizeNamedOp(rewriter, op))) {
        op->emitError("--masformer-generalize-layout-ops: cannot rewrite ")
            << op->getName() << " as a linalg.generic";
        return signalPassFailure();
      }
    }
  }
};

} // namespace
