//===- PrepareEntry.cpp - The entry function as the runtime cal -*- C++ -*-===//
//
// Arguments read-only, every result a buffer of its own, a C interface: see
// the pass description in Codegen/Common/Passes.td.
//
//===----------------------------------------------------------------------===//

#include "masformer/Codegen/Common/Passes.h"
#include "masformer/Dialect/MASFormer/IR/MASFormerOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::masformer {
#define GEN_PASS_DEF_PREPAREENTRY
#include "masformer/Codegen/Common/Passes.h.inc"
} // namespace mlir::masformer

using namespace mlir;
using namespace mlir::masformer;

/// True when `v` (through views) is an argument or a constant, or a buffer
/// already returned: returning it would hand the runtime memory that it
/// must not free.
static bool needsCopy(Value v, llvm::DenseSet<Value> &returned) {
  Value root = v;
  while (Operation *op = root.getDefiningOp()) {
    if (!isa<tensor::CastOp, tensor::ExpandShapeOp, tensor::CollapseShapeOp,
             tensor::ExtractSliceOp, tensor::ReshapeOp>(op))
      break;
    root = op->getOperand(0);
  }
  if (isa<BlockArgument>(root) || root.getDefiningOp<arith::ConstantOp>())
    return true;
  return !returned.insert(root).second;
}

namespace {

struct PrepareEntry final : masformer::impl::PrepareEntryBase<PrepareEntry> {
  using PrepareEntryBase::PrepareEntryBase;

  void runOnOperation() override {
    auto main = getOperation().lookupSymbol<func::FuncOp>(entry);
    if (!main || main.isExternal()) {
      getOperation().emitError() << "--masformer-prepare-entry: no function @"
                                 << entry << " with a body";
      return signalPassFailure();
    }
    MLIRContext *ctx = main.getContext();
    // The runtime passes the caller's buffers: never written, but for those
    // the entry updates in place (a decode entry's cache), which
    // --masformer-check-in-place checks after bufferization.
    for (unsigned i = 0; i < main.getNumArguments(); ++i)
      main.setArgAttr(
          i, "bufferization.writable",
          BoolAttr::get(ctx, main.getArgAttr(i, kInPlaceAttrName) != nullptr));
    // Every result is a buffer of its own, which the runtime frees.
    llvm::DenseSet<Value> returned;
    WalkResult walk = main.walk([&](func::ReturnOp ret) {
      OpBuilder b(ret);
      for (OpOperand &operand : ret->getOpOperands()) {
        Value v = operand.get();
        if (!needsCopy(v, returned))
          continue;
        auto tt = dyn_cast<RankedTensorType>(v.getType());
        if (!tt) {
          ret.emitError() << "--masformer-prepare-entry: result "
                          << operand.getOperandNumber() << " of @" << entry
                          << " is " << v.getType() << ", not a ranked tensor";
          return WalkResult::interrupt();
        }
        SmallVector<Value> dyn;
        for (int64_t d = 0; d < tt.getRank(); ++d)
          if (tt.isDynamicDim(d))
            dyn.push_back(tensor::DimOp::create(b, ret.getLoc(), v, d));
        Value init = tensor::EmptyOp::create(b, ret.getLoc(), tt.getShape(),
                                             tt.getElementType(), dyn);
        operand.set(
            linalg::CopyOp::create(b, ret.getLoc(), v, init).getResult(0));
      }
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();
    main->setAttr("llvm.emit_c_interface", UnitAttr::get(ctx));
  }
};

} // namespace
