//===- consumer.cpp - Uses the installed masformer package ------*- C++ -*-===//
//
// Parses a module with masformer.attention, runs the reference decomposition
// from the installed library, and prints how many attention ops remain.
//
//===----------------------------------------------------------------------===//

#include "masformer/Dialect/MASFormer/IR/MASFormerDialect.h"
#include "masformer/Dialect/MASFormer/IR/MASFormerOps.h"
#include "masformer/Dialect/MASFormer/Transforms/Passes.h"
#include "masformer/Import/ONNXImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    llvm::errs() << "usage: masformer-consumer input.mlir\n";
    return 2;
  }
  mlir::MLIRContext ctx;
  ctx.loadDialect<mlir::masformer::MASFormerDialect, mlir::func::FuncDialect>();
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(argv[1], &ctx);
  if (!module)
    return 1;
  auto count = [&] {
    int n = 0;
    module->walk([&](mlir::masformer::AttentionOp) { ++n; });
    return n;
  };
  llvm::outs() << "attention ops before: " << count() << "\n";
  mlir::PassManager pm(&ctx);
  pm.addPass(mlir::masformer::createDecomposeAttention());
  if (mlir::failed(pm.run(*module)))
    return 1;
  llvm::outs() << "attention ops after: " << count() << "\n";
  // The importer's API links too (it brings ONNX and protobuf along).
  mlir::masformer::ONNXImportOptions options;
  std::string err =
      mlir::masformer::parseInputShapeOption("input_ids=1x128", options);
  llvm::outs() << "input shape option: "
               << (err.empty() ? "ok" : err.c_str()) << "\n";
  return 0;
}
