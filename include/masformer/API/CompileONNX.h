//===- CompileONNX.h - An ONNX model to a runnable library ------*- C++ -*-===//
//
// The job of `masformer-compile`: import, raise, rewrite the spans, lower
// every op of the model, and link one shared library that the runtime
// (include/masformer/Runtime) loads. See docs/compile.md.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_API_COMPILEONNX_H
#define MASFORMER_API_COMPILEONNX_H

#include "masformer/API/RewriteONNX.h"

#include <optional>
#include <string>

namespace mlir::masformer {

/// What compileONNXFile writes.
enum class CompileOutput {
  /// A shared library for the runtime (the default).
  Library,
  /// The object file the library is linked from.
  Object,
  /// The optimized LLVM IR, as text.
  LLVMIR,
  /// The module in the LLVM dialect, before translation, as text.
  MLIR,
};

struct CompileONNXOptions {
  /// Import shapes, spans and the report's sequence length.
  RewriteONNXOptions rewrite;
  /// "cpu" (the host) or "cuda".
  std::string target = "cpu";
  /// The GPU for target "cuda" (sm_80 or newer); empty: sm_90. Only for
  /// target "cuda".
  std::string chip;
  /// For target "cuda": "f32", or "bf16" (products and attention on bf16
  /// operands, --masformer-mixed-precision).
  std::string precision = "f32";
  /// The CUDA toolkit whose ptxas makes the cubin (empty: $CUDA_HOME,
  /// $CUDA_PATH, or /usr/local/cuda).
  std::string cudaToolkit;
  /// Where libMASFormerCudaRuntime.so is (empty: $MASFORMER_LIBRARY_DIR,
  /// ../lib next to the running executable, or the build tree's lib/).
  std::string runtimeLibraryDir;
  /// The LLVM CPU to generate code for ("native": this machine's CPU and
  /// features).
  std::string cpu = "native";
  /// For target "cpu": the products AMX takes (bf16 ones with precision
  /// "bf16"; a quantized model's 8-bit ones at any precision, where the CPU
  /// has AVX512-VNNI) are compiled for AMX whatever the CPU has, and run in
  /// a checked scalar emulation of its tile instructions
  /// (--masformer-emulate-amx): a test of the AMX path on any CPU, slow.
  bool emulateAMX = false;
  /// Query rows and keys per attention tile. tileKV 0 chooses for the
  /// CPU: 128 with AVX-512, 64 with vectors of 8 (AVX2), where causal
  /// blocks and windows took 9-18% less time with 64 on a Zen 3 and full
  /// attention 3-6% less (bench/RESULTS.md).
  int64_t tileQ = 64, tileKV = 0;
  CompileOutput output = CompileOutput::Library;
  /// Keep every weight in the library's code instead of mapping them at
  /// load time from the model's data file and `weightsPath(dst)` (only
  /// for models whose weights stay well under 2 GiB).
  bool embedWeights = false;
  /// The decode entry for generation (docs/generate.md): "auto" derives it
  /// from a causal decoder and records why not otherwise, "on" fails when
  /// it cannot, "off" leaves it out.
  std::string decode = "auto";
  /// Threads that optimize and compile the parts of the machine code at
  /// once (0: one per core).
  unsigned jobs = 0;
  /// The object cache (docs/compile.md): a directory where each part's
  /// object file is kept under a hash of its LLVM IR, the target and the
  /// compiler, and taken from on the next compile. Unset:
  /// $MASFORMER_CACHE_DIR, or none; empty: none.
  std::optional<std::string> cacheDir;
  /// Print the wall time of each step (import, MLIR passes one by one,
  /// translation, LLVM optimization and machine code, link) to stderr.
  bool timing = false;
  /// When set, the same report goes here instead, as MLIR's JSON timing
  /// report (a list of {"name", "wall": {"duration", "percentage"},
  /// "passes": [...]}), once the compile has succeeded.
  std::string *timingJSON = nullptr;
  /// Verify the IR after every pass of the lowering, as masformer-opt does
  /// (a pass that breaks the IR is then named). Off, the input of the
  /// lowering and its result are verified once each: the verifier after
  /// each of its passes took about a third of the lowering's time.
  bool verifyEach = false;

  /// The chip compiled for: `chip`, or sm_90.
  std::string gpuChip() const { return chip.empty() ? "sm_90" : chip; }
};

/// The weights file written beside the output `dst`: `dst` with the
/// extension ".weights" (model.so -> model.weights).
std::string weightsPath(llvm::StringRef dst);

/// Compiles the ONNX model `src` into `dst` (nothing is written on
/// failure) and returns the span report of the compiled model. Weights the
/// model's own data file does not hold as they are go to weightsPath(dst),
/// written only when there are such weights. Errors go to
/// `context`'s diagnostic handler, naming the file, node, op or option.
FailureOr<SpanReport> compileONNXFile(llvm::StringRef src,
                                      llvm::StringRef dst,
                                      const CompileONNXOptions &options,
                                      MLIRContext *context);

/// Checks the options as compileONNXFile does, before any work: the one
/// place that knows which targets, chips and precisions exist and go
/// together (the command line and Python pass their values through). The
/// error message names the option.
LogicalResult checkCompileTarget(const CompileONNXOptions &options,
                                 std::string &error);

} // namespace mlir::masformer

#endif // MASFORMER_API_COMPILEONNX_H
