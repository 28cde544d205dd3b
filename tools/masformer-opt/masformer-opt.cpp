//===- masformer-opt.cpp - The masformer optimizer driver -------*- C++ -*-===//
//
// mlir-opt with the masformer dialect and passes, plus every upstream dialect
// and pass, so that a user can run the masformer passes and the upstream
// lowerings in one pipeline.
//
//===----------------------------------------------------------------------===//

#include "masformer/Dialect/MASFormer/IR/MASFormerDialect.h"
#include "masformer/Dialect/MASFormer/Transforms/Passes.h"
#include "masformer/Pipelines/Pipelines.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::registerAllPasses();
  registry.insert<mlir::masformer::MASFormerDialect>();
  mlir::masformer::registerMASFormerPasses();
  mlir::masformer::registerMASFormerPipelines();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "masformer optimizer driver\n", registry));
}
