//===- HostTensor.h - Small constant tensors evaluated at impor -*- C++ -*-===//
//
// The importer evaluates shape subgraphs (Shape -> Gather -> Concat ->
// Reshape and friends) on the host. A HostTensor holds such a value: a static
// shape, an element type, and the data as int64 (integers and bool) or
// double (floats).
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_LIB_IMPORT_HOSTTENSOR_H
#define MASFORMER_LIB_IMPORT_HOSTTENSOR_H

#include "mlir/IR/AffineExpr.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace mlir::masformer {

/// `e`, an expression over the importer's size symbols, in the canonical
/// form MLIR's affine simplification gives (s0 + s1 - s1 is s0), so that
/// equal sizes compare equal.
AffineExpr simplifySizeExpr(AffineExpr e);

/// `v` as an int64 without undefined behaviour: truncated toward zero,
/// saturated at the int64 range, NaN as 0 (a float fed where ONNX expects an
/// integer must not trap the import).
inline int64_t saturatingInt(double v) {
  if (!(v == v))
    return 0;
  if (v >= 9223372036854775807.0)
    return INT64_MAX;
  if (v <= -9223372036854775808.0)
    return INT64_MIN;
  return static_cast<int64_t>(v);
}

struct HostTensor {
  SmallVector<int64_t> shape;
  Type elemType;
  /// Exactly one of these holds the data, row-major.
  std::vector<int64_t> ints;
  std::vector<double> floats;
  /// Integer tensors computed from dynamic dimensions (a Shape, and the
  /// arithmetic of shape subgraphs): element i is syms[i], an affine
  /// expression over the importer's dimension symbols (a constant where the
  /// value is known; ints[i] then holds it too). Empty when every element is
  /// known.
  std::vector<AffineExpr> syms;

  bool isSymbolic() const { return !syms.empty(); }
  /// Element i as an expression (a constant when known).
  AffineExpr getExpr(int64_t i, MLIRContext *ctx) const {
    return isSymbolic() ? syms[i] : getAffineConstantExpr(getInt(i), ctx);
  }
  /// Sets element i of an integer tensor to `e`, keeping `ints` in step
  /// with constants; makes the tensor symbolic when `e` is not constant.
  void setExpr(int64_t i, AffineExpr e);

  bool isFloat() const { return isa<FloatType>(elemType); }
  int64_t numElements() const;
  int64_t getInt(int64_t i) const {
    return isFloat() ? saturatingInt(floats[i]) : ints[i];
  }
  double getDouble(int64_t i) const {
    return isFloat() ? floats[i] : static_cast<double>(ints[i]);
  }
  void resize(int64_t n);
  void set(int64_t i, double v);
  void setInt(int64_t i, int64_t v);

  RankedTensorType getType() const {
    return RankedTensorType::get(shape, elemType);
  }
  /// The data as a DenseElementsAttr of getType().
  DenseElementsAttr toAttr() const;
  /// Reads a DenseElementsAttr of a supported element type.
  static std::optional<HostTensor> fromAttr(DenseElementsAttr attr);

  static HostTensor scalarInt(Type type, int64_t v);
  static HostTensor vectorInt(Type type, ArrayRef<int64_t> values);
};

/// The largest tensor the importer accepts (elements). Shapes computed from
/// model data (Reshape targets, ConstantOfShape, Expand, Range) are checked
/// against it, so that a hostile model cannot overflow an element count.
constexpr int64_t kMaxTensorElements = int64_t(1) << 40;

/// Whether `shape` has a negative dimension or more than kMaxTensorElements
/// elements (computed without overflowing).
bool isBadShape(ArrayRef<int64_t> shape);

/// Numpy broadcasting of two static shapes; failure if incompatible.
FailureOr<SmallVector<int64_t>> broadcastShapes(ArrayRef<int64_t> a,
                                                ArrayRef<int64_t> b);

/// Row-major strides of `shape`.
SmallVector<int64_t> stridesOf(ArrayRef<int64_t> shape);

/// Applies `fn(outIndex, inputIndices)` over the broadcast of `inputs` to
/// `outShape`: inputIndices[k] is the linear index into inputs[k].
void forEachBroadcast(
    ArrayRef<int64_t> outShape, ArrayRef<ArrayRef<int64_t>> inputShapes,
    llvm::function_ref<void(int64_t, ArrayRef<int64_t>)> fn);

/// A host tensor of `shape` whose element n is element srcIndex(n) of `src`
/// (srcIndex gets n's multi-index).
HostTensor gatherHost(const HostTensor &src, ArrayRef<int64_t> shape,
                      llvm::function_ref<int64_t(ArrayRef<int64_t>)> srcIndex);

/// Row-major linear index of `idx` in `shape`.
int64_t linearIndex(ArrayRef<int64_t> idx, ArrayRef<int64_t> shape);

} // namespace mlir::masformer

#endif // MASFORMER_LIB_IMPORT_HOSTTENSOR_H
