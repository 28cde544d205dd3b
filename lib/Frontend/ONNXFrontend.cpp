//===- ONNXFrontend.cpp - ONNX to raised (and rewritten) MLIR ---*- C++ -*-===//

#include "masformer/Frontend/ONNXFrontend.h"
#include "masformer/Dialect/MASFormer/IR/MASFormerDialect.h"
#include "masformer/Dialect/MASFormer/Transforms/Passes.h"
#include "masformer/Import/ONNXImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"

#include <onnx/onnx_pb.h>

using namespace mlir;
using namespace mlir::masformer;

ONNXFrontendResult::ONNXFrontendResult() = default;
ONNXFrontendResult::ONNXFrontendResult(ONNXFrontendResult &&) = default;
ONNXFrontendResult &
ONNXFrontendResult::operator=(ONNXFrontendResult &&) = default;
ONNXFrontendResult::~ONNXFrontendResult() = default;

void mlir::masformer::registerONNXFrontendDialects(DialectRegistry &registry) {
  registerONNXImportDialects(registry);
  registry.insert<MASFormerDialect>();
}

FailureOr<ONNXFrontendResult> mlir::masformer::runONNXFrontend(
    StringRef path, const ONNXFrontendOptions &options, MLIRContext *context) {
  FailureOr<std::unique_ptr<onnx::ModelProto>> model =
      readONNXModel(path, context);
  if (failed(model))
    return failure();
  return runONNXFrontend(std::move(*model), modelDirectory(path), path, options,
                         context);
}

FailureOr<ONNXFrontendResult>
mlir::masformer::runONNXFrontend(std::unique_ptr<onnx::ModelProto> model,
                                 StringRef baseDir, StringRef sourceName,
                                 const ONNXFrontendOptions &options,
                                 MLIRContext *context) {
  DialectRegistry registry;
  registerONNXFrontendDialects(registry);
  context->appendDialectRegistry(registry);
  context->loadAllAvailableDialects();
  Location loc = FileLineColLoc::get(context, sourceName, 0, 0);
  if (options.validate && failed(options.validate(*model)))
    return failure();
  ONNXFrontendResult result;
  result.model = std::move(model);
  ONNXImportOptions importOptions;
  importOptions.inputShapes = options.inputShapes;
  importOptions.valueTypes = &result.valueTypes;
  importOptions.owner = result.model;
  FailureOr<OwningOpRef<ModuleOp>> module = importONNXModel(
      *result.model, baseDir, sourceName, context, importOptions);
  if (failed(module))
    return failure();
  result.module = std::move(*module);
  // importONNXModel verified the module: the passes below get valid IR.

  PassManager pm(context);
  RaiseAttentionOptions raise;
  raise.strict = options.strictRaise;
  pm.addNestedPass<func::FuncOp>(createRaiseAttention(raise));
  if (!options.spans.empty()) {
    std::unique_ptr<Pass> rewrite = createRewriteSpans();
    std::string err;
    if (failed(rewrite->initializeOptions(options.spans, [&](const Twine &msg) {
          err = msg.str();
          return failure();
        })))
      return emitError(loc)
                 << "--masformer-rewrite-spans options '" << options.spans
                 << "': " << (err.empty() ? "cannot be parsed" : err),
             failure();
    pm.addPass(std::move(rewrite));
  }
  if (options.extraPasses && failed(options.extraPasses(pm)))
    return failure();
  if (failed(pm.run(*result.module)))
    return failure();
  return result;
}
