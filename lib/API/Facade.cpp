//===- Facade.cpp - The rewrite and compile APIs in plain C++ t -*- C++ -*-===//
//
// Each call runs in a context of its own whose diagnostics are collected as
// text, so that language bindings see one message per error.
//
//===----------------------------------------------------------------------===//

#include "masformer/API/Facade.h"
#include "masformer/API/CompileONNX.h"
#include "masformer/API/RewriteONNX.h"
#include "masformer/Import/ONNXImporter.h"

#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace mlir::masformer;

namespace {

/// Runs `job` with a context whose diagnostics are collected into `result`:
/// errors (with their notes) become the message, warnings (layers left
/// dense...) are returned.
template <typename Job>
api::RewriteResult runCollecting(
    const std::string &what, const std::string &src,
    const std::vector<std::pair<std::string, std::vector<int64_t>>> &shapes,
    Job job) {
  api::RewriteResult result;
  MemoryBudget budget = memoryBudget();
  if (budget.bytes < api::kMinMemoryBytes) {
    result.error = "the " + what + " of '" + src + "' needs at least " +
                   std::to_string(api::kMinMemoryBytes >> 20) +
                   " MiB of memory to start, more than " + budget.what + " (" +
                   std::to_string(budget.bytes) + " bytes)";
    return result;
  }
  MLIRContext context(MLIRContext::Threading::DISABLED);
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    std::string text;
    llvm::raw_string_ostream os(text);
    if (auto fl = dyn_cast<FileLineColLoc>(diag.getLocation()))
      os << fl.getFilename().getValue() << ": ";
    os << diag;
    for (const Diagnostic &note : diag.getNotes())
      os << "\n  note: " << note;
    if (diag.getSeverity() == DiagnosticSeverity::Error) {
      if (!result.error.empty())
        result.error += "\n";
      result.error += text;
    } else if (diag.getSeverity() == DiagnosticSeverity::Warning) {
      result.warnings.push_back(text);
    }
    return success();
  });
  llvm::StringMap<llvm::SmallVector<int64_t>> inputShapes;
  for (const auto &[name, dims] : shapes) {
    for (int64_t d : dims)
      if (d <= 0) {
        result.error =
            "input shape of '" + name + "': dimensions must be positive";
        return result;
      }
    inputShapes[name] = llvm::SmallVector<int64_t>(dims.begin(), dims.end());
  }
  FailureOr<SpanReport> report = job(std::move(inputShapes), &context);
  if (succeeded(report)) {
    result.ok = true;
    result.report = std::move(*report);
  } else if (result.error.empty()) {
    result.error = "the " + what + " of '" + src + "' failed";
  }
  return result;
}

} // namespace

api::RewriteResult api::rewrite(const RewriteRequest &request) {
  return runCollecting("rewrite", request.src, request.inputShapes,
                       [&](llvm::StringMap<llvm::SmallVector<int64_t>> shapes,
                           MLIRContext *context) {
                         RewriteONNXOptions options;
                         options.spans = request.spans;
                         options.reportSeqLen = request.seqLen;
                         options.inputShapes = std::move(shapes);
                         return rewriteONNXFile(request.src, request.dst,
                                                options, context);
                       });
}

api::RewriteResult api::compile(const CompileRequest &request) {
  std::string timing;
  api::RewriteResult result = runCollecting(
      "compilation", request.src, request.inputShapes,
      [&](llvm::StringMap<llvm::SmallVector<int64_t>> shapes,
          MLIRContext *context) {
        CompileONNXOptions options;
        options.target = request.target;
        options.chip = request.chip;
        options.precision = request.precision;
        options.cpu = request.cpu;
        options.embedWeights = request.embedWeights;
        options.emulateAMX = request.emulateAMX;
        options.jobs = request.jobs;
        options.cacheDir = request.cacheDir;
        options.rewrite.spans = request.spans;
        options.rewrite.reportSeqLen = request.seqLen;
        options.rewrite.inputShapes = std::move(shapes);
        if (request.timing)
          options.timingJSON = &timing;
        return compileONNXFile(request.src, request.dst, options, context);
      });
  result.timing = std::move(timing);
  return result;
}
