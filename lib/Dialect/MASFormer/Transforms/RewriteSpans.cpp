//===- RewriteSpans.cpp - The MASFormer rewrite -----------------*- C++ -*-===//
//
// Chooses which attention layers keep full attention and gives the others a
// block or window span.
//
//===----------------------------------------------------------------------===//

#include "masformer/Dialect/MASFormer/Analysis/AttentionLayers.h"
#include "masformer/Dialect/MASFormer/Transforms/Passes.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

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

/// The spans of a plan file by layer index (see docs/rewrite.md): every
/// error names the file and the entry.
FailureOr<llvm::DenseMap<int64_t, SpanAttr>>
readPlan(MLIRContext *ctx, StringRef path, int64_t count, Location loc) {
  auto fail = [&](const Twine &msg) {
    return emitError(loc) << "--masformer-rewrite-spans: plan '" << path
                          << "': " << msg,
           failure();
  };
  // Only a regular file of bounded size: a FIFO or a device would hang or
  // read without end.
  llvm::sys::fs::file_status st;
  if (std::error_code ec = llvm::sys::fs::status(path, st))
    return fail("cannot be read: " + ec.message());
  if (st.type() != llvm::sys::fs::file_type::regular_file)
    return fail("is not a regular file");
  if (st.getSize() > (16u << 20))
    return fail("is larger than 16 MiB");
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buf =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buf)
    return fail("cannot be read: " + buf.getError().message());
  llvm::Expected<llvm::json::Value> doc =
      llvm::json::parse((*buf)->getBuffer());
  if (!doc)
    return fail("is not JSON: " + llvm::toString(doc.takeError()));
  const llvm::json::Object *root = doc->getAsObject();
  if (!root || root->getString("format") != "masformer-span-plan")
    return fail("expected an object with \"format\": "
                "\"masformer-span-plan\"");
  if (root->getInteger("version") != 1)
    return fail("unsupported version; this masformer reads version 1");
  const llvm::json::Array *layers = root->getArray("layers");
  if (!layers)
    return fail("expected a \"layers\" array");
  llvm::DenseMap<int64_t, SpanAttr> plan;
  for (auto [i, entry] : llvm::enumerate(*layers)) {
    std::string where = "layers[" + std::to_string(i) + "]";
    const llvm::json::Object *o = entry.getAsObject();
    std::optional<int64_t> layer = o ? o->getInteger("layer") : std::nullopt;
    if (!layer)
      return fail(where + ": expected an object with an integer \"layer\"");
    if (*layer < 0 || *layer >= count)
      return fail(where + ": layer " + Twine(*layer) + " is out of range (the "
                  "model has " + Twine(count) + " attention layers)");
    std::optional<StringRef> kindText = o->getString("span");
    std::optional<SpanKind> kind =
        kindText ? symbolizeSpanKind(*kindText) : std::nullopt;
    if (!kind)
      return fail(where + ": \"span\" must be \"full\", \"block\" or "
                  "\"window\"");
    int64_t size = o->getInteger("size").value_or(0);
    int64_t sink = o->getInteger("sink").value_or(0);
    SpanAttr attr = SpanAttr::getChecked(
        [&] {
          return emitError(loc) << "--masformer-rewrite-spans: plan '" << path
                                << "': " << where << ": ";
        },
        ctx, *kind, size, sink);
    if (!attr)
      return failure();
    if (!plan.try_emplace(*layer, attr).second)
      return fail(where + ": layer " + Twine(*layer) + " is listed twice");
  }
  return plan;
}

/// Layers (sorted by index) must be numbered 0..n-1, as the raise numbers
/// them: options and plans name layers by these indices.
LogicalResult checkNumbering(ArrayRef<AttentionOp> layers) {
  for (auto [i, constOp] : llvm::enumerate(layers)) {
    AttentionOp op = constOp;
    if (static_cast<int64_t>(*op.getLayer()) != static_cast<int64_t>(i))
      return op.emitError() << "layer indices must be 0.." << layers.size() - 1
                            << ", found " << *op.getLayer();
  }
  return success();
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
    if (!plan.empty())
      return applyPlan();
    if (span.empty())
      return emitError(loc) << "--masformer-rewrite-spans needs span=block:B "
                               "or span=window:W (or plan=file.json)";
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
    if (failed(checkNumbering(*layers)))
      return failure();

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

  /// plan=...: every listed layer gets its span; the others keep theirs.
  LogicalResult applyPlan() {
    ModuleOp module = getOperation();
    Location loc = module.getLoc();
    if (!span.empty() || sink != 0 || !fullLayers.empty() ||
        !policy.empty() || numFull >= 0 || !calibration.empty())
      return emitError(loc) << "--masformer-rewrite-spans: plan gives every "
                               "layer its span and cannot be combined with "
                               "span, sink, full-layers, policy or num-full";
    FailureOr<SmallVector<AttentionOp>> layers = collectLayers(module);
    if (failed(layers))
      return failure();
    if (failed(checkNumbering(*layers)))
      return failure();
    FailureOr<llvm::DenseMap<int64_t, SpanAttr>> spans = readPlan(
        &getContext(), plan, static_cast<int64_t>(layers->size()), loc);
    if (failed(spans))
      return failure();
    for (AttentionOp op : *layers) {
      auto it = spans->find(static_cast<int64_t>(*op.getLayer()));
      if (it != spans->end())
        op.setSpanAttr(it->second);
    }
    return success();
  }
};

} // namespace
