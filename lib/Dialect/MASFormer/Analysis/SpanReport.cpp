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
  FailureOr<SmallVector<AttentionOp>> layers = collectLayers(module);
  if (failed(layers))
    return failure();
  SpanReport report;
  report.seqLen = seqLen;
  for (AttentionOp op : *layers) {
    int64_t heads = op.getQueryType().getDimSize(1);
    int64_t dim = op.getQueryType().getDimSize(3);
    if (ShapedType::isDynamic(heads) || ShapedType::isDynamic(dim))
      return op.emitError("--masformer-span-report needs static heads and "
                          "head_dim");
    LayerCost c;
    c.layer = *op.getLayer();
    SpanAttr span = op.getSpan();
    c.span = stringifySpanKind(span.getKind()).str();
    c.spanSize = span.getSize();
    c.sink = span.getSink();
    c.causal = op.getCausal();
    c.heads = heads;
    c.headDim = dim;
    double perPair = 4.0 * heads * dim;
    c.flops = perPair * span.countPairs(seqLen, seqLen, c.causal);
    c.fullFlops = perPair * SpanAttr::get(op.getContext(), SpanKind::Full)
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
    std::string span = c.spanText();
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
