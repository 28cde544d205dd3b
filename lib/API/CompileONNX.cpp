//===- CompileONNX.cpp - An ONNX model to a runnable library ------*- C++ -*-===//
//
// Import, raise and rewrite (importAndRewriteONNX), then:
//   1. the entry: @main's arguments read-only, results that would alias an
//      input or a weight copied, a C interface;
//   2. to the LLVM dialect: --masformer-lower-to-cpu (tiled attention and
//      contractions, the rest as loops, OpenMP), or for cuda
//      --masformer-model-to-nvvm (tensor-core kernels, the rest as
//      one-thread-per-element kernels, a cubin by ptxas, host code on
//      device buffers with the weights as @main's trailing arguments);
//   3. LLVM IR with `masformer_run` (for cuda: the weights uploaded once
//      and passed to @main) and the signature the runtime reads, optimized
//      at O3 for the host CPU, an object file, and a shared library linked
//      with the system's C compiler driver (for cuda: with
//      libMASFormerCudaRuntime).
//
//===----------------------------------------------------------------------===//

#include "masformer/API/CompileONNX.h"
#include "masformer/Dialect/MASFormer/Transforms/Passes.h"
#include "masformer/Pipelines/Pipelines.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"

#include <mutex>

using namespace mlir;
using namespace mlir::masformer;

#ifndef MASFORMER_LLVM_LIBRARY_DIR
#define MASFORMER_LLVM_LIBRARY_DIR "/usr/lib/llvm-22/lib"
#endif

namespace {

//===----------------------------------------------------------------------===//
// The signature the runtime reads
//===----------------------------------------------------------------------===//

/// The runtime's name of an element type; empty when it has none.
StringRef dtypeName(Type t) {
  if (t.isF32())
    return "f32";
  if (t.isF16())
    return "f16";
  if (t.isBF16())
    return "bf16";
  if (t.isF64())
    return "f64";
  if (t.isInteger(1))
    return "bool";
  if (auto i = dyn_cast<IntegerType>(t)) {
    if (i.isUnsigned() && i.getWidth() == 8)
      return "u8";
    switch (i.getWidth()) {
    case 8:
      return "i8";
    case 16:
      return "i16";
    case 32:
      return "i32";
    case 64:
      return "i64";
    default:
      break;
    }
  }
  return "";
}

/// Names in the signature are percent-encoded where they hold a separator.
std::string escape(StringRef s) {
  std::string out;
  for (char c : s) {
    if (c == '%' || c == '\t' || c == '\n' || c == ',' ||
        static_cast<unsigned char>(c) < 0x20) {
      out += '%';
      out += llvm::hexdigit((c >> 4) & 0xF);
      out += llvm::hexdigit(c & 0xF);
    } else {
      out += c;
    }
  }
  return out;
}

/// One "input|output <name> <dtype> <dims>" line: a dimension is its size,
/// or "?" and the key of its symbol (equal keys are equal sizes; "?" alone
/// is a size known only after the run).
FailureOr<std::string> signatureLine(StringRef kind, unsigned index, Type type,
                                     DictionaryAttr attrs, Location loc) {
  auto tt = dyn_cast<RankedTensorType>(type);
  StringRef dtype = tt ? dtypeName(tt.getElementType()) : "";
  auto nameAttr = attrs ? attrs.getAs<StringAttr>("onnx.name") : nullptr;
  std::string name = nameAttr ? nameAttr.str() : (kind + Twine(index)).str();
  if (dtype.empty())
    return emitError(loc) << kind << " '" << name << "' has type " << type
                          << ", which the runtime cannot pass",
           failure();
  auto dimsAttr = attrs ? attrs.getAs<ArrayAttr>("onnx.dims") : nullptr;
  std::string line = (kind + "\t" + escape(name) + "\t" + dtype + "\t").str();
  for (int64_t d = 0; d < tt.getRank(); ++d) {
    if (d)
      line += ',';
    if (!tt.isDynamicDim(d)) {
      line += std::to_string(tt.getDimSize(d));
      continue;
    }
    line += '?';
    if (dimsAttr && d < static_cast<int64_t>(dimsAttr.size()))
      if (auto key = dyn_cast<StringAttr>(dimsAttr[d]))
        if (key.getValue() != "?")
          line += escape(key.getValue());
  }
  return line + "\n";
}

//===----------------------------------------------------------------------===//
// The entry function
//===----------------------------------------------------------------------===//

/// True when `v` (through views) is an argument or a constant, or a buffer
/// already returned: returning it would hand the runtime memory that it
/// must not free.
bool needsCopy(Value v, llvm::DenseSet<Value> &returned) {
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

/// Prepares @main for the runtime and returns its signature text.
FailureOr<std::string> prepareEntry(func::FuncOp main,
                                    const CompileONNXOptions &options) {
  Location loc = main.getLoc();
  std::string sig = "masformer-model\t" +
                    std::to_string(kCompiledModelABIVersion) + "\ntarget\t" +
                    options.target + "\n";
  if (options.target == "cuda")
    sig += "chip\t" + options.chip + "\n";
  FunctionType type = main.getFunctionType();
  for (unsigned i = 0; i < type.getNumInputs(); ++i) {
    FailureOr<std::string> line = signatureLine("input", i, type.getInput(i),
                                                main.getArgAttrDict(i), loc);
    if (failed(line))
      return failure();
    sig += *line;
    // The runtime passes the caller's buffers: never written.
    main.setArgAttr(i, "bufferization.writable",
                    BoolAttr::get(main.getContext(), false));
  }
  for (unsigned i = 0; i < type.getNumResults(); ++i) {
    FailureOr<std::string> line = signatureLine("output", i, type.getResult(i),
                                                main.getResultAttrDict(i), loc);
    if (failed(line))
      return failure();
    sig += *line;
  }
  // Every result is a buffer of its own, which the runtime frees.
  llvm::DenseSet<Value> returned;
  main.walk([&](func::ReturnOp ret) {
    OpBuilder b(ret);
    for (OpOperand &operand : ret->getOpOperands()) {
      Value v = operand.get();
      if (!needsCopy(v, returned))
        continue;
      auto tt = cast<RankedTensorType>(v.getType());
      SmallVector<Value> dyn;
      for (int64_t d = 0; d < tt.getRank(); ++d)
        if (tt.isDynamicDim(d))
          dyn.push_back(tensor::DimOp::create(b, ret.getLoc(), v, d));
      Value init = tensor::EmptyOp::create(b, ret.getLoc(), tt.getShape(),
                                           tt.getElementType(), dyn);
      operand.set(
          linalg::CopyOp::create(b, ret.getLoc(), v, init).getResult(0));
    }
  });
  main->setAttr("llvm.emit_c_interface", UnitAttr::get(main.getContext()));
  return sig;
}

//===----------------------------------------------------------------------===//
// LLVM
//===----------------------------------------------------------------------===//

struct HostTarget {
  std::unique_ptr<llvm::TargetMachine> machine;
  bool avx512 = false;
};

FailureOr<HostTarget> createTargetMachine(StringRef cpuOption, Location loc) {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
  llvm::Triple triple(llvm::sys::getProcessTriple());
  std::string err;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, err);
  if (!target)
    return emitError(loc) << "no LLVM target for " << triple.str() << ": "
                          << err,
           failure();
  std::string cpu = cpuOption.str();
  std::string features;
  if (cpuOption == "native") {
    cpu = llvm::sys::getHostCPUName().str();
    SmallVector<std::string> list;
    for (const auto &f : llvm::sys::getHostCPUFeatures())
      list.push_back((f.second ? "+" : "-") + f.first().str());
    features = llvm::join(list, ",");
  }
  llvm::TargetOptions targetOptions;
  HostTarget host;
  host.machine.reset(target->createTargetMachine(
      triple, cpu, features, targetOptions, llvm::Reloc::PIC_, std::nullopt,
      llvm::CodeGenOptLevel::Aggressive));
  if (!host.machine)
    return emitError(loc) << "cannot create an LLVM target machine for "
                          << triple.str(),
           failure();
  const llvm::MCSubtargetInfo *sti = host.machine->getMCSubtargetInfo();
  if (!sti->isCPUStringValid(cpu))
    return emitError(loc) << "--cpu=" << cpuOption
                          << ": not a CPU that LLVM knows for " << triple.str(),
           failure();
  host.avx512 = sti->checkFeatures("+avx512f");
  return host;
}

/// A weight that the GPU code takes as a trailing argument of @main: the
/// global holding it on the host and its shape.
struct DeviceConstant {
  std::string global;
  SmallVector<int64_t> shape;
};

/// The weights that masformer-buffers-to-device made arguments of @main, in
/// order.
FailureOr<SmallVector<DeviceConstant>> deviceConstants(ModuleOp module,
                                                       Location loc) {
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
    auto value =
        global ? dyn_cast_or_null<ElementsAttr>(global.getValueOrNull())
               : ElementsAttr();
    if (!value)
      return emitError(loc) << "internal error: constant " << ref
                            << " has no data after the lowering",
             failure();
    out.push_back({ref.getValue().str(),
                   llvm::to_vector(value.getShapedType().getShape())});
  }
  return out;
}

/// Adds `masformer_run(void **inputs, void *results)` (calls the C
/// interface of @main with the input descriptors and the results' struct),
/// the signature and the ABI version; everything else becomes internal.
/// With device constants, masformer_run first uploads them (once: their
/// device pointers stay in `masformer_device_constants` until the library
/// is unloaded) and passes their descriptors after the inputs.
LogicalResult addRuntimeInterface(llvm::Module &m, unsigned numInputs,
                                  StringRef signature, bool device,
                                  ArrayRef<DeviceConstant> constants,
                                  Location loc) {
  llvm::LLVMContext &ctx = m.getContext();
  llvm::Function *ciface = m.getFunction("_mlir_ciface_main");
  if (!ciface || ciface->arg_size() != numInputs + constants.size() + 1)
    return emitError(loc) << "internal error: the lowered module has no C "
                             "interface for @main with "
                          << numInputs << " inputs and " << constants.size()
                          << " weights",
           failure();
  SmallVector<llvm::GlobalVariable *> hostData;
  for (const DeviceConstant &c : constants) {
    llvm::GlobalVariable *g = m.getGlobalVariable(c.global, true);
    if (!g)
      return emitError(loc) << "internal error: no global " << c.global
                            << " in the LLVM module",
             failure();
    hostData.push_back(g);
  }
  for (llvm::Function &f : m)
    if (!f.isDeclaration())
      f.setLinkage(llvm::GlobalValue::InternalLinkage);
  // (llvm.global_ctors loads the GPU code: its linkage stays.)
  for (llvm::GlobalVariable &g : m.globals())
    if (!g.isDeclaration() && !g.getName().starts_with("llvm."))
      g.setLinkage(llvm::GlobalValue::InternalLinkage);

  auto *ptr = llvm::PointerType::getUnqual(ctx);
  auto *fnType = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptr, ptr},
                                         /*isVarArg=*/false);
  auto *run = llvm::Function::Create(fnType, llvm::GlobalValue::ExternalLinkage,
                                     "masformer_run", m);
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
        llvm::ConstantAggregateZero::get(slotsTy),
        "masformer_device_constants");
    slots->setVisibility(llvm::GlobalValue::HiddenVisibility);
    auto *count = new llvm::GlobalVariable(
        m, i64, /*isConstant=*/true, llvm::GlobalValue::ExternalLinkage,
        llvm::ConstantInt::get(i64, constants.size()),
        "masformer_num_device_constants");
    count->setVisibility(llvm::GlobalValue::HiddenVisibility);
  }
  if (!constants.empty()) {
    const llvm::DataLayout &dl = m.getDataLayout();
    SmallVector<llvm::Constant *> hosts, sizes;
    for (llvm::GlobalVariable *g : hostData) {
      hosts.push_back(g);
      sizes.push_back(llvm::ConstantInt::get(
          i64, dl.getTypeAllocSize(g->getValueType()).getFixedValue()));
    }
    auto *hostsTy = llvm::ArrayType::get(ptr, hosts.size());
    auto *hostsVar = new llvm::GlobalVariable(
        m, hostsTy, true, llvm::GlobalValue::PrivateLinkage,
        llvm::ConstantArray::get(hostsTy, hosts), "masformer_constant_data");
    auto *sizesTy = llvm::ArrayType::get(i64, sizes.size());
    auto *sizesVar = new llvm::GlobalVariable(
        m, sizesTy, true, llvm::GlobalValue::PrivateLinkage,
        llvm::ConstantArray::get(sizesTy, sizes), "masformer_constant_bytes");
    llvm::FunctionCallee upload = m.getOrInsertFunction(
        "masformer_cuda_upload_constants",
        llvm::FunctionType::get(llvm::Type::getInt32Ty(ctx),
                                {ptr, ptr, ptr, i64}, false));
    llvm::Value *rc = b.CreateCall(
        upload, {slots, hostsVar, sizesVar,
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
        b.CreateStore(b.getInt64(c.shape[k]),
                      b.CreateInBoundsGEP(descTy, desc,
                                          {b.getInt32(0), b.getInt32(3),
                                           b.getInt32(k)}));
        b.CreateStore(b.getInt64(stride),
                      b.CreateInBoundsGEP(descTy, desc,
                                          {b.getInt32(0), b.getInt32(4),
                                           b.getInt32(k)}));
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
                           "masformer_signature");
  auto *i32 = llvm::Type::getInt32Ty(ctx);
  new llvm::GlobalVariable(
      m, i32, /*isConstant=*/true, llvm::GlobalValue::ExternalLinkage,
      llvm::ConstantInt::get(i32, kCompiledModelABIVersion),
      "masformer_abi_version");
  return success();
}

void optimize(llvm::Module &m, llvm::TargetMachine &tm) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = true;
  tuning.SLPVectorization = true;
  llvm::PassBuilder pb(&tm, tuning);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3).run(m, mam);
}

/// Linked into every library: the allocator of its buffers
/// (finalize-memref-to-llvm with use-generic-functions calls it). Blocks of
/// 1 MiB or more are kept when freed and reused for a request of up to
/// their size, so that a model's activations, freed and allocated again in
/// every run, do not go back to the kernel (an mmap, page faults and
/// zeroed pages per buffer and per run). masformer_free frees the results
/// the runtime receives; masformer_release_memory empties the cache.
constexpr llvm::StringLiteral kAllocatorSource = R"c(
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#define MF_HEADER 64
#define MF_BIG ((size_t)1 << 20)
#define MF_SLOTS 64

typedef struct { char *base; size_t size; } mf_block;
static mf_block mf_cache[MF_SLOTS];
static int mf_cached;
static pthread_mutex_t mf_lock = PTHREAD_MUTEX_INITIALIZER;

__attribute__((visibility("hidden"))) void *
_mlir_memref_to_llvm_alloc(uint64_t size) {
  size_t total = (size_t)size + MF_HEADER;
  if (total < size)
    return NULL;
  if (total >= MF_BIG) {
    pthread_mutex_lock(&mf_lock);
    int best = -1;
    for (int i = 0; i < mf_cached; ++i)
      if (mf_cache[i].size >= total && mf_cache[i].size - total <= total / 4 &&
          (best < 0 || mf_cache[i].size < mf_cache[best].size))
        best = i;
    if (best >= 0) {
      char *base = mf_cache[best].base;
      mf_cache[best] = mf_cache[--mf_cached];
      pthread_mutex_unlock(&mf_lock);
      return base + MF_HEADER;
    }
    pthread_mutex_unlock(&mf_lock);
  }
  char *base = (char *)malloc(total);
  if (!base)
    return NULL;
  *(size_t *)base = total;
  return base + MF_HEADER;
}

__attribute__((visibility("hidden"))) void
_mlir_memref_to_llvm_free(void *ptr) {
  if (!ptr)
    return;
  char *base = (char *)ptr - MF_HEADER;
  size_t total = *(size_t *)base;
  if (total >= MF_BIG) {
    pthread_mutex_lock(&mf_lock);
    int slot = mf_cached < MF_SLOTS ? mf_cached++ : -1;
    if (slot < 0) {
      /* Full: this block replaces the smallest one if it is larger. */
      int small = 0;
      for (int i = 1; i < MF_SLOTS; ++i)
        if (mf_cache[i].size < mf_cache[small].size)
          small = i;
      if (mf_cache[small].size < total) {
        char *old = mf_cache[small].base;
        mf_cache[small].base = base;
        mf_cache[small].size = total;
        base = old;
      }
    } else {
      mf_cache[slot].base = base;
      mf_cache[slot].size = total;
      base = NULL;
    }
    pthread_mutex_unlock(&mf_lock);
    if (!base)
      return;
  }
  free(base);
}

void masformer_free(void *ptr) { _mlir_memref_to_llvm_free(ptr); }

#ifdef MF_CUDA
/* The model's weights on the device: masformer_run uploads them, and they
   live as long as the library is loaded (every handle of it shares them). */
extern void *masformer_device_constants[];
extern const int64_t masformer_num_device_constants;
void masformer_cuda_free_constants(void **slots, int64_t n);
void masformer_cuda_release_memory(void);

__attribute__((destructor)) static void mf_free_device_constants(void) {
  masformer_cuda_free_constants(masformer_device_constants,
                                masformer_num_device_constants);
}
#endif

void masformer_release_memory(void) {
  pthread_mutex_lock(&mf_lock);
  for (int i = 0; i < mf_cached; ++i)
    free(mf_cache[i].base);
  mf_cached = 0;
  pthread_mutex_unlock(&mf_lock);
#ifdef MF_CUDA
  /* The shim's cached free device blocks (the weights stay). */
  masformer_cuda_release_memory();
#endif
}
)c";

/// The C compiler driver that links the library.
FailureOr<std::string> findLinker(Location loc) {
  for (StringRef name : {"clang-22", "clang", "cc", "gcc"})
    if (llvm::ErrorOr<std::string> p = llvm::sys::findProgramByName(name))
      return *p;
  return emitError(loc) << "no C compiler driver (clang-22, clang, cc or "
                           "gcc) in PATH to link the library with; "
                           "scripts/setup.sh installs one",
         failure();
}

/// A temporary file that is removed unless kept.
struct TempFile {
  SmallString<256> path;
  llvm::FileRemover remover;
  LogicalResult create(StringRef suffix, Location loc) {
    if (std::error_code ec =
            llvm::sys::fs::createTemporaryFile("masformer", suffix, path))
      return emitError(loc)
             << "cannot create a temporary file: " << ec.message();
    remover.setFile(path);
    return success();
  }
};

/// Writes `path` with `fn`; an error names the file.
LogicalResult
writeFile(StringRef path,
          llvm::function_ref<LogicalResult(llvm::raw_fd_ostream &)> fn,
          Location loc) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec)
    return emitError(loc) << "cannot write '" << path << "': " << ec.message();
  return fn(os);
}

/// Links the library; `cudaRuntimeDir` (non-empty for cuda) is where
/// libMASFormerCudaRuntime.so is.
LogicalResult linkLibrary(StringRef object, StringRef out,
                          StringRef cudaRuntimeDir, Location loc) {
  FailureOr<std::string> driver = findLinker(loc);
  if (failed(driver))
    return failure();
  TempFile log, allocator;
  if (failed(log.create("log", loc)) || failed(allocator.create("c", loc)))
    return failure();
  if (failed(writeFile(
          allocator.path,
          [](llvm::raw_fd_ostream &os) {
            os << kAllocatorSource;
            return success();
          },
          loc)))
    return failure();
  std::string libDir = MASFORMER_LLVM_LIBRARY_DIR;
  SmallVector<std::string> args = {*driver,
                                   "-shared",
                                   "-o",
                                   out.str(),
                                   object.str(),
                                   "-O2",
                                   "-fPIC",
                                   allocator.path.str().str(),
                                   "-Wl,-z,defs"};
  if (cudaRuntimeDir.empty()) {
    args.append({"-L" + libDir, "-Wl,-rpath," + libDir, "-lomp",
                 "-lmlir_c_runner_utils"});
  } else {
    // The shim from where it is, or next to the library (a copy of both
    // carried to a GPU machine).
    args.append({"-DMF_CUDA", "-L" + cudaRuntimeDir.str(),
                 "-Wl,-rpath," + cudaRuntimeDir.str(), "-Wl,-rpath,$ORIGIN",
                 "-lMASFormerCudaRuntime"});
  }
  args.push_back("-lm");
  SmallVector<StringRef> argRefs(args.begin(), args.end());
  std::optional<StringRef> redirects[] = {std::nullopt, log.path.str(),
                                          log.path.str()};
  std::string err;
  int rc = llvm::sys::ExecuteAndWait(*driver, argRefs, std::nullopt, redirects,
                                     0, 0, &err);
  if (rc != 0) {
    std::string text;
    if (auto buf = llvm::MemoryBuffer::getFile(log.path))
      text = (*buf)->getBuffer().take_back(2000).str();
    return emitError(loc) << "linking the library with " << *driver << " failed"
                          << (err.empty() ? "" : ": " + err) << "\n"
                          << text,
           failure();
  }
  return success();
}

/// The CUDA toolkit to compile kernels with; fails unless it has ptxas.
FailureOr<std::string> findCudaToolkit(StringRef option, Location loc) {
  std::string dir = option.str();
  if (dir.empty())
    for (const char *var : {"CUDA_HOME", "CUDA_PATH"})
      if (std::optional<std::string> v = llvm::sys::Process::GetEnv(var))
        if (!v->empty()) {
          dir = *v;
          break;
        }
  if (dir.empty())
    dir = "/usr/local/cuda";
  SmallString<256> ptxas(dir);
  llvm::sys::path::append(ptxas, "bin", "ptxas");
  if (!llvm::sys::fs::can_execute(ptxas))
    return emitError(loc) << "--target=cuda: no CUDA toolkit at '" << dir
                          << "' (no " << ptxas
                          << "); pass --cuda-toolkit=DIR or set CUDA_HOME",
           failure();
  return dir;
}

/// The directory of libMASFormerCudaRuntime.so, which cuda libraries link.
FailureOr<std::string> findCudaRuntimeDir(StringRef option, Location loc) {
  SmallVector<std::string> candidates;
  if (!option.empty()) {
    candidates.push_back(option.str());
  } else {
    if (std::optional<std::string> v =
            llvm::sys::Process::GetEnv("MASFORMER_LIBRARY_DIR"))
      candidates.push_back(*v);
    // Next to the tool: <prefix>/bin/masformer-compile, <prefix>/lib.
    static int anchor;
    std::string exe = llvm::sys::fs::getMainExecutable(nullptr, &anchor);
    if (!exe.empty()) {
      SmallString<256> dir(llvm::sys::path::parent_path(
          llvm::sys::path::parent_path(exe)));
      llvm::sys::path::append(dir, "lib");
      candidates.push_back(dir.str().str());
    }
#ifdef MASFORMER_BUILD_LIBRARY_DIR
    candidates.push_back(MASFORMER_BUILD_LIBRARY_DIR);
#endif
  }
  for (const std::string &dir : candidates) {
    SmallString<256> lib(dir);
    llvm::sys::path::append(lib, "libMASFormerCudaRuntime.so");
    if (llvm::sys::fs::exists(lib)) {
      SmallString<256> abs(dir);
      llvm::sys::fs::make_absolute(abs);
      return abs.str().str();
    }
  }
  return emitError(loc) << "--target=cuda: libMASFormerCudaRuntime.so is "
                           "not in "
                        << llvm::join(candidates, ", ")
                        << "; set MASFORMER_LIBRARY_DIR to the directory "
                           "that has it",
         failure();
}

void registerCompileDialects(MLIRContext *context) {
  static std::once_flag once;
  std::call_once(once, [] {
    registerAllPasses();
    registerMASFormerPasses();
  });
  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerAllToLLVMIRTranslations(registry);
  context->appendDialectRegistry(registry);
}

} // namespace

FailureOr<SpanReport>
mlir::masformer::compileONNXFile(StringRef src, StringRef dst,
                                 const CompileONNXOptions &options,
                                 MLIRContext *context) {
  Location loc = FileLineColLoc::get(context, src, 0, 0);
  if (options.target != "cpu" && options.target != "cuda")
    return emitError(loc) << "--target=" << options.target
                          << ": expected cpu or cuda",
           failure();
  bool cuda = options.target == "cuda";
  if (options.precision != "f32" && options.precision != "bf16")
    return emitError(loc) << "--precision=" << options.precision
                          << ": expected f32 or bf16",
           failure();
  if (!cuda && options.precision != "f32")
    return emitError(loc) << "--precision=" << options.precision
                          << " needs --target=cuda",
           failure();
  std::string toolkit, runtimeDir;
  if (cuda) {
    std::string error;
    if (failed(checkNVVMChip(options.chip, error)))
      return emitError(loc) << "--chip=" << options.chip << ": " << error,
             failure();
    FailureOr<std::string> t = findCudaToolkit(options.cudaToolkit, loc);
    if (failed(t))
      return failure();
    toolkit = *t;
    if (options.output == CompileOutput::Library) {
      FailureOr<std::string> r =
          findCudaRuntimeDir(options.runtimeLibraryDir, loc);
      if (failed(r))
        return failure();
      runtimeDir = *r;
    }
  }
  if (options.tileQ <= 0 || options.tileKV <= 0)
    return emitError(loc) << "attention tiles must be positive, got "
                          << options.tileQ << " x " << options.tileKV,
           failure();
  if (dst.empty())
    return emitError(loc) << "no output file given", failure();
  FailureOr<HostTarget> host = createTargetMachine(options.cpu, loc);
  if (failed(host))
    return failure();

  registerCompileDialects(context);
  FailureOr<ImportedONNXModel> imported =
      importAndRewriteONNX(src, options.rewrite, context);
  if (failed(imported))
    return failure();
  ModuleOp module = *imported->module;
  auto main = module.lookupSymbol<func::FuncOp>("main");
  if (!main)
    return emitError(loc) << "internal error: the import has no @main",
           failure();
  unsigned numInputs = main.getNumArguments();
  FailureOr<std::string> signature = prepareEntry(main, options);
  if (failed(signature))
    return failure();

  PassManager pm(context);
  if (cuda) {
    ModelToNVVMOptions lowering;
    lowering.chip = options.chip;
    lowering.toolkit = toolkit;
    lowering.format = "bin";
    lowering.constants = "arguments";
    lowering.precision = options.precision;
    lowering.genericAllocation = true;
    buildModelToNVVMPipeline(pm, lowering);
  } else {
    LowerToCPUOptions lowering;
    lowering.tileQ = options.tileQ;
    lowering.tileKV = options.tileKV;
    lowering.vectorWidth = host->avx512 ? 16 : 8;
    lowering.genericAllocation = true;
    buildLowerToCPUPipeline(pm, lowering);
  }
  if (failed(pm.run(module)))
    return emitError(loc) << "lowering the model to the "
                          << (cuda ? "GPU (" + options.chip + ")" : "CPU")
                          << " failed",
           failure();
  SmallVector<DeviceConstant> constants;
  if (cuda) {
    FailureOr<SmallVector<DeviceConstant>> c = deviceConstants(module, loc);
    if (failed(c))
      return failure();
    constants = std::move(*c);
  }

  // Everything goes to a temporary file next to `dst`, renamed at the end.
  SmallString<256> tmp;
  {
    int fd;
    if (std::error_code ec =
            llvm::sys::fs::createUniqueFile(dst + ".tmp-%%%%%%", fd, tmp))
      return emitError(loc)
                 << "cannot write next to '" << dst << "': " << ec.message(),
             failure();
    llvm::sys::Process::SafelyCloseFileDescriptor(fd);
  }
  llvm::FileRemover tmpRemover(tmp);
  auto writeText = [&](llvm::function_ref<void(raw_ostream &)> fn) {
    return writeFile(
        tmp,
        [&](llvm::raw_fd_ostream &os) {
          fn(os);
          return success();
        },
        loc);
  };

  if (options.output == CompileOutput::MLIR) {
    if (failed(writeText([&](raw_ostream &os) { module.print(os); })))
      return failure();
  } else {
    llvm::LLVMContext llvmContext;
    std::unique_ptr<llvm::Module> llvmModule =
        translateModuleToLLVMIR(module, llvmContext, src);
    if (!llvmModule)
      return emitError(loc) << "translating the model to LLVM IR failed",
             failure();
    llvm::TargetMachine &tm = *host->machine;
    llvmModule->setDataLayout(tm.createDataLayout());
    llvmModule->setTargetTriple(tm.getTargetTriple());
    if (failed(addRuntimeInterface(*llvmModule, numInputs, *signature, cuda,
                                   constants, loc)))
      return failure();
    if (llvm::verifyModule(*llvmModule, &llvm::errs()))
      return emitError(loc) << "internal error: invalid LLVM IR", failure();
    optimize(*llvmModule, tm);
    if (options.output == CompileOutput::LLVMIR) {
      if (failed(writeText(
              [&](raw_ostream &os) { llvmModule->print(os, nullptr); })))
        return failure();
    } else {
      TempFile object;
      StringRef objectPath = tmp;
      if (options.output == CompileOutput::Library) {
        if (failed(object.create("o", loc)))
          return failure();
        objectPath = object.path;
      }
      auto emitObject = [&](llvm::raw_fd_ostream &os) -> LogicalResult {
        llvm::legacy::PassManager codegen;
        if (tm.addPassesToEmitFile(codegen, os, nullptr,
                                   llvm::CodeGenFileType::ObjectFile))
          return emitError(loc) << "LLVM cannot emit an object file for "
                                << tm.getTargetTriple().str();
        codegen.run(*llvmModule);
        return success();
      };
      if (failed(writeFile(objectPath, emitObject, loc)))
        return failure();
      if (options.output == CompileOutput::Library &&
          failed(linkLibrary(objectPath, tmp, runtimeDir, loc)))
        return failure();
    }
  }
  if (std::error_code ec = llvm::sys::fs::rename(tmp, dst))
    return emitError(loc) << "cannot write '" << dst << "': " << ec.message(),
           failure();
  tmpRemover.releaseFile();
  return std::move(imported->report);
}
