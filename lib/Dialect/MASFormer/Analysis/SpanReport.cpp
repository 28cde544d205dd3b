//===- SpanReport.cpp - Per-layer span and attention cost -------*- C++ -*-===//
//
// The cost model of spans over a module's attention layers: pairs kept per
// layer at a sequence length, and the table that --masformer-span-report
// prints.
//
//===----------------------------------------------------------------------===//

#include "masformer/Dialect/MASFormer/Analysis/SpanReport.h"
#include "masformer/Dialect/MASFormer/Analysis/AttentionLayers.h"

#include "llvm/Support/Format.h"

using namespace mlir;
using namespace mlir::masformer;

FailureOr<SpanReport> mlir::masformer::computeSpanReport(ModuleOp module,
                                                         int64_t seqLen) {
  if (seqLen <= 0)
    return emitError(module.getLoc())
           << "--masformer-span-report needs seq-len=N with N > 0";
  // Pairs are counted per query: a bound on the work (and on the counts,
  // which stay exact in int64 for any head count).
  if (seqLen > kMaxReportSeqLen)
    return emitError(module.getLoc())
           << "--masformer-span-report: seq-len=" << seqLen
           << " is above the largest length it reports on, "
           << kMaxReportSeqLen;
  FailureOr<SmallVector<AttentionOp>> layers = collectLayers(module);
  if (failed(layers))
    return failure();
  SpanReport report;
  report.seqLen = seqLen;
  auto spec = [](SpanAttr span) {
    SpanSpec s;
    s.span = stringifySpanKind(span.getKind()).str();
    s.spanSize = span.getSize();
    s.sink = span.getSink();
    return s;
  };
  for (AttentionOp op : *layers) {
    int64_t heads = op.getQueryType().getDimSize(1);
    int64_t kvHeads = op.getKeyType().getDimSize(1);
    int64_t dim = op.getQueryType().getDimSize(3);
    if (ShapedType::isDynamic(heads) || ShapedType::isDynamic(kvHeads) ||
        ShapedType::isDynamic(dim))
      return op.emitError("--masformer-span-report needs static heads and "
                          "head_dim");
    LayerCost c;
    static_cast<SpanSpec &>(c) = spec(op.getSpan());
    c.layer = *op.getLayer();
    if (std::optional<ArrayAttr> hs = op.getHeadSpans())
      for (Attribute a : *hs)
        c.headSpans.push_back(spec(cast<SpanAttr>(a)));
    c.causal = op.getCausal();
    c.cross = isCrossAttention(op);
    c.heads = heads;
    c.kvHeads = kvHeads;
    c.headDim = dim;
    // The importer's node names: a NameLoc, or a FusedLoc of them.
    auto addName = [&](Location l) {
      if (auto n = dyn_cast<NameLoc>(l))
        c.nodes.push_back(n.getName().str());
    };
    if (auto fused = dyn_cast<FusedLoc>(op.getLoc()))
      llvm::for_each(fused.getLocations(), addName);
    else
      addName(op.getLoc());
    double perPair = 4.0 * dim;
    c.flops = perPair * op.countPairs(seqLen, seqLen);
    c.fullFlops = perPair * heads *
                  SpanAttr::get(op.getContext(), SpanKind::Full)
                      .countPairs(seqLen, seqLen, c.causal);
    report.totalFlops += c.flops;
    report.fullFlops += c.fullFlops;
    report.layers.push_back(std::move(c));
  }
  return report;
}

void mlir::masformer::printSpanReport(const SpanReport &r,
                                      llvm::raw_ostream &os) {
  os << "masformer span report: " << r.layers.size()
     << " attention layers, seq-len " << r.seqLen << ", batch 1\n";
  os << llvm::format("%5s  %-20s %6s %6s %9s %14s %9s\n", "layer", "span",
                     "causal", "heads", "head_dim", "attn GFLOP", "of full");
  for (const LayerCost &c : r.layers) {
    double frac = c.fullFlops > 0 ? c.flops / c.fullFlops : 1.0;
    std::string span = c.spanText() + (c.cross ? " (cross)" : "");
    os << llvm::format("%5lld  %-20s %6s %6lld %9lld %14.3f %9.3f\n",
                       (long long)c.layer, span.c_str(),
                       c.causal ? "yes" : "no", (long long)c.heads,
                       (long long)c.headDim, c.flops / 1e9, frac);
  }
  double frac = r.fractionOfFull();
  os << llvm::format("%5s  %-20s %6s %6s %9s %14.3f %9.3f\n", "total", "", "",
                     "", "", r.totalFlops / 1e9, frac);
  os << llvm::format("attention cost: %.1f%% of full attention "
                     "(%.1f%% saved)\n",
                     100.0 * frac, 100.0 * (1.0 - frac));
}
