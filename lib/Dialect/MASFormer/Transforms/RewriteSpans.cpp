//===- RewriteSpans.cpp - The MASFormer rewrite -----------------*- C++ -*-===//
//
// Chooses which attention layers keep full attention and gives the others a
// block or window span.
//
//===----------------------------------------------------------------------===//

#include "masformer/Dialect/MASFormer/Analysis/AttentionLayers.h"
#include "masformer/Dialect/MASFormer/Transforms/Passes.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

namespace mlir::masformer {
#define GEN_PASS_DEF_REWRITESPANS
#include "masformer/Dialect/MASFormer/Transforms/Passes.h.inc"
} // namespace mlir::masformer

using namespace mlir;
using namespace mlir::masformer;

namespace {

/// Parses `block:B` / `window:W`.
FailureOr<SpanAttr> parseSpanOption(MLIRContext *ctx, StringRef text,
                                    Location loc) {
  auto [kindText, sizeText] = text.split(':');
  std::optional<SpanKind> kind = symbolizeSpanKind(kindText);
  int64_t size = 0;
  if (!kind || *kind == SpanKind::Full || !text.contains(':'))
    return emitError(loc) << "--masformer-rewrite-spans: span='" << text
                          << "' must be block:B or window:W",
           failure();
  if (sizeText.getAsInteger(10, size) || size <= 0)
    return emitError(loc) << "--masformer-rewrite-spans: span size '"
                          << sizeText << "' must be a positive integer",
           failure();
  return SpanAttr::get(ctx, *kind, size);
}

/// The layers that keep full attention under `policy`.
SmallVector<int64_t> chooseFull(StringRef policy, int64_t layers,
                                int64_t numFull) {
  SmallVector<int64_t> full;
  if (policy == "top") {
    for (int64_t i = layers - numFull; i < layers; ++i)
      full.push_back(i);
  } else if (policy == "spread") {
    // Centres of numFull equal slices of the stack.
    for (int64_t i = 0; i < numFull; ++i)
      full.push_back(((2 * i + 1) * layers) / (2 * numFull));
  } else {
    for (int64_t i = 0; i < numFull; ++i)
      full.push_back(i);
  }
  return full;
}

struct RewriteSpansPass final
    : masformer::impl::RewriteSpansBase<RewriteSpansPass> {
  using RewriteSpansBase::RewriteSpansBase;

  void runOnOperation() override {
    if (failed(rewrite()))
      signalPassFailure();
  }

  LogicalResult rewrite() {
    ModuleOp module = getOperation();
    Location loc = module.getLoc();
    MLIRContext *ctx = &getContext();
    if (span.empty())
      return emitError(loc) << "--masformer-rewrite-spans needs span=block:B "
                               "or span=window:W";
    FailureOr<SpanAttr> newSpan = parseSpanOption(ctx, span, loc);
    if (failed(newSpan))
      return failure();
    if (sink < 0)
      return emitError(loc) << "--masformer-rewrite-spans: sink must be "
                               "non-negative, got "
                            << static_cast<int64_t>(sink);
    newSpan = SpanAttr::get(ctx, newSpan->getKind(), newSpan->getSize(), sink);
    if (!policy.empty() && policy != "bottom" && policy != "top" &&
        policy != "spread" && policy != "calibrated")
      return emitError(loc) << "--masformer-rewrite-spans: unknown policy '"
                            << policy
                            << "', expected bottom, top, spread or "
                               "calibrated";
    if (!fullLayers.empty() && (!policy.empty() || numFull >= 0))
      return emitError(loc) << "--masformer-rewrite-spans: full-layers "
                               "names the full layers itself and cannot be "
                               "combined with policy or num-full";
    if (policy == "calibrated")
      return emitError(loc)
             << "--masformer-rewrite-spans: policy=calibrated (choosing the "
                "full layers from calibration data) is not implemented yet; "
                "use full-layers or policy=bottom|top|spread";
    if (!calibration.empty())
      return emitError(loc) << "--masformer-rewrite-spans: calibration is "
                               "only used with policy=calibrated";
    if (numFull < -1)
      return emitError(loc) << "--masformer-rewrite-spans: num-full must be "
                               "non-negative, got "
                            << numFull;

    FailureOr<SmallVector<AttentionOp>> layers = collectLayers(module);
    if (failed(layers))
      return failure();
    int64_t count = layers->size();
    if (count == 0)
      return emitError(loc) << "--masformer-rewrite-spans: the module has no "
                               "attention layer (masformer.attention) to "
                               "rewrite";
    for (auto [i, op] : llvm::enumerate(*layers))
      if (static_cast<int64_t>(*op.getLayer()) != static_cast<int64_t>(i))
        return op.emitError() << "layer indices must be 0.." << count - 1
                              << ", found " << *op.getLayer();

    SmallVector<int64_t> full;
    if (!fullLayers.empty()) {
      for (int64_t l : fullLayers) {
        if (l < 0 || l >= count)
          return emitError(loc)
                 << "--masformer-rewrite-spans: full-layers names layer " << l
                 << ", but the model has " << count << " attention layers (0.."
                 << count - 1 << ")";
        full.push_back(l);
      }
    } else {
      int64_t n = numFull >= 0 ? static_cast<int64_t>(numFull)
                               : llvm::divideCeil(count, 6);
      if (n > count)
        return emitError(loc) << "--masformer-rewrite-spans: num-full=" << n
                              << " is larger than the number of attention "
                                 "layers ("
                              << count << ")";
      full = chooseFull(policy, count, n);
    }
    for (auto [i, op] : llvm::enumerate(*layers)) {
      bool keep = llvm::is_contained(full, static_cast<int64_t>(i));
      op.setSpanAttr(keep ? SpanAttr::get(ctx, SpanKind::Full) : *newSpan);
    }
    return success();
  }
};

} // namespace
