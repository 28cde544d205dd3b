//===- SpanCost.h - Per-layer attention cost (plain data) -------*- C++ -*-===//
//
// The span report as plain C++ data (no MLIR types), shared by
// computeSpanReport (Analysis/SpanReport.h), the rewrite API and the
// Python extension.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_DIALECT_MASFORMER_ANALYSIS_SPANCOST_H
#define MASFORMER_DIALECT_MASFORMER_ANALYSIS_SPANCOST_H

#include <cstdint>
#include <string>
#include <vector>

namespace mlir::masformer {

/// One attention layer at the report's sequence length (batch 1). FLOPs
/// count 4 * heads * head_dim per computed (query, key) pair.
struct LayerCost {
  int64_t layer = 0;
  /// "full", "block" or "window", and the block or window size (0 for full).
  std::string span;
  int64_t spanSize = 0;
  /// Sink keys visible to every query (0: none).
  int64_t sink = 0;
  bool causal = false;
  int64_t heads = 0, headDim = 0;
  double flops = 0, fullFlops = 0;

  /// "full", "block 64", "window 512, sink 4": as the dialect prints it.
  std::string spanText() const {
    if (span == "full")
      return span;
    std::string s = span + " " + std::to_string(spanSize);
    if (sink > 0)
      s += ", sink " + std::to_string(sink);
    return s;
  }
};

struct SpanReport {
  int64_t seqLen = 0;
  std::vector<LayerCost> layers;
  double totalFlops = 0, fullFlops = 0;
  double fractionOfFull() const {
    return fullFlops > 0 ? totalFlops / fullFlops : 1.0;
  }
};

} // namespace mlir::masformer

#endif // MASFORMER_DIALECT_MASFORMER_ANALYSIS_SPANCOST_H
