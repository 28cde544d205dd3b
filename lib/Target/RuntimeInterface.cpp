//===- RuntimeInterface.cpp - What a compiled library exports ---*- C++ -*-===//

#include "masformer/Target/RuntimeInterface.h"
#include "masformer/Runtime/ABI.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Module.h"

using namespace mlir;
using namespace mlir::masformer;

FailureOr<SmallVector<DeviceConstant>>
mlir::masformer::collectDeviceConstants(ModuleOp module, Location loc) {
  SmallVector<DeviceConstant> out;
  auto main = module.lookupSymbol<LLVM::LLVMFuncOp>("main");
  if (!main)
    return emitError(loc) << "internal error: no @main after the lowering",
           failure();
  auto names = main->getAttrOfType<ArrayAttr>("masformer.constants");
  if (!names)
    return out;
  for (Attribute a : names) {
    auto ref = cast<FlatSymbolRefAttr>(a);
    auto global = module.lookupSymbol<LLVM::GlobalOp>(ref.getAttr());
    auto value = global
                     ? dyn_cast_or_null<ElementsAttr>(global.getValueOrNull())
                     : ElementsAttr();
    if (!value)
      return emitError(loc) << "internal error: constant " << ref
                            << " has no data after the lowering",
             failure();
    Type et = value.getShapedType().getElementType();
    uint64_t bytes = static_cast<uint64_t>(value.getNumElements()) *
                     llvm::divideCeil(et.getIntOrFloatBitWidth(), 8);
    out.push_back({ref.getValue().str(),
                   llvm::to_vector(value.getShapedType().getShape()), bytes,
                   std::nullopt});
  }
  return out;
}

LogicalResult mlir::masformer::addRuntimeInterface(
    llvm::Module &m, unsigned numInputs, StringRef signature, bool device,
    ArrayRef<DeviceConstant> constants, Location loc) {
  llvm::LLVMContext &ctx = m.getContext();
  llvm::Function *ciface = m.getFunction("_mlir_ciface_main");
  if (!ciface || ciface->arg_size() != numInputs + constants.size() + 1)
    return emitError(loc) << "internal error: the lowered module has no C "
                             "interface for @main with "
                          << numInputs << " inputs and " << constants.size()
                          << " weights",
           failure();
  // The weights' host data: a global in the code, or a weight-table slot.
  SmallVector<llvm::GlobalVariable *> hostData;
  llvm::GlobalVariable *table = m.getGlobalVariable(MF_ABI_SYM_WEIGHT_TABLE);
  for (const DeviceConstant &c : constants) {
    llvm::GlobalVariable *g =
        c.slot ? table : m.getGlobalVariable(c.global, true);
    if (!g)
      return emitError(loc) << "internal error: no global " << c.global
                            << " in the LLVM module",
             failure();
    hostData.push_back(g);
  }
  for (llvm::Function &f : m)
    if (!f.isDeclaration())
      f.setLinkage(llvm::GlobalValue::InternalLinkage);
  // (llvm.global_ctors loads the GPU code and the runtime fills the weight
  // table: their linkage stays.)
  for (llvm::GlobalVariable &g : m.globals())
    if (!g.isDeclaration() && !g.getName().starts_with("llvm.") && &g != table)
      g.setLinkage(llvm::GlobalValue::InternalLinkage);

  auto *ptr = llvm::PointerType::getUnqual(ctx);
  auto *fnType = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptr, ptr},
                                         /*isVarArg=*/false);
  auto *run = llvm::Function::Create(fnType, llvm::GlobalValue::ExternalLinkage,
                                     MF_ABI_SYM_RUN, m);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", run));
  SmallVector<llvm::Value *> args = {run->getArg(1)};
  for (unsigned i = 0; i < numInputs; ++i) {
    llvm::Value *slot = b.CreateConstInBoundsGEP1_64(ptr, run->getArg(0), i);
    args.push_back(b.CreateLoad(ptr, slot));
  }
  // The weights: device pointers (hidden, for masformer_release_memory in
  // the allocator's source), their host data and sizes.
  auto *i64 = llvm::Type::getInt64Ty(ctx);
  auto *slotsTy = llvm::ArrayType::get(ptr, constants.size());
  llvm::GlobalVariable *slots = nullptr;
  if (device) {
    slots = new llvm::GlobalVariable(
        m, slotsTy, /*isConstant=*/false, llvm::GlobalValue::ExternalLinkage,
        llvm::ConstantAggregateZero::get(slotsTy), MF_ABI_SYM_DEVICE_CONSTANTS);
    slots->setVisibility(llvm::GlobalValue::HiddenVisibility);
    auto *count = new llvm::GlobalVariable(
        m, i64, /*isConstant=*/true, llvm::GlobalValue::ExternalLinkage,
        llvm::ConstantInt::get(i64, constants.size()),
        MF_ABI_SYM_NUM_DEVICE_CONSTANTS);
    count->setVisibility(llvm::GlobalValue::HiddenVisibility);
  }
  if (!constants.empty()) {
    // The host pointers, read when the run starts: a slot's is set at load.
    SmallVector<llvm::Constant *> sizes;
    auto *hostsTy = llvm::ArrayType::get(ptr, constants.size());
    llvm::Value *hostsVar = b.CreateAlloca(hostsTy);
    for (auto [i, c] : llvm::enumerate(constants)) {
      llvm::Value *host = hostData[i];
      if (c.slot)
        host = b.CreateLoad(ptr, b.CreateConstInBoundsGEP2_64(
                                     table->getValueType(), table, 0, *c.slot));
      b.CreateStore(host,
                    b.CreateConstInBoundsGEP2_64(hostsTy, hostsVar, 0, i));
      sizes.push_back(llvm::ConstantInt::get(i64, c.bytes));
    }
    auto *sizesTy = llvm::ArrayType::get(i64, sizes.size());
    auto *sizesVar = new llvm::GlobalVariable(
        m, sizesTy, true, llvm::GlobalValue::PrivateLinkage,
        llvm::ConstantArray::get(sizesTy, sizes), "masformer_constant_bytes");
    llvm::FunctionCallee upload = m.getOrInsertFunction(
        "masformer_cuda_upload_constants",
        llvm::FunctionType::get(llvm::Type::getInt32Ty(ctx),
                                {ptr, ptr, ptr, i64}, false));
    llvm::Value *rc =
        b.CreateCall(upload, {slots, hostsVar, sizesVar,
                              llvm::ConstantInt::get(i64, constants.size())});
    // On failure (no GPU, out of memory) nothing runs: the runtime reads
    // the error from the shim.
    auto *body = llvm::BasicBlock::Create(ctx, "run", run);
    auto *done = llvm::BasicBlock::Create(ctx, "failed", run);
    b.CreateCondBr(b.CreateICmpEQ(rc, b.getInt32(0)), body, done);
    b.SetInsertPoint(done);
    b.CreateRetVoid();
    b.SetInsertPoint(body);
    for (auto [i, c] : llvm::enumerate(constants)) {
      // {ptr allocated, ptr aligned, i64 offset, [r x i64] sizes, strides}
      size_t r = c.shape.size();
      auto *arr = llvm::ArrayType::get(i64, r);
      SmallVector<llvm::Type *> fields = {ptr, ptr, i64};
      if (r)
        fields.append({arr, arr});
      auto *descTy = llvm::StructType::get(ctx, fields);
      llvm::Value *desc = b.CreateAlloca(descTy);
      llvm::Value *p =
          b.CreateLoad(ptr, b.CreateConstInBoundsGEP2_64(slotsTy, slots, 0, i));
      b.CreateStore(p, b.CreateStructGEP(descTy, desc, 0));
      b.CreateStore(p, b.CreateStructGEP(descTy, desc, 1));
      b.CreateStore(b.getInt64(0), b.CreateStructGEP(descTy, desc, 2));
      int64_t stride = 1;
      for (size_t k = r; k-- > 0;) {
        b.CreateStore(
            b.getInt64(c.shape[k]),
            b.CreateInBoundsGEP(descTy, desc,
                                {b.getInt32(0), b.getInt32(3), b.getInt32(k)}));
        b.CreateStore(
            b.getInt64(stride),
            b.CreateInBoundsGEP(descTy, desc,
                                {b.getInt32(0), b.getInt32(4), b.getInt32(k)}));
        stride *= c.shape[k];
      }
      args.push_back(desc);
    }
  }
  b.CreateCall(ciface, args);
  b.CreateRetVoid();

  auto *sigInit = llvm::ConstantDataArray::getString(ctx, signature);
  new llvm::GlobalVariable(m, sigInit->getType(), /*isConstant=*/true,
                           llvm::GlobalValue::ExternalLinkage, sigInit,
                           MF_ABI_SYM_SIGNATURE);
  auto *i32 = llvm::Type::getInt32Ty(ctx);
  new llvm::GlobalVariable(
      m, i32, /*isConstant=*/true, llvm::GlobalValue::ExternalLinkage,
      llvm::ConstantInt::get(i32, MF_ABI_VERSION), MF_ABI_SYM_VERSION);
  return success();
}

LogicalResult mlir::masformer::addDecodeInterface(llvm::Module &m,
                                                  unsigned numInputs,
                                                  StringRef signature,
                                                  Location loc) {
  llvm::LLVMContext &ctx = m.getContext();
  if (!signature.starts_with(MF_ABI_DECODE_UNAVAILABLE)) {
    llvm::Function *ciface = m.getFunction("_mlir_ciface_decode");
    if (!ciface || ciface->arg_size() != numInputs + 1)
      return emitError(loc) << "internal error: the lowered module has no C "
                               "interface for @decode with "
                            << numInputs << " inputs",
             failure();
    auto *ptr = llvm::PointerType::getUnqual(ctx);
    auto *fnType = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx),
                                           {ptr, ptr}, /*isVarArg=*/false);
    auto *run = llvm::Function::Create(
        fnType, llvm::GlobalValue::ExternalLinkage, MF_ABI_SYM_DECODE_RUN, m);
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", run));
    SmallVector<llvm::Value *> args = {run->getArg(1)};
    for (unsigned i = 0; i < numInputs; ++i)
      args.push_back(b.CreateLoad(
          ptr, b.CreateConstInBoundsGEP1_64(ptr, run->getArg(0), i)));
    b.CreateCall(ciface, args);
    b.CreateRetVoid();
  }
  auto *sigInit = llvm::ConstantDataArray::getString(ctx, signature);
  new llvm::GlobalVariable(m, sigInit->getType(), /*isConstant=*/true,
                           llvm::GlobalValue::ExternalLinkage, sigInit,
                           MF_ABI_SYM_DECODE_SIGNATURE);
  return success();
}
