//===- masformer-compile.cpp - ONNX to a runnable library -------*- C++ -*-===//
//
//   masformer-compile model.onnx --target=cpu \
//     --spans="span=block:256 policy=top num-full=2" -o model.so
//   masformer-compile model.onnx --target=cuda --chip=sm_90 -o model.so
//
// imports the model, raises its attention layers, applies the MASFormer
// rewrite, lowers every op and links one shared library that the runtime
// (include/masformer/Runtime, masformer-run, masformer.Session) loads.
// See docs/compile.md.
//
//===----------------------------------------------------------------------===//

#include "masformer/API/CompileONNX.h"
#include "masformer/Utils/CommandLine.h"
#include "masformer/Import/ONNXImporter.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::masformer;

namespace cl = llvm::cl;

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  mlir::masformer::exitCleanlyOnOutOfMemory("masformer-compile");
  cl::OptionCategory category("masformer-compile options");
  cl::opt<std::string> input(cl::Positional, cl::desc("<model.onnx>"),
                             cl::Required, cl::cat(category));
  cl::opt<std::string> output("o", cl::desc("Output file"),
                              cl::value_desc("model.so"), cl::Required,
                              cl::cat(category));
  cl::opt<std::string> target("target", cl::desc("cpu (default) or cuda"),
                              cl::init("cpu"), cl::cat(category));
  cl::opt<std::string> chip(
      "chip",
      cl::desc("GPU architecture for --target=cuda: sm_80, sm_86, sm_89, "
               "sm_90 (default), ..."),
      cl::init(""), cl::cat(category));
  cl::opt<std::string> cudaToolkit(
      "cuda-toolkit",
      cl::desc("CUDA toolkit whose ptxas compiles the kernels (default: "
               "$CUDA_HOME, $CUDA_PATH or /usr/local/cuda)"),
      cl::init(""), cl::cat(category));
  cl::opt<std::string> precision(
      "precision",
      cl::desc("f32 (default), or bf16: matrix products and attention on "
               "bf16 operands with f32 accumulation (on the CPU: AMX tiles, "
               "or AVX512-BF16; attention stays f32 on Intel's CPUs "
               "without AMX, whose f32 attention kernels are the faster; an "
               "error on a CPU with neither)"),
      cl::init("f32"), cl::cat(category));
  cl::opt<std::string> cpu(
      "cpu",
      cl::desc("LLVM CPU to generate code for (default: native, this "
               "machine's CPU and features)"),
      cl::init("native"), cl::cat(category));
  cl::opt<bool> emulateAMX(
      "emulate-amx",
      cl::desc("On the CPU: compile the products AMX takes (bf16 ones with "
               "--precision=bf16, a quantized model's 8-bit ones at any "
               "precision where the CPU has AVX512-VNNI) for AMX whatever the "
               "CPU has, and run them in a checked scalar emulation of AMX's "
               "tile instructions (a test of the AMX path on a CPU without "
               "AMX; slow)"),
      cl::init(false), cl::cat(category));
  cl::list<std::string> inputShapes(
      "input-shape",
      cl::desc("Static shape of a graph input: name=d0xd1x... (repeatable; "
               "dimensions stay dynamic otherwise)"),
      cl::ZeroOrMore, cl::cat(category));
  cl::opt<std::string> spans(
      "spans",
      cl::desc("The MASFormer rewrite: the options of "
               "--masformer-rewrite-spans, e.g. \"span=block:256 "
               "policy=top num-full=2\" (default: no rewrite)"),
      cl::init(""), cl::cat(category));
  cl::opt<CompileOutput> emit(
      "emit", cl::desc("What to write"), cl::init(CompileOutput::Library),
      cl::values(clEnumValN(CompileOutput::Library, "library",
                            "A shared library for the runtime (default)"),
                 clEnumValN(CompileOutput::Object, "object", "The object file"),
                 clEnumValN(CompileOutput::LLVMIR, "llvm", "Optimized LLVM IR"),
                 clEnumValN(CompileOutput::MLIR, "mlir",
                            "The module lowered to the LLVM dialect")),
      cl::cat(category));
  cl::opt<bool> embedWeights(
      "embed-weights",
      cl::desc("Keep the weights inside the library (default: mapped at "
               "load time from the model's data file and <output>.weights; "
               "embedding fails to link above about 2 GiB of weights)"),
      cl::init(false), cl::cat(category));
  cl::opt<std::string> decode(
      "decode",
      cl::desc("The decode entry for generation (docs/generate.md): auto "
               "(default: for a causal decoder on the CPU), on (fail when "
               "the model has none), off"),
      cl::init("auto"), cl::cat(category));
  cl::opt<bool> report("report",
                       cl::desc("Print the span report of the compiled model"),
                       cl::init(false), cl::cat(category));
  cl::opt<int64_t> reportSeqLen(
      "report-seq-len",
      cl::desc("Sequence length of the span report (default 2048)"),
      cl::init(2048), cl::cat(category));
  cl::opt<bool> timing(
      "timing",
      cl::desc("Print the time each step of the compile took (the MLIR "
               "passes one by one, LLVM's optimization and machine code, link) "
               "to stderr"),
      cl::init(false), cl::cat(category));
  cl::opt<bool> verifyEach(
      "verify-each",
      cl::desc("Verify the IR after every pass of the lowering (default: "
               "only its input and its result; a developer's option, which "
               "names the pass that broke the IR)"),
      cl::init(false), cl::cat(category));
  cl::opt<int64_t> tileQ("tile-q", cl::desc("Query rows per attention tile"),
                         cl::init(64), cl::cat(category));
  cl::opt<int64_t> tileKV(
      "tile-kv",
      cl::desc("Keys per attention tile (default 0: 128 for a CPU with "
               "AVX-512, 64 for one without)"),
      cl::init(0), cl::cat(category));
  cl::opt<unsigned> jobs(
      "jobs",
      cl::desc("Threads that optimize and compile the parts of the machine "
               "code at once (default 0: one per core)"),
      cl::init(0), cl::cat(category));
  cl::opt<std::string> cacheDir(
      "cache-dir",
      cl::desc("Keep each part's object file in this directory, keyed by its "
               "LLVM IR, the target and the compiler, and reuse it on the "
               "next compile (default: $MASFORMER_CACHE_DIR, or no cache; "
               "--cache-dir= turns the cache off)"),
      cl::value_desc("dir"), cl::cat(category));
  masformer::hideOptionsOutside(category);
  cl::ParseCommandLineOptions(
      argc, argv, "masformer-compile: an ONNX model to a runnable library\n");

  MLIRContext context(MLIRContext::Threading::DISABLED);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagHandler(sourceMgr, &context);
  context.printOpOnDiagnostic(false);
  Location loc = FileLineColLoc::get(&context, input, 0, 0);

  CompileONNXOptions options;
  options.target = target;
  options.chip = chip;
  options.cudaToolkit = cudaToolkit;
  options.precision = precision;
  options.cpu = cpu;
  options.emulateAMX = emulateAMX;
  options.output = emit;
  options.embedWeights = embedWeights;
  options.decode = decode;
  options.tileQ = tileQ;
  options.tileKV = tileKV;
  options.timing = timing;
  options.verifyEach = verifyEach;
  options.jobs = jobs;
  if (cacheDir.getNumOccurrences())
    options.cacheDir = cacheDir;
  options.rewrite.spans = spans;
  options.rewrite.reportSeqLen = reportSeqLen;
  ONNXImportOptions shapes;
  for (const std::string &spec : inputShapes) {
    std::string err = parseInputShapeOption(spec, shapes);
    if (!err.empty()) {
      emitError(loc) << err;
      return 1;
    }
  }
  options.rewrite.inputShapes = shapes.inputShapes;
  FailureOr<SpanReport> result =
      compileONNXFile(input, output, options, &context);
  if (failed(result))
    return 1;
  if (report)
    printSpanReport(*result, llvm::outs());
  return 0;
}
