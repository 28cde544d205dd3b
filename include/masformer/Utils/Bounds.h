//===- Bounds.h - Constant bounds of index values ---------------*- C++ -*-===//
//
// The constant upper bound of a tile's size, which the CPU passes use to
// give a tile's temporaries a static size.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_UTILS_BOUNDS_H
#define MASFORMER_UTILS_BOUNDS_H

#include "mlir/IR/Value.h"

#include <cstdint>
#include <optional>

namespace mlir::masformer {

/// A constant upper bound (inclusive) of the index value `v`, or none.
/// Minima are bounded by any bounded operand (arith.minsi / minui, affine's
/// constant results), maxima and selects by both, which the value-bounds
/// analysis does not model for arith; anything else is asked of that
/// analysis.
std::optional<int64_t> constantUpperBound(Value v);

} // namespace mlir::masformer

#endif // MASFORMER_UTILS_BOUNDS_H
