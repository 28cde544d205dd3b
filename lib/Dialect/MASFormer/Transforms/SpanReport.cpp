//===- SpanReport.cpp - Per-layer span and attention cost --------*- C++ -*-===//
//
// A table on stdout (and JSON on request) of each layer's span and the
// attention FLOPs it costs at a given sequence length.
//
//===----------------------------------------------------------------------===//

#include "Layers.h"
#include "masformer/Dialect/MASFormer/Transforms/Passes.h"

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
    if (seqLen <= 0)
      return emitError(module.getLoc())
             << "--masformer-span-report needs seq-len=N with N > 0";
    FailureOr<SmallVector<AttentionOp>> layers = collectLayers(module);
    if (failed(layers))
      return failure();
    int64_t n = seqLen;
    llvm::raw_ostream &os = llvm::outs();
    os << "masformer span report: " << layers->size()
       << " attention layers, seq-len " << n << ", batch 1\n";
    os << llvm::format("%5s  %-14s %6s %6s %9s %14s %9s\n", "layer", "span",
                       "causal", "heads", "head_dim", "attn GFLOP",
                       "of full");
    llvm::json::Array rows;
    double total = 0, totalFull = 0;
    for (AttentionOp op : *layers) {
      int64_t heads = op.getQueryType().getDimSize(1);
      int64_t dim = op.getQueryType().getDimSize(3);
      if (ShapedType::isDynamic(heads) || ShapedType::isDynamic(dim))
        return op.emitError("--masformer-span-report needs static heads and "
                            "head_dim");
      bool causal = op.getCausal();
      SpanAttr span = op.getSpan();
      double perPair = 4.0 * heads * dim;
      double flops = perPair * span.countPairs(n, n, causal);
      double fullFlops =
          perPair * SpanAttr::get(op.getContext(), SpanKind::Full)
                        .countPairs(n, n, causal);
      total += flops;
      totalFull += fullFlops;
      double frac = fullFlops > 0 ? flops / fullFlops : 1.0;
      os << llvm::format("%5lld  %-14s %6s %6lld %9lld %14.3f %9.3f\n",
                         (long long)*op.getLayer(), span.str().c_str(),
                         causal ? "yes" : "no", (long long)heads,
                         (long long)dim, flops / 1e9, frac);
      rows.push_back(llvm::json::Object{
          {"layer", *op.getLayer()},
          {"span", stringifySpanKind(span.getKind())},
          {"span_size", span.getSize()},
          {"causal", causal},
          {"heads", heads},
          {"head_dim", dim},
          {"flops", flops},
          {"full_flops", fullFlops},
          {"fraction_of_full", frac}});
    }
    double frac = totalFull > 0 ? total / totalFull : 1.0;
    os << llvm::format("%5s  %-14s %6s %6s %9s %14.3f %9.3f\n", "total", "",
                       "", "", "", total / 1e9, frac);
    os << llvm::format("attention cost: %.1f%% of full attention "
                       "(%.1f%% saved)\n",
                       100.0 * frac, 100.0 * (1.0 - frac));
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
                             {"total_flops", total},
                             {"full_flops", totalFull},
                             {"fraction_of_full", frac}};
      file->os() << llvm::formatv("{0:2}", llvm::json::Value(std::move(doc)))
                 << "\n";
      file->keep();
    }
    return success();
  }
};

} // namespace
