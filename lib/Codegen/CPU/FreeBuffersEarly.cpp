//===- FreeBuffersEarly.cpp - Free buffers after their last use -*- C++ -*-===//
//
// Ownership-based buffer deallocation places each dealloc at the end of the
// block that allocated the buffer; a model's entry function is one block,
// so without this pass every activation would live until the model
// returns. Each memref.dealloc moves up to just after the last op of its
// block that uses the buffer or any alias of it.
//
//===----------------------------------------------------------------------===//

#include "masformer/Codegen/CPU/Passes.h"

#include "mlir/Dialect/Bufferization/Transforms/BufferViewFlowAnalysis.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace mlir::masformer {
#define GEN_PASS_DEF_FREEBUFFERSEARLY
#include "masformer/Codegen/CPU/Passes.h.inc"
} // namespace mlir::masformer

using namespace mlir;

namespace {

/// The op of `dealloc`'s block after which the buffer is no longer used:
/// the last ancestor in that block of a user of any alias, or the buffer's
/// definition. Null when the dealloc must stay: an alias is used outside
/// the block or after the dealloc, or escapes the analysis, or the buffer
/// has neither a definition nor a use in the block.
Operation *lastUse(memref::DeallocOp dealloc,
                   const BufferViewFlowAnalysis &aliases) {
  Block *block = dealloc->getBlock();
  Value buffer = dealloc.getMemref();
  Operation *last = buffer.getDefiningOp();
  if (last && last->getBlock() != block)
    last = nullptr;
  for (Value alias : aliases.resolve(buffer)) {
    for (Operation *user : alias.getUsers()) {
      if (user == dealloc)
        continue;
      // An index holding the address may be used anywhere.
      if (isa<memref::ExtractAlignedPointerAsIndexOp>(user))
        return nullptr;
      Operation *ancestor = block->findAncestorOpInBlock(*user);
      if (!ancestor || !ancestor->isBeforeInBlock(dealloc))
        return nullptr;
      if (!last || last->isBeforeInBlock(ancestor))
        last = ancestor;
    }
  }
  return last;
}

struct FreeBuffersEarlyPass final
    : masformer::impl::FreeBuffersEarlyBase<FreeBuffersEarlyPass> {
  void runOnOperation() override {
    BufferViewFlowAnalysis aliases(getOperation());
    SmallVector<memref::DeallocOp> deallocs;
    getOperation()->walk([&](memref::DeallocOp op) { deallocs.push_back(op); });
    for (memref::DeallocOp dealloc : deallocs) {
      if (Operation *last = lastUse(dealloc, aliases))
        if (last->getNextNode() != dealloc)
          dealloc->moveAfter(last);
    }
  }
};

} // namespace
