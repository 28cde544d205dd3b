//===- FuzzShapes.h - Static input shapes for fuzzing -----------*- C++ -*-===//
//
// Shared by the libFuzzer harnesses that import models: static shapes for a
// model's inputs, so that graphs whose sizes are dynamic still get imported
// in full.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_TOOLS_FUZZ_FUZZSHAPES_H
#define MASFORMER_TOOLS_FUZZ_FUZZSHAPES_H

#include "masformer/Frontend/ONNXFrontend.h"

#include "llvm/ADT/SmallVector.h"

#include <onnx/onnx_pb.h>

namespace mlir::masformer::fuzz {

/// Gives every input of `model` (of rank 8 or less) a static shape in
/// `options`: its static dimensions below 64 as they are, the others 2.
inline void setStaticInputShapes(const onnx::ModelProto &model,
                                 ONNXFrontendOptions &options) {
  for (const onnx::ValueInfoProto &in : model.graph().input()) {
    const auto &tt = in.type().tensor_type();
    if (!tt.has_shape() || tt.shape().dim_size() > 8)
      continue;
    llvm::SmallVector<int64_t> shape;
    for (const auto &d : tt.shape().dim())
      shape.push_back(d.has_dim_value() && d.dim_value() > 0 &&
                              d.dim_value() < 64
                          ? d.dim_value()
                          : 2);
    options.inputShapes[in.name()] = shape;
  }
}

} // namespace mlir::masformer::fuzz

#endif // MASFORMER_TOOLS_FUZZ_FUZZSHAPES_H
