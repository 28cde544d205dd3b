//===- InitAllPasses.h - Register every masformer pass ----------*- C++ -*-===//
//
// One call for tools that expose every masformer pass on their command line
// (masformer-opt, the option fuzzer, a consumer's own opt tool), as
// mlir/InitAllPasses.h is for upstream's.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_INITALLPASSES_H
#define MASFORMER_INITALLPASSES_H

#include "masformer/Codegen/CPU/Passes.h"
#include "masformer/Codegen/Common/Passes.h"
#include "masformer/Codegen/GPU/Passes.h"
#include "masformer/Conversion/Passes.h"
#include "masformer/Dialect/MASFormer/Transforms/Passes.h"

namespace mlir::masformer {

/// Registers the passes of the dialect, the conversions and the code
/// generation folders (not the pipelines: registerMASFormerPipelines).
inline void registerAllPasses() {
  registerMASFormerPasses();
  registerMASFormerConversionPasses();
  registerMASFormerCodegenCommonPasses();
  registerMASFormerCodegenCPUPasses();
  registerMASFormerCodegenGPUPasses();
}

} // namespace mlir::masformer

#endif // MASFORMER_INITALLPASSES_H
