//===- ConstantData.h - The bytes of a constant tensor ----------*- C++ -*-===//
//
// Compile-time rewrites of weights (transposed, converted to bf16) read
// the constant's elements directly.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_LIB_DIALECT_MASFORMER_TRANSFORMS_CONSTANTDATA_H
#define MASFORMER_LIB_DIALECT_MASFORMER_TRANSFORMS_CONSTANTDATA_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"

#include <optional>

namespace mlir::masformer {

/// The bytes of a constant's elements (row-major), when it has them all:
/// a dense_resource blob or a non-splat dense attribute.
inline std::optional<ArrayRef<char>> constantBytes(Attribute value) {
  if (auto res = dyn_cast<DenseResourceElementsAttr>(value)) {
    AsmResourceBlob *blob = res.getRawHandle().getBlob();
    if (!blob)
      return std::nullopt;
    return blob->getData();
  }
  if (auto dense = dyn_cast<DenseIntOrFPElementsAttr>(value))
    if (!dense.isSplat())
      return dense.getRawData();
  return std::nullopt;
}

} // namespace mlir::masformer

#endif // MASFORMER_LIB_DIALECT_MASFORMER_TRANSFORMS_CONSTANTDATA_H
