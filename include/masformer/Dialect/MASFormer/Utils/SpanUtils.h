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
/// span (its sinks included) and the causal flag, in index arithmetic
/// inside a linalg body; a null value when every pair is allowed.
Value buildSpanAllowed(OpBuilder &b, Location loc, SpanAttr span, bool causal,
                       Value qPos, Value j);

/// buildSpanAllowed for per-head spans: `spans` holds one span per
/// key/value head (or one for all), and query head `queryHead` reads
/// key/value head `queryHead / group` (`group` unused with one span); an
/// i1, true where every pair is allowed.
Value buildHeadSpansAllowed(OpBuilder &b, Location loc,
                            ArrayRef<SpanAttr> spans, bool causal, Value qPos,
                            Value j, Value queryHead, Value group);

/// The keys [lo, hi) that the queries at positions qPos0..qPosLast may see
/// under the span's own rule and the causal flag, within [0, skv): the
/// bounds of the tiled lowerings' key-tile loops. Sinks are not in it (see
/// buildSinkKeyEnd).
std::pair<Value, Value> buildSpanKeyRange(Idx &ix, SpanAttr span, bool causal,
                                          Value qPos0, Value qPosLast,
                                          Value skv);

/// The end of the sink keys [0, end) that the queries up to qPosLast may
/// see (within [0, skv), and not after the last query when causal); null
/// when the span has no sinks. Tiled lowerings visit these key tiles as
/// well as those of buildSpanKeyRange.
Value buildSinkKeyEnd(Idx &ix, SpanAttr span, bool causal, Value qPosLast,
                      Value skv);

/// Whether every pair of a query at qPos0..qPosLast and a key at k0..kLast
/// passes the span (its sinks included) and the causal flag (such a tile
/// needs no position mask); null when every pair always does.
Value buildSpanTileInterior(Idx &ix, SpanAttr span, bool causal, Value qPos0,
                            Value qPosLast, Value k0, Value kLast);

} // namespace mlir::masformer

#endif // MASFORMER_DIALECT_MASFORMER_UTILS_SPANUTILS_H
