//===- RewriteONNX.cpp - The MASFormer rewrite of an ONNX file ----*- C++ -*-===//

#include "masformer/API/RewriteONNX.h"
#include "masformer/API/CompileONNX.h"
#include "masformer/API/Facade.h"
#include "masformer/Dialect/MASFormer/IR/MASFormerDialect.h"
#include "masformer/Dialect/MASFormer/Transforms/Passes.h"
#include "masformer/Export/ONNXExporter.h"
#include "masformer/Import/ONNXImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <onnx/onnx_pb.h>

using namespace mlir;
using namespace mlir::masformer;

void mlir::masformer::registerRewriteONNXDialects(DialectRegistry &registry) {
  registerONNXImportDialects(registry);
  registry.insert<MASFormerDialect>();
}

LogicalResult mlir::masformer::checkExternalDataOutput(
    const onnx::ModelProto &model, StringRef src, StringRef dst,
    Location loc) {
  for (const onnx::TensorProto &t : model.graph().initializer()) {
    if (t.data_location() != onnx::TensorProto::EXTERNAL)
      continue;
    SmallString<256> inDir(src), outDir(dst), inReal, outReal;
    llvm::sys::path::remove_filename(inDir);
    llvm::sys::path::remove_filename(outDir);
    if (inDir.empty())
      inDir = ".";
    if (outDir.empty())
      outDir = ".";
    if (llvm::sys::fs::real_path(inDir, inReal) ||
        llvm::sys::fs::real_path(outDir, outReal) || inReal != outReal)
      return emitError(loc) << "the model keeps its weights in external data "
                               "files referenced relative to it; write the "
                               "output .onnx into the input's directory ("
                            << inDir << ")";
    return success();
  }
  return success();
}

ImportedONNXModel::ImportedONNXModel() = default;
ImportedONNXModel::ImportedONNXModel(ImportedONNXModel &&) = default;
ImportedONNXModel::~ImportedONNXModel() = default;

FailureOr<ImportedONNXModel> mlir::masformer::importAndRewriteONNX(
    StringRef src, const RewriteONNXOptions &options, MLIRContext *context,
    llvm::function_ref<LogicalResult(const onnx::ModelProto &)> validate) {
  DialectRegistry registry;
  registerRewriteONNXDialects(registry);
  context->appendDialectRegistry(registry);
  context->loadAllAvailableDialects();
  Location loc = FileLineColLoc::get(context, src, 0, 0);
  ImportedONNXModel result;
  ONNXImportOptions importOptions;
  importOptions.inputShapes = options.inputShapes;
  importOptions.valueTypes = &result.valueTypes;
  FailureOr<std::unique_ptr<onnx::ModelProto>> model =
      readONNXModel(src, context);
  if (failed(model))
    return failure();
  result.model = std::move(*model);
  if (validate && failed(validate(*result.model)))
    return failure();
  SmallString<256> dir(src);
  llvm::sys::path::remove_filename(dir);
  if (dir.empty())
    dir = ".";
  FailureOr<OwningOpRef<ModuleOp>> module =
      importONNXModel(*result.model, dir, src, context, importOptions);
  if (failed(module))
    return failure();
  result.module = std::move(*module);

  PassManager pm(context);
  RaiseAttentionOptions raise;
  raise.strict = true;
  pm.addNestedPass<func::FuncOp>(createRaiseAttention(raise));
  if (!options.spans.empty()) {
    // The pass's own option parser, so that the options and their errors
    // are exactly those of --masformer-rewrite-spans.
    std::unique_ptr<Pass> rewrite = createRewriteSpans();
    std::string err;
    if (failed(rewrite->initializeOptions(
            options.spans, [&](const Twine &msg) {
              err = msg.str();
              return failure();
            })))
      return emitError(loc) << "--masformer-rewrite-spans options '"
                            << options.spans << "': "
                            << (err.empty() ? "cannot be parsed" : err),
             failure();
    pm.addPass(std::move(rewrite));
  }
  if (failed(pm.run(*result.module)))
    return failure();
  FailureOr<SpanReport> report =
      computeSpanReport(*result.module, options.reportSeqLen);
  if (failed(report))
    return failure();
  result.report = std::move(*report);
  return result;
}

FailureOr<SpanReport>
mlir::masformer::rewriteONNXFile(StringRef src, StringRef dst,
                                 const RewriteONNXOptions &options,
                                 MLIRContext *context) {
  Location loc = FileLineColLoc::get(context, src, 0, 0);
  if (!dst.empty() && !dst.ends_with(".onnx"))
    return emitError(loc) << "the output '" << dst
                          << "' must be a .onnx file",
           failure();
  FailureOr<ImportedONNXModel> imported = importAndRewriteONNX(
      src, options, context, [&](const onnx::ModelProto &model) {
        return dst.empty() ? success()
                           : checkExternalDataOutput(model, src, dst, loc);
      });
  if (failed(imported))
    return failure();
  if (!dst.empty()) {
    ONNXExportOptions exportOptions;
    exportOptions.valueTypes = &imported->valueTypes;
    if (failed(exportSpansToONNX(*imported->module, *imported->model,
                                 exportOptions)) ||
        failed(writeONNXFile(*imported->model, dst, context)))
      return failure();
  }
  return std::move(imported->report);
}

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
        result.error = "input shape of '" + name +
                       "': dimensions must be positive";
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
  return runCollecting(
      "rewrite", request.src, request.inputShapes,
      [&](llvm::StringMap<llvm::SmallVector<int64_t>> shapes,
          MLIRContext *context) {
        RewriteONNXOptions options;
        options.spans = request.spans;
        options.reportSeqLen = request.seqLen;
        options.inputShapes = std::move(shapes);
        return rewriteONNXFile(request.src, request.dst, options, context);
      });
}

api::RewriteResult api::compile(const CompileRequest &request) {
  return runCollecting(
      "compilation", request.src, request.inputShapes,
      [&](llvm::StringMap<llvm::SmallVector<int64_t>> shapes,
          MLIRContext *context) {
        CompileONNXOptions options;
        options.target = request.target;
        options.chip = request.chip;
        options.precision = request.precision;
        options.cpu = request.cpu;
        options.rewrite.spans = request.spans;
        options.rewrite.reportSeqLen = request.seqLen;
        options.rewrite.inputShapes = std::move(shapes);
        return compileONNXFile(request.src, request.dst, options, context);
      });
}
