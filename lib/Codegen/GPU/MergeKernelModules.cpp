//===- MergeKernelModules.cpp - All gpu.modules as one ----------*- C++ -*-===//
//
// gpu-kernel-outlining makes one gpu.module per kernel: for a whole model,
// hundreds of ptxas runs at compile time and of module loads when the
// library is opened. Their kernels move into the first gpu.module; an
// outlined kernel, always called after its launch's function
// (@main_kernel in @main_kernel_7), takes its module's name (unique in the
// enclosing module) when its own collides. Identical kernels (the same
// element-wise op in every layer of a model) are then kept once.
//
//===----------------------------------------------------------------------===//

#include "masformer/Codegen/GPU/Passes.h"

#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::masformer {
#define GEN_PASS_DEF_MERGEKERNELMODULES
#include "masformer/Codegen/GPU/Passes.h.inc"
} // namespace mlir::masformer

using namespace mlir;
using namespace mlir::masformer;

namespace {

struct MergeKernelModulesPass final
    : masformer::impl::MergeKernelModulesBase<MergeKernelModulesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto gpuModules = llvm::to_vector(module.getOps<gpu::GPUModuleOp>());
    if (gpuModules.size() < 2)
      return;
    for (gpu::GPUModuleOp m : gpuModules)
      if (m.getTargetsAttr() && !m.getTargetsAttr().empty()) {
        m.emitError() << "masformer-merge-kernel-modules runs before "
                         "targets are attached (nvvm-attach-target)";
        return signalPassFailure();
      }
    gpu::GPUModuleOp into = gpuModules.front();
    SymbolTable intoSymbols(into);
    // (old module, old symbol) -> new symbol in `into`.
    DenseMap<std::pair<StringAttr, StringAttr>, StringAttr> moved;
    for (gpu::GPUModuleOp from : llvm::drop_begin(gpuModules)) {
      for (Operation &op :
           llvm::make_early_inc_range(from.getBody()->getOperations())) {
        auto sym = dyn_cast<SymbolOpInterface>(op);
        if (!sym)
          continue;
        StringAttr oldName = sym.getNameAttr();
        op.remove();
        // Prefer the module's name (unique among the enclosing module's
        // symbols); SymbolTable::insert renames on a collision.
        if (intoSymbols.lookup(oldName))
          sym.setName(from.getNameAttr());
        StringAttr newName = intoSymbols.insert(&op);
        moved[{from.getNameAttr(), oldName}] = newName;
      }
    }
    // The launches, to the kernels' new homes.
    // Identical kernels: the first of each kind stays. The key is the
    // kernel printed under a fixed name.
    llvm::StringMap<StringAttr> firstOfKind;
    DenseMap<StringAttr, StringAttr> sameAs;
    SmallVector<gpu::GPUFuncOp> duplicates;
    StringAttr placeholder = StringAttr::get(&getContext(), "__kernel");
    for (auto func : into.getOps<gpu::GPUFuncOp>()) {
      StringAttr name = func.getNameAttr();
      func.setName(placeholder);
      std::string key;
      llvm::raw_string_ostream os(key);
      func->print(os, OpPrintingFlags().printGenericOpForm().useLocalScope());
      func.setName(name);
      auto [it, inserted] = firstOfKind.try_emplace(key, name);
      if (!inserted) {
        sameAs[name] = it->second;
        duplicates.push_back(func);
      }
    }
    module.walk([&](gpu::LaunchFuncOp launch) {
      SymbolRefAttr ref = launch.getKernel();
      StringAttr leaf = ref.getLeafReference();
      auto it = moved.find({ref.getRootReference(), leaf});
      if (it != moved.end())
        leaf = it->second;
      else if (ref.getRootReference() != into.getNameAttr())
        return;
      if (StringAttr first = sameAs.lookup(leaf))
        leaf = first;
      launch.setKernelAttr(SymbolRefAttr::get(into.getNameAttr(),
                                              {FlatSymbolRefAttr::get(leaf)}));
    });
    for (gpu::GPUFuncOp func : duplicates)
      func.erase();
    for (gpu::GPUModuleOp from : llvm::drop_begin(gpuModules)) {
      if (!from.getBody()->empty()) {
        from.emitError() << "masformer-merge-kernel-modules: '"
                         << from.getName()
                         << "' keeps ops that are not symbols";
        return signalPassFailure();
      }
      from.erase();
    }
  }
};

} // namespace
