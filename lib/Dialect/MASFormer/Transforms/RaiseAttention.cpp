//===- RaiseAttention.cpp - Find attention in imported models ---*- C++ -*-===//
//
// Matches softmax(scale * Q K^T + masks) V, with the scores optionally
// softcapped (c * tanh(s / c)) before the masks, in the form the ONNX importer
// produces (linalg.generic contractions and elementwise ops, linalg.softmax,
// linalg.transpose, reshapes) and replaces it with masformer.attention.
//
// The walk starts at each linalg.softmax over the last axis of a rank-4
// tensor: upwards through casts, scales and masks to the Q K^T contraction,
// downwards through casts to the P V contraction.
//
//===----------------------------------------------------------------------===//

#include "AttentionMatchers.h"
#include "masformer/Dialect/MASFormer/IR/MASFormerOps.h"
#include "masformer/Dialect/MASFormer/Transforms/Passes.h"
#include "masformer/Utils/IRBuilders.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

#include <cmath>
#include <limits>

namespace mlir::masformer {
#define GEN_PASS_DEF_RAISEATTENTION
#include "masformer/Dialect/MASFormer/Transforms/Passes.h.inc"
} // namespace mlir::masformer

using namespace mlir;
using namespace mlir::masformer;

namespace {

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
  /// `scores`: the [B, H, S, T] scores the softmax normalizes (its input,
  /// or, for a softmax over heads flattened into the batch, the 4-D tensor
  /// its input was collapsed from).
  AttentionRaiser(linalg::SoftmaxOp softmax, Value scores)
      : softmax(softmax), scores(scores) {}

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

  /// A mask of [B * H or 1, S', T] added to scores whose `heads` heads are
  /// flattened into the batch, as the [B or 1, H or 1, S', T] mask of the
  /// 4-D scores.
  Value unflattenMask(Value mask, int64_t heads);

  linalg::SoftmaxOp softmax;
  Value scores;
  std::optional<BatchMatmul> qk;
  double scale = 1.0;
  /// Product of the scales met so far while walking up (they multiply masks
  /// added before them).
  double downstreamScale = 1.0;
  bool causal = false;
  SmallVector<MaskTerm> masks;
  /// `c` of softcapped scores, c * tanh(s / c), once the walk passed the
  /// tanh: masks must come after it (they are added to capped scores).
  std::optional<double> softcap;
};

LogicalResult AttentionRaiser::addSelectMask(Value cond, bool keepWhenTrue,
                                             double fill) {
  if (fill > kMaskedThreshold)
    return fail("a Where mask fills with " + std::to_string(fill) +
                ", not a large negative value");
  DenseElementsAttr attr;
  if (matchConstantElements(cond, attr) &&
      isCausalPattern(attr, [&](int64_t i) -> std::optional<bool> {
        bool v = attr.getValues<bool>()[i];
        return keepWhenTrue ? v : !v;
      })) {
    causal = true;
    return success();
  }
  // A causal condition computed from dynamic sizes.
  if (probeMask(cond, [&](ArrayRef<int64_t> shape,
                          llvm::function_ref<double(int64_t)> at) {
        return isCausalShape(shape, [&](int64_t i) -> std::optional<bool> {
          bool v = at(i) != 0.0;
          return keepWhenTrue ? v : !v;
        });
      })) {
    causal = true;
    return success();
  }
  // Any other boolean mask becomes additive: 0 where kept, the fill
  // elsewhere. A fill as large as float-min absorbs any score it is added
  // to, so the sum is the fill that Where puts there, even in a row whose
  // every key is masked (which a block span makes of a padded query);
  // -inf (or a fill beyond f32) stays -inf.
  float maskedValue =
      std::isfinite(fill) && fill >= -std::numeric_limits<float>::max()
          ? static_cast<float>(fill)
          : -std::numeric_limits<float>::infinity();
  OpBuilder b(softmax);
  auto ct = cast<RankedTensorType>(cond.getType());
  auto ft = RankedTensorType::get(ct.getShape(), b.getF32Type());
  Location loc = softmax.getLoc();
  Value init = tensor::EmptyOp::create(
      b, loc, tensor::getMixedSizes(b, loc, cond), b.getF32Type());
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
                nb, nloc, nb.getF32FloatAttr(maskedValue));
            Value r = keepWhenTrue
                          ? arith::SelectOp::create(nb, nloc, args[0], zero,
                                                    ninf)
                          : arith::SelectOp::create(nb, nloc, args[0], ninf,
                                                    zero);
            linalg::YieldOp::create(nb, nloc, r);
          })
          .getResult(0);
  if (isUpperMasked(mask))
    causal = true;
  masks.push_back({mask, 1.0});
  return success();
}

/// An additive mask value: kept (0), masked (<= kMaskedThreshold), or
/// neither.
static std::optional<bool> additiveKept(double v) {
  if (v == 0.0)
    return true;
  if (v <= kMaskedThreshold)
    return false;
  return std::nullopt;
}

LogicalResult AttentionRaiser::addAdditiveMask(Value mask, double factor) {
  DenseElementsAttr attr;
  if (matchConstantElements(mask, attr) &&
      isa<FloatType>(attr.getElementType()) && !attr.isSplat()) {
    auto values = attr.getValues<APFloat>();
    if (isCausalPattern(attr, [&](int64_t i) {
          return additiveKept(values[i].convertToDouble());
        })) {
      causal = true;
      return success();
    }
  }
  // A causal mask computed from dynamic sizes.
  if (probeMask(mask, [&](ArrayRef<int64_t> shape,
                          llvm::function_ref<double(int64_t)> at) {
        return isCausalShape(shape,
                             [&](int64_t i) { return additiveKept(at(i)); });
      })) {
    causal = true;
    return success();
  }
  // A combined causal + padding mask computed at run time: still causal
  // (and kept, for its padding part).
  if (isUpperMasked(mask))
    causal = true;
  masks.push_back({mask, factor});
  return success();
}

LogicalResult AttentionRaiser::walkScores(Value x) {
  // The heads, once the scores were found flattened into the batch
  // ([B*H, S, T] expanded to [B, H, S, T]); 0 otherwise.
  int64_t flatHeads = 0;
  for (int steps = 0; steps < 32; ++steps) {
    if (!flatHeads && (qk = matchBatchMatmul(x)))
      return success();
    if (flatHeads && (qk = matchFlatHeadsMatmul(x, flatHeads)))
      return success();
    if (Value flat = peelExpandedHeads(x); flat && !flatHeads) {
      flatHeads = cast<RankedTensorType>(x.getType()).getDimSize(1);
      if (ShapedType::isDynamic(flatHeads))
        return fail("scores flattened over a dynamic number of heads");
      x = flat;
      continue;
    }
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
    if (isa<arith::MaximumFOp, arith::MaxNumFOp>(p)) {
      // A clamp at float-min (OPT: torch.max(scores, finfo.min)): only
      // turns -inf into a very negative number; both mask the pair.
      for (int i = 0; i < 2; ++i) {
        std::optional<double> c = getScalarConstant(e->operands[1 - i]);
        if (c && *c <= kMaskedThreshold && e->isIdentity[i]) {
          x = e->operands[i];
          break;
        }
      }
      if (x != e->op.getResult(0))
        continue;
      return fail("a maximum on the scores is not a clamp at a large "
                  "negative value");
    }
    if (isa<math::TanhOp>(p)) {
      // Softcapping, c * tanh(s / c): the factor met since the softmax is
      // c; `scale` keeps it, so that with the factors below the tanh
      // (1 / c and the attention scale) it becomes the scale of the
      // scores before capping.
      if (softcap)
        return fail("more than one tanh between Q*K^T and the softmax");
      if (!(scale > 0.0) || !std::isfinite(scale))
        return fail("a tanh on the scores is multiplied by " +
                    std::to_string(scale) + ", not a positive softcap");
      softcap = scale;
      x = e->operands[0];
      continue;
    }
    if (isa<arith::AddFOp>(p)) {
      // baddbmm's beta * zeros: nothing added.
      if (e->isIdentity[0] && isZeroTensor(e->operands[1])) {
        x = e->operands[0];
        continue;
      }
      if (e->isIdentity[1] && isZeroTensor(e->operands[0])) {
        x = e->operands[1];
        continue;
      }
      if (softcap)
        return fail("a mask added to the scores before the softcap's tanh");
      bool first = e->isIdentity[0] && reachesScores(e->operands[0]);
      bool second = !first && e->isIdentity[1] && reachesScores(e->operands[1]);
      if (!first && !second)
        return fail("an addition to the scores has no recognizable scores "
                    "operand");
      Value mask = e->operands[first ? 1 : 0];
      // With flattened heads (BLOOM's ALiBi, added by baddbmm to
      // [B * H, S, T] scores), the mask of the 4-D scores.
      if (flatHeads && !(mask = unflattenMask(mask, flatHeads)))
        return fail("a mask added to scores with flattened heads is not "
                    "[B * heads or 1, queries or 1, keys]");
      if (failed(addAdditiveMask(mask, downstreamScale)))
        return failure();
      x = e->operands[first ? 0 : 1];
      continue;
    }
    if (isa<arith::SelectOp>(p)) {
      if (softcap)
        return fail("a Where on the scores before the softcap's tanh");
      if (flatHeads)
        return fail("a Where on scores with flattened heads is not "
                    "supported");
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
  // Sizes: static ones as they are, a dynamic one from a mask that has it.
  SmallVector<OpFoldResult> sizes;
  for (int64_t o = 0; o < rank; ++o) {
    if (ShapedType::isStatic(shape[o])) {
      sizes.push_back(b.getIndexAttr(shape[o]));
      continue;
    }
    for (const MaskTerm &m : masks) {
      auto t = cast<RankedTensorType>(m.mask.getType());
      int64_t d = o - (rank - t.getRank());
      if (d >= 0 && t.isDynamicDim(d)) {
        sizes.push_back(tensor::DimOp::create(b, loc, m.mask, d).getResult());
        break;
      }
    }
  }
  auto outType = RankedTensorType::get(shape, b.getF32Type());
  Value init = tensor::EmptyOp::create(b, loc, sizes, b.getF32Type());
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

Value AttentionRaiser::unflattenMask(Value mask, int64_t heads) {
  auto ty = dyn_cast<RankedTensorType>(mask.getType());
  if (!ty || ty.getRank() != 3 || !isa<FloatType>(ty.getElementType()))
    return {};
  OpBuilder b(softmax);
  Location loc = mask.getLoc();
  int64_t lead = ty.getDimSize(0);
  SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(b, loc, mask);
  SmallVector<OpFoldResult> out;
  SmallVector<int64_t> shape;
  if (lead == 1) {
    out = {b.getIndexAttr(1), b.getIndexAttr(1)};
    shape = {1, 1};
  } else if (ShapedType::isStatic(lead) && lead % heads == 0) {
    out = {b.getIndexAttr(lead / heads), b.getIndexAttr(heads)};
    shape = {lead / heads, heads};
  } else if (ShapedType::isDynamic(lead)) {
    // [B * H, ...] -> [B, H, ...]: B = lead / H at run time.
    Value batch = arith::DivUIOp::create(
        b, loc, getValueOrCreateConstantIndexOp(b, loc, sizes[0]),
        arith::ConstantIndexOp::create(b, loc, heads));
    out = {batch, b.getIndexAttr(heads)};
    shape = {ShapedType::kDynamic, heads};
  } else {
    return {};
  }
  out.append({sizes[1], sizes[2]});
  shape.append({ty.getDimSize(1), ty.getDimSize(2)});
  return tensor::ExpandShapeOp::create(
      b, loc, RankedTensorType::get(shape, ty.getElementType()), mask,
      ArrayRef<ReassociationIndices>{{0, 1}, {2}, {3}}, out);
}

/// K from K^T that the dynamo exporter's SDPA decomposition transposes with
/// the heads flattened into the batch: expand(transpose(collapse(K),
/// [0, 2, 1])); null for any other K^T.
static Value peelFlatTransposedK(Value kt) {
  auto ex = kt.getDefiningOp<tensor::ExpandShapeOp>();
  if (!ex || ex.getSrcType().getRank() != 3 ||
      ex.getReassociationIndices()[0] != ReassociationIndices{0, 1})
    return {};
  auto t = ex.getSrc().getDefiningOp<linalg::TransposeOp>();
  auto c = t ? t.getInput().getDefiningOp<tensor::CollapseShapeOp>()
             : tensor::CollapseShapeOp();
  if (!c || t.getPermutation() != ArrayRef<int64_t>{0, 2, 1} ||
      c.getSrcType().getRank() != 4 ||
      c.getReassociationIndices()[0] != ReassociationIndices{0, 1} ||
      c.getSrcType().getDimSize(1) != ex.getResultType().getDimSize(1))
    return {};
  return c.getSrc();
}

/// Whether the scores are laid out [B, S, H, T], split from [B, S * H, T]
/// (GPTBigCode's eager multi-query attention: Q reshaped to [B, S * H, D]
/// against the one key head), searched through the elementwise ops above
/// the softmax.
static bool hasQueryMajorHeads(Value scores) {
  SmallVector<Value> work{scores};
  llvm::SmallPtrSet<Value, 16> seen;
  while (!work.empty() && seen.size() < 32) {
    Value v = work.pop_back_val();
    if (!seen.insert(v).second)
      continue;
    if (auto ex = v.getDefiningOp<tensor::ExpandShapeOp>()) {
      if (ex.getSrcType().getRank() == 3 && ex.getResultType().getRank() == 4 &&
          ex.getReassociationIndices() ==
              SmallVector<ReassociationIndices>{{0}, {1, 2}, {3}})
        return true;
      continue;
    }
    if (std::optional<Elementwise> e = matchElementwise(v))
      for (auto [operand, identity] : llvm::zip(e->operands, e->isIdentity))
        if (identity)
          work.push_back(operand);
  }
  return false;
}

//===----------------------------------------------------------------------===//
// Self- or cross-attention
//===----------------------------------------------------------------------===//

/// Whether `v` is computed from constants alone within `depth` ops (a
/// weight, possibly transposed, cast or dequantized).
static bool isConstantDerived(Value v, int depth = 8) {
  Operation *def = v.getDefiningOp();
  if (!def)
    return false;
  if (def->hasTrait<OpTrait::ConstantLike>() || isa<tensor::EmptyOp>(def))
    return true;
  if (depth == 0)
    return false;
  if (auto linalgOp = dyn_cast<linalg::LinalgOp>(def))
    return llvm::all_of(linalgOp.getDpsInputs(), [&](Value in) {
      return isConstantDerived(in, depth - 1);
    });
  if (def->getNumRegions() != 0)
    return false;
  return llvm::all_of(def->getOperands(), [&](Value o) {
    return !isa<RankedTensorType>(o.getType()) ||
           isConstantDerived(o, depth - 1);
  });
}

/// The hidden states `v` is a projection of, at the first product by a
/// weight on each path up from `v` (Q = X Wq: X, with reshapes and float
/// casts peeled so that two views of one X are one source). Values with no
/// such product above them (a function argument, a cached K) add nothing.
static llvm::SmallSetVector<Value, 4> projectionSources(Value v) {
  llvm::SmallSetVector<Value, 4> sources;
  SmallVector<Value> work{v};
  llvm::DenseSet<Value> seen;
  // The walk stops at the first product on each path; the paths that have
  // none (rotary tables, positions) end at the function's arguments. The
  // bound keeps a model without projections cheap.
  while (!work.empty() && seen.size() < 4096) {
    Value x = work.pop_back_val();
    if (!seen.insert(x).second)
      continue;
    Operation *def = x.getDefiningOp();
    if (!def)
      continue;
    auto linalgOp = dyn_cast<linalg::LinalgOp>(def);
    if (linalgOp && linalgOp.getNumReductionLoops() > 0 &&
        linalgOp.getNumDpsInputs() == 2) {
      Value a = linalgOp.getDpsInputs()[0], b = linalgOp.getDpsInputs()[1];
      bool constA = isConstantDerived(a), constB = isConstantDerived(b);
      if (constA != constB) {
        Value src = constA ? b : a;
        while (true) {
          src = peelCast(src);
          if (auto c = src.getDefiningOp<tensor::CollapseShapeOp>())
            src = c.getSrc();
          else if (auto e = src.getDefiningOp<tensor::ExpandShapeOp>())
            src = e.getSrc();
          else if (auto c = src.getDefiningOp<tensor::CastOp>())
            src = c.getSource();
          else
            break;
        }
        sources.insert(src);
        continue;
      }
    }
    for (Value o : def->getOperands())
      if (isa<RankedTensorType>(o.getType()))
        work.push_back(o);
  }
  return sources;
}

/// Cross-attention: the queries are a projection of some hidden states and
/// the keys are not a projection of those (an encoder-decoder's decoder
/// attending to the encoder's output, or to its cached keys). Keys from
/// the queries' own states, with or without a cache before them, are
/// self-attention; so is a layer whose queries are no projection at all
/// (nothing to compare).
static bool isCrossAttention(Value q, Value k) {
  llvm::SmallSetVector<Value, 4> qSources = projectionSources(q);
  if (qSources.empty())
    return false;
  llvm::SmallSetVector<Value, 4> kSources = projectionSources(k);
  return llvm::none_of(kSources, [&](Value s) { return qSources.contains(s); });
}

/// The NaN guard torch's SDPA export puts after the softmax,
/// Where(IsNaN(p), 0, p): zeros for the rows of queries whose every key is
/// masked (-inf), which is what masformer.attention computes for them.
/// Returns the guarded probabilities, or null when `p`'s users are not
/// that guard.
static Value peelNaNGuard(Value p) {
  if (!llvm::hasNItems(p.getUsers(), 2))
    return {};
  for (Operation *user : p.getUsers()) {
    if (user->getNumResults() != 1)
      return {};
    Value select = user->getResult(0);
    std::optional<Elementwise> e = matchElementwise(select);
    if (!e || !isa<arith::SelectOp>(e->payload) || e->operands[2] != p ||
        !e->isIdentity[2] || getScalarConstant(e->operands[1]) != 0.0)
      continue;
    std::optional<Elementwise> isNaN = matchElementwise(e->operands[0]);
    auto cmp =
        isNaN ? dyn_cast<arith::CmpFOp>(isNaN->payload) : arith::CmpFOp();
    // cmpf uno x, x: both operands are p.
    if (!cmp || cmp.getPredicate() != arith::CmpFPredicate::UNO ||
        cmp.getLhs() != cmp.getRhs() ||
        !llvm::all_of(isNaN->operands, [&](Value x) { return x == p; }) ||
        !llvm::all_of(isNaN->isIdentity, [](bool b) { return b; }) ||
        !e->operands[0].hasOneUse())
      return {};
    // The guard's two ops are p's users.
    if (!llvm::is_contained(p.getUsers(), isNaN->op.getOperation()))
      return {};
    return select;
  }
  return {};
}

FailureOr<AttentionOp> AttentionRaiser::raise() {
  if (failed(walkScores(scores))) {
    if (hasQueryMajorHeads(scores))
      return fail("the scores are laid out [batch, queries, heads, keys], "
                  "split from a product of [batch, queries * heads, "
                  "head_dim] queries (GPTBigCode's eager multi-query "
                  "attention), which is not supported: export the model "
                  "with attn_implementation=\"sdpa\"");
    return failure();
  }

  // Downwards: the probabilities feed exactly one P*V contraction, 4-D, or
  // with the heads flattened into the batch (OPT, BLOOM: [B * H, S, T] x
  // [B * H, T, D]).
  int64_t heads = cast<RankedTensorType>(scores.getType()).getDimSize(1);
  Value p = softmax.getResult()[0];
  bool flatProbs = scores != softmax.getInput();
  std::optional<BatchMatmul> pv;
  for (int steps = 0; steps < 6 && !pv; ++steps) {
    if (Value guarded = peelNaNGuard(p)) {
      p = guarded;
      continue;
    }
    if (!p.hasOneUse())
      return fail("the attention probabilities have other uses than P*V");
    Operation *user = *p.getUsers().begin();
    if (user->getNumResults() != 1)
      return fail("the attention probabilities feed an unsupported op");
    Value r = user->getResult(0);
    if (!flatProbs && (pv = matchBatchMatmul(r)) && pv->lhs == p)
      break;
    if (flatProbs && (pv = matchFlatPV(r, heads)) && pv->lhs == p)
      break;
    pv.reset();
    if (!flatProbs && collapsesHeads(r)) {
      flatProbs = true;
      p = r;
      continue;
    }
    // Flat probabilities viewed as [B, H, S, T] again (XGLM under
    // transformers 5 views them 4-D and back before P V).
    if (flatProbs && peelExpandedHeads(r) == p &&
        cast<RankedTensorType>(r.getType()).getDimSize(1) == heads) {
      flatProbs = false;
      p = r;
      continue;
    }
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
  if (Value flat = peelFlatTransposedK(kt)) {
    k = peelScale(flat, scale);
  } else if (auto t = kt.getDefiningOp<linalg::TransposeOp>()) {
    ArrayRef<int64_t> perm = t.getPermutation();
    SmallVector<int64_t> composed = {perm[0], perm[1], perm[3], perm[2]};
    Value src = t.getInput();
    if (composed == SmallVector<int64_t>{0, 1, 2, 3}) {
      k = peelScale(src, scale);
    } else {
      auto srcTy = cast<RankedTensorType>(src.getType());
      SmallVector<OpFoldResult> srcSizes = tensor::getMixedSizes(b, loc, src);
      SmallVector<OpFoldResult> sizes;
      for (int64_t d : composed)
        sizes.push_back(srcSizes[d]);
      Value init = tensor::EmptyOp::create(b, loc, sizes,
                                           srcTy.getElementType());
      k = linalg::TransposeOp::create(b, loc, src, init, composed)
              .getResult()[0];
    }
  } else {
    auto ktTy = cast<RankedTensorType>(kt.getType());
    SmallVector<OpFoldResult> ktSizes = tensor::getMixedSizes(b, loc, kt);
    SmallVector<OpFoldResult> sizes = {ktSizes[0], ktSizes[1], ktSizes[3],
                                       ktSizes[2]};
    Value init = tensor::EmptyOp::create(b, loc, sizes,
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
  // Half-precision Q, K and V whose products the model computes in f32 and
  // keeps in f32 (torch's SDPA export of an f16 model upcasts them): the op
  // takes them in f32, so that its result is not rounded to f16 where the
  // model's is not.
  auto outTy = cast<RankedTensorType>(pv->op.getResult(0).getType());
  if (outTy.getElementType() != qTy.getElementType() &&
      isa<FloatType>(outTy.getElementType()) &&
      cast<FloatType>(outTy.getElementType()).getWidth() >
          cast<FloatType>(qTy.getElementType()).getWidth()) {
    Type wide = outTy.getElementType();
    q = extendElements(b, loc, q, wide);
    k = extendElements(b, loc, k, wide);
    v = extendElements(b, loc, v, wide);
    qTy = cast<RankedTensorType>(q.getType());
  }
  if (!(scale > 0.0) || !std::isfinite(scale))
    return fail("the combined scale " + std::to_string(scale) +
                " is not positive");

  // A causal sliding window the masks enforce whatever the inputs are
  // (Mistral, Gemma 2): the layer's span, with the masks kept (they still
  // hold its padding, and apply exactly as in the model).
  SpanAttr span = SpanAttr::get(ctx, SpanKind::Full);
  if (causal) {
    std::optional<int64_t> window;
    for (const MaskTerm &m : masks)
      if (std::optional<int64_t> w = findMaskWindow(m.mask))
        window = window ? std::min(*window, *w) : *w;
    if (window)
      span = SpanAttr::get(ctx, SpanKind::Window, *window);
  }
  Value mask = buildMask(b, loc);
  auto op = AttentionOp::create(
      b, loc, qTy, q, k, v, mask, /*row_offset=*/Value(), span,
      b.getBoolAttr(causal), b.getF32FloatAttr(static_cast<float>(scale)),
      IntegerAttr(), ArrayAttr(),
      softcap ? b.getF32FloatAttr(static_cast<float>(*softcap)) : FloatAttr());
  // The op verifier re-checks shapes (head_dim, batch, mask broadcast).
  ScopedDiagnosticHandler silence(ctx, [](Diagnostic &) { return success(); });
  Value result = op.getResult();
  if (succeeded(mlir::verify(op)) && flatProbs) {
    // Back to [B * H, S, D] for the flattened P*V's users.
    result = tensor::CollapseShapeOp::create(
        b, loc, result, ArrayRef<ReassociationIndices>{{0, 1}, {2}, {3}});
    if (result.getType() != pv->op.getResult(0).getType() &&
        tensor::CastOp::areCastCompatible(result.getType(),
                                          pv->op.getResult(0).getType()))
      result =
          tensor::CastOp::create(b, loc, pv->op.getResult(0).getType(), result);
  }
  if (failed(mlir::verify(op)) ||
      result.getType() != pv->op.getResult(0).getType()) {
    if (result != op.getResult())
      result.getDefiningOp()->erase();
    op.erase();
    return fail("the matched Q, K, V and mask do not form a valid attention "
                "(shapes or types disagree)");
  }
  if (!span.isFull())
    op->setAttr(kModelSpanAttrName, span);
  // Keys from another sequence: a block or window span cannot apply
  // (RewriteSpans keeps the layer full). A causal mask would pair the
  // sequences' positions, so such a layer stays self-attention.
  if (!causal && span.isFull() && isCrossAttention(q, k))
    op->setAttr(kCrossAttentionAttrName, b.getUnitAttr());
  pv->op.getResult(0).replaceAllUsesWith(result);
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
    // Layers imported from attention nodes (opset-23 Attention,
    // onnxruntime's Attention and MultiHeadAttention) are ops already; the
    // raise tells their cross-attention as it does for the ones it makes.
    func.walk([&](AttentionOp op) {
      if (!op.getCausal() && op.getSpan().isFull() && !op.hasHeadSpans() &&
          !isCrossAttention(op) && isCrossAttention(op.getQuery(), op.getKey()))
        op->setAttr(kCrossAttentionAttrName, UnitAttr::get(&getContext()));
    });
    SmallVector<linalg::SoftmaxOp> softmaxes;
    func.walk([&](linalg::SoftmaxOp op) { softmaxes.push_back(op); });
    bool failedAny = false;
    for (linalg::SoftmaxOp sm : softmaxes) {
      auto ty = cast<RankedTensorType>(sm.getInput().getType());
      // Attention probabilities: a softmax over the keys of a
      // [batch, heads, queries, keys] tensor. Other softmaxes (a classifier
      // head) are not attention.
      Value scores = sm.getInput();
      if (ty.getRank() == 3 && sm.getDimension() == 2 && collapsesHeads(scores))
        scores = scores.getDefiningOp<tensor::CollapseShapeOp>().getSrc();
      else if (ty.getRank() != 4 || sm.getDimension() != 3)
        continue;
      AttentionRaiser raiser(sm, scores);
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
