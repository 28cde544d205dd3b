//===- ONNXExporter.h - Rewritten spans back into ONNX ----------*- C++ -*-===//
//
// Writes the MASFormer rewrite back into the ONNX model the module was
// imported from, by patching that ModelProto: only the nodes of layers whose
// span changed are replaced, every initializer stays byte-identical, and the
// result runs in any ONNX runtime.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_EXPORT_ONNXEXPORTER_H
#define MASFORMER_EXPORT_ONNXEXPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringMap.h"

namespace onnx {
class ModelProto;
} // namespace onnx

namespace mlir::masformer {

struct ONNXExportOptions {
  /// Static types of the original graph's tensors, by name, as the importer
  /// reports them (ONNXImportOptions::valueTypes).
  const llvm::StringMap<RankedTensorType> *valueTypes = nullptr;
};

/// Patches `model` so that every masformer.attention of `module` with a
/// non-full span computes that span: a block span becomes blocked standard
/// ONNX ops that only compute the (query, key) pairs inside each block; a
/// window span an added window mask (with a warning: no work is skipped).
/// Layers are found through the ONNX node names the importer put in the
/// locations. Errors are reported on the op's location.
LogicalResult exportSpansToONNX(ModuleOp module, onnx::ModelProto &model,
                                const ONNXExportOptions &options);

/// Serializes `model` to `path`; the file only appears when writing
/// succeeded.
LogicalResult writeONNXFile(const onnx::ModelProto &model, StringRef path,
                            MLIRContext *context);

} // namespace mlir::masformer

#endif // MASFORMER_EXPORT_ONNXEXPORTER_H
