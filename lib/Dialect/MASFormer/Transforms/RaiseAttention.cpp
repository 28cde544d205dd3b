//===- RaiseAttention.cpp - Find attention in imported models ---*- C++ -*-===//
//
// Matches softmax(scale * Q K^T + masks) V in the form the ONNX importer
// produces (linalg.generic contractions and elementwise ops, linalg.softmax,
// linalg.transpose, reshapes) and replaces it with masformer.attention.
//
// The walk starts at each linalg.softmax over the last axis of a rank-4
// tensor: upwards through casts, scales and masks to the Q K^T contraction,
// downwards through casts to the P V contraction.
//
//===----------------------------------------------------------------------===//

#include "masformer/Dialect/MASFormer/IR/MASFormerOps.h"
#include "masformer/Dialect/MASFormer/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Transforms/RegionUtils.h"

#include <cmath>
#include <limits>

namespace mlir::masformer {
#define GEN_PASS_DEF_RAISEATTENTION
#include "masformer/Dialect/MASFormer/Transforms/Passes.h.inc"
} // namespace mlir::masformer

using namespace mlir;
using namespace mlir::masformer;

namespace {

/// Scores at or below this are "masked out" in an additive mask: exporters
/// use -inf, float-min or -10000.
constexpr double kMaskedThreshold = -1e4;

//===----------------------------------------------------------------------===//
// Matchers on the importer's IR
//===----------------------------------------------------------------------===//

/// A linalg.generic applying one scalar op per element.
struct Elementwise {
  linalg::GenericOp op;
  Operation *payload;
  /// The generic's inputs feeding the payload, in payload operand order.
  SmallVector<Value> operands;
  /// Whether each of `operands` is read with an identity map (same shape as
  /// the result).
  SmallVector<bool> isIdentity;
};

std::optional<Elementwise> matchElementwise(Value v) {
  auto g = v.getDefiningOp<linalg::GenericOp>();
  if (!g || g.getNumDpsInits() != 1 ||
      g.getNumLoops() != g.getNumParallelLoops() ||
      !g.getIndexingMapsArray().back().isIdentity())
    return std::nullopt;
  Block &body = g.getRegion().front();
  if (!llvm::hasSingleElement(body.without_terminator()))
    return std::nullopt;
  Operation *payload = &body.front();
  if (body.getTerminator()->getOperand(0) != payload->getResult(0))
    return std::nullopt;
  Elementwise e{g, payload, {}, {}};
  for (Value o : payload->getOperands()) {
    auto arg = dyn_cast<BlockArgument>(o);
    if (!arg || arg.getOwner() != &body ||
        arg.getArgNumber() >= g.getNumDpsInputs())
      return std::nullopt;
    OpOperand *in = g.getDpsInputOperand(arg.getArgNumber());
    e.operands.push_back(in->get());
    e.isIdentity.push_back(g.getMatchingIndexingMap(in).isIdentity());
  }
  return e;
}

/// The value of a splat or one-element float constant.
std::optional<double> getScalarConstant(Value v) {
  DenseElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)) ||
      !isa<FloatType>(attr.getElementType()))
    return std::nullopt;
  if (!attr.isSplat() && attr.getNumElements() != 1)
    return std::nullopt;
  return (*attr.getValues<APFloat>().begin()).convertToDouble();
}

/// A float cast (extf / truncf) generic: its input.
Value peelCast(Value v) {
  while (std::optional<Elementwise> e = matchElementwise(v)) {
    if (!isa<arith::ExtFOp, arith::TruncFOp>(e->payload))
      break;
    v = e->operands[0];
  }
  return v;
}

/// Folds Mul/Div by scalar constants on `v` into `scale`.
Value peelScale(Value v, double &scale) {
  while (std::optional<Elementwise> e = matchElementwise(v)) {
    if (isa<arith::MulFOp>(e->payload)) {
      if (auto c = getScalarConstant(e->operands[1]); c && e->isIdentity[0]) {
        scale *= *c;
        v = e->operands[0];
        continue;
      }
      if (auto c = getScalarConstant(e->operands[0]); c && e->isIdentity[1]) {
        scale *= *c;
        v = e->operands[1];
        continue;
      }
    } else if (isa<arith::DivFOp>(e->payload) && e->isIdentity[0]) {
      if (auto c = getScalarConstant(e->operands[1]); c && *c != 0.0) {
        scale /= *c;
        v = e->operands[0];
        continue;
      }
    }
    break;
  }
  return v;
}

/// out[b,h,i,j] = sum_k lhs[b,h,i,k] * rhs[b,h,k,j] with a zero init.
struct BatchMatmul {
  linalg::GenericOp op;
  Value lhs, rhs;
};

std::optional<BatchMatmul> matchBatchMatmul(Value v) {
  auto g = v.getDefiningOp<linalg::GenericOp>();
  if (!g || g.getNumDpsInputs() != 2 || g.getNumDpsInits() != 1 ||
      g.getNumLoops() != 5 || g.getNumReductionLoops() != 1)
    return std::nullopt;
  MLIRContext *ctx = g.getContext();
  auto map = [&](ArrayRef<unsigned> dims) {
    SmallVector<AffineExpr> e;
    for (unsigned d : dims)
      e.push_back(getAffineDimExpr(d, ctx));
    return AffineMap::get(5, 0, e, ctx);
  };
  SmallVector<AffineMap> maps = g.getIndexingMapsArray();
  if (maps[0] != map({0, 1, 2, 4}) || maps[1] != map({0, 1, 4, 3}) ||
      maps[2] != map({0, 1, 2, 3}))
    return std::nullopt;
  auto iters = g.getIteratorTypesArray();
  if (iters[4] != utils::IteratorType::reduction)
    return std::nullopt;
  // Body: acc + a * b (operands possibly extended).
  Block &body = g.getRegion().front();
  auto add = body.getTerminator()->getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add)
    return std::nullopt;
  Value acc = body.getArgument(2);
  Value prodV = add.getLhs() == acc ? add.getRhs() : add.getLhs();
  if (add.getLhs() != acc && add.getRhs() != acc)
    return std::nullopt;
  auto mul = prodV.getDefiningOp<arith::MulFOp>();
  if (!mul)
    return std::nullopt;
  auto strip = [](Value x) {
    if (auto ext = x.getDefiningOp<arith::ExtFOp>())
      return ext.getIn();
    return x;
  };
  if (strip(mul.getLhs()) != body.getArgument(0) ||
      strip(mul.getRhs()) != body.getArgument(1))
    return std::nullopt;
  // The accumulator starts at zero.
  auto fill = g.getDpsInitOperand(0)->get().getDefiningOp<linalg::FillOp>();
  std::optional<double> zero =
      fill ? getScalarConstant(fill.getInputs()[0]) : std::nullopt;
  if (!zero) {
    if (fill) {
      FloatAttr f;
      if (matchPattern(fill.getInputs()[0], m_Constant(&f)))
        zero = f.getValueAsDouble();
    }
  }
  if (!zero || *zero != 0.0)
    return std::nullopt;
  return BatchMatmul{g, g.getDpsInputOperand(0)->get(),
                     g.getDpsInputOperand(1)->get()};
}

/// Peels the repetition of key/value heads that grouped-query attention
/// exports write as unsqueeze(2) -> expand -> reshape: returns the tensor
/// with kv_heads heads. Reshapes are row-major, so the static shapes alone
/// say what each one does.
Value peelRepeatKV(Value v) {
  auto shapeOf = [](Value x) {
    return cast<RankedTensorType>(x.getType()).getShape();
  };
  Operation *merge = v.getDefiningOp();
  if (!isa_and_nonnull<tensor::CollapseShapeOp, tensor::ReshapeOp>(merge))
    return v;
  Value repeated = merge->getOperand(0);
  ArrayRef<int64_t> r = shapeOf(repeated), out = shapeOf(v);
  // [B, Hkv, G, S, D] -> [B, Hkv * G, S, D].
  if (r.size() != 5 || out.size() != 4 || out[0] != r[0] ||
      out[1] != r[1] * r[2] || out[2] != r[3] || out[3] != r[4])
    return v;
  auto bcast = repeated.getDefiningOp<linalg::GenericOp>();
  if (!bcast || bcast.getNumDpsInputs() != 1 ||
      bcast.getNumLoops() != bcast.getNumParallelLoops())
    return v;
  Block &body = bcast.getRegion().front();
  if (!llvm::hasSingleElement(body) ||
      body.getTerminator()->getOperand(0) != body.getArgument(0))
    return v;
  Value unsqueezed = bcast.getDpsInputOperand(0)->get();
  ArrayRef<int64_t> u = shapeOf(unsqueezed);
  // [B, Hkv, 1, S, D] broadcast along the new axis.
  if (u.size() != 5 || u[0] != r[0] || u[1] != r[1] || u[2] != 1 ||
      u[3] != r[3] || u[4] != r[4])
    return v;
  Operation *expand = unsqueezed.getDefiningOp();
  if (!isa_and_nonnull<tensor::ExpandShapeOp, tensor::ReshapeOp>(expand))
    return v;
  Value src = expand->getOperand(0);
  ArrayRef<int64_t> k = shapeOf(src);
  if (k.size() != 4 || k[0] != r[0] || k[1] != r[1] || k[2] != r[3] ||
      k[3] != r[4])
    return v;
  return src;
}

/// Whether `v` comes from the Q K^T contraction through the elementwise
/// ops that may stand between it and the softmax.
bool reachesScores(Value v, int depth = 12) {
  if (depth == 0)
    return false;
  if (matchBatchMatmul(v))
    return true;
  std::optional<Elementwise> e = matchElementwise(v);
  if (!e)
    return false;
  for (auto [o, id] : llvm::zip(e->operands, e->isIdentity))
    if (id && reachesScores(o, depth - 1))
      return true;
  return false;
}

/// Whether the constant `attr` of shape [..., q, kv] marks exactly the
/// causal (bottom-right aligned) triangle as kept; `kept(i)` says whether
/// element i is kept.
bool isCausalPattern(DenseElementsAttr attr,
                     llvm::function_ref<std::optional<bool>(int64_t)> kept) {
  auto ty = cast<ShapedType>(attr.getType());
  if (ty.getRank() < 2)
    return false;
  int64_t q = ty.getDimSize(ty.getRank() - 2);
  int64_t kv = ty.getDimSize(ty.getRank() - 1);
  if (q > kv)
    return false;
  int64_t slices = ty.getNumElements() / (q * kv);
  for (int64_t s = 0; s < slices; ++s)
    for (int64_t i = 0; i < q; ++i)
      for (int64_t j = 0; j < kv; ++j) {
        std::optional<bool> k = kept(s * q * kv + i * kv + j);
        if (!k || *k != (j <= i + kv - q))
          return false;
      }
  return true;
}

/// Whether the last two dims of `map` (of an operand read by a generic) are
/// the generic's last two loop dims, in order.
bool keepsLastTwoDims(AffineMap map, unsigned numLoops) {
  unsigned r = map.getNumResults();
  if (r < 2)
    return false;
  auto d0 = dyn_cast<AffineDimExpr>(map.getResult(r - 2));
  auto d1 = dyn_cast<AffineDimExpr>(map.getResult(r - 1));
  return d0 && d1 && d0.getPosition() == numLoops - 2 &&
         d1.getPosition() == numLoops - 1;
}

/// Whether every element of `v` above the causal diagonal (key j > query i,
/// queries aligned to the end of the keys) is masked (<= -1e4) whatever the
/// model's inputs are. Exporters build combined causal + padding masks as
/// Where(padding, float-min, causal_constant) and friends: such a mask still
/// makes the layer causal.
bool isUpperMasked(Value v, int depth = 16) {
  if (depth == 0)
    return false;
  auto ty = dyn_cast<RankedTensorType>(v.getType());
  if (!ty || !isa<FloatType>(ty.getElementType()))
    return false;
  DenseElementsAttr attr;
  if (matchPattern(v, m_Constant(&attr))) {
    auto values = attr.getValues<APFloat>();
    if (attr.isSplat())
      return (*values.begin()).convertToDouble() <= kMaskedThreshold;
    if (ty.getRank() < 2)
      return false;
    int64_t q = ty.getDimSize(ty.getRank() - 2),
            kv = ty.getDimSize(ty.getRank() - 1);
    int64_t slices = ty.getNumElements() / std::max<int64_t>(q * kv, 1);
    for (int64_t sl = 0; sl < slices; ++sl)
      for (int64_t i = 0; i < q; ++i)
        for (int64_t j = i + kv - q + 1; j < kv; ++j)
          if (j >= 0 && values[sl * q * kv + i * kv + j].convertToDouble() >
                            kMaskedThreshold)
            return false;
    return true;
  }
  Operation *def = v.getDefiningOp();
  if (!def)
    return false;
  // Reshapes, slices and inserts that keep the last two dims in place.
  auto sameLastTwo = [&](Value other) {
    auto ot = dyn_cast<RankedTensorType>(other.getType());
    return ot && ot.getRank() >= 2 &&
           ot.getShape().take_back(2) == ty.getShape().take_back(2);
  };
  if (isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(def))
    return sameLastTwo(def->getOperand(0)) &&
           isUpperMasked(def->getOperand(0), depth - 1);
  if (auto slice = dyn_cast<tensor::ExtractSliceOp>(def)) {
    // A top-left square cut of a square mask keeps its diagonal.
    auto src = slice.getSourceType();
    int64_t r = src.getRank();
    ArrayRef<int64_t> offs = slice.getStaticOffsets(),
                      strides = slice.getStaticStrides();
    return r >= 2 && offs[r - 1] == 0 && offs[r - 2] == 0 &&
           strides[r - 1] == 1 && strides[r - 2] == 1 &&
           src.getDimSize(r - 1) == src.getDimSize(r - 2) &&
           ty.getDimSize(r - 1) == ty.getDimSize(r - 2) &&
           isUpperMasked(slice.getSource(), depth - 1);
  }
  if (auto insert = dyn_cast<tensor::InsertSliceOp>(def)) {
    // An insert that overwrites the whole destination.
    auto srcTy = insert.getSourceType();
    return srcTy.getShape() == ty.getShape() &&
           isUpperMasked(insert.getSource(), depth - 1);
  }
  auto g = dyn_cast<linalg::GenericOp>(def);
  if (!g || g.getNumDpsInits() != 1 ||
      g.getNumLoops() != g.getNumParallelLoops() ||
      !g.getIndexingMapsArray().back().isIdentity())
    return false;
  unsigned loops = g.getNumLoops();
  // An operand is masked where the result needs it if it is a masked
  // scalar, or masked with its last two dims following the result's.
  auto operandMasked = [&](OpOperand *in) {
    AffineMap map = g.getMatchingIndexingMap(in);
    if (map.getNumResults() == 0 ||
        llvm::all_of(map.getResults(), [](AffineExpr e) {
          return isa<AffineConstantExpr>(e);
        }))
      return getScalarConstant(in->get()).value_or(0.0) <= kMaskedThreshold;
    return keepsLastTwoDims(map, loops) && isUpperMasked(in->get(), depth - 1);
  };
  Block &body = g.getRegion().front();
  Value yielded = body.getTerminator()->getOperand(0);
  auto inputOf = [&](Value x) -> OpOperand * {
    auto arg = dyn_cast<BlockArgument>(x);
    if (!arg || arg.getOwner() != &body ||
        arg.getArgNumber() >= g.getNumDpsInputs())
      return nullptr;
    return g.getDpsInputOperand(arg.getArgNumber());
  };
  // A broadcast (Expand): the body yields its input.
  if (OpOperand *in = inputOf(yielded))
    return operandMasked(in);
  Operation *payload = yielded.getDefiningOp();
  if (!payload || payload->getBlock() != &body ||
      !llvm::hasSingleElement(body.without_terminator()))
    return false;
  if (isa<arith::ExtFOp, arith::TruncFOp>(payload)) {
    OpOperand *in = inputOf(payload->getOperand(0));
    return in && operandMasked(in);
  }
  if (isa<arith::SelectOp>(payload)) {
    OpOperand *a = inputOf(payload->getOperand(1));
    OpOperand *b = inputOf(payload->getOperand(2));
    return a && b && operandMasked(a) && operandMasked(b);
  }
  if (isa<arith::MinimumFOp>(payload)) {
    OpOperand *a = inputOf(payload->getOperand(0));
    OpOperand *b = inputOf(payload->getOperand(1));
    return (a && operandMasked(a)) || (b && operandMasked(b));
  }
  return false;
}

//===----------------------------------------------------------------------===//
// The raising of one layer
//===----------------------------------------------------------------------===//

struct MaskTerm {
  Value mask;
  /// Multiplier from scales applied after the mask was added.
  double factor;
};

class AttentionRaiser {
public:
  explicit AttentionRaiser(linalg::SoftmaxOp softmax) : softmax(softmax) {}

  /// Returns the new op, or failure with `reason` set.
  FailureOr<AttentionOp> raise();
  std::string reason;

private:
  LogicalResult fail(const Twine &why) {
    reason = why.str();
    return failure();
  }
  LogicalResult walkScores(Value x);
  LogicalResult addSelectMask(Value cond, bool keepWhenTrue, double fill);
  LogicalResult addAdditiveMask(Value mask, double factor);
  Value buildMask(OpBuilder &b, Location loc);

  linalg::SoftmaxOp softmax;
  std::optional<BatchMatmul> qk;
  double scale = 1.0;
  /// Product of the scales met so far while walking up (they multiply masks
  /// added before them).
  double downstreamScale = 1.0;
  bool causal = false;
  SmallVector<MaskTerm> masks;
};

LogicalResult AttentionRaiser::addSelectMask(Value cond, bool keepWhenTrue,
                                             double fill) {
  if (fill > kMaskedThreshold)
    return fail("a Where mask fills with " + std::to_string(fill) +
                ", not a large negative value");
  DenseElementsAttr attr;
  if (matchPattern(cond, m_Constant(&attr)) &&
      isCausalPattern(attr, [&](int64_t i) -> std::optional<bool> {
        bool v = attr.getValues<bool>()[i];
        return keepWhenTrue ? v : !v;
      })) {
    causal = true;
    return success();
  }
  // Any other boolean mask becomes additive: 0 where kept, -inf elsewhere.
  OpBuilder b(softmax);
  auto ct = cast<RankedTensorType>(cond.getType());
  auto ft = RankedTensorType::get(ct.getShape(), b.getF32Type());
  Location loc = softmax.getLoc();
  Value init = tensor::EmptyOp::create(b, loc, ct.getShape(), b.getF32Type());
  int64_t rank = ct.getRank();
  AffineMap id = AffineMap::getMultiDimIdentityMap(rank, b.getContext());
  Value mask =
      linalg::GenericOp::create(
          b, loc, ft, ValueRange{cond}, ValueRange{init},
          ArrayRef<AffineMap>{id, id},
          SmallVector<utils::IteratorType>(rank,
                                           utils::IteratorType::parallel),
          [&](OpBuilder &nb, Location nloc, ValueRange args) {
            Value zero =
                arith::ConstantOp::create(nb, nloc, nb.getF32FloatAttr(0.0f));
            Value ninf = arith::ConstantOp::create(
                nb, nloc,
                nb.getF32FloatAttr(-std::numeric_limits<float>::infinity()));
            Value r = keepWhenTrue
                          ? arith::SelectOp::create(nb, nloc, args[0], zero,
                                                    ninf)
                          : arith::SelectOp::create(nb, nloc, args[0], ninf,
                                                    zero);
            linalg::YieldOp::create(nb, nloc, r);
          })
          .getResult(0);
  masks.push_back({mask, 1.0});
  return success();
}

LogicalResult AttentionRaiser::addAdditiveMask(Value mask, double factor) {
  DenseElementsAttr attr;
  if (matchPattern(mask, m_Constant(&attr)) &&
      isa<FloatType>(attr.getElementType()) && !attr.isSplat()) {
    auto values = attr.getValues<APFloat>();
    if (isCausalPattern(attr, [&](int64_t i) -> std::optional<bool> {
          double v = values[i].convertToDouble();
          if (v == 0.0)
            return true;
          if (v <= kMaskedThreshold)
            return false;
          return std::nullopt;
        })) {
      causal = true;
      return success();
    }
  }
  // A combined causal + padding mask computed at run time: still causal
  // (and kept, for its padding part).
  if (isUpperMasked(mask))
    causal = true;
  masks.push_back({mask, factor});
  return success();
}

LogicalResult AttentionRaiser::walkScores(Value x) {
  for (int steps = 0; steps < 32; ++steps) {
    if ((qk = matchBatchMatmul(x)))
      return success();
    std::optional<Elementwise> e = matchElementwise(x);
    if (!e)
      return fail("the softmax input does not come from a Q*K^T contraction "
                  "through casts, scales and masks");
    Operation *p = e->payload;
    if (isa<arith::ExtFOp, arith::TruncFOp>(p)) {
      x = e->operands[0];
      continue;
    }
    if (isa<arith::MulFOp, arith::DivFOp>(p)) {
      double s = 1.0;
      Value rest = peelScale(x, s);
      if (rest == x)
        return fail("scores are multiplied by a non-constant");
      scale *= s;
      downstreamScale *= s;
      x = rest;
      continue;
    }
    if (isa<arith::AddFOp>(p)) {
      bool first = e->isIdentity[0] && reachesScores(e->operands[0]);
      bool second = !first && e->isIdentity[1] && reachesScores(e->operands[1]);
      if (!first && !second)
        return fail("an addition to the scores has no recognizable scores "
                    "operand");
      if (failed(addAdditiveMask(e->operands[first ? 1 : 0],
                                 downstreamScale)))
        return failure();
      x = e->operands[first ? 0 : 1];
      continue;
    }
    if (isa<arith::SelectOp>(p)) {
      Value cond = e->operands[0];
      bool keepTrue = e->isIdentity[1] && reachesScores(e->operands[1]);
      bool keepFalse =
          !keepTrue && e->isIdentity[2] && reachesScores(e->operands[2]);
      if (!keepTrue && !keepFalse)
        return fail("a Where on the scores has no recognizable scores "
                    "operand");
      std::optional<double> fill =
          getScalarConstant(e->operands[keepTrue ? 2 : 1]);
      if (!fill)
        return fail("a Where on the scores fills with a non-constant");
      if (failed(addSelectMask(cond, keepTrue, *fill)))
        return failure();
      x = e->operands[keepTrue ? 1 : 2];
      continue;
    }
    return fail("unsupported op '" + p->getName().getStringRef() +
                "' between Q*K^T and the softmax");
  }
  return fail("too many ops between Q*K^T and the softmax");
}

Value AttentionRaiser::buildMask(OpBuilder &b, Location loc) {
  if (masks.empty())
    return {};
  if (masks.size() == 1 && masks[0].factor == 1.0)
    return masks[0].mask;
  // Sum of factor_k * mask_k in f32, broadcast (right-aligned) to the
  // common shape.
  SmallVector<int64_t> shape;
  for (const MaskTerm &m : masks) {
    ArrayRef<int64_t> s = cast<RankedTensorType>(m.mask.getType()).getShape();
    if (s.size() > shape.size())
      shape.insert(shape.begin(), s.size() - shape.size(), 1);
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t &d = shape[shape.size() - s.size() + i];
      d = d == 1 ? s[i] : d;
    }
  }
  MLIRContext *ctx = b.getContext();
  int64_t rank = shape.size();
  SmallVector<AffineMap> maps;
  SmallVector<Value> inputs;
  for (const MaskTerm &m : masks) {
    auto t = cast<RankedTensorType>(m.mask.getType());
    SmallVector<AffineExpr> exprs;
    for (int64_t d = 0; d < t.getRank(); ++d) {
      int64_t o = rank - t.getRank() + d;
      exprs.push_back(t.getDimSize(d) == 1 && shape[o] != 1
                          ? getAffineConstantExpr(0, ctx)
                          : getAffineDimExpr(o, ctx));
    }
    maps.push_back(AffineMap::get(rank, 0, exprs, ctx));
    inputs.push_back(m.mask);
  }
  maps.push_back(AffineMap::getMultiDimIdentityMap(rank, ctx));
  auto outType = RankedTensorType::get(shape, b.getF32Type());
  Value init = tensor::EmptyOp::create(b, loc, shape, b.getF32Type());
  return linalg::GenericOp::create(
             b, loc, outType, inputs, ValueRange{init}, maps,
             SmallVector<utils::IteratorType>(rank,
                                              utils::IteratorType::parallel),
             [&](OpBuilder &nb, Location nloc, ValueRange args) {
               Value sum;
               for (auto [k, m] : llvm::enumerate(masks)) {
                 Value x = args[k];
                 if (!x.getType().isF32())
                   x = arith::ExtFOp::create(nb, nloc, nb.getF32Type(), x);
                 if (m.factor != 1.0)
                   x = arith::MulFOp::create(
                       nb, nloc, x,
                       arith::ConstantOp::create(
                           nb, nloc, nb.getF32FloatAttr(m.factor)));
                 sum = sum ? arith::AddFOp::create(nb, nloc, sum, x)
                                 .getResult()
                           : x;
               }
               linalg::YieldOp::create(nb, nloc, sum);
             })
      .getResult(0);
}

FailureOr<AttentionOp> AttentionRaiser::raise() {
  if (failed(walkScores(softmax.getInput())))
    return failure();

  // Downwards: the probabilities feed exactly one P*V contraction.
  Value p = softmax.getResult()[0];
  std::optional<BatchMatmul> pv;
  for (int steps = 0; steps < 4 && !pv; ++steps) {
    if (!p.hasOneUse())
      return fail("the attention probabilities have other uses than P*V");
    Operation *user = *p.getUsers().begin();
    if (user->getNumResults() != 1)
      return fail("the attention probabilities feed an unsupported op");
    Value r = user->getResult(0);
    if ((pv = matchBatchMatmul(r)) && pv->lhs == p)
      break;
    pv.reset();
    std::optional<Elementwise> e = matchElementwise(r);
    if (!e || !isa<arith::ExtFOp, arith::TruncFOp>(e->payload))
      return fail("the attention probabilities do not feed a P*V "
                  "contraction");
    p = r;
  }
  if (!pv)
    return fail("the attention probabilities do not feed a P*V contraction");

  OpBuilder b(pv->op);
  MLIRContext *ctx = b.getContext();
  Location loc = FusedLoc::get(
      ctx, {qk->op.getLoc(), softmax.getLoc(), pv->op.getLoc()});

  Value q = peelScale(qk->lhs, scale);
  Value kt = peelScale(qk->rhs, scale);
  Value k;
  // K^T is usually a transpose of K (or of the [B, S, H, D] projection).
  if (auto t = kt.getDefiningOp<linalg::TransposeOp>()) {
    ArrayRef<int64_t> perm = t.getPermutation();
    SmallVector<int64_t> composed = {perm[0], perm[1], perm[3], perm[2]};
    Value src = t.getInput();
    if (composed == SmallVector<int64_t>{0, 1, 2, 3}) {
      k = peelScale(src, scale);
    } else {
      auto srcTy = cast<RankedTensorType>(src.getType());
      SmallVector<int64_t> shape;
      for (int64_t d : composed)
        shape.push_back(srcTy.getDimSize(d));
      Value init = tensor::EmptyOp::create(b, loc, shape,
                                           srcTy.getElementType());
      k = linalg::TransposeOp::create(b, loc, src, init, composed)
              .getResult()[0];
    }
  } else {
    auto ktTy = cast<RankedTensorType>(kt.getType());
    SmallVector<int64_t> shape = {ktTy.getDimSize(0), ktTy.getDimSize(1),
                                  ktTy.getDimSize(3), ktTy.getDimSize(2)};
    Value init = tensor::EmptyOp::create(b, loc, shape,
                                         ktTy.getElementType());
    k = linalg::TransposeOp::create(b, loc, kt, init,
                                    ArrayRef<int64_t>{0, 1, 3, 2})
            .getResult()[0];
  }
  k = peelRepeatKV(peelCast(k));
  q = peelCast(q);
  Value v = peelRepeatKV(peelCast(pv->rhs));

  auto qTy = cast<RankedTensorType>(q.getType());
  auto kTy = cast<RankedTensorType>(k.getType());
  auto vTy = cast<RankedTensorType>(v.getType());
  if (kTy.getElementType() != qTy.getElementType() ||
      vTy.getElementType() != qTy.getElementType())
    return fail("Q, K and V have different element types");
  if (!(scale > 0.0) || !std::isfinite(scale))
    return fail("the combined scale " + std::to_string(scale) +
                " is not positive");

  Value mask = buildMask(b, loc);
  auto op = AttentionOp::create(
      b, loc, qTy, q, k, v, mask, SpanAttr::get(ctx, SpanKind::Full),
      b.getBoolAttr(causal), b.getF32FloatAttr(static_cast<float>(scale)),
      IntegerAttr());
  // The op verifier re-checks shapes (head_dim, batch, mask broadcast).
  ScopedDiagnosticHandler silence(ctx, [](Diagnostic &) { return success(); });
  if (failed(mlir::verify(op)) ||
      op.getType() != pv->op.getResult(0).getType()) {
    op.erase();
    return fail("the matched Q, K, V and mask do not form a valid attention "
                "(shapes or types disagree)");
  }
  pv->op.getResult(0).replaceAllUsesWith(op.getResult());
  return op;
}

/// Erases ops left without uses by the raising (the old contractions, masks
/// and softmax).
void eraseDeadOps(func::FuncOp func) {
  bool changed = true;
  while (changed) {
    changed = false;
    SmallVector<Operation *> dead;
    func.walk([&](Operation *op) {
      if (op != func && isOpTriviallyDead(op))
        dead.push_back(op);
    });
    // Users come after their operands: erase from the back.
    for (Operation *op : llvm::reverse(dead)) {
      op->erase();
      changed = true;
    }
  }
}

struct RaiseAttentionPass final
    : masformer::impl::RaiseAttentionBase<RaiseAttentionPass> {
  using RaiseAttentionBase::RaiseAttentionBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    SmallVector<linalg::SoftmaxOp> softmaxes;
    func.walk([&](linalg::SoftmaxOp op) { softmaxes.push_back(op); });
    bool failedAny = false;
    for (linalg::SoftmaxOp sm : softmaxes) {
      auto ty = cast<RankedTensorType>(sm.getInput().getType());
      // Attention probabilities: a softmax over the keys of a
      // [batch, heads, queries, keys] tensor. Other softmaxes (a classifier
      // head) are not attention.
      if (ty.getRank() != 4 || sm.getDimension() != 3)
        continue;
      AttentionRaiser raiser(sm);
      if (succeeded(raiser.raise()))
        continue;
      InFlightDiagnostic diag = strict ? sm.emitError() : sm.emitWarning();
      diag << "cannot raise this attention layer to masformer.attention: "
           << raiser.reason;
      failedAny = true;
    }
    eraseDeadOps(func);
    int64_t layer = 0;
    func.walk([&](AttentionOp op) {
      op.setLayerAttr(IntegerAttr::get(IntegerType::get(&getContext(), 64),
                                       layer++));
    });
    if (strict && failedAny)
      signalPassFailure();
  }
};

} // namespace
