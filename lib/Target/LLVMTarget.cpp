//===- LLVMTarget.cpp - The host CPU as an LLVM target ----------*- C++ -*-===//

#include "masformer/Target/LLVMTarget.h"

#include "mlir/IR/Diagnostics.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Metadata.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/Transforms/IPO/MergeFunctions.h"

#include <mutex>

using namespace mlir;
using namespace mlir::masformer;

int64_t mlir::masformer::knownL2Bytes(StringRef cpu) {
  constexpr int64_t kKiB = 1024;
  return llvm::StringSwitch<int64_t>(cpu)
      .Cases({"znver1", "znver2", "znver3"}, 512 * kKiB)
      .Cases({"znver4", "znver5"}, 1024 * kKiB)
      .Cases({"nehalem", "westmere", "sandybridge", "ivybridge", "haswell",
              "broadwell", "skylake", "cannonlake"},
             256 * kKiB)
      .Cases({"icelake-client", "rocketlake"}, 512 * kKiB)
      .Cases({"skylake-avx512", "cascadelake", "cooperlake", "sierraforest",
              "grandridge"},
             1024 * kKiB)
      .Cases({"icelake-server", "tigerlake", "alderlake"}, 1280 * kKiB)
      .Cases({"sapphirerapids", "emeraldrapids", "graniterapids",
              "graniterapids-d", "diamondrapids", "raptorlake", "meteorlake"},
             2048 * kKiB)
      .Default(1024 * kKiB);
}

int64_t mlir::masformer::hostL2BytesPerThread() {
  auto read = [](const llvm::Twine &path) -> std::string {
    auto buffer = llvm::MemoryBuffer::getFileAsStream(path);
    return buffer ? (*buffer)->getBuffer().trim().str() : std::string();
  };
  for (int index = 0; index < 8; ++index) {
    std::string dir =
        "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index);
    std::string level = read(dir + "/level");
    if (level.empty())
      break;
    std::string type = read(dir + "/type");
    if (level != "2" || (type != "Unified" && type != "Data"))
      continue;
    // "2048K"; the threads that share it, as "0-1" or "0,64".
    std::string sizeText = read(dir + "/size");
    StringRef size = StringRef(sizeText).trim();
    int64_t scale = 1;
    if (size.consume_back("K"))
      scale = 1024;
    else if (size.consume_back("M"))
      scale = 1024 * 1024;
    int64_t bytes = 0;
    if (size.getAsInteger(10, bytes) || bytes <= 0)
      return 0;
    int64_t threads = 0;
    SmallVector<StringRef> ranges;
    std::string shared = read(dir + "/shared_cpu_list");
    StringRef(shared).split(ranges, ',', -1, /*KeepEmpty=*/false);
    for (StringRef range : ranges) {
      auto [first, last] = range.trim().split('-');
      int64_t lo = 0, hi = 0;
      if (first.getAsInteger(10, lo))
        return 0;
      if (last.empty())
        hi = lo;
      else if (last.getAsInteger(10, hi) || hi < lo)
        return 0;
      threads += hi - lo + 1;
    }
    return bytes * scale / std::max<int64_t>(1, threads);
  }
  return 0;
}

FailureOr<HostTarget> mlir::masformer::createHostTarget(StringRef cpuOption,
                                                        Location loc) {
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
  HostTarget host;
  host.target = target;
  host.cpu = cpu;
  host.features = features;
  host.machine = host.createMachine();
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
  host.amxBF16 = sti->checkFeatures("+amx-tile,+amx-bf16");
  host.avx512BF16 = sti->checkFeatures("+avx512bf16");
  host.avx512VNNI = sti->checkFeatures("+avx512vnni");
  host.amxInt8 = sti->checkFeatures("+amx-tile,+amx-int8");
  // AMD's Zen cores are LLVM's znver*; a host's vendor comes from CPUID,
  // which a virtual machine reports truly where its model number may not be
  // (an Intel Xeon with AMX seen as "rocketlake").
  bool amd = cpuOption == "native"
                 ? llvm::sys::detail::x86::getVendorSignature() ==
                       llvm::sys::detail::x86::VendorSignatures::AUTHENTIC_AMD
                 : StringRef(cpu).starts_with("znver");
  host.fastBF16Dot = host.avx512BF16 && amd;
  host.l2Bytes = cpuOption == "native" ? hostL2BytesPerThread() : 0;
  if (host.l2Bytes <= 0)
    host.l2Bytes = knownL2Bytes(cpu);
  return host;
}

std::unique_ptr<llvm::TargetMachine> HostTarget::createMachine() const {
  llvm::Triple triple(llvm::sys::getProcessTriple());
  llvm::TargetOptions targetOptions;
  return std::unique_ptr<llvm::TargetMachine>(target->createTargetMachine(
      triple, cpu, features, targetOptions, llvm::Reloc::PIC_, std::nullopt,
      llvm::CodeGenOptLevel::Aggressive));
}

/// Marks every loop of the functions that are not kernels "do not unroll".
/// The kernels (--masformer-outline-kernels' masformer_kernel_N and the
/// OpenMP bodies outlined from them) do the model's work; the rest is glue:
/// allocations, copies, the few ops left sequential. On small static shapes
/// LLVM fully unrolled the glue's loops: main grew from 7,000 to 53,000 lines
/// of IR on a 3-layer model at 2x16 tokens, and O3 and machine code took
/// 4.7 s instead of 1.2. That code is not where a model spends its time (not
/// measurable in GPT-2 small's profile), and its loops are still vectorized.
/// The loop vectorizer gives the loops it creates new loop IDs: the hint
/// is passed on to them as its followup.
static void keepGlueLoopsRolled(llvm::Module &m) {
  llvm::LLVMContext &ctx = m.getContext();
  llvm::MDNode *disable = llvm::MDNode::get(
      ctx, llvm::MDString::get(ctx, "llvm.loop.unroll.disable"));
  llvm::MDNode *followup = llvm::MDNode::get(
      ctx,
      {llvm::MDString::get(ctx, "llvm.loop.vectorize.followup_all"), disable});
  for (llvm::Function &f : m) {
    if (f.isDeclaration() || f.getName().starts_with("masformer_kernel_"))
      continue;
    llvm::DominatorTree dominators(f);
    llvm::LoopInfo loops(dominators);
    for (llvm::Loop *loop : loops.getLoopsInPreorder()) {
      // A loop ID is distinct and names itself first.
      SmallVector<llvm::Metadata *> ops = {nullptr};
      if (llvm::MDNode *id = loop->getLoopID())
        ops.append(id->op_begin() + 1, id->op_end());
      ops.append({disable, followup});
      llvm::MDNode *id = llvm::MDNode::getDistinct(ctx, ops);
      id->replaceOperandWith(0, id);
      loop->setLoopID(id);
    }
  }
}

void mlir::masformer::optimizeModule(llvm::Module &m, llvm::TargetMachine &tm) {
  keepGlueLoopsRolled(m);
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
  // Functions still identical after --masformer-outline-kernels (OpenMP
  // regions of identical kernels) become calls to one before the O3
  // pipeline, which then optimizes and emits each once. Alone, before the
  // outlining, this took GPT-2 small's compile from 310 s to 74 s on a Zen 3.
  llvm::ModulePassManager mpm;
  mpm.addPass(llvm::MergeFunctionsPass());
  mpm.addPass(pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3));
  mpm.run(m, mam);
}

void mlir::masformer::mergeIdenticalFunctions(llvm::Module &m) {
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb;
  pb.registerModuleAnalyses(mam);
  llvm::ModulePassManager mpm;
  mpm.addPass(llvm::MergeFunctionsPass());
  mpm.run(m, mam);
}

LogicalResult mlir::masformer::emitObjectFile(llvm::Module &module,
                                              llvm::TargetMachine &machine,
                                              llvm::raw_pwrite_stream &os,
                                              Location loc) {
  llvm::legacy::PassManager codegen;
  if (machine.addPassesToEmitFile(codegen, os, nullptr,
                                  llvm::CodeGenFileType::ObjectFile))
    return emitError(loc) << "LLVM cannot emit an object file for "
                          << machine.getTargetTriple().str();
  codegen.run(module);
  return success();
}
