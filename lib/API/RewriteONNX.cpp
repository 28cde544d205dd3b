//===- RewriteONNX.cpp - The MASFormer rewrite of an ONNX file --*- C++ -*-===//

#include "masformer/API/RewriteONNX.h"
#include "masformer/Export/ONNXExporter.h"
#include "masformer/Frontend/ONNXFrontend.h"
#include "masformer/Import/ONNXImporter.h"

#include "llvm/Support/FileSystem.h"

#include <onnx/onnx_pb.h>

using namespace mlir;
using namespace mlir::masformer;

LogicalResult mlir::masformer::checkExternalDataOutput(
    const onnx::ModelProto &model, StringRef src, StringRef dst,
    Location loc) {
  for (const onnx::TensorProto &t : model.graph().initializer()) {
    if (t.data_location() != onnx::TensorProto::EXTERNAL)
      continue;
    std::string inDir = modelDirectory(src), outDir = modelDirectory(dst);
    SmallString<256> inReal, outReal;
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

FailureOr<SpanReport>
mlir::masformer::rewriteONNXFile(StringRef src, StringRef dst,
                                 const RewriteONNXOptions &options,
                                 MLIRContext *context) {
  Location loc = FileLineColLoc::get(context, src, 0, 0);
  if (!dst.empty() && !dst.ends_with(".onnx"))
    return emitError(loc) << "the output '" << dst
                          << "' must be a .onnx file",
           failure();
  ONNXFrontendOptions frontend;
  frontend.inputShapes = options.inputShapes;
  frontend.spans = options.spans;
  frontend.validate = [&](const onnx::ModelProto &model) {
    return dst.empty() ? success()
                       : checkExternalDataOutput(model, src, dst, loc);
  };
  FailureOr<ONNXFrontendResult> imported =
      runONNXFrontend(src, frontend, context);
  if (failed(imported))
    return failure();
  FailureOr<SpanReport> report =
      computeSpanReport(*imported->module, options.reportSeqLen);
  if (failed(report))
    return failure();
  if (!dst.empty()) {
    ONNXExportOptions exportOptions;
    exportOptions.valueTypes = &imported->valueTypes;
    if (failed(exportSpansToONNX(*imported->module, *imported->model,
                                 exportOptions)) ||
        failed(writeONNXFile(*imported->model, dst, context)))
      return failure();
  }
  return report;
}
