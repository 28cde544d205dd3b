//===- masformer-translate.cpp - ONNX import driver -------------*- C++ -*-===//
//
//   masformer-translate --import-onnx model.onnx [--input-shape x=1x128] -o
//   m.mlir
//
// Imports an ONNX model into upstream tensor-level dialects (docs/import.md).
// Its own options come first in --help; LLVM's and MLIR's printing options
// still work and are listed by --help-hidden.
//
//===----------------------------------------------------------------------===//

#include "masformer/Import/ONNXImporter.h"
#include "masformer/Utils/CommandLine.h"
#include "masformer/Utils/OutputFile.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;
namespace cl = llvm::cl;

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  mlir::masformer::exitCleanlyOnOutOfMemory("masformer-translate");
  cl::OptionCategory category("masformer-translate options");
  cl::opt<std::string> input(cl::Positional, cl::desc("<model.onnx>"),
                             cl::Required, cl::cat(category));
  cl::opt<bool> importONNX(
      "import-onnx",
      cl::desc("Import an ONNX model (.onnx) into MLIR (the only "
               "translation; kept as a flag for mlir-translate habits)"),
      cl::cat(category));
  cl::opt<std::string> output("o", cl::desc("Output file (default: stdout)"),
                              cl::value_desc("file.mlir"), cl::init("-"),
                              cl::cat(category));
  cl::list<std::string> inputShapes(
      "input-shape",
      cl::desc("Static shape of a graph input: name=d0xd1x... "
               "(repeatable), e.g. --input-shape input_ids=1x2048"),
      cl::ZeroOrMore, cl::cat(category));
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  masformer::hideOptionsOutside(category);
  cl::ParseCommandLineOptions(argc, argv,
                              "masformer-translate: ONNX to MLIR\n");

  DialectRegistry registry;
  masformer::registerONNXImportDialects(registry);
  MLIRContext context(registry);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagHandler(sourceMgr, &context);
  Location loc = FileLineColLoc::get(&context, input, 0, 0);
  if (!importONNX) {
    emitError(loc) << "no translation given: pass --import-onnx";
    return 1;
  }
  masformer::ONNXImportOptions options;
  for (const std::string &spec : inputShapes) {
    std::string err = masformer::parseInputShapeOption(spec, options);
    if (!err.empty()) {
      emitError(loc) << err;
      return 1;
    }
  }
  FailureOr<OwningOpRef<ModuleOp>> module =
      masformer::importONNXFile(input, &context, options);
  if (failed(module))
    return 1;
  // Written only once the import succeeded, through a temporary file: a
  // failure or a kill leaves an existing file as it was.
  auto print = [&](llvm::raw_ostream &os) {
    (*module)->print(os, OpPrintingFlags());
    os << "\n";
    return success();
  };
  return failed(masformer::writeOutputAtomically(output, loc, print)) ? 1 : 0;
}
