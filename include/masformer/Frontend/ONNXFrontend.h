//===- ONNXFrontend.h - ONNX to raised (and rewritten) MLIR -----*- C++ -*-===//
//
// The front half that every entry point shares: read an ONNX model, import
// it, raise its attention layers into masformer.attention and, when asked,
// rewrite their spans. masformer-opt on an .onnx input, the rewrite and
// compile APIs (and through them Python), and the importer fuzzer all call
// it, so that a model means the same thing to each of them; what differs
// between them (how strict the raise is, what runs after it) is an option
// here, not a second copy of the sequence.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_FRONTEND_ONNXFRONTEND_H
#define MASFORMER_FRONTEND_ONNXFRONTEND_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"

#include <functional>
#include <memory>
#include <string>

namespace onnx {
class ModelProto;
} // namespace onnx

namespace mlir::masformer {

struct ONNXFrontendOptions {
  /// Static shapes for graph inputs; other dimensions stay dynamic.
  llvm::StringMap<llvm::SmallVector<int64_t>> inputShapes;
  /// Whether an attention-like pattern that cannot be raised is an error
  /// (the rewrite and compile APIs: a layer left dense would silently keep
  /// full attention) or a warning that leaves it as imported (masformer-opt
  /// on .onnx, which shows the user the IR, and the fuzzer).
  bool strictRaise = true;
  /// The options of --masformer-rewrite-spans, run after the raise; empty:
  /// no rewrite. Parsed by the pass itself, so that options and errors are
  /// those of the pass on the command line.
  std::string spans;
  /// Adds more passes after the raise and the rewrite (masformer-opt's
  /// command-line pipeline); a failure stops the front half.
  std::function<LogicalResult(PassManager &)> extraPasses;
  /// Checks the read model before the (costly) import.
  std::function<LogicalResult(const onnx::ModelProto &)> validate;
};

/// A read, imported and raised model, with what the ONNX export needs.
struct ONNXFrontendResult {
  ONNXFrontendResult();
  ONNXFrontendResult(ONNXFrontendResult &&);
  ONNXFrontendResult &operator=(ONNXFrontendResult &&);
  ~ONNXFrontendResult();
  /// Shared with the module's weight blobs, which view its raw bytes.
  std::shared_ptr<onnx::ModelProto> model;
  OwningOpRef<ModuleOp> module;
  /// The imported type of every ONNX value, by name.
  llvm::StringMap<RankedTensorType> valueTypes;
};

/// Reads the model at `path` and runs the front half on it. Errors go to
/// `context`'s diagnostic handler, naming the file, node, op or option.
FailureOr<ONNXFrontendResult>
runONNXFrontend(llvm::StringRef path, const ONNXFrontendOptions &options,
                MLIRContext *context);

/// The front half on a model already in memory; `baseDir` locates its
/// external data, `sourceName` names it in diagnostics.
FailureOr<ONNXFrontendResult>
runONNXFrontend(std::unique_ptr<onnx::ModelProto> model,
                llvm::StringRef baseDir, llvm::StringRef sourceName,
                const ONNXFrontendOptions &options, MLIRContext *context);

/// Every dialect the import, the raise and the rewrite create.
void registerONNXFrontendDialects(DialectRegistry &registry);

} // namespace mlir::masformer

#endif // MASFORMER_FRONTEND_ONNXFRONTEND_H
