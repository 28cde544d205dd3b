//===- fuzz-options.cpp - libFuzzer harness for option parsers --*- C++ -*-===//
//
// Arbitrary text through the parsers users type into: the span attribute
// (`#masformer.span<...>`), `--input-shape`, and the
// --masformer-rewrite-spans option string. Errors are fine; crashes are not.
//
//===----------------------------------------------------------------------===//

#include "masformer/Dialect/MASFormer/IR/MASFormerDialect.h"
#include "masformer/InitAllPasses.h"
#include "masformer/Import/ONNXImporter.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Parser/Parser.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 4096)
    return 0;
  std::string text(reinterpret_cast<const char *>(data), size);
  mlir::DialectRegistry registry;
  mlir::masformer::registerONNXImportDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  mlir::ScopedDiagnosticHandler quiet(
      &context, [](mlir::Diagnostic &) { return mlir::success(); });

  (void)mlir::parseAttribute("#masformer.span<" + text + ">", &context);

  mlir::masformer::ONNXImportOptions options;
  (void)mlir::masformer::parseInputShapeOption(text, options);

  // The rewrite's options on a two-layer module.
  static const char *kModule = R"mlir(
func.func @f(%q: tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32> {
  %0 = masformer.attention %q, %q, %q {span = #masformer.span<full>, layer = 0 : i64} : tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32> -> tensor<1x2x8x4xf32>
  %1 = masformer.attention %0, %q, %q {span = #masformer.span<full>, causal = true, layer = 1 : i64} : tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32> -> tensor<1x2x8x4xf32>
  return %1 : tensor<1x2x8x4xf32>
}
)mlir";
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(kModule, &context);
  if (!module)
    __builtin_trap();
  static bool registered = [] {
    mlir::masformer::registerAllPasses();
    return true;
  }();
  (void)registered;
  mlir::PassManager pm(&context);
  if (mlir::succeeded(mlir::parsePassPipeline(
          "builtin.module(masformer-rewrite-spans{" + text + "})", pm)))
    (void)pm.run(*module);
  return 0;
}
