//===- MASFormerAttrs.cpp - masformer attributes ----------------*- C++ -*-===//
//
// The span attribute: verification and the span predicate shared by every
// pass that needs to know which (query, key) pairs a span keeps.
//
//===----------------------------------------------------------------------===//

#include "masformer/Dialect/MASFormer/IR/MASFormerAttrs.h"
#include "masformer/Dialect/MASFormer/IR/MASFormerDialect.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::masformer;

#include "masformer/Dialect/MASFormer/IR/MASFormerEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "masformer/Dialect/MASFormer/IR/MASFormerAttrs.cpp.inc"

void MASFormerDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "masformer/Dialect/MASFormer/IR/MASFormerAttrs.cpp.inc"
      >();
}

// `<full>`, `<block N>`, `<window N>`, `<window N, sink K>`: the size
// follows the kind, and only block and window spans have one (and sinks).
// Range checks are left to verify() so that programmatic construction gets
// the same messages.
Attribute SpanAttr::parse(AsmParser &parser, Type) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseLess() || parser.parseKeyword(&keyword))
    return {};
  std::optional<SpanKind> kind = symbolizeSpanKind(keyword);
  if (!kind) {
    parser.emitError(loc) << "unknown span kind '" << keyword
                          << "', expected one of: full, block, window";
    return {};
  }
  int64_t size = 0;
  if (*kind != SpanKind::Full) {
    SMLoc sizeLoc = parser.getCurrentLocation();
    APInt value;
    OptionalParseResult parsed = parser.parseOptionalInteger(value);
    if (!parsed.has_value()) {
      parser.emitError(sizeLoc)
          << "expected the " << keyword << " span's size, a positive integer";
      return {};
    }
    if (failed(*parsed))
      return {};
    if (value.getSignificantBits() > 64) {
      parser.emitError(sizeLoc) << keyword << " span size is too large";
      return {};
    }
    size = value.getSExtValue();
  }
  int64_t sink = 0;
  if (succeeded(parser.parseOptionalComma())) {
    SMLoc sinkLoc = parser.getCurrentLocation();
    APInt value;
    if (parser.parseKeyword("sink"))
      return {};
    OptionalParseResult parsed = parser.parseOptionalInteger(value);
    if (!parsed.has_value()) {
      parser.emitError(parser.getCurrentLocation())
          << "expected the number of sink keys, a non-negative integer";
      return {};
    }
    if (failed(*parsed))
      return {};
    if (value.getSignificantBits() > 64) {
      parser.emitError(sinkLoc) << "sink count is too large";
      return {};
    }
    sink = value.getSExtValue();
  }
  if (parser.parseGreater())
    return {};
  return SpanAttr::getChecked([&] { return parser.emitError(loc); },
                              parser.getContext(), *kind, size, sink);
}

void SpanAttr::print(AsmPrinter &printer) const {
  printer << '<' << stringifySpanKind(getKind());
  if (!isFull())
    printer << ' ' << getSize();
  if (getSink() > 0)
    printer << ", sink " << getSink();
  printer << '>';
}

LogicalResult SpanAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               SpanKind kind, int64_t size, int64_t sink) {
  if (sink < 0)
    return emitError() << "the sink count must be non-negative, got " << sink;
  if (kind == SpanKind::Full) {
    if (size != 0)
      return emitError() << "a full span takes no size, got " << size;
    // Sinks only add keys back to a span that removed them.
    if (sink != 0)
      return emitError() << "a full span keeps every key and takes no sinks, "
                            "got sink "
                         << sink;
    return success();
  }
  // A block or window of zero (or fewer) keys would leave every query with
  // nothing to attend to.
  if (size <= 0)
    return emitError() << stringifySpanKind(kind)
                       << " span size must be a positive integer, got "
                       << size;
  return success();
}

/// Floor division that rounds towards negative infinity, as the span
/// definition requires for positions before the first block.
static int64_t floorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

bool SpanAttr::coversSequence(int64_t kvSeq) const {
  // Positions lie in [0, kvSeq): a block of at least kvSeq holds them all,
  // |i - j| <= kvSeq - 1 < W for a window of at least kvSeq, and sinks of
  // at least kvSeq are every key.
  return isFull() || getSize() >= kvSeq || getSink() >= kvSeq;
}

bool SpanAttr::allows(int64_t pos, int64_t j, bool causal) const {
  if (j < getSink())
    return true;
  switch (getKind()) {
  case SpanKind::Full:
    return true;
  case SpanKind::Block:
    return floorDiv(pos, getSize()) == floorDiv(j, getSize());
  case SpanKind::Window:
    return causal ? pos - j >= 0 && pos - j < getSize()
                  : pos - j < getSize() && j - pos < getSize();
  }
  return true;
}

int64_t SpanAttr::countPairs(int64_t q, int64_t kv, bool causal) const {
  // Per query, the allowed keys form one interval [lo, hi] (and the sinks
  // one more): counted in closed form per query, so the time is linear in
  // q (callers bound q: kMaxReportSeqLen).
  int64_t total = 0;
  int64_t size = getSize();
  for (int64_t i = 0; i < q; ++i) {
    int64_t pos = i + kv - q;
    int64_t lo = 0, hi = kv - 1;
    if (causal)
      hi = std::min(hi, pos);
    switch (getKind()) {
    case SpanKind::Full:
      break;
    case SpanKind::Block: {
      int64_t blk = floorDiv(pos, size);
      lo = std::max(lo, blk * size);
      hi = std::min(hi, blk * size + size - 1);
      break;
    }
    case SpanKind::Window:
      lo = std::max(lo, pos - size + 1);
      if (!causal)
        hi = std::min(hi, pos + size - 1);
      break;
    }
    // The sinks [0, sinkHi] join the span's interval; count their union.
    int64_t sinkHi = std::min(getSink() - 1, causal ? pos : kv - 1);
    sinkHi = std::min(sinkHi, kv - 1);
    int64_t span = std::max<int64_t>(0, hi - lo + 1);
    int64_t sinks = std::max<int64_t>(0, sinkHi + 1);
    int64_t both =
        span > 0 ? std::max<int64_t>(0, std::min(hi, sinkHi) - lo + 1) : 0;
    total += span + sinks - both;
  }
  return total;
}

std::string SpanAttr::str() const {
  if (isFull())
    return "full";
  std::string s = (stringifySpanKind(getKind()) + " " + Twine(getSize())).str();
  if (getSink() > 0)
    s += ", sink " + std::to_string(getSink());
  return s;
}
