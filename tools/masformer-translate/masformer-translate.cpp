//===- masformer-translate.cpp - ONNX import driver -------------*- C++ -*-===//
//
// mlir-translate with the ONNX importer:
//   masformer-translate --import-onnx model.onnx [--input-shape x=1x128] -o m.mlir
//
//===----------------------------------------------------------------------===//

#include "masformer/Import/ONNXImporter.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;

static llvm::cl::list<std::string> clInputShapes(
    "input-shape",
    llvm::cl::desc("Static shape of a graph input: name=d0xd1x... "
                   "(repeatable), e.g. --input-shape input_ids=1x2048"),
    llvm::cl::ZeroOrMore);

static OwningOpRef<Operation *> importONNX(llvm::SourceMgr &sourceMgr,
                                           MLIRContext *context) {
  const llvm::MemoryBuffer *buffer =
      sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID());
  StringRef path = buffer->getBufferIdentifier();
  masformer::ONNXImportOptions options;
  for (const std::string &spec : clInputShapes) {
    std::string err = masformer::parseInputShapeOption(spec, options);
    if (!err.empty()) {
      emitError(UnknownLoc::get(context)) << err;
      return nullptr;
    }
  }
  FailureOr<OwningOpRef<ModuleOp>> module =
      masformer::importONNXFile(path, context, options);
  if (failed(module))
    return nullptr;
  return OwningOpRef<Operation *>(module->release());
}

int main(int argc, char **argv) {
  TranslateToMLIRRegistration importRegistration(
      "import-onnx", "Import an ONNX model (.onnx) into MLIR", importONNX,
      [](DialectRegistry &registry) {
        masformer::registerONNXImportDialects(registry);
      });
  return failed(mlirTranslateMain(argc, argv, "masformer translation driver"));
}
