//===- BuffersToDevice.cpp - A host function's memory on the GP -*- C++ -*-===//
//
// After bufferization and kernel outlining, a model's host function only
// allocates, reshapes and launches. Its buffers are still host memory,
// though: allocations are memref.alloc, the weights are memref.get_global
// of host globals, and the arguments and results are the caller's. This
// pass moves all of it to the device while the function keeps its host
// interface:
//
//   %arg (host) ──gpu.memcpy──▶ device copy ─▶ kernels ─▶ device result
//                                                  │
//   return ◀── new host buffer ◀──gpu.memcpy───────┘
//
// and frees every device buffer after its last use. The function body must
// be one block (the host code of an outlined model is straight-line), so
// that "last use" is an order in that block.
//
//===----------------------------------------------------------------------===//

#include "masformer/Codegen/GPU/Passes.h"

#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace mlir::masformer {
#define GEN_PASS_DEF_BUFFERSTODEVICE
#include "masformer/Codegen/GPU/Passes.h.inc"
} // namespace mlir::masformer

using namespace mlir;
using namespace mlir::masformer;

namespace {

/// The dynamic sizes of `v` (a memref), as memref.dim ops at `b`.
SmallVector<Value> dynamicSizes(OpBuilder &b, Location loc, Value v) {
  auto ty = cast<MemRefType>(v.getType());
  SmallVector<Value> sizes;
  for (int64_t d = 0; d < ty.getRank(); ++d)
    if (ty.isDynamicDim(d))
      sizes.push_back(memref::DimOp::create(b, loc, v, d));
  return sizes;
}

/// A device buffer shaped like `v` (identity layout) holding a copy of it;
/// `uses` gets the ops that read `v` to make it.
Value copyToDevice(OpBuilder &b, Location loc, Value v,
                   llvm::SmallPtrSetImpl<Operation *> &uses) {
  auto ty = cast<MemRefType>(v.getType());
  auto devTy = MemRefType::get(ty.getShape(), ty.getElementType());
  SmallVector<Value> sizes = dynamicSizes(b, loc, v);
  for (Value size : sizes)
    uses.insert(size.getDefiningOp());
  Value dev = gpu::AllocOp::create(b, loc, devTy, Type(), ValueRange{}, sizes,
                                   ValueRange{})
                  .getMemref();
  uses.insert(gpu::MemcpyOp::create(b, loc, Type(), ValueRange{}, dev, v));
  return dev;
}

/// Ops whose memref results are views of their first memref operand.
bool isView(Operation *op) {
  return isa<ViewLikeOpInterface, memref::CastOp, memref::ExpandShapeOp,
             memref::CollapseShapeOp, memref::ReinterpretCastOp>(op);
}

struct BuffersToDevicePass final
    : masformer::impl::BuffersToDeviceBase<BuffersToDevicePass> {
  using Base::Base;

  /// Fails (with an error on the op) when `op`, left on the host, reads or
  /// writes memory.
  LogicalResult checkHostOp(Operation *op) {
    if (isa_and_nonnull<gpu::GPUDialect>(op->getDialect()) ||
        isa<func::ReturnOp, memref::GetGlobalOp>(op))
      return success();
    auto effects = dyn_cast<MemoryEffectOpInterface>(op);
    bool touches = !effects && !isPure(op);
    if (effects)
      touches = effects.hasEffect<MemoryEffects::Read>() ||
                effects.hasEffect<MemoryEffects::Write>();
    if (!touches)
      return success();
    return op->emitError()
           << "'" << op->getName()
           << "' would access device memory on the host: the GPU pipeline "
              "needs every op that reads or writes a buffer in a kernel";
  }

  LogicalResult convert(func::FuncOp func) {
    Region &region = func.getBody();
    if (!region.hasOneBlock())
      return func.emitError()
             << "the GPU pipeline needs straight-line host code, but @"
             << func.getSymName() << " has " << region.getBlocks().size()
             << " blocks";
    Block &block = region.front();
    for (Operation &op : block)
      if (failed(checkHostOp(&op)))
        return failure();
    OpBuilder b = OpBuilder::atBlockBegin(&block);
    Location loc = func.getLoc();

    // Arguments: a device copy at entry.
    for (BlockArgument arg : llvm::to_vector(block.getArguments())) {
      auto ty = dyn_cast<MemRefType>(arg.getType());
      if (!ty || arg.use_empty())
        continue;
      if (!ty.getLayout().isIdentity())
        return func.emitError()
               << "argument #" << arg.getArgNumber() << " has type " << ty
               << ": the GPU pipeline copies only contiguous (identity "
                  "layout) arguments to the device";
      llvm::SmallPtrSet<Operation *, 4> copying;
      Value dev = copyToDevice(b, loc, arg, copying);
      arg.replaceUsesWithIf(dev, [&](OpOperand &use) {
        return !copying.contains(use.getOwner());
      });
    }

    // Constants: copied at entry, or arguments in device memory.
    bool asArguments = constants == "arguments";
    if (asArguments &&
        !SymbolTable::symbolKnownUseEmpty(func, func->getParentOp()))
      return func.emitError()
             << "constants=arguments changes the signature of @"
             << func.getSymName() << ", which has callers";
    llvm::MapVector<StringAttr, SmallVector<memref::GetGlobalOp>> globals;
    func.walk([&](memref::GetGlobalOp op) {
      globals[op.getNameAttr().getAttr()].push_back(op);
    });
    for (auto &[name, uses] : globals) {
      auto ty = cast<MemRefType>(uses.front().getType());
      Value dev;
      if (asArguments) {
        unsigned index = func.getNumArguments();
        if (failed(func.insertArgument(index, ty, DictionaryAttr(), loc)))
          return failure();
        dev = func.getArgument(index);
      } else {
        Value host = memref::GetGlobalOp::create(b, loc, ty, name);
        llvm::SmallPtrSet<Operation *, 4> copying;
        dev = copyToDevice(b, loc, host, copying);
      }
      for (memref::GetGlobalOp op : uses) {
        op.replaceAllUsesWith(dev);
        op.erase();
      }
    }
    // The constants in argument order, for the caller. (On the function:
    // argument attributes do not survive the lowering to LLVM.)
    if (asArguments && !globals.empty()) {
      SmallVector<Attribute> names;
      for (auto &entry : globals)
        names.push_back(FlatSymbolRefAttr::get(entry.first));
      func->setAttr("masformer.constants", b.getArrayAttr(names));
    }

    // Allocations: device memory.
    SmallVector<Operation *> allocs;
    for (Operation &op : llvm::make_early_inc_range(block)) {
      if (isa<memref::DeallocOp>(op)) {
        op.erase();
        continue;
      }
      if (!isa<memref::AllocOp, memref::AllocaOp>(op))
        continue;
      OpBuilder ab(&op);
      auto ty = cast<MemRefType>(op.getResult(0).getType());
      auto dev = gpu::AllocOp::create(ab, op.getLoc(), ty, Type(),
                                      ValueRange{}, op.getOperands(),
                                      ValueRange{});
      op.getResult(0).replaceAllUsesWith(dev.getMemref());
      op.erase();
    }

    // Results: copied into new host buffers.
    auto ret = cast<func::ReturnOp>(block.getTerminator());
    b.setInsertionPoint(ret);
    for (OpOperand &operand : ret->getOpOperands()) {
      auto ty = dyn_cast<MemRefType>(operand.get().getType());
      if (!ty)
        continue;
      if (!ty.getLayout().isIdentity())
        return ret.emitError() << "result #" << operand.getOperandNumber()
                               << " has type " << ty
                               << ": the GPU pipeline returns only contiguous "
                                  "(identity layout) buffers";
      Value dev = operand.get();
      Value host = memref::AllocOp::create(b, ret.getLoc(), ty,
                                           dynamicSizes(b, ret.getLoc(), dev));
      gpu::MemcpyOp::create(b, ret.getLoc(), Type(), ValueRange{}, host, dev);
      operand.set(host);
    }

    // Each device buffer freed after the last use of it or of a view of it.
    for (Operation &op : llvm::make_early_inc_range(block)) {
      auto alloc = dyn_cast<gpu::AllocOp>(op);
      if (!alloc)
        continue;
      Operation *last = alloc;
      SmallVector<Value> work = {alloc.getMemref()};
      while (!work.empty()) {
        Value v = work.pop_back_val();
        for (Operation *user : v.getUsers()) {
          Operation *inBlock = block.findAncestorOpInBlock(*user);
          if (isa<func::ReturnOp>(inBlock))
            return inBlock->emitError()
                   << "internal error: a device buffer is returned";
          if (last->isBeforeInBlock(inBlock))
            last = inBlock;
          if (isView(user))
            for (Value r : user->getResults())
              if (isa<MemRefType>(r.getType()))
                work.push_back(r);
        }
      }
      OpBuilder db(&block, std::next(Block::iterator(last)));
      gpu::DeallocOp::create(db, alloc.getLoc(), Type(), ValueRange{},
                             alloc.getMemref());
    }
    return success();
  }

  void runOnOperation() override {
    if (constants != "copy" && constants != "arguments") {
      getOperation().emitError()
          << "masformer-buffers-to-device: constants=" << constants
          << ": expected copy or arguments";
      return signalPassFailure();
    }
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      if (failed(convert(func)))
        return signalPassFailure();
    }
  }
};

} // namespace
