//===- masformer-opt.cpp - The masformer optimizer driver -------*- C++ -*-===//
//
// mlir-opt with the masformer dialect and passes, plus every upstream dialect
// and pass, so that a user can run the masformer passes and the upstream
// lowerings in one pipeline.
//
// Given an .onnx input, it imports the model (--input-shape fixes dynamic
// dimensions), raises its attention layers, runs the passes given on the
// command line, and writes either MLIR or, for `-o out.onnx`, the original
// model patched with the new spans:
//
//   masformer-opt model.onnx --input-shape input_ids=1x2048 \
//     --masformer-rewrite-spans="span=block:256" -o out.onnx
//
//===----------------------------------------------------------------------===//

#include "TestPasses.h"
#include "masformer/API/RewriteONNX.h"
#include "masformer/Dialect/MASFormer/IR/MASFormerDialect.h"
#include "masformer/Export/ONNXExporter.h"
#include "masformer/Frontend/ONNXFrontend.h"
#include "masformer/Import/ONNXImporter.h"
#include "masformer/InitAllPasses.h"
#include "masformer/Pipelines/Pipelines.h"
#include "masformer/Utils/CommandLine.h"
#include "masformer/Utils/OutputFile.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"

#include <onnx/onnx_pb.h>

using namespace mlir;

/// The positional input of the command line, skipping option values.
static StringRef findInput(int argc, char **argv) {
  for (int i = 1; i < argc; ++i) {
    StringRef a(argv[i]);
    if (a == "-o" || a == "--input-shape" || a == "-input-shape" ||
        a == "-p" || a == "--p") {
      ++i;
      continue;
    }
    if (!a.starts_with("-"))
      return a;
  }
  return "";
}

/// ONNX in, ONNX or MLIR out.
static int onnxMain(int argc, char **argv, DialectRegistry &registry) {
  static llvm::cl::opt<std::string> inputFilename(
      llvm::cl::Positional, llvm::cl::desc("<input .onnx>"),
      llvm::cl::Required);
  static llvm::cl::opt<std::string> outputFilename(
      "o",
      llvm::cl::desc("Output: a .onnx file gets the patched model, anything "
                     "else the MLIR module"),
      llvm::cl::value_desc("filename"), llvm::cl::init("-"));
  static llvm::cl::list<std::string> inputShapes(
      "input-shape",
      llvm::cl::desc("Static shape of a graph input: name=d0xd1x... "
                     "(repeatable)"),
      llvm::cl::ZeroOrMore);
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
  PassPipelineCLParser passPipeline("", "Compiler passes to run", "p");
  llvm::cl::ParseCommandLineOptions(argc, argv,
                                    "masformer optimizer driver (ONNX mode)\n");

  MLIRContext context(registry);
  // Print every diagnostic (warnings about layers that stay dense
  // included), as mlir-opt does.
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagHandler(sourceMgr, &context);
  context.printOpOnDiagnostic(false);
  Location loc = FileLineColLoc::get(&context, inputFilename, 0, 0);
  masformer::ONNXImportOptions shapes;
  for (const std::string &spec : inputShapes) {
    std::string err = masformer::parseInputShapeOption(spec, shapes);
    if (!err.empty()) {
      emitError(loc) << err;
      return 1;
    }
  }
  masformer::ONNXFrontendOptions options;
  options.inputShapes = std::move(shapes.inputShapes);
  // The IR is what the user asked to see: a pattern that cannot be raised
  // stays as imported, with a warning naming it.
  options.strictRaise = false;
  options.extraPasses = [&](PassManager &pm) -> LogicalResult {
    if (failed(applyPassManagerCLOptions(pm)))
      return failure();
    return passPipeline.addToPipeline(pm, [&](const Twine &msg) {
      // A pass option that does not parse is reported by LLVM's option
      // parser on its own line ("for the --num-full option: ..."), and the
      // handler then gets no text.
      std::string text = msg.str();
      emitError(loc) << (text.empty() ? "a pass option above could not be "
                                        "parsed"
                                      : text);
      return failure();
    });
  };
  FailureOr<masformer::ONNXFrontendResult> imported =
      masformer::runONNXFrontend(inputFilename, options, &context);
  if (failed(imported))
    return 1;
  OwningOpRef<ModuleOp> &module = imported->module;
  onnx::ModelProto &model = *imported->model;

  if (StringRef(outputFilename).ends_with(".onnx")) {
    // External data is referenced relative to the model file: the patched
    // model only finds it next to the original.
    if (failed(masformer::checkExternalDataOutput(model, inputFilename,
                                                  outputFilename, loc)))
      return 1;
    masformer::ONNXExportOptions exportOptions;
    exportOptions.valueTypes = &imported->valueTypes;
    if (failed(masformer::exportSpansToONNX(*module, model, exportOptions)) ||
        failed(masformer::writeONNXFile(model, outputFilename, &context)))
      return 1;
    return 0;
  }
  auto print = [&](llvm::raw_ostream &os) {
    module->print(os);
    os << "\n";
    return success();
  };
  return failed(masformer::writeOutputAtomically(outputFilename, loc, print))
             ? 1
             : 0;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  mlir::masformer::exitCleanlyOnOutOfMemory("masformer-opt");
  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  // gpu-module-to-binary translates kernels to LLVM IR.
  mlir::registerAllToLLVMIRTranslations(registry);
  mlir::registerAllPasses();
  registry.insert<mlir::masformer::MASFormerDialect>();
  mlir::masformer::registerONNXFrontendDialects(registry);
  mlir::masformer::registerAllPasses();
  mlir::masformer::registerMASFormerPipelines();
  mlir::masformer::test::registerTestPasses();
  if (findInput(argc, argv).ends_with(".onnx"))
    return onnxMain(argc, argv, registry);
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "masformer optimizer driver\n", registry));
}
