//===- SpanReport.cpp - Per-layer span and attention cost --------*- C++ -*-===//
//
// A table on stdout (and JSON on request) of each layer's span and the
// attention FLOPs it costs at a given sequence length.
//
//===----------------------------------------------------------------------===//

#include "Layers.h"
#include "masformer/Dialect/MASFormer/Transforms/Passes.h"
#include "masformer/Dialect/MASFormer/Transforms/SpanReport.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/ToolOutputFile.h"
#include "mlir/Support/FileUtilities.h"

namespace mlir::masformer {
#define GEN_PASS_DEF_SPANREPORT
#include "masformer/Dialect/MASFormer/Transforms/Passes.h.inc"
} // namespace mlir::masformer

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
  os << llvm::format("%5s  %-14s %6s %6s %9s %14s %9s\n", "layer", "span",
                     "causal", "heads", "head_dim", "attn GFLOP", "of full");
  for (const LayerCost &c : r.layers) {
    double frac = c.fullFlops > 0 ? c.flops / c.fullFlops : 1.0;
    std::string span =
        c.span == "full" ? c.span : c.span + " " + std::to_string(c.spanSize);
    os << llvm::format("%5lld  %-14s %6s %6lld %9lld %14.3f %9.3f\n",
                       (long long)c.layer, span.c_str(),
                       c.causal ? "yes" : "no", (long long)c.heads,
                       (long long)c.headDim, c.flops / 1e9, frac);
  }
  double frac = r.fractionOfFull();
  os << llvm::format("%5s  %-14s %6s %6s %9s %14.3f %9.3f\n", "total", "",
                     "", "", "", r.totalFlops / 1e9, frac);
  os << llvm::format("attention cost: %.1f%% of full attention "
                     "(%.1f%% saved)\n",
                     100.0 * frac, 100.0 * (1.0 - frac));
}

namespace {

struct SpanReportPass final
    : masformer::impl::SpanReportBase<SpanReportPass> {
  using SpanReportBase::SpanReportBase;

  void runOnOperation() override {
    if (failed(report()))
      signalPassFailure();
    markAllAnalysesPreserved();
  }

  LogicalResult report() {
    ModuleOp module = getOperation();
    FailureOr<SpanReport> r = computeSpanReport(module, seqLen);
    if (failed(r))
      return failure();
    int64_t n = seqLen;
    printSpanReport(*r, llvm::outs());
    llvm::json::Array rows;
    for (const LayerCost &c : r->layers) {
      double frac = c.fullFlops > 0 ? c.flops / c.fullFlops : 1.0;
      rows.push_back(llvm::json::Object{{"layer", c.layer},
                                        {"span", c.span},
                                        {"span_size", c.spanSize},
                                        {"causal", c.causal},
                                        {"heads", c.heads},
                                        {"head_dim", c.headDim},
                                        {"flops", c.flops},
                                        {"full_flops", c.fullFlops},
                                        {"fraction_of_full", frac}});
    }
    double frac = r->fractionOfFull();
    if (!json.empty()) {
      std::string err;
      std::unique_ptr<llvm::ToolOutputFile> file = openOutputFile(json, &err);
      if (!file)
        return emitError(module.getLoc())
               << "--masformer-span-report: cannot write '" << json
               << "': " << err;
      llvm::json::Object doc{{"seq_len", n},
                             {"batch", 1},
                             {"layers", std::move(rows)},
                             {"total_flops", r->totalFlops},
                             {"full_flops", r->fullFlops},
                             {"fraction_of_full", frac}};
      file->os() << llvm::formatv("{0:2}", llvm::json::Value(std::move(doc)))
                 << "\n";
      file->keep();
    }
    return success();
  }
};

} // namespace
