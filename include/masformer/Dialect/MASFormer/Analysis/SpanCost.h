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

/// A span as plain data: "full", "block" or "window", the block or window
/// size (0 for full) and the sink keys visible to every query (0: none).
struct SpanSpec {
  std::string span;
  int64_t spanSize = 0;
  int64_t sink = 0;

  /// "full", "block 64", "window 512, sink 4": as the dialect prints it.
  std::string text() const {
    if (span == "full")
      return span;
    std::string s = span + " " + std::to_string(spanSize);
    if (sink > 0)
      s += ", sink " + std::to_string(sink);
    return s;
  }
};

/// One attention layer at the report's sequence length (batch 1). FLOPs
/// count 4 * head_dim per computed (query, key) pair of each query head.
struct LayerCost : SpanSpec {
  int64_t layer = 0;
  bool causal = false;
  /// Cross-attention (keys from another sequence): always full, costed as
  /// seq-len queries by seq-len keys.
  bool cross = false;
  int64_t heads = 0, kvHeads = 0, headDim = 0;
  double flops = 0, fullFlops = 0;
  /// With per-head spans, the span of each key/value head (and `span` is
  /// "full"); empty otherwise.
  std::vector<SpanSpec> headSpans;
  /// The names of the model's nodes this layer was raised from (scores
  /// MatMul, Softmax, output MatMul; or the one Attention node), where the
  /// importer recorded them.
  std::vector<std::string> nodes;

  /// The layer's span as text; with per-head spans, each distinct span with
  /// how many key/value heads have it ("full x1; window 512, sink 64 x2").
  std::string spanText() const {
    if (headSpans.empty())
      return text();
    std::vector<std::pair<std::string, int>> counts;
    for (const SpanSpec &h : headSpans) {
      std::string t = h.text();
      auto it = counts.begin();
      for (; it != counts.end() && it->first != t; ++it)
        ;
      if (it == counts.end())
        counts.push_back({t, 1});
      else
        ++it->second;
    }
    std::string s;
    for (auto &[t, n] : counts)
      s += (s.empty() ? "" : "; ") + t + " x" + std::to_string(n);
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
