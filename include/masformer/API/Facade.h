//===- Facade.h - The rewrite API in plain C++ types ------------*- C++ -*-===//
//
// rewriteONNXFile and compileONNXFile behind plain C++ types, with the diagnostics collected as
// text: what language bindings (the Python extension, built with RTTI and
// exceptions) call without including MLIR headers.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_API_FACADE_H
#define MASFORMER_API_FACADE_H

#include "masformer/Dialect/MASFormer/Analysis/SpanCost.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mlir::masformer::api {

/// rewrite() and compile() refuse to start when the process may take less
/// memory than this (memoryBudget(), Import/ONNXImporter.h): the context's
/// dialects and the pipelines need about this much for any model, and an
/// allocation that fails inside MLIR's own setup code cannot be unwound
/// safely (docs/SECURITY.md, "Memory"). 80 MiB since 2026-12-06: with 64
/// MiB left a compile of GPT-2's fixture aborted about once in 12 runs (a
/// std::bad_alloc thrown where no exception may pass); none in 15 runs
/// each at 80 and 96 MiB.
constexpr uint64_t kMinMemoryBytes = uint64_t(80) << 20;

struct RewriteRequest {
  std::string src, dst;
  /// The options of --masformer-rewrite-spans; empty: no rewrite.
  std::string spans;
  int64_t seqLen = 2048;
  std::vector<std::pair<std::string, std::vector<int64_t>>> inputShapes;
};

struct RewriteResult {
  bool ok = false;
  /// Every error, one per line, each naming the file, node, op or option.
  std::string error;
  std::vector<std::string> warnings;
  SpanReport report;
  /// compile with CompileRequest::timing: the time of each step, as JSON
  /// (CompileONNXOptions::timingJSON).
  std::string timing;
};

RewriteResult rewrite(const RewriteRequest &request);

struct CompileRequest {
  std::string src, dst;
  /// "cpu" or "cuda".
  std::string target = "cpu";
  /// The GPU for "cuda" (sm_80 or newer); empty: sm_90.
  std::string chip;
  /// For "cuda": "f32" or "bf16" (products and attention on bf16 operands).
  std::string precision = "f32";
  /// The LLVM CPU ("native": this machine).
  std::string cpu = "native";
  /// The options of --masformer-rewrite-spans; empty: no rewrite.
  std::string spans;
  int64_t seqLen = 2048;
  std::vector<std::pair<std::string, std::vector<int64_t>>> inputShapes;
  /// Keep the weights in the library (CompileONNXOptions::embedWeights).
  bool embedWeights = false;
  /// The AMX path in its checked emulator (CompileONNXOptions::emulateAMX).
  bool emulateAMX = false;
  /// Time each step of the compile into RewriteResult::timing.
  bool timing = false;
  /// Threads for the machine code (CompileONNXOptions::jobs; 0: one per
  /// core).
  unsigned jobs = 0;
  /// The object cache (CompileONNXOptions::cacheDir): unset,
  /// $MASFORMER_CACHE_DIR; empty, none.
  std::optional<std::string> cacheDir;
};

/// compileONNXFile (API/CompileONNX.h) into a shared library at `dst`; the
/// report is that of the compiled model.
RewriteResult compile(const CompileRequest &request);

} // namespace mlir::masformer::api

#endif // MASFORMER_API_FACADE_H
