//===- OutlineKernels.cpp - Loop nests as shared functions -----*- C++ -*-===//
//
// A model lowers every layer to its own copy of the same loop nests: the
// tiled attention of each layer of one shape and span is the same code, and
// it is the largest part of the module. Each outermost scf.forall becomes a
// call to a private function holding it; nests that print the same share
// one function, so that the rest of the lowering, the translation to LLVM
// IR and LLVM handle each kernel once.
//
//===----------------------------------------------------------------------===//

#include "masformer/Codegen/CPU/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::masformer {
#define GEN_PASS_DEF_OUTLINEKERNELS
#include "masformer/Codegen/CPU/Passes.h.inc"
} // namespace mlir::masformer

using namespace mlir;

namespace {

/// An op that can be copied into the kernel instead of becoming an
/// argument: a constant without operands (a tile size, a loop bound, a
/// splat).
bool isCopiedConstant(Operation *def) {
  return def->getNumOperands() == 0 && def->getNumRegions() == 0 &&
         matchPattern(def, m_Constant());
}

/// A view the kernel recomputes from its source instead of taking as an
/// argument: the loads and stores through it then fold onto the source
/// (--fold-memref-alias-ops) as they did before outlining, and no view of
/// a reassociated or strided shape crosses a call.
bool isCopiedView(Operation *def) {
  return isa<memref::ExpandShapeOp, memref::CollapseShapeOp, memref::SubViewOp,
             memref::CastOp, memref::ReinterpretCastOp>(def);
}

/// What the kernel of a loop nest needs from outside: its arguments, and
/// the ops it copies in (constants, views), in an order where each op
/// comes after the ops that define its operands.
struct KernelInputs {
  SmallVector<Value> arguments;
  SmallVector<Operation *> copied;
  DenseSet<Value> seen;

  void add(Value value) {
    if (!seen.insert(value).second)
      return;
    Operation *def = value.getDefiningOp();
    if (def && isCopiedConstant(def)) {
      copied.push_back(def);
      return;
    }
    if (def && isCopiedView(def)) {
      for (Value operand : def->getOperands())
        add(operand);
      copied.push_back(def);
      return;
    }
    arguments.push_back(value);
  }
};

struct OutlineKernelsPass final
    : masformer::impl::OutlineKernelsBase<OutlineKernelsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<scf::ForallOp> loops;
    for (auto func : module.getOps<func::FuncOp>())
      func.walk<WalkOrder::PreOrder>([&](scf::ForallOp loop) {
        loops.push_back(loop);
        return WalkResult::skip();
      });
    SymbolTable symbols(module);
    // The printed kernel (with a placeholder name) -> its function.
    llvm::StringMap<func::FuncOp> kernels;
    OpBuilder builder(module.getContext());
    for (scf::ForallOp loop : loops) {
      // On buffers a forall has no results; one on tensors stays.
      if (loop->getNumResults() != 0)
        continue;
      llvm::SetVector<Value> used(loop->operand_begin(), loop->operand_end());
      getUsedValuesDefinedAbove(loop->getRegions(), used);
      KernelInputs inputs;
      for (Value value : used)
        inputs.add(value);

      builder.setInsertionPointToEnd(module.getBody());
      auto kernel = func::FuncOp::create(
          builder, loop.getLoc(), "masformer_kernel",
          builder.getFunctionType(ValueRange(inputs.arguments).getTypes(), {}));
      kernel.setPrivate();
      Block *entry = kernel.addEntryBlock();
      IRMapping mapping;
      mapping.map(inputs.arguments, entry->getArguments());
      builder.setInsertionPointToStart(entry);
      for (Operation *op : inputs.copied)
        builder.clone(*op, mapping);
      builder.clone(*loop, mapping);
      func::ReturnOp::create(builder, loop.getLoc());

      // Locations are not printed: the same nest of two layers prints the
      // same.
      std::string key;
      {
        llvm::raw_string_ostream os(key);
        kernel->print(os, OpPrintingFlags().useLocalScope());
      }
      func::FuncOp callee;
      if (auto it = kernels.find(key); it != kernels.end()) {
        callee = it->second;
        kernel.erase();
      } else {
        kernel.setName(("masformer_kernel_" + Twine(kernels.size())).str());
        symbols.insert(kernel); // renamed if the module has that name
        kernels[key] = kernel;
        callee = kernel;
      }
      builder.setInsertionPoint(loop);
      func::CallOp::create(builder, loop.getLoc(), callee, inputs.arguments);
      loop.erase();
    }
  }
};

} // namespace
