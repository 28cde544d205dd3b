//===- Pipelines.h - masformer pass pipelines ---------------------*- C++ -*-===//
//
// Named pipelines, registered once, for masformer-opt and library users.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_PIPELINES_PIPELINES_H
#define MASFORMER_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir::masformer {

/// Options of the reference pipeline (none yet: the reference is meant to be
/// boring and exact).
struct ReferenceToLLVMOptions
    : public PassPipelineOptions<ReferenceToLLVMOptions> {};

/// masformer.attention through the reference decomposition, bufferization
/// and the upstream CPU lowering down to the LLVM dialect, runnable by
/// mlir-runner with libmlir_runner_utils and libmlir_c_runner_utils. Slow by
/// design (dense, scalar loops): the numerics every fast path is checked
/// against.
void buildReferenceToLLVMPipeline(OpPassManager &pm,
                                  const ReferenceToLLVMOptions &options);

/// Registers the pipelines above with the pass registry
/// (`--masformer-reference-to-llvm`).
void registerMASFormerPipelines();

} // namespace mlir::masformer

#endif // MASFORMER_PIPELINES_PIPELINES_H
