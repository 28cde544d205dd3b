//===- MASFormerOps.cpp - masformer operations ------------------*- C++ -*-===//
//
// Verification and canonicalization of masformer.attention.
//
//===----------------------------------------------------------------------===//

#include "masformer/Dialect/MASFormer/IR/MASFormerOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/PatternMatch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::masformer;

#define GET_OP_CLASSES
#include "masformer/Dialect/MASFormer/IR/MASFormerOps.cpp.inc"

namespace {
/// Dimension positions of the [batch, heads, seq, head_dim] layout.
enum Dim : unsigned { kBatch = 0, kHeads = 1, kSeq = 2, kHeadDim = 3 };
} // namespace

static bool isSupportedElementType(Type t) {
  return t.isF32() || t.isF16() || t.isBF16();
}


/// Two sizes conflict only when both are static and differ: dynamic sizes are
/// checked at run time.
static bool conflict(int64_t a, int64_t b) {
  return ShapedType::isStatic(a) && ShapedType::isStatic(b) && a != b;
}

std::optional<int64_t> AttentionOp::getStaticGroupSize() {
  int64_t qHeads = getQueryType().getDimSize(kHeads);
  int64_t kvHeads = getKeyType().getDimSize(kHeads);
  if (ShapedType::isDynamic(qHeads) || ShapedType::isDynamic(kvHeads))
    return std::nullopt;
  return qHeads / kvHeads;
}

LogicalResult AttentionOp::verify() {
  RankedTensorType qTy = getQueryType(), kTy = getKeyType(),
                   vTy = getValueType();
  // The layout every lowering assumes: [batch, heads, seq, head_dim].
  for (auto [name, ty] : {std::pair<StringRef, RankedTensorType>{"query", qTy},
                          {"key", kTy},
                          {"value", vTy}}) {
    if (ty.getRank() != 4)
      return emitOpError() << name
                           << " must have rank 4 ([batch, heads, seq, "
                              "head_dim]), got rank "
                           << ty.getRank();
  }
  if (!isSupportedElementType(qTy.getElementType()))
    return emitOpError() << "query element type must be f32, f16 or bf16, got "
                         << qTy.getElementType();
  if (kTy.getElementType() != qTy.getElementType())
    return emitOpError() << "key element type (" << kTy.getElementType()
                         << ") must match query element type ("
                         << qTy.getElementType() << ")";
  if (vTy.getElementType() != qTy.getElementType())
    return emitOpError() << "value element type (" << vTy.getElementType()
                         << ") must match query element type ("
                         << qTy.getElementType() << ")";
  if (getResult().getType() != qTy)
    return emitOpError() << "result type " << getResult().getType()
                         << " must equal query type " << qTy;

  ArrayRef<int64_t> q = qTy.getShape(), k = kTy.getShape(),
                    v = vTy.getShape();
  if (conflict(k[kBatch], q[kBatch]))
    return emitOpError() << "key batch (" << k[kBatch]
                         << ") must equal query batch (" << q[kBatch] << ")";
  if (conflict(k[kHeadDim], q[kHeadDim]))
    return emitOpError() << "key head_dim (" << k[kHeadDim]
                         << ") must equal query head_dim (" << q[kHeadDim]
                         << ")";
  static constexpr StringLiteral kDimNames[] = {"batch", "kv_heads", "kv_seq",
                                                "head_dim"};
  for (unsigned d = 0; d < 3; ++d)
    if (conflict(v[d], k[d]))
      return emitOpError() << "value " << kDimNames[d] << " (" << v[d]
                           << ") must equal key " << kDimNames[d] << " ("
                           << k[d] << ")";
  if (conflict(v[kHeadDim], q[kHeadDim]))
    return emitOpError() << "value head_dim (" << v[kHeadDim]
                         << ") must equal query head_dim (" << q[kHeadDim]
                         << ")";
  // Grouped-query attention: each key/value head serves a whole group of
  // query heads, so the group size must be an integer.
  if (ShapedType::isStatic(k[kHeads]) && ShapedType::isStatic(q[kHeads]) &&
      (k[kHeads] == 0 || q[kHeads] % k[kHeads] != 0))
    return emitOpError() << "kv_heads (" << k[kHeads]
                         << ") must divide q_heads (" << q[kHeads] << ")";

  if (Value mask = getMask()) {
    auto mTy = cast<RankedTensorType>(mask.getType());
    if (mTy.getRank() > 4)
      return emitOpError() << "mask rank (" << mTy.getRank()
                           << ") must be at most 4";
    if (!isSupportedElementType(mTy.getElementType()))
      return emitOpError() << "mask element type must be f32, f16 or bf16, got "
                           << mTy.getElementType();
    // Numpy broadcasting, right-aligned, against [batch, q_heads, q_seq,
    // kv_seq].
    int64_t target[4] = {q[kBatch], q[kHeads], q[kSeq], k[kSeq]};
    static constexpr StringLiteral kTargetNames[] = {"batch", "q_heads",
                                                     "q_seq", "kv_seq"};
    int64_t offset = 4 - mTy.getRank();
    for (int64_t d = 0; d < mTy.getRank(); ++d) {
      int64_t size = mTy.getDimSize(d);
      if (size == 1)
        continue;
      if (conflict(size, target[offset + d]))
        return emitOpError()
               << "mask dim " << d << " (size " << size
               << ") is not broadcastable to "
               << kTargetNames[offset + d] << " (" << target[offset + d]
               << ")";
    }
  }

  if (Value offset = getRowOffset()) {
    int64_t rows = cast<RankedTensorType>(offset.getType()).getDimSize(0);
    if (conflict(rows, q[kBatch]))
      return emitOpError() << "row_offset has " << rows
                           << " rows, the query's batch is " << q[kBatch];
  }

  if (std::optional<APFloat> scale = getScale()) {
    double s = scale->convertToDouble();
    if (!std::isfinite(s) || s <= 0.0)
      return emitOpError() << "scale must be a finite positive number, got "
                           << s;
  }
  if (std::optional<float> c = getSoftcapValue();
      c && (!std::isfinite(*c) || *c <= 0.0f))
    return emitOpError() << "softcap must be a finite positive number, got "
                         << *c;
  if (std::optional<int64_t> layer = getLayer(); layer && *layer < 0)
    return emitOpError() << "layer index must be non-negative, got " << *layer;

  if (std::optional<ArrayAttr> heads = getHeadSpans()) {
    if (!getSpan().isFull())
      return emitOpError() << "span must be #masformer.span<full> when "
                              "head_spans gives each key/value head its span, "
                              "got "
                           << getSpan();
    if (ShapedType::isDynamic(k[kHeads]))
      return emitOpError() << "head_spans needs a static number of key/value "
                              "heads";
    if (static_cast<int64_t>(heads->size()) != k[kHeads])
      return emitOpError() << "head_spans has " << heads->size()
                           << " spans, expected one per key/value head ("
                           << k[kHeads] << ")";
  }

  // Queries align to the end of the keys; with more queries than keys the
  // first ones would sit at negative positions, where causal and span masks
  // have no meaning.
  if ((getCausal() || hasSparseSpan()) && ShapedType::isStatic(q[kSeq]) &&
      ShapedType::isStatic(k[kSeq]) && q[kSeq] > k[kSeq])
    return emitOpError() << "q_seq (" << q[kSeq]
                         << ") must not exceed kv_seq (" << k[kSeq]
                         << ") when the attention is causal or its span is "
                            "not full";
  return success();
}

SpanAttr AttentionOp::getKVHeadSpan(int64_t kvHead) {
  if (std::optional<ArrayAttr> heads = getHeadSpans())
    return cast<SpanAttr>((*heads)[kvHead]);
  return getSpan();
}

bool AttentionOp::hasSparseSpan() {
  if (std::optional<ArrayAttr> heads = getHeadSpans())
    return llvm::any_of(*heads, [](Attribute a) {
      return !cast<SpanAttr>(a).isFull();
    });
  return !getSpan().isFull();
}

bool AttentionOp::hasPositionalSpan() {
  auto positional = [](SpanAttr s) {
    return s.getKind() == SpanKind::Block || s.getSink() > 0;
  };
  if (std::optional<ArrayAttr> heads = getHeadSpans())
    return llvm::any_of(
        *heads, [&](Attribute a) { return positional(cast<SpanAttr>(a)); });
  return positional(getSpan());
}

int64_t AttentionOp::countPairs(int64_t q, int64_t kv) {
  std::optional<ArrayAttr> heads = getHeadSpans();
  if (!heads) {
    int64_t qHeads = getQueryType().getDimSize(1);
    return (ShapedType::isDynamic(qHeads) ? 1 : qHeads) *
           getSpan().countPairs(q, kv, getCausal());
  }
  int64_t group = getStaticGroupSize().value_or(1);
  int64_t pairs = 0;
  // Counted once per distinct span (the count is linear in q).
  llvm::SmallDenseMap<Attribute, int64_t> counted;
  for (Attribute a : *heads) {
    auto [it, fresh] = counted.try_emplace(a, 0);
    if (fresh)
      it->second = cast<SpanAttr>(a).countPairs(q, kv, getCausal());
    pairs += group * it->second;
  }
  return pairs;
}

LogicalResult AttentionOp::canonicalize(AttentionOp op,
                                        PatternRewriter &rewriter) {
  MLIRContext *ctx = op.getContext();
  SpanAttr full = SpanAttr::get(ctx, SpanKind::Full);
  // A block or window at least as long as the key sequence removes no pair:
  // it is a full span, which every backend handles best.
  // With row offsets, positions lie in [-offset, kvSeq - offset): only a
  // window of kvSeq keys (differences of positions) still covers them; a
  // block may split them and keys at negative positions are no sinks.
  int64_t kvSeq = op.getKeyType().getDimSize(kSeq);
  bool shifted = op.getRowOffset() != nullptr;
  auto simplify = [&](SpanAttr span) {
    if (span.isFull() || ShapedType::isDynamic(kvSeq))
      return span;
    bool covers =
        shifted ? span.getKind() == SpanKind::Window && span.getSize() >= kvSeq
                : span.coversSequence(kvSeq);
    return covers ? full : span;
  };
  std::optional<ArrayAttr> heads = op.getHeadSpans();
  if (!heads) {
    SpanAttr span = simplify(op.getSpan());
    if (span == op.getSpan())
      return failure();
    rewriter.modifyOpInPlace(op, [&] { op.setSpanAttr(span); });
    return success();
  }
  // Head spans: each simplified; when all heads end up with the same span,
  // it is the op's span.
  SmallVector<Attribute> spans;
  for (Attribute a : *heads)
    spans.push_back(simplify(cast<SpanAttr>(a)));
  bool same = llvm::all_equal(spans);
  if (!same && ArrayRef<Attribute>(spans) == heads->getValue())
    return failure();
  rewriter.modifyOpInPlace(op, [&] {
    if (same) {
      op.setSpanAttr(cast<SpanAttr>(spans.front()));
      op.removeHeadSpansAttr();
    } else {
      op.setHeadSpansAttr(ArrayAttr::get(ctx, spans));
    }
  });
  return success();
}

bool mlir::masformer::takesBF16Operands(AttentionOp op,
                                        int64_t headDimMultiple) {
  auto qTy = cast<RankedTensorType>(op.getQuery().getType());
  int64_t d = qTy.getDimSize(qTy.getRank() - 1);
  return qTy.getElementType().isF32() && !ShapedType::isDynamic(d) &&
         d % std::max<int64_t>(16, headDimMultiple) == 0;
}

SpanAttr mlir::masformer::getModelSpan(AttentionOp op) {
  if (auto span = op->getAttrOfType<SpanAttr>(kModelSpanAttrName))
    return span;
  return SpanAttr::get(op.getContext(), SpanKind::Full);
}

bool mlir::masformer::isCrossAttention(AttentionOp op) {
  return op->hasAttr(kCrossAttentionAttrName);
}

float AttentionOp::getDefaultScale(int64_t headDim) {
  return 1.0f / std::sqrt(static_cast<float>(headDim));
}

std::optional<float> AttentionOp::getStaticScale() {
  if (std::optional<APFloat> s = getScale())
    return s->convertToFloat();
  int64_t headDim = getQueryType().getDimSize(3);
  if (ShapedType::isDynamic(headDim))
    return std::nullopt;
  return getDefaultScale(headDim);
}

Value AttentionOp::applySoftcap(OpBuilder &b, Location loc, Value x,
                                std::optional<float> softcap) {
  if (!softcap)
    return x;
  auto cst = [&](float v) -> Value {
    Attribute a = b.getF32FloatAttr(v);
    if (auto vt = dyn_cast<VectorType>(x.getType()))
      a = DenseElementsAttr::get(vt, b.getF32FloatAttr(v));
    return arith::ConstantOp::create(b, loc, cast<TypedAttr>(a));
  };
  Value t = math::TanhOp::create(
      b, loc, arith::MulFOp::create(b, loc, x, cst(1.0f / *softcap)));
  return arith::MulFOp::create(b, loc, t, cst(*softcap));
}

Value AttentionOp::buildScale(OpBuilder &b, Location loc) {
  Type f32 = b.getF32Type();
  if (std::optional<float> s = getStaticScale())
    return arith::ConstantOp::create(b, loc, f32, b.getF32FloatAttr(*s));
  Value d = tensor::DimOp::create(b, loc, getQuery(), 3);
  Value di = arith::IndexCastOp::create(b, loc, b.getI64Type(), d);
  Value df = arith::SIToFPOp::create(b, loc, f32, di);
  Value one = arith::ConstantOp::create(b, loc, f32, b.getF32FloatAttr(1.0f));
  return arith::DivFOp::create(b, loc, one, math::SqrtOp::create(b, loc, df));
}
