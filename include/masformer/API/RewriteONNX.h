//===- RewriteONNX.h - The MASFormer rewrite of an ONNX file ----*- C++ -*-===//
//
// One call for the whole job of `masformer-opt model.onnx
// --masformer-rewrite-spans=... -o out.onnx`: import, raise every attention
// layer, rewrite the spans, patch the original model and write it, and report
// each layer's attention cost. Used by the Python package; a library user
// can call it too.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_API_REWRITEONNX_H
#define MASFORMER_API_REWRITEONNX_H

#include "masformer/Dialect/MASFormer/Analysis/SpanReport.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"

#include <string>

namespace onnx {
class ModelProto;
} // namespace onnx

namespace mlir::masformer {

struct RewriteONNXOptions {
  /// The options of --masformer-rewrite-spans, e.g. "span=block:256
  /// full-layers=0,1" or "span=window:512 policy=spread num-full=2". Empty:
  /// no rewrite (every layer keeps its span; the report still runs).
  std::string spans;
  /// Sequence length of the report (> 0).
  int64_t reportSeqLen = 2048;
  /// Static shapes for graph inputs (optional; dynamic dimensions otherwise
  /// stay dynamic).
  llvm::StringMap<llvm::SmallVector<int64_t>> inputShapes;
};

/// Imports `src`, raises its attention layers (an error if one cannot be
/// raised), applies `options.spans`, and writes the patched model to `dst`
/// (nothing is written on failure; `dst` empty: only the report). Errors go
/// to `context`'s diagnostic handler, naming the file, node or option.
FailureOr<SpanReport> rewriteONNXFile(llvm::StringRef src,
                                      llvm::StringRef dst,
                                      const RewriteONNXOptions &options,
                                      MLIRContext *context);

/// An output .onnx must lie in the input's directory when the model keeps
/// its weights in external data files (they are referenced relative to the
/// model); the error names the directory.
LogicalResult checkExternalDataOutput(const onnx::ModelProto &model,
                                      llvm::StringRef src,
                                      llvm::StringRef dst, Location loc);

} // namespace mlir::masformer

#endif // MASFORMER_API_REWRITEONNX_H
