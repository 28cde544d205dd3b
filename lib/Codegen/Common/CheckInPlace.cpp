//===- CheckInPlace.cpp - Arguments updated in place, checked ---*- C++ -*-===//
//
// After bufferization, each function argument marked masformer.in_place
// must be written, directly or through views: otherwise bufferization
// copied it and the caller would never see the update. See the pass
// description in Codegen/Common/Passes.td.
//
//===----------------------------------------------------------------------===//

#include "masformer/Codegen/Common/Passes.h"
#include "masformer/Dialect/MASFormer/IR/MASFormerOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace mlir::masformer {
#define GEN_PASS_DEF_CHECKINPLACE
#include "masformer/Codegen/Common/Passes.h.inc"
} // namespace mlir::masformer

using namespace mlir;
using namespace mlir::masformer;

/// Whether some op writes `root` or a view of it.
static bool isWritten(Value root) {
  SmallVector<Value> worklist = {root};
  llvm::SmallPtrSet<Value, 8> seen;
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    if (!seen.insert(v).second)
      continue;
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      // Subviews, casts, reshapes.
      if (auto view = dyn_cast<ViewLikeOpInterface>(user)) {
        if (view.getViewSource() == v)
          llvm::append_range(worklist, user->getResults());
        continue;
      }
      SmallVector<MemoryEffects::EffectInstance> effects;
      if (auto iface = dyn_cast<MemoryEffectOpInterface>(user))
        iface.getEffectsOnValue(v, effects);
      if (llvm::any_of(effects, [](const MemoryEffects::EffectInstance &e) {
            return isa<MemoryEffects::Write>(e.getEffect());
          }))
        return true;
    }
  }
  return false;
}

namespace {

struct CheckInPlace final : masformer::impl::CheckInPlaceBase<CheckInPlace> {
  void runOnOperation() override {
    WalkResult walk = getOperation().walk([&](func::FuncOp f) {
      for (unsigned i = 0; i < f.getNumArguments(); ++i) {
        if (!f.getArgAttr(i, kInPlaceAttrName))
          continue;
        if (f.isExternal()) {
          f.removeArgAttr(i, kInPlaceAttrName);
          continue;
        }
        BlockArgument arg = f.getArgument(i);
        auto name = f.getArgAttrOfType<StringAttr>(i, "onnx.name");
        std::string which =
            "argument " + std::to_string(i) +
            (name ? " ('" + name.getValue().str() + "')" : std::string());
        if (!isa<BaseMemRefType>(arg.getType())) {
          f.emitError() << "--masformer-check-in-place: @" << f.getSymName()
                        << "'s " << which
                        << " is not a buffer: run it after bufferization";
          return WalkResult::interrupt();
        }
        if (!isWritten(arg)) {
          f.emitError() << "@" << f.getSymName() << "'s " << which
                        << " must be updated in place, but bufferization "
                           "copied it: the caller would not see the update";
          return WalkResult::interrupt();
        }
        f.removeArgAttr(i, kInPlaceAttrName);
      }
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
