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

/// One layer of a plan: its span, or (version 2) one span per key/value
/// head.
struct PlanEntry {
  SpanAttr span;
  SmallVector<SpanAttr> heads;
  std::string where;
};

/// The spans of a plan file by layer index (see docs/rewrite.md): every
/// error names the file and the entry.
FailureOr<llvm::DenseMap<int64_t, PlanEntry>>
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
  std::optional<int64_t> version = root->getInteger("version");
  if (version != 1 && version != 2)
    return fail("unsupported version; this masformer reads versions 1 and 2");
  const llvm::json::Array *layers = root->getArray("layers");
  if (!layers)
    return fail("expected a \"layers\" array");
  // A span object: "span", optional "size" and "sink".
  auto readSpan = [&](const llvm::json::Object &o,
                      const std::string &where) -> FailureOr<SpanAttr> {
    std::optional<StringRef> kindText = o.getString("span");
    std::optional<SpanKind> kind =
        kindText ? symbolizeSpanKind(*kindText) : std::nullopt;
    if (!kind)
      return fail(where + ": \"span\" must be \"full\", \"block\" or "
                  "\"window\"");
    for (StringRef key : {"size", "sink"})
      if (o.get(key) && !o.getInteger(key))
        return fail(where + ": \"" + key + "\" must be an integer");
    int64_t size = o.getInteger("size").value_or(0);
    int64_t sink = o.getInteger("sink").value_or(0);
    SpanAttr attr = SpanAttr::getChecked(
        [&] {
          return emitError(loc) << "--masformer-rewrite-spans: plan '" << path
                                << "': " << where << ": ";
        },
        ctx, *kind, size, sink);
    if (!attr)
      return failure();
    return attr;
  };
  llvm::DenseMap<int64_t, PlanEntry> plan;
  for (auto [i, entry] : llvm::enumerate(*layers)) {
    std::string where = "layers[" + std::to_string(i) + "]";
    const llvm::json::Object *o = entry.getAsObject();
    std::optional<int64_t> layer = o ? o->getInteger("layer") : std::nullopt;
    if (!layer)
      return fail(where + ": expected an object with an integer \"layer\"");
    if (*layer < 0 || *layer >= count)
      return fail(where + ": layer " + Twine(*layer) + " is out of range (the "
                  "model has " + Twine(count) + " attention layers)");
    PlanEntry e;
    e.where = where;
    if (const llvm::json::Value *heads = o->get("heads")) {
      if (*version < 2)
        return fail(where + ": per-head spans (\"heads\") need version 2");
      if (o->get("span"))
        return fail(where + ": give either \"span\" or \"heads\", not "
                    "both");
      const llvm::json::Array *arr = heads->getAsArray();
      if (!arr || arr->empty())
        return fail(where + ": \"heads\" must be a non-empty array of "
                    "spans, one per key/value head");
      for (auto [h, hv] : llvm::enumerate(*arr)) {
        std::string hw = where + ".heads[" + std::to_string(h) + "]";
        const llvm::json::Object *ho = hv.getAsObject();
        if (!ho)
          return fail(hw + ": expected an object with \"span\"");
        FailureOr<SpanAttr> span = readSpan(*ho, hw);
        if (failed(span))
          return failure();
        e.heads.push_back(*span);
      }
    } else {
      FailureOr<SpanAttr> span = readSpan(*o, where);
      if (failed(span))
        return failure();
      e.span = *span;
    }
    if (!plan.try_emplace(*layer, std::move(e)).second)
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

/// The positions, among `layers` candidates, that keep full attention under
/// `policy`.
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
    if (!plan.empty()) {
      if (!span.empty() || sink != 0 || !fullLayers.empty() ||
          !policy.empty() || numFull >= 0 || !calibration.empty())
        return emitError(loc)
               << "--masformer-rewrite-spans: plan gives every layer its "
                  "span and cannot be combined with span, sink, full-layers, "
                  "policy, num-full or calibration";
      return applyPlan(plan);
    }
    // policy=calibrated: the plan that `python -m masformer.calibrate` chose
    // from calibration data.
    if (policy == "calibrated") {
      if (calibration.empty())
        return emitError(loc)
               << "--masformer-rewrite-spans: policy=calibrated needs "
                  "calibration=plan.json, a span plan chosen from "
                  "calibration data (python -m masformer.calibrate)";
      if (!span.empty() || sink != 0 || !fullLayers.empty() || numFull >= 0)
        return emitError(loc)
               << "--masformer-rewrite-spans: policy=calibrated takes every "
                  "span from its calibration plan and cannot be combined "
                  "with span, sink, full-layers or num-full";
      return applyPlan(calibration);
    }
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
    if (!calibration.empty())
      return emitError(loc) << "--masformer-rewrite-spans: calibration is "
                               "only used with policy=calibrated";
    if (numFull < -1)
      return emitError(loc) << "--masformer-rewrite-spans: num-full must be "
                               "non-negative, got "
                            << static_cast<int64_t>(numFull);

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

    // Cross-attention layers keep the full span (their keys are positions
    // of another sequence); the policies choose among the others.
    SmallVector<int64_t> selfLayers;
    for (auto [i, op] : llvm::enumerate(*layers))
      if (!isCrossAttention(op))
        selfLayers.push_back(static_cast<int64_t>(i));
    int64_t numSelf = selfLayers.size();
    if (numSelf == 0)
      return emitError(loc)
             << "--masformer-rewrite-spans: the module's " << count
             << " attention layers are all cross-attention, "
                "which keeps the full span: nothing to rewrite";
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
                               : llvm::divideCeil(numSelf, 6);
      if (n > numSelf) {
        InFlightDiagnostic diag = emitError(loc)
                                  << "--masformer-rewrite-spans: num-full=" << n
                                  << " is larger than the number of attention "
                                     "layers ("
                                  << numSelf;
        if (numSelf != count)
          diag << " self-attention; the " << count - numSelf
               << " cross-attention layers stay full";
        return diag << ")";
      }
      for (int64_t pos : chooseFull(policy, numSelf, n))
        full.push_back(selfLayers[pos]);
    }
    for (auto [i, op] : llvm::enumerate(*layers)) {
      if (isCrossAttention(op))
        continue;
      bool keep = llvm::is_contained(full, static_cast<int64_t>(i));
      // A layer kept whole keeps the model's own span (a window built
      // into its mask); a rewritten one gets the new span, and its mask
      // still applies the model's window on top.
      op.setSpanAttr(keep ? getModelSpan(op) : *newSpan);
      // One span for the whole layer replaces any per-head spans.
      op.removeHeadSpansAttr();
    }
    return success();
  }

  /// plan=...: every listed layer gets its span (or its head spans); the
  /// others keep theirs.
  LogicalResult applyPlan(StringRef path) {
    ModuleOp module = getOperation();
    FailureOr<SmallVector<AttentionOp>> layers = collectLayers(module);
    if (failed(layers))
      return failure();
    if (failed(checkNumbering(*layers)))
      return failure();
    MLIRContext *ctx = &getContext();
    FailureOr<llvm::DenseMap<int64_t, PlanEntry>> plan = readPlan(
        ctx, path, static_cast<int64_t>(layers->size()), module.getLoc());
    if (failed(plan))
      return failure();
    for (AttentionOp op : *layers) {
      auto it = plan->find(static_cast<int64_t>(*op.getLayer()));
      if (it == plan->end())
        continue;
      const PlanEntry &e = it->second;
      if (isCrossAttention(op) && (!e.heads.empty() || !e.span.isFull()))
        return op.emitError()
               << "--masformer-rewrite-spans: plan '" << path
               << "': " << e.where << ": layer " << *op.getLayer()
               << " is cross-attention (its keys come from another "
                  "sequence than its queries), which takes the full span "
                  "only";
      if (e.heads.empty()) {
        // "full" leaves the layer as the model has it (its own window).
        op.setSpanAttr(e.span.isFull() ? getModelSpan(op) : e.span);
        op.removeHeadSpansAttr();
        continue;
      }
      int64_t kvHeads = op.getKeyType().getDimSize(1);
      if (static_cast<int64_t>(e.heads.size()) != kvHeads)
        return op.emitError()
               << "--masformer-rewrite-spans: plan '" << path << "': "
               << e.where << ": " << e.heads.size()
               << " head spans, but layer " << *op.getLayer() << " has "
               << (ShapedType::isDynamic(kvHeads)
                       ? std::string("a dynamic number of")
                       : std::to_string(kvHeads))
               << " key/value heads";
      op.setSpanAttr(SpanAttr::get(ctx, SpanKind::Full));
      op.setHeadSpansAttr(ArrayAttr::get(
          ctx, SmallVector<Attribute>(e.heads.begin(), e.heads.end())));
    }
    return success();
  }
};

} // namespace
