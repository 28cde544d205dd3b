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

#include <cstdint>
#include <cstring>
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

/// f32 -> bf16 bits, rounding to nearest even (NaN stays NaN): how weights
/// become bf16 (MixedPrecision, the importer's dequantized weights).
inline uint16_t toBF16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu))
    return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

} // namespace mlir::masformer

#endif // MASFORMER_LIB_DIALECT_MASFORMER_TRANSFORMS_CONSTANTDATA_H
