//===- ONNXImporter.h - ONNX models into MLIR -------------------*- C++ -*-===//
//
// Imports an ONNX ModelProto into a module with one func.func (@main): one
// group of upstream tensor-level ops (linalg, tensor, arith, math) per ONNX
// node, located at the node's name, weights as dense_resource blobs. Shape
// subgraphs are evaluated at import time.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_IMPORT_ONNXIMPORTER_H
#define MASFORMER_IMPORT_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"

#include <memory>
#include <string>

namespace onnx {
class ModelProto;
} // namespace onnx

namespace mlir::masformer {

/// Options of the ONNX importer.
struct ONNXImportOptions {
  /// Static shapes for graph inputs, by name (`--input-shape
  /// input_ids=1x2048`). Dynamic input dimensions not fixed here stay
  /// dynamic (docs/import.md, "Shapes").
  llvm::StringMap<llvm::SmallVector<int64_t>> inputShapes;
  /// Name of the function that holds the graph.
  std::string functionName = "main";
  /// Initializers with at most this many elements become inline dense
  /// constants (readable, foldable); larger ones become dense_resource blobs.
  int64_t inlineConstantLimit = 16;
  /// The owner of the model being imported, when it is shared: weights
  /// stored in the model's raw bytes are then viewed, not copied (the blobs
  /// keep it alive), so that a model costs its weights once in memory.
  std::shared_ptr<const onnx::ModelProto> owner;
  /// If set, receives the static type of every tensor of the graph, by ONNX
  /// name (the exporter uses it to rewrite nodes of the original model).
  llvm::StringMap<RankedTensorType> *valueTypes = nullptr;
  /// Sizes of dynamic input dimensions, by their key (the dim_param, or
  /// "?<input>.<dim>" for an unnamed one): every input dimension of that
  /// key becomes that static size. The importer adds to them itself where
  /// an op fixes a size that the model leaves symbolic (onnxruntime-genai
  /// declares the head size of its cache inputs as "kv_cache_dim"), and
  /// imports again.
  llvm::StringMap<int64_t> dimSizes;
};

/// The memory this process may still take: the least of the machine's
/// physical memory, what the address-space limit (ulimit -v) leaves and what
/// the memory cgroup's limit leaves, and which of them it is. The importer
/// caps the tensor data it holds at it; the API refuses to start below
/// api::kMinMemoryBytes of it.
struct MemoryBudget {
  uint64_t bytes;
  const char *what;
};
MemoryBudget memoryBudget();

/// Parses `spec` of the form `name=d0xd1x...` into `options`. Returns an
/// error message, empty on success.
std::string parseInputShapeOption(llvm::StringRef spec,
                                  ONNXImportOptions &options);

/// The directory that the model at `modelPath` resolves its external data
/// files against ("." for a bare file name).
std::string modelDirectory(llvm::StringRef modelPath);

/// Reads and parses the ONNX model at `path`; errors go to the context's
/// diagnostic handler.
FailureOr<std::unique_ptr<onnx::ModelProto>>
readONNXModel(llvm::StringRef path, MLIRContext *context);

/// Imports the model stored at `path` (external data files are read relative
/// to its directory). Errors are reported through the context's diagnostic
/// handler, naming the file, node and op; on failure nothing is returned.
FailureOr<OwningOpRef<ModuleOp>>
importONNXFile(llvm::StringRef path, MLIRContext *context,
               const ONNXImportOptions &options = {});

/// Imports an in-memory model; `baseDir` locates external data files.
FailureOr<OwningOpRef<ModuleOp>>
importONNXModel(const onnx::ModelProto &model, llvm::StringRef baseDir,
                llvm::StringRef sourceName, MLIRContext *context,
                const ONNXImportOptions &options = {});

/// Registers the dialects the importer creates ops of.
void registerONNXImportDialects(DialectRegistry &registry);

} // namespace mlir::masformer

#endif // MASFORMER_IMPORT_ONNXIMPORTER_H
