//===- SpanUtils.h - The span semantics as IR -------------------*- C++ -*-===//
//
// The span rule of docs/spans.md written once as IR builders, for every
// lowering of masformer.attention (the reference decomposition, the CPU
// tiles, the GPU kernels): the per-pair predicate, the key range a query
// tile may see, and whether a tile needs no position mask.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_DIALECT_MASFORMER_UTILS_SPANUTILS_H
#define MASFORMER_DIALECT_MASFORMER_UTILS_SPANUTILS_H

#include "masformer/Dialect/MASFormer/IR/MASFormerAttrs.h"
#include "masformer/Utils/IRBuilders.h"

namespace mlir::masformer {

/// Builds the i1 "query position qPos may attend key position j" from the
/// span and the causal flag, in index arithmetic inside a linalg body; a null
/// value when every pair is allowed.
Value buildSpanAllowed(OpBuilder &b, Location loc, SpanAttr span, bool causal,
                       Value qPos, Value j);

/// The keys [lo, hi) that the queries at positions qPos0..qPosLast may see
/// under the span and the causal flag, within [0, skv): the bounds of the
/// tiled lowerings' key-tile loops.
std::pair<Value, Value> buildSpanKeyRange(Idx &ix, SpanAttr span, bool causal,
                                          Value qPos0, Value qPosLast,
                                          Value skv);

/// Whether every pair of a query at qPos0..qPosLast and a key at k0..kLast
/// passes the span and the causal flag (such a tile needs no position
/// mask); null when every pair always does.
Value buildSpanTileInterior(Idx &ix, SpanAttr span, bool causal, Value qPos0,
                            Value qPosLast, Value k0, Value kLast);

} // namespace mlir::masformer

#endif // MASFORMER_DIALECT_MASFORMER_UTILS_SPANUTILS_H
