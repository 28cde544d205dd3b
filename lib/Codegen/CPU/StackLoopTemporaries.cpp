//===- StackLoopTemporaries.cpp - Loop temporaries on the stack -*- C++ -*-===//
//
// A tiled kernel's temporaries, allocated inside its scf.forall (and inside
// its inner loops, once per step), become one stack slot each at the start
// of the forall's body: no malloc and free per tile and per step. A slot
// is sized by the buffer's constant upper bound; only buffers that cannot
// outlive one execution of their definition move, so a slot serves every
// execution.
//
//===----------------------------------------------------------------------===//

#include "masformer/Codegen/CPU/Passes.h"
#include "masformer/Utils/Bounds.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace mlir::masformer {
#define GEN_PASS_DEF_STACKLOOPTEMPORARIES
#include "masformer/Codegen/CPU/Passes.h.inc"
} // namespace mlir::masformer

using namespace mlir;

namespace {

/// Whether every use of `buffer`, through views, only reads or writes it:
/// no region yield, call, return, dealloc or op of unknown effects sees it,
/// so it cannot outlive one execution of its definition.
bool staysLocal(Value buffer) {
  SmallVector<Value> work = {buffer};
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (auto view = dyn_cast<ViewLikeOpInterface>(user)) {
        if (view.getViewSource() != v)
          return false;
        for (Value r : user->getResults())
          if (isa<BaseMemRefType>(r.getType()))
            work.push_back(r);
        continue;
      }
      if (user->hasTrait<OpTrait::IsTerminator>() ||
          isa<CallOpInterface, memref::DeallocOp,
              memref::ExtractAlignedPointerAsIndexOp>(user) ||
          !isa<MemoryEffectOpInterface>(user))
        return false;
      if (llvm::any_of(user->getResultTypes(), llvm::IsaPred<BaseMemRefType>))
        return false;
    }
  }
  return true;
}

struct StackLoopTemporariesPass final
    : masformer::impl::StackLoopTemporariesBase<StackLoopTemporariesPass> {
  using Base::Base;

  void runOnOperation() override {
    if (maxBytes < 0) {
      getOperation()->emitError("masformer-stack-loop-temporaries: max-bytes "
                                "must be non-negative, got ")
          << static_cast<int64_t>(maxBytes);
      return signalPassFailure();
    }
    // Each innermost forall's temporaries in program order.
    llvm::MapVector<scf::ForallOp, SmallVector<memref::AllocOp>> byLoop;
    // (Not through a parallel loop of another kind: its iterations would
    // share the slot at the same time.)
    getOperation()->walk([&](memref::AllocOp alloc) {
      auto loop = alloc->getParentOfType<scf::ForallOp>();
      if (!loop)
        return;
      for (Operation *p = alloc->getParentOp(); p != loop; p = p->getParentOp())
        if (isa<scf::ParallelOp>(p) ||
            (p->getDialect() && p->getDialect()->getNamespace() == "omp"))
          return;
      byLoop[loop].push_back(alloc);
    });
    for (auto &[loop, allocs] : byLoop) {
      int64_t used = 0;
      // The slots at the start of the body, in the buffers' order.
      OpBuilder slots(loop.getBody(), loop.getBody()->begin());
      for (memref::AllocOp alloc : allocs) {
        std::optional<MemRefType> slotType = slotTypeOf(alloc);
        if (!slotType || !staysLocal(alloc.getResult()))
          continue;
        int64_t bytes = slotType->getNumElements() *
                        llvm::divideCeil(slotType->getElementTypeBitWidth(), 8);
        if (used + bytes > maxBytes)
          continue;
        used += bytes;
        moveToStack(alloc, slots, *slotType);
      }
    }
  }

  /// The static type of `alloc`'s slot: its type with the leading size at
  /// its upper bound. None when another size is dynamic (a view of the
  /// slot would not have the buffer's layout), a size has no constant
  /// bound, or the layout is not the identity.
  static std::optional<MemRefType> slotTypeOf(memref::AllocOp alloc) {
    MemRefType type = alloc.getType();
    if (!type.getLayout().isIdentity() || !type.getElementType().isIntOrFloat())
      return std::nullopt;
    SmallVector<int64_t> shape(type.getShape());
    for (auto [i, size] : llvm::enumerate(shape)) {
      if (!ShapedType::isDynamic(size))
        continue;
      if (i != 0)
        return std::nullopt;
      std::optional<int64_t> bound =
          masformer::constantUpperBound(alloc.getDynamicSizes().front());
      if (!bound || *bound < 0)
        return std::nullopt;
      size = *bound;
    }
    return MemRefType::get(shape, type.getElementType(),
                           MemRefLayoutAttrInterface(), type.getMemorySpace());
  }

  static void moveToStack(memref::AllocOp alloc, OpBuilder &slots,
                          MemRefType slotType) {
    Location loc = alloc.getLoc();
    auto slot = memref::AllocaOp::create(slots, loc, slotType, ValueRange{},
                                         alloc.getAlignmentAttr());
    OpBuilder b(slot);
    MemRefType type = alloc.getType();
    if (type.hasStaticShape()) {
      alloc.replaceAllUsesWith(slot.getResult());
      alloc.erase();
      return;
    }
    b.setInsertionPoint(alloc);
    SmallVector<OpFoldResult> offsets(type.getRank(), b.getIndexAttr(0));
    SmallVector<OpFoldResult> strides(type.getRank(), b.getIndexAttr(1));
    SmallVector<OpFoldResult> sizes;
    for (int64_t i = 0; i < type.getRank(); ++i)
      sizes.push_back(i == 0 ? OpFoldResult(alloc.getDynamicSizes().front())
                             : b.getIndexAttr(type.getDimSize(i)));
    Value view =
        memref::SubViewOp::create(b, loc, slot, offsets, sizes, strides);
    Value cast = memref::CastOp::create(b, loc, type, view);
    alloc.replaceAllUsesWith(cast);
    alloc.erase();
  }
};

} // namespace
