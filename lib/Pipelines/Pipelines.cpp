//===- Pipelines.cpp - masformer pass pipelines ------------------*- C++ -*-===//
//
// The reference pipeline to the LLVM dialect.
//
//===----------------------------------------------------------------------===//

#include "masformer/Pipelines/Pipelines.h"
#include "masformer/Dialect/MASFormer/Transforms/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/ErrorHandling.h"

using namespace mlir;
using namespace mlir::masformer;

void mlir::masformer::buildReferenceToLLVMPipeline(
    OpPassManager &pm, const ReferenceToLLVMOptions &options) {
  pm.addPass(createDecomposeAttention());
  pm.addPass(createDecomposeAggregates());
  // The upstream passes by their registered names, as MLIR's own CPU
  // integration tests spell this lowering; parsing keeps this list readable
  // and independent of the C++ factory names, which move between releases.
  static constexpr StringLiteral kLowering =
      "convert-elementwise-to-linalg,"
      "one-shot-bufferize{bufferize-function-boundaries "
      "allow-return-allocs-from-loops},"
      "convert-linalg-to-loops,expand-strided-metadata,lower-affine,"
      "convert-scf-to-cf,arith-expand,convert-math-to-llvm,convert-math-to-libm,"
      "finalize-memref-to-llvm,convert-arith-to-llvm,convert-index-to-llvm,"
      "convert-cf-to-llvm,convert-func-to-llvm,reconcile-unrealized-casts";
  if (failed(parsePassPipeline(kLowering, pm)))
    llvm::report_fatal_error("masformer: the reference lowering pipeline "
                             "names a pass that is not registered");
}

void mlir::masformer::registerMASFormerPipelines() {
  PassPipelineRegistration<ReferenceToLLVMOptions>(
      "masformer-reference-to-llvm",
      "Reference decomposition of masformer.attention and the upstream CPU "
      "lowering to the LLVM dialect (runnable by mlir-runner)",
      buildReferenceToLLVMPipeline);
}
