//===- SpanReport.cpp - The --masformer-span-report pass --------*- C++ -*-===//
//
// A table on stdout (and JSON on request) of each layer's span and the
// attention FLOPs it costs at a given sequence length.
//
//===----------------------------------------------------------------------===//

#include "masformer/Dialect/MASFormer/Analysis/SpanReport.h"
#include "masformer/Dialect/MASFormer/Transforms/Passes.h"
#include "masformer/Utils/OutputFile.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"

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
    FailureOr<SpanReport> r = computeSpanReport(module, seqLen);
    if (failed(r))
      return failure();
    int64_t n = seqLen;
    printSpanReport(*r, llvm::outs());
    llvm::json::Array rows;
    for (const LayerCost &c : r->layers) {
      double frac = c.fullFlops > 0 ? c.flops / c.fullFlops : 1.0;
      llvm::json::Object row{
          {"layer", c.layer},          {"span", c.span},
          {"span_size", c.spanSize},   {"sink", c.sink},
          {"causal", c.causal},        {"cross", c.cross},
          {"heads", c.heads},          {"kv_heads", c.kvHeads},
          {"head_dim", c.headDim},     {"flops", c.flops},
          {"full_flops", c.fullFlops}, {"fraction_of_full", frac}};
      if (!c.headSpans.empty()) {
        llvm::json::Array hs;
        for (const SpanSpec &h : c.headSpans)
          hs.push_back(llvm::json::Object{
              {"span", h.span}, {"size", h.spanSize}, {"sink", h.sink}});
        row["head_spans"] = std::move(hs);
      }
      rows.push_back(std::move(row));
    }
    double frac = r->fractionOfFull();
    if (!json.empty()) {
      llvm::json::Object doc{{"seq_len", n},
                             {"batch", 1},
                             {"layers", std::move(rows)},
                             {"total_flops", r->totalFlops},
                             {"full_flops", r->fullFlops},
                             {"fraction_of_full", frac}};
      if (failed(writeOutputAtomically(
              json, module.getLoc(), [&](llvm::raw_ostream &os) {
                os << llvm::formatv("{0:2}", llvm::json::Value(std::move(doc)))
                   << "\n";
                return success();
              })))
        return failure();
    }
    return success();
  }
};

} // namespace
