//===- CompileONNX.cpp - An ONNX model to a runnable library ----*- C++ -*-===//
//
// The compile driver, in four steps over parts that live elsewhere:
//   1. options checked and tools found (lib/Target/Toolchain);
//   2. the front half (lib/Frontend): import, raise, rewrite the spans;
//   3. the entry prepared for the runtime (--masformer-prepare-entry), the
//      signature taken (lib/Target/Signature), and the model lowered to the
//      LLVM dialect: --masformer-lower-to-cpu, or for cuda
//      --masformer-model-to-nvvm (tensor-core kernels, the rest as
//      one-thread-per-element kernels, a cubin by ptxas, host code on device
//      buffers with the weights as @main's trailing arguments);
//   4. the weights moved out of the code (lib/Target/Weights: a manifest,
//      slots the runtime fills from the model's data file and the weights
//      file), LLVM IR with the runtime interface (lib/Target/
//      RuntimeInterface), O3 for the host CPU, an object file, and a shared
//      library (lib/Target/LLVMTarget, Toolchain), written next to the
//      output and renamed into place, weights file first, only when
//      everything succeeded.
//
//===----------------------------------------------------------------------===//

#include "masformer/API/CompileONNX.h"
#include "masformer/Codegen/Common/Passes.h"
#include "masformer/Dialect/MASFormer/Analysis/SpanReport.h"
#include "masformer/Dialect/MASFormer/IR/MASFormerOps.h"
#include "masformer/Dialect/MASFormer/Transforms/DeriveDecode.h"
#include "masformer/Frontend/ONNXFrontend.h"
#include "masformer/InitAllPasses.h"
#include "masformer/Pipelines/Pipelines.h"
#include "masformer/Runtime/ABI.h"
#include "masformer/Target/Codegen.h"
#include "masformer/Target/LLVMTarget.h"
#include "masformer/Target/RuntimeInterface.h"
#include "masformer/Target/Signature.h"
#include "masformer/Target/Toolchain.h"
#include "masformer/Target/Weights.h"
#include "masformer/Utils/OutputFile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Signals.h"

#include <mutex>

using namespace mlir;
using namespace mlir::masformer;

LogicalResult
mlir::masformer::checkCompileTarget(const CompileONNXOptions &options,
                                    std::string &error) {
  StringRef target = options.target, precision = options.precision;
  if (target != "cpu" && target != "cuda") {
    error = ("--target=" + target + ": expected cpu or cuda").str();
    return failure();
  }
  if (target != "cuda") {
    if (!options.chip.empty()) {
      error = "--chip=" + options.chip + " needs --target=cuda";
      return failure();
    }
    if (!options.cudaToolkit.empty()) {
      error = "--cuda-toolkit=" + options.cudaToolkit + " needs --target=cuda";
      return failure();
    }
  }
  if (precision != "f32" && precision != "bf16") {
    error = ("--precision=" + precision + ": expected f32 or bf16").str();
    return failure();
  }
  if (options.emulateAMX && target != "cpu") {
    error = "--emulate-amx needs --target=cpu";
    return failure();
  }
  if (target == "cuda") {
    std::string chipError;
    if (failed(checkNVVMChip(options.gpuChip(), chipError))) {
      error = "--chip=" + options.gpuChip() + ": " + chipError;
      return failure();
    }
  }
  if (options.decode != "auto" && options.decode != "on" &&
      options.decode != "off") {
    error = "--decode=" + options.decode + ": expected auto, on or off";
    return failure();
  }
  if (options.decode == "on" && target != "cpu") {
    error = "--decode=on needs --target=cpu (the GPU target compiles "
            "whole-sequence models only, for now)";
    return failure();
  }
  if (options.rewrite.reportSeqLen <= 0) {
    error = "--report-seq-len must be positive, got " +
            std::to_string(options.rewrite.reportSeqLen);
    return failure();
  }
  return success();
}

namespace {

/// The tools and the target machine one compilation uses.
struct CompileTools {
  HostTarget host;
  /// For cuda: the toolkit with ptxas, and (for a library) the directory of
  /// libMASFormerCudaRuntime.
  std::string cudaToolkit, cudaRuntimeDir;
};

/// Step 1: every option checked and every tool found before any work.
FailureOr<CompileTools>
checkOptionsAndFindTools(StringRef dst, const CompileONNXOptions &options,
                         Location loc) {
  std::string error;
  if (failed(checkCompileTarget(options, error)))
    return emitError(loc) << error, failure();
  if (options.tileQ <= 0 || options.tileKV < 0)
    return emitError(loc) << "attention tiles must be positive, got "
                          << options.tileQ << " x " << options.tileKV,
           failure();
  if (dst.empty())
    return emitError(loc) << "no output file given", failure();
  CompileTools tools;
  if (options.target == "cuda") {
    FailureOr<std::string> toolkit = findCudaToolkit(options.cudaToolkit, loc);
    if (failed(toolkit))
      return failure();
    tools.cudaToolkit = *toolkit;
    if (options.output == CompileOutput::Library) {
      FailureOr<std::string> dir =
          findCudaRuntimeDir(options.runtimeLibraryDir, loc);
      if (failed(dir))
        return failure();
      tools.cudaRuntimeDir = *dir;
    }
  }
  FailureOr<HostTarget> host = createHostTarget(options.cpu, loc);
  if (failed(host))
    return failure();
  tools.host = std::move(*host);
  if (options.target == "cpu" && options.precision == "bf16" &&
      !options.emulateAMX && !tools.host.amxBF16 && !tools.host.avx512BF16)
    return emitError(loc)
               << "--precision=bf16 on the CPU needs AMX-BF16 or AVX512-BF16, "
                  "and --cpu="
               << options.cpu << " (" << tools.host.cpu << ") has neither",
           failure();
  // At f32, --emulate-amx emulates the 8-bit products' AMX-INT8 tiles, the
  // products of a few rows staying on vpdpbusd.
  if (options.target == "cpu" && options.precision != "bf16" &&
      options.emulateAMX && !tools.host.avx512VNNI)
    return emitError(loc) << "--emulate-amx at --precision="
                          << options.precision
                          << " emulates AMX-INT8 for a quantized model's 8-bit "
                             "products, which needs AVX512-VNNI, and --cpu="
                          << options.cpu << " (" << tools.host.cpu
                          << ") has none",
           failure();
  return tools;
}

void registerCompileDialects(MLIRContext *context) {
  static std::once_flag once;
  std::call_once(once, [] {
    mlir::registerAllPasses();
    masformer::registerAllPasses();
  });
  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerAllToLLVMIRTranslations(registry);
  context->appendDialectRegistry(registry);
}

/// What the runtime interface needs from @main (and @decode) before they
/// are lowered.
struct EntryInfo {
  std::string signature;
  unsigned numInputs = 0;
  /// The decode entry's signature (or MF_ABI_DECODE_UNAVAILABLE and why).
  std::string decodeSignature;
  unsigned decodeInputs = 0;
};

/// The decode signature's lines after the tensors: each cache input's span
/// and the model's maximum length.
std::string decodeCacheLines(func::FuncOp decode) {
  std::string out;
  for (unsigned i = 0; i < decode.getNumArguments(); ++i) {
    auto span = decode.getArgAttrOfType<SpanAttr>(i, kCacheSpanAttrName);
    if (!span)
      continue;
    out += "cache\t" + std::to_string(i) + "\t" +
           stringifySpanKind(span.getKind()).str() + "\t" +
           std::to_string(span.getSize()) + "\t" +
           std::to_string(span.getSink()) + "\n";
  }
  if (auto max = decode->getAttrOfType<IntegerAttr>(kMaxLengthAttrName))
    out += "max_length\t" + std::to_string(max.getInt()) + "\n";
  return out;
}

/// The AMX instruction sets that the lowered `module` calls ("amx-bf16" for
/// tdpbf16ps, "amx-int8" for the 8-bit tile products), in that order.
SmallVector<StringRef> usedAMXInstructionSets(ModuleOp module) {
  bool bf16 = false, int8 = false;
  module.walk([&](LLVM::CallIntrinsicOp call) {
    StringRef name = call.getIntrin();
    if (!name.consume_front("llvm.x86.tdp"))
      return;
    bf16 |= name.starts_with("bf16ps");
    int8 |= name.starts_with("bss") || name.starts_with("bsu") ||
            name.starts_with("bus") || name.starts_with("buu");
  });
  SmallVector<StringRef> sets;
  if (bf16)
    sets.push_back("amx-bf16");
  if (int8)
    sets.push_back("amx-int8");
  return sets;
}

/// The CPU pipeline's options for the target CPU, in `lowering`.
void setCPULowering(LowerToCPUOptions &lowering,
                    const CompileONNXOptions &options,
                    const CompileTools &tools) {
  lowering.tileQ = options.tileQ;
  lowering.tileKV =
      options.tileKV ? options.tileKV : (tools.host.avx512 ? 128 : 64);
  lowering.vectorWidth = tools.host.avx512 ? 16 : 8;
  lowering.l2Bytes = tools.host.l2Bytes;
  lowering.precision = options.precision;
  lowering.amx =
      options.precision == "bf16" && (tools.host.amxBF16 || options.emulateAMX);
  lowering.emulateAMX = options.emulateAMX;
  lowering.avx512BF16 = options.precision == "bf16" && tools.host.avx512BF16;
  lowering.avx512VNNI = tools.host.avx512VNNI;
  lowering.amxInt8 =
      tools.host.avx512VNNI && (tools.host.amxInt8 || options.emulateAMX);
  // bf16 attention where its kernels beat the f32 ones: on AMX tiles, on
  // vdpbf16ps (AMD), or with no AVX512-BF16 at all (--emulate-amx on an
  // AVX2 CPU, a test of the bf16 attention kernels); f32 on Intel's
  // AVX512-BF16 without AMX.
  lowering.attentionBF16 =
      !tools.host.avx512BF16 || tools.host.fastBF16Dot || lowering.amx;
  lowering.genericAllocation = true;
}

/// Step 3: the entry prepared and the module lowered to the LLVM dialect;
/// returns the signature the library will carry and @main's input count.
FailureOr<EntryInfo> lowerModel(ModuleOp module,
                                const CompileONNXOptions &options,
                                const CompileTools &tools, TimingScope &timing,
                                Location loc) {
  auto main = module.lookupSymbol<func::FuncOp>("main");
  if (!main)
    return emitError(loc) << "internal error: the import has no @main",
           failure();
  FailureOr<std::string> signature =
      buildRuntimeSignature(main, options.target, options.gpuChip());
  if (failed(signature))
    return failure();
  EntryInfo entry{std::move(*signature), main.getNumArguments(), "", 0};
  auto decode = module.lookupSymbol<func::FuncOp>(kDecodeFuncName);
  if (decode) {
    FailureOr<std::string> decodeSignature =
        buildRuntimeSignature(decode, options.target, options.gpuChip());
    if (failed(decodeSignature))
      return failure();
    entry.decodeSignature = *decodeSignature + decodeCacheLines(decode);
    entry.decodeInputs = decode.getNumArguments();
    for (unsigned i = 0; i < decode.getNumArguments(); ++i)
      decode.removeArgAttr(i, kCacheSpanAttrName);
  }
  bool cuda = options.target == "cuda";
  // Rows of their own lengths (GroupQueryAttention with a KV cache) are
  // chosen on the host from seqlens_k, which the GPU code keeps in device
  // memory.
  if (cuda) {
    AttentionOp rows;
    module.walk([&](AttentionOp op) {
      if (!rows && op.getRowOffset())
        rows = op;
      return rows ? WalkResult::interrupt() : WalkResult::advance();
    });
    if (rows) {
      std::string node;
      if (auto name = dyn_cast<NameLoc>(rows.getLoc()))
        node = " (node '" + name.getName().str() + "')";
      std::optional<uint64_t> layer = rows.getLayer();
      return emitError(rows.getLoc())
                 << "layer " << (layer ? std::to_string(*layer) : "?") << node
                 << ": --target=cuda does not take attention over a KV cache "
                    "whose batch rows have lengths of their own "
                    "(com.microsoft.GroupQueryAttention with past keys, "
                    "onnxruntime-genai's decoders) yet: compile it for the "
                    "CPU",
             failure();
    }
  }
  PassManager pm(module.getContext());
  TimingScope passTiming = timing.nest("lowering (MLIR passes)");
  pm.enableTiming(passTiming);
  // The IR is verified before the lowering and after it; after each of its
  // passes only with --verify-each.
  pm.enableVerifier(options.verifyEach);
  pm.addPass(createPrepareEntry());
  if (decode) {
    PrepareEntryOptions decodeEntry;
    decodeEntry.entry = kDecodeFuncName.str();
    pm.addPass(createPrepareEntry(decodeEntry));
  }
  if (cuda) {
    ModelToNVVMOptions lowering;
    lowering.chip = options.gpuChip();
    lowering.toolkit = tools.cudaToolkit;
    lowering.format = "bin";
    lowering.constants = "arguments";
    lowering.precision = options.precision;
    lowering.genericAllocation = true;
    buildModelToNVVMPipeline(pm, lowering);
  } else {
    LowerToCPUOptions lowering;
    setCPULowering(lowering, options, tools);
    buildLowerToCPUPipeline(pm, lowering);
  }
  // The frontend's result was verified, the decode entry derived since.
  if (failed(verify(module)))
    return emitError(loc) << "internal error: the model does not verify "
                             "before its lowering",
           failure();
  if (failed(pm.run(module)))
    return emitError(loc) << "lowering the model to the "
                          << (cuda ? "GPU (" + options.gpuChip() + ")" : "CPU")
                          << " failed",
           failure();
  if (!options.verifyEach && failed(verify(module)))
    return emitError(loc) << "internal error: the model lowered to the LLVM "
                             "dialect does not verify (--verify-each names "
                             "the pass that broke it)",
           failure();
  // The instructions the runtime must check (and, for AMX, ask the kernel
  // for) before it runs the library: those the lowered code calls.
  if (!cuda) {
    for (StringRef isa : usedAMXInstructionSets(module)) {
      entry.signature += ("isa\t" + isa + "\n").str();
      if (!entry.decodeSignature.empty() &&
          !StringRef(entry.decodeSignature)
               .starts_with(MF_ABI_DECODE_UNAVAILABLE))
        entry.decodeSignature += ("isa\t" + isa + "\n").str();
    }
  }
  return entry;
}

/// Step 4: the lowered module, as `options.output` asks, written to `path`;
/// unless the weights stay embedded, `weights` says where they went (their
/// own file is named `ownWeightsPath` in the manifest and written later).
LogicalResult emitOutput(ModuleOp module, StringRef path,
                         const EntryInfo &entry,
                         const CompileONNXOptions &options,
                         const CompileTools &tools, StringRef sourceName,
                         StringRef ownWeightsPath, WeightsLayout &weights,
                         TimingScope &timing, Location loc) {
  auto writeText = [&](llvm::function_ref<void(raw_ostream &)> fn) {
    return writeFile(
        path,
        [&](llvm::raw_fd_ostream &os) {
          fn(os);
          return success();
        },
        loc);
  };
  orderGlobalsByFirstUse(module);
  if (options.output == CompileOutput::MLIR)
    return writeText([&](raw_ostream &os) { module.print(os); });

  bool cuda = options.target == "cuda";
  SmallVector<DeviceConstant> constants;
  if (cuda) {
    FailureOr<SmallVector<DeviceConstant>> c =
        collectDeviceConstants(module, loc);
    if (failed(c))
      return failure();
    constants = std::move(*c);
  }
  if (!options.embedWeights) {
    FailureOr<WeightsLayout> layout =
        externalizeWeights(module, ownWeightsPath, loc);
    if (failed(layout))
      return failure();
    weights = std::move(*layout);
    for (DeviceConstant &c : constants)
      if (auto it = weights.slotOf.find(c.global); it != weights.slotOf.end())
        c.slot = it->second;
  }
  TimingScope step = timing.nest("translation to LLVM IR");
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, llvmContext, sourceName);
  if (!llvmModule)
    return emitError(loc) << "translating the model to LLVM IR failed";
  llvm::TargetMachine &tm = *tools.host.machine;
  llvmModule->setDataLayout(tm.createDataLayout());
  llvmModule->setTargetTriple(tm.getTargetTriple());
  if (failed(addRuntimeInterface(*llvmModule, entry.numInputs, entry.signature,
                                 cuda, constants, loc)) ||
      failed(addDecodeInterface(*llvmModule, entry.decodeInputs,
                                entry.decodeSignature, loc)))
    return failure();
  addWeightsManifest(*llvmModule, weights);
  if (llvm::verifyModule(*llvmModule, &llvm::errs()))
    return emitError(loc) << "internal error: invalid LLVM IR";
  // Identical functions left after --masformer-outline-kernels (the OpenMP
  // bodies of different kernels) become one before the module is split.
  mergeIdenticalFunctions(*llvmModule);
  SmallVector<ModulePart> parts = splitModule(std::move(llvmModule));
  step.stop();

  if (options.output != CompileOutput::Library) {
    step = timing.nest("LLVM optimization (O3)");
    FailureOr<std::unique_ptr<llvm::Module>> whole =
        optimizeParts(parts, tools.host, options.jobs, llvmContext, loc);
    if (failed(whole))
      return failure();
    step.stop();
    if (options.output == CompileOutput::LLVMIR)
      return writeText([&](raw_ostream &os) { (*whole)->print(os, nullptr); });
    step = timing.nest("machine code");
    return writeFile(
        path,
        [&](llvm::raw_fd_ostream &os) {
          return emitObjectFile(**whole, *tools.host.machine, os, loc);
        },
        loc);
  }

  CodegenOptions codegen;
  codegen.jobs = options.jobs;
  if (options.cacheDir)
    codegen.cacheDir = *options.cacheDir;
  else if (std::optional<std::string> dir =
               llvm::sys::Process::GetEnv("MASFORMER_CACHE_DIR"))
    codegen.cacheDir = *dir;
  if (!codegen.cacheDir.empty()) {
    if (std::optional<std::string> why = objectCacheUnusable()) {
      emitRemark(loc) << "the object cache is not used: " << *why;
      codegen.cacheDir.clear();
    }
  }
  step = timing.nest("LLVM optimization and machine code");
  SmallVector<std::string> objects;
  SmallVector<std::unique_ptr<TempFile>> temporaries;
  FailureOr<CodegenStats> stats =
      compileParts(parts, tools.host, codegen, objects, temporaries, loc);
  if (failed(stats))
    return failure();
  step.stop();
  if (options.timing) {
    llvm::errs() << "masformer-compile: " << stats->parts
                 << " parts of machine code, " << stats->cached
                 << " from the object cache";
    if (!codegen.cacheDir.empty())
      llvm::errs() << " (" << codegen.cacheDir << ")";
    llvm::errs() << ", " << stats->parts - stats->cached << " compiled on "
                 << stats->threads
                 << (stats->threads == 1 ? " thread\n" : " threads\n");
  }
  step = timing.nest("link");
  return linkLibrary(objects, path, tools.cudaRuntimeDir, loc);
}

} // namespace

std::string mlir::masformer::weightsPath(StringRef dst) {
  SmallString<256> path(dst);
  llvm::sys::path::replace_extension(path, "weights");
  return path.str().str();
}

namespace {

/// A temporary file next to `dst`, removed on failure and on a signal
/// (Ctrl-C) until it is renamed into place by `keep`.
struct PendingOutput {
  SmallString<256> tmp;
  std::optional<llvm::FileRemover> remover;

  LogicalResult create(StringRef dst, Location loc) {
    int fd;
    if (std::error_code ec =
            createFileRemovedOnSignal(dst + ".tmp-%%%%%%", false, fd, tmp)) {
      tmp.clear();
      return emitError(loc)
                 << "cannot write next to '" << dst << "': " << ec.message(),
             failure();
    }
    llvm::sys::Process::SafelyCloseFileDescriptor(fd);
    remover.emplace(tmp);
    return success();
  }
  LogicalResult keep(StringRef dst, Location loc) {
    if (std::error_code ec = llvm::sys::fs::rename(tmp, dst))
      return emitError(loc) << "cannot write '" << dst << "': " << ec.message(),
             failure();
    remover->releaseFile();
    return success();
  }
  ~PendingOutput() {
    if (!tmp.empty())
      llvm::sys::DontRemoveFileOnSignal(tmp);
  }
};

} // namespace

/// compileONNXFile's steps, each timed in `timing`.
static FailureOr<SpanReport> compileSteps(StringRef src, StringRef dst,
                                          const CompileONNXOptions &options,
                                          const CompileTools &tools,
                                          MLIRContext *context,
                                          TimingScope &timing, Location loc) {
  TimingScope step = timing.nest("import, raise and rewrite (ONNX frontend)");
  registerCompileDialects(context);
  ONNXFrontendOptions frontend;
  frontend.inputShapes = options.rewrite.inputShapes;
  frontend.spans = options.rewrite.spans;
  FailureOr<ONNXFrontendResult> imported =
      runONNXFrontend(src, frontend, context);
  if (failed(imported))
    return failure();
  ModuleOp module = *imported->module;
  FailureOr<SpanReport> report =
      computeSpanReport(module, options.rewrite.reportSeqLen);
  if (failed(report))
    return failure();
  // The decode entry of a causal decoder (docs/generate.md); its caches in
  // bf16 where the attention will take bf16 operands.
  std::string noDecode;
  LowerToCPUOptions lowering;
  setCPULowering(lowering, options, tools);
  if (options.decode == "off")
    noDecode = "it was compiled with --decode=off";
  else if (options.target != "cpu")
    noDecode = "decode entries are compiled for the CPU only, for now";
  else if (failed(deriveDecodeEntry(module, noDecode,
                                    bf16AttentionHeadDimMultiple(lowering))) &&
           options.decode == "on")
    return emitError(loc) << "--decode=on: " << noDecode, failure();
  step.stop();
  FailureOr<EntryInfo> entry = lowerModel(module, options, tools, timing, loc);
  if (failed(entry))
    return failure();
  if (entry->decodeSignature.empty()) {
    std::string why = noDecode;
    for (char &c : why)
      if (c == '\n' || c == '\t')
        c = ' ';
    entry->decodeSignature =
        (Twine(MF_ABI_DECODE_UNAVAILABLE) + "\t" + why + "\n").str();
  }

  // Everything goes to temporary files next to `dst`, renamed at the end:
  // the weights file first, so that a library is never in place without
  // its weights.
  std::string ownWeights = weightsPath(dst);
  if (!options.embedWeights && ownWeights == dst)
    return emitError(loc) << "-o " << dst
                          << ": the output cannot have the weights file's "
                             "extension (.weights)",
           failure();
  PendingOutput output;
  if (failed(output.create(dst, loc)))
    return failure();
  WeightsLayout weights;
  if (failed(emitOutput(module, output.tmp, *entry, options, tools, src,
                        ownWeights, weights, timing, loc)))
    return failure();
  step = timing.nest("weights file");
  PendingOutput weightsOutput;
  if (weights.ownFile() >= 0) {
    if (failed(weightsOutput.create(ownWeights, loc)))
      return failure();
    if (failed(writeFile(
            weightsOutput.tmp,
            [&](llvm::raw_fd_ostream &os) {
              return writeWeightsFile(weights, os, loc);
            },
            loc)) ||
        failed(weightsOutput.keep(ownWeights, loc)))
      return failure();
  }
  if (failed(output.keep(dst, loc)))
    return failure();
  return report;
}

FailureOr<SpanReport>
mlir::masformer::compileONNXFile(StringRef src, StringRef dst,
                                 const CompileONNXOptions &options,
                                 MLIRContext *context) {
  Location loc = FileLineColLoc::get(context, src, 0, 0);
  FailureOr<CompileTools> tools = checkOptionsAndFindTools(dst, options, loc);
  if (failed(tools))
    return failure();

  // --timing: each step's wall time, the MLIR passes one by one, printed to
  // stderr when the compile ends; or, for the library's callers, written to
  // options.timingJSON. The stream outlives the timer, which prints when
  // destroyed.
  std::string json;
  llvm::raw_string_ostream jsonStream(json);
  DefaultTimingManager timer;
  timer.setEnabled(options.timing || options.timingJSON);
  if (options.timingJSON)
    timer.setOutput(createOutputStrategy(
        DefaultTimingManager::OutputFormat::Json, jsonStream));
  // The root scope ends before the report is printed.
  FailureOr<SpanReport> report = [&] {
    TimingScope timing = timer.getRootScope();
    return compileSteps(src, dst, options, *tools, context, timing, loc);
  }();
  if (options.timingJSON) {
    if (succeeded(report)) {
      timer.print();
      *options.timingJSON = std::move(json);
    }
    timer.setEnabled(false);
  }
  return report;
}
