//===- AttentionMatchers.cpp - Matchers on imported attention ---*- C++ -*-===//
//
// Recognizers for the ops the ONNX importer produces around attention.
//
//===----------------------------------------------------------------------===//

#include "AttentionMatchers.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace mlir::masformer;

std::optional<Elementwise> mlir::masformer::matchElementwise(Value v) {
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

bool mlir::masformer::matchConstantElements(Value v, DenseElementsAttr &out) {
  Attribute value;
  if (!matchPattern(v, m_Constant(&value)))
    return false;
  if (auto dense = dyn_cast<DenseElementsAttr>(value)) {
    out = dense;
    return true;
  }
  auto res = dyn_cast<DenseResourceElementsAttr>(value);
  if (!res || res.getType().getNumElements() > (int64_t(1) << 22))
    return false;
  AsmResourceBlob *blob = res.getRawHandle().getBlob();
  if (!blob)
    return false;
  ArrayRef<char> bytes = blob->getData();
  ShapedType type = res.getType();
  Type et = type.getElementType();
  if (et.isInteger(1)) {
    if (static_cast<int64_t>(bytes.size()) != type.getNumElements())
      return false;
    SmallVector<bool> bits(bytes.size());
    for (auto [i, b] : llvm::enumerate(bytes))
      bits[i] = b != 0;
    out = DenseElementsAttr::get(type, bits);
    return true;
  }
  if (!et.isIntOrFloat() ||
      static_cast<int64_t>(bytes.size()) !=
          type.getNumElements() *
              static_cast<int64_t>(et.getIntOrFloatBitWidth() / 8))
    return false;
  out = DenseElementsAttr::getFromRawBuffer(type, bytes);
  return true;
}

/// The value of a splat or one-element float constant.
std::optional<double> mlir::masformer::getScalarConstant(Value v) {
  // A blob is read only when it holds one element (a weight is no scalar,
  // and reading it would copy it); an inline constant may be a splat.
  auto ty = dyn_cast<ShapedType>(v.getType());
  bool oneElement = ty && ty.hasStaticShape() && ty.getNumElements() == 1;
  DenseElementsAttr attr;
  if (!(oneElement ? matchConstantElements(v, attr)
                   : matchPattern(v, m_Constant(&attr))) ||
      !isa<FloatType>(attr.getElementType()))
    return std::nullopt;
  if (!attr.isSplat() && attr.getNumElements() != 1)
    return std::nullopt;
  return (*attr.getValues<APFloat>().begin()).convertToDouble();
}

/// A float cast (extf / truncf) generic: its input.
Value mlir::masformer::peelCast(Value v) {
  while (std::optional<Elementwise> e = matchElementwise(v)) {
    if (!isa<arith::ExtFOp, arith::TruncFOp>(e->payload))
      break;
    v = e->operands[0];
  }
  return v;
}

/// The map of `numLoops` loops to the loop dimensions `dims`.
static AffineMap dimsMap(unsigned numLoops, ArrayRef<unsigned> dims,
                         MLIRContext *ctx) {
  SmallVector<AffineExpr> e;
  for (unsigned d : dims)
    e.push_back(getAffineDimExpr(d, ctx));
  return AffineMap::get(numLoops, 0, e, ctx);
}

/// Folds Mul/Div by scalar constants on `v` into `scale`.
Value mlir::masformer::peelScale(Value v, double &scale) {
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


std::optional<BatchMatmul> mlir::masformer::matchBatchMatmul(Value v) {
  auto g = v.getDefiningOp<linalg::GenericOp>();
  if (!g || g.getNumDpsInputs() != 2 || g.getNumDpsInits() != 1 ||
      g.getNumLoops() != 5 || g.getNumReductionLoops() != 1)
    return std::nullopt;
  MLIRContext *ctx = g.getContext();
  auto map = [&](ArrayRef<unsigned> dims) { return dimsMap(5, dims, ctx); };
  SmallVector<AffineMap> maps = g.getIndexingMapsArray();
  // An operand with one head may broadcast it over the heads (multi-query
  // attention through a broadcasting MatMul, as Falcon exports it).
  auto headsBroadcast = [&](unsigned operand, AffineMap expected) {
    if (maps[operand] == expected)
      return true;
    auto t = cast<RankedTensorType>(g.getDpsInputs()[operand].getType());
    AffineMap b = expected.replace(getAffineDimExpr(1, ctx),
                                   getAffineConstantExpr(0, ctx), 5, 0);
    return maps[operand] == b && t.getDimSize(1) == 1;
  };
  if (!headsBroadcast(0, map({0, 1, 2, 4})) ||
      !headsBroadcast(1, map({0, 1, 4, 3})) || maps[2] != map({0, 1, 2, 3}))
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

/// Whether `v` is zero everywhere: a splat-zero constant or a fill of 0.
bool mlir::masformer::isZeroTensor(Value v) {
  if (std::optional<double> c = getScalarConstant(v))
    return *c == 0.0;
  // A broadcast of zeros (an expanded ConstantOfShape), or a product with
  // zeros (baddbmm's beta * zeros).
  if (std::optional<Elementwise> e = matchElementwise(v)) {
    if (isa<arith::MulFOp>(e->payload))
      return llvm::any_of(e->operands, [](Value o) { return isZeroTensor(o); });
    return false;
  }
  if (auto g = v.getDefiningOp<linalg::GenericOp>();
      g && g.getNumDpsInputs() == 1 &&
      g.getNumLoops() == g.getNumParallelLoops()) {
    Block &body = g.getRegion().front();
    if (llvm::hasSingleElement(body) &&
        body.getTerminator()->getOperand(0) == body.getArgument(0))
      return isZeroTensor(g.getDpsInputOperand(0)->get());
  }
  if (auto fill = v.getDefiningOp<linalg::FillOp>()) {
    std::optional<double> c = getScalarConstant(fill.getInputs()[0]);
    FloatAttr f;
    if (!c && matchPattern(fill.getInputs()[0], m_Constant(&f)))
      c = f.getValueAsDouble();
    return c && *c == 0.0;
  }
  return false;
}

/// Whether `v` is [B, H, S, T] expanded from [B * H, S, T]: the source.
static Value expandedHeads(Value v) {
  auto ex = v.getDefiningOp<tensor::ExpandShapeOp>();
  if (!ex || ex.getSrcType().getRank() != 3 ||
      ex.getResultType().getRank() != 4)
    return {};
  SmallVector<ReassociationIndices> re = ex.getReassociationIndices();
  if (re.size() != 3 || re[0] != ReassociationIndices{0, 1})
    return {};
  return ex.getSrc();
}

Value mlir::masformer::peelExpandedHeads(Value v) { return expandedHeads(v); }

/// The 4-D tensor that `v` ([B * H, S, D]) was collapsed from, when its
/// head dimension has `heads` heads.
static Value collapsedFrom(Value v, int64_t heads) {
  auto c = v.getDefiningOp<tensor::CollapseShapeOp>();
  if (!c || c.getSrcType().getRank() != 4 || c.getResultType().getRank() != 3)
    return {};
  SmallVector<ReassociationIndices> re = c.getReassociationIndices();
  if (re.size() != 3 || re[0] != ReassociationIndices{0, 1} ||
      c.getSrcType().getDimSize(1) != heads)
    return {};
  return c.getSrc();
}

/// Whether `v` is a 3-D batched product [b, i, k] x [b, k, j] -> [b, i, j].
static linalg::GenericOp flatProduct(Value v) {
  auto g = v.getDefiningOp<linalg::GenericOp>();
  if (!g || g.getNumDpsInputs() != 2 || g.getNumDpsInits() != 1 ||
      g.getNumLoops() != 4 || g.getNumReductionLoops() != 1)
    return {};
  MLIRContext *ctx = g.getContext();
  auto map = [&](ArrayRef<unsigned> dims) { return dimsMap(4, dims, ctx); };
  SmallVector<AffineMap> maps = g.getIndexingMapsArray();
  if (maps[0] != map({0, 1, 3}) || maps[1] != map({0, 3, 2}) ||
      maps[2] != map({0, 1, 2}) ||
      g.getIteratorTypesArray()[3] != utils::IteratorType::reduction)
    return {};
  return g;
}

/// Whether the body of the product `g` is acc + a * b (the operands
/// possibly extended) from a zero start.
static bool isZeroStartProduct(linalg::GenericOp g) {
  Block &body = g.getRegion().front();
  auto add = body.getTerminator()->getOperand(0).getDefiningOp<arith::AddFOp>();
  Value acc = body.getArgument(2);
  if (!add || (add.getLhs() != acc && add.getRhs() != acc))
    return false;
  auto mul = (add.getLhs() == acc ? add.getRhs() : add.getLhs())
                 .getDefiningOp<arith::MulFOp>();
  auto strip = [](Value x) {
    if (auto ext = x.getDefiningOp<arith::ExtFOp>())
      return ext.getIn();
    return x;
  };
  return mul && strip(mul.getLhs()) == body.getArgument(0) &&
         strip(mul.getRhs()) == body.getArgument(1) &&
         isZeroTensor(g.getDpsInitOperand(0)->get());
}

bool mlir::masformer::collapsesHeads(Value v) {
  auto c = v.getDefiningOp<tensor::CollapseShapeOp>();
  return c && c.getSrcType().getRank() == 4 &&
         c.getResultType().getRank() == 3 &&
         c.getReassociationIndices() ==
             SmallVector<ReassociationIndices>{{0, 1}, {2}, {3}};
}

std::optional<BatchMatmul> mlir::masformer::matchFlatPV(Value v,
                                                        int64_t heads) {
  linalg::GenericOp g = flatProduct(v);
  if (!g || !isZeroStartProduct(g))
    return std::nullopt;
  Value v4 = collapsedFrom(g.getDpsInputOperand(1)->get(), heads);
  if (!v4)
    return std::nullopt;
  return BatchMatmul{g, g.getDpsInputOperand(0)->get(), v4};
}

std::optional<BatchMatmul>
mlir::masformer::matchFlatHeadsMatmul(Value v, int64_t heads) {
  linalg::GenericOp g = flatProduct(v);
  if (!g || !isZeroStartProduct(g))
    return std::nullopt;
  // Q from [B, H, S, D]; K^T as a transpose of K from [B, H, S, D].
  Value q = collapsedFrom(g.getDpsInputOperand(0)->get(), heads);
  auto kt = g.getDpsInputOperand(1)->get().getDefiningOp<linalg::TransposeOp>();
  if (!q || !kt || kt.getPermutation() != ArrayRef<int64_t>{0, 2, 1})
    return std::nullopt;
  Value k = collapsedFrom(kt.getInput(), heads);
  if (!k)
    return std::nullopt;
  // K^T with its heads, next to the product.
  OpBuilder b(g);
  Location loc = g.getLoc();
  auto kTy = cast<RankedTensorType>(k.getType());
  SmallVector<OpFoldResult> kSizes = tensor::getMixedSizes(b, loc, k);
  Value init = tensor::EmptyOp::create(
      b, loc, {kSizes[0], kSizes[1], kSizes[3], kSizes[2]},
      kTy.getElementType());
  Value kt4 = linalg::TransposeOp::create(b, loc, k, init,
                                          ArrayRef<int64_t>{0, 1, 3, 2})
                  .getResult()[0];
  return BatchMatmul{g, q, kt4};
}

/// Peels the repetition of key/value heads that grouped-query attention
/// exports write as unsqueeze(2) -> expand -> reshape: returns the tensor
/// with kv_heads heads. Reshapes are row-major, so the static shapes alone
/// say what each one does.
Value mlir::masformer::peelRepeatKV(Value v) {
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
bool mlir::masformer::reachesScores(Value v, int depth) {
  if (depth == 0)
    return false;
  if (matchBatchMatmul(v))
    return true;
  if (Value flat = expandedHeads(v))
    return reachesScores(flat, depth - 1);
  if (flatProduct(v))
    return true; // Q K^T with flattened heads (matchFlatHeadsMatmul)
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
bool mlir::masformer::isCausalPattern(DenseElementsAttr attr,
                     llvm::function_ref<std::optional<bool>(int64_t)> kept) {
  return isCausalShape(cast<ShapedType>(attr.getType()).getShape(), kept);
}

bool mlir::masformer::isCausalShape(
    ArrayRef<int64_t> shape,
    llvm::function_ref<std::optional<bool>(int64_t)> kept) {
  if (shape.size() < 2)
    return false;
  int64_t q = shape[shape.size() - 2];
  int64_t kv = shape.back();
  if (q > kv || q == 0)
    return false;
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  int64_t slices = n / (q * kv);
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
static bool keepsLastTwoDims(AffineMap map, unsigned numLoops) {
  unsigned r = map.getNumResults();
  if (r < 2)
    return false;
  auto d0 = dyn_cast<AffineDimExpr>(map.getResult(r - 2));
  auto d1 = dyn_cast<AffineDimExpr>(map.getResult(r - 1));
  return d0 && d1 && d0.getPosition() == numLoops - 2 &&
         d1.getPosition() == numLoops - 1;
}

/// Whether `at` (over `shape` [..., q, kv]) is masked at every pair that
/// `mustMask` names.
static bool maskedAt(ArrayRef<int64_t> shape,
                     llvm::function_ref<double(int64_t)> at,
                     PairRule mustMask) {
  if (shape.size() < 2)
    return false;
  int64_t q = shape[shape.size() - 2], kv = shape.back();
  if (q > kv)
    return false;
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  for (int64_t s = 0; s < n / std::max<int64_t>(q * kv, 1); ++s)
    for (int64_t i = 0; i < q; ++i)
      for (int64_t j = 0; j < kv; ++j)
        if (mustMask(i + kv - q, j) &&
            at(s * q * kv + i * kv + j) > kMaskedThreshold)
          return false;
  return true;
}

/// `def` as a linalg.generic computing each element of its one result from
/// the inputs at that element (all loops parallel, identity output map).
static linalg::GenericOp pointwiseGeneric(Operation *def) {
  auto g = dyn_cast_or_null<linalg::GenericOp>(def);
  if (!g || g.getNumDpsInits() != 1 ||
      g.getNumLoops() != g.getNumParallelLoops() ||
      !g.getIndexingMapsArray().back().isIdentity())
    return {};
  return g;
}

/// The input operand of `g` whose element the body value `x` is, or null
/// (x is computed in the body, or is the init's element).
static OpOperand *payloadInput(linalg::GenericOp g, Value x) {
  auto arg = dyn_cast<BlockArgument>(x);
  if (!arg || arg.getOwner() != &g.getRegion().front() ||
      arg.getArgNumber() >= g.getNumDpsInputs())
    return nullptr;
  return g.getDpsInputOperand(arg.getArgNumber());
}

static bool condIsAt(Value cond, bool value, PairRule mustMask, int depth = 12);

/// condIsAt through the boolean algebra exporters combine masks with
/// (transformers 5 builds And(causal, padding) from index comparisons and
/// the attention mask): And is false where either side is, true where both
/// are; Or the reverse; Not flips; a broadcast passes its input through.
/// Only operands whose last two dimensions follow the result's are looked
/// into (a padding mask broadcast over the queries is not, and need not be:
/// the causal side of an And decides).
static bool condIsAtStructurally(Value cond, bool value, PairRule mustMask,
                                 int depth) {
  Operation *def = cond.getDefiningOp();
  if (!def)
    return false;
  if (isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(def)) {
    auto in = cast<RankedTensorType>(def->getOperand(0).getType());
    auto out = cast<RankedTensorType>(cond.getType());
    return in.getRank() >= 2 && out.getRank() >= 2 &&
           in.getShape().take_back(2) == out.getShape().take_back(2) &&
           condIsAt(def->getOperand(0), value, mustMask, depth - 1);
  }
  linalg::GenericOp g = pointwiseGeneric(def);
  if (!g)
    return false;
  unsigned loops = g.getNumLoops();
  Block &body = g.getRegion().front();
  auto inputOf = [&](Value x) { return payloadInput(g, x); };
  // An operand that is `v` at the pairs: a scalar constant, or an operand
  // whose last two dimensions follow the result's.
  auto operandIs = [&](Value x, bool v) {
    OpOperand *in = inputOf(x);
    if (!in)
      return false;
    AffineMap map = g.getMatchingIndexingMap(in);
    DenseElementsAttr attr;
    if (llvm::all_of(map.getResults(),
                     [](AffineExpr e) { return isa<AffineConstantExpr>(e); }))
      return matchConstantElements(in->get(), attr) && attr.isSplat() &&
             attr.getElementType().isInteger(1) &&
             attr.getSplatValue<bool>() == v;
    return keepsLastTwoDims(map, loops) &&
           condIsAt(in->get(), v, mustMask, depth - 1);
  };
  Value yielded = body.getTerminator()->getOperand(0);
  if (inputOf(yielded))
    return operandIs(yielded, value);
  Operation *payload = yielded.getDefiningOp();
  if (!payload || payload->getBlock() != &body ||
      !llvm::hasSingleElement(body.without_terminator()) ||
      !yielded.getType().isInteger(1))
    return false;
  Value a = payload->getNumOperands() > 0 ? payload->getOperand(0) : Value();
  Value b = payload->getNumOperands() > 1 ? payload->getOperand(1) : Value();
  if (isa<arith::AndIOp>(payload))
    return value ? operandIs(a, true) && operandIs(b, true)
                 : operandIs(a, false) || operandIs(b, false);
  if (isa<arith::OrIOp>(payload))
    return value ? operandIs(a, true) || operandIs(b, true)
                 : operandIs(a, false) && operandIs(b, false);
  if (isa<arith::XOrIOp>(payload)) {
    // Not: an XOr with a true constant (in the body or as an input).
    for (auto [x, y] : {std::pair(a, b), std::pair(b, a)}) {
      IntegerAttr c;
      bool isTrue = (matchPattern(y, m_Constant(&c)) && c.getInt() != 0);
      if (!isTrue) {
        OpOperand *in = inputOf(y);
        DenseElementsAttr attr;
        isTrue = in && matchConstantElements(in->get(), attr) &&
                 attr.isSplat() && attr.getElementType().isInteger(1) &&
                 attr.getSplatValue<bool>();
      }
      if (isTrue)
        return operandIs(x, !value);
    }
  }
  return false;
}

/// Whether the boolean `cond` is `value` at every pair `mustMask` names: a
/// constant, or computed from sizes (evaluated by probeMask), or combined
/// from such conditions (condIsAtStructurally).
static bool condIsAt(Value cond, bool value, PairRule mustMask, int depth) {
  if (depth == 0)
    return false;
  auto check = [&](ArrayRef<int64_t> shape,
                   llvm::function_ref<double(int64_t)> at) {
    // As a mask: "masked" where the condition has the value.
    return maskedAt(
        shape, [&](int64_t i) { return (at(i) != 0.0) == value ? -1e30 : 0.0; },
        mustMask);
  };
  DenseElementsAttr attr;
  if (matchConstantElements(cond, attr)) {
    auto ty = cast<RankedTensorType>(cond.getType());
    if (!attr.getElementType().isInteger(1))
      return false;
    auto values = attr.getValues<bool>();
    if (attr.isSplat())
      return *values.begin() == value;
    return check(ty.getShape(),
                 [&](int64_t i) { return values[i] ? 1.0 : 0.0; });
  }
  return probeMask(cond, check, mustMask.reach + 2) ||
         condIsAtStructurally(cond, value, mustMask, depth);
}

bool mlir::masformer::isUpperMasked(Value v) {
  auto above = [](int64_t pos, int64_t key) { return key > pos; };
  return isMaskedWhere(v, PairRule{above, /*reach=*/0});
}

std::optional<int64_t> mlir::masformer::findMaskWindow(Value mask) {
  SmallVector<int64_t> candidates;
  for (int64_t c : positionConstants(mask))
    if (c >= 1)
      candidates.append({c, c + 1});
  llvm::sort(candidates);
  candidates.erase(llvm::unique(candidates), candidates.end());
  for (int64_t w : candidates) {
    auto outside = [w](int64_t pos, int64_t key) { return pos - key >= w; };
    if (isMaskedWhere(mask, PairRule{outside, /*reach=*/w}))
      return w;
  }
  return std::nullopt;
}

/// Whether every element of `v` that `mustMask` names is masked whatever
/// the model's inputs are. Exporters build combined causal + padding masks
/// as Where(padding, float-min, causal_constant) and friends, and sliding
/// windows as Where(Trilu(ones, -W), float-min, mask): such masks still make
/// the layer causal, or windowed.
bool mlir::masformer::isMaskedWhere(Value v, PairRule mustMask, int depth) {
  if (depth == 0)
    return false;
  auto ty = dyn_cast<RankedTensorType>(v.getType());
  if (!ty || !isa<FloatType>(ty.getElementType()))
    return false;
  // Computed from sizes only: check it at probe sizes.
  if (probeMask(
          v,
          [&](ArrayRef<int64_t> shape, llvm::function_ref<double(int64_t)> at) {
            return maskedAt(shape, at, mustMask);
          },
          mustMask.reach + 2))
    return true;
  DenseElementsAttr attr;
  if (matchConstantElements(v, attr)) {
    auto values = attr.getValues<APFloat>();
    if (attr.isSplat())
      return (*values.begin()).convertToDouble() <= kMaskedThreshold;
    return maskedAt(
        ty.getShape(), [&](int64_t i) { return values[i].convertToDouble(); },
        mustMask);
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
           isMaskedWhere(def->getOperand(0), mustMask, depth - 1);
  if (auto slice = dyn_cast<tensor::ExtractSliceOp>(def)) {
    // A top-left square cut of a square mask keeps each pair's position
    // and key.
    auto src = slice.getSourceType();
    int64_t r = src.getRank();
    ArrayRef<int64_t> offs = slice.getStaticOffsets(),
                      strides = slice.getStaticStrides();
    return r >= 2 && offs[r - 1] == 0 && offs[r - 2] == 0 &&
           strides[r - 1] == 1 && strides[r - 2] == 1 &&
           src.getDimSize(r - 1) == src.getDimSize(r - 2) &&
           ty.getDimSize(r - 1) == ty.getDimSize(r - 2) &&
           isMaskedWhere(slice.getSource(), mustMask, depth - 1);
  }
  if (auto insert = dyn_cast<tensor::InsertSliceOp>(def)) {
    // An insert that overwrites the whole destination.
    auto srcTy = insert.getSourceType();
    return srcTy.getShape() == ty.getShape() &&
           isMaskedWhere(insert.getSource(), mustMask, depth - 1);
  }
  linalg::GenericOp g = pointwiseGeneric(def);
  if (!g)
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
    return keepsLastTwoDims(map, loops) &&
           isMaskedWhere(in->get(), mustMask, depth - 1);
  };
  Block &body = g.getRegion().front();
  Value yielded = body.getTerminator()->getOperand(0);
  auto inputOf = [&](Value x) { return payloadInput(g, x); };
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
    if (a && b && operandMasked(a) && operandMasked(b))
      return true;
    // A condition known on the pairs: only the branch it picks there.
    OpOperand *c = inputOf(payload->getOperand(0));
    if (!c || !keepsLastTwoDims(g.getMatchingIndexingMap(c), loops))
      return false;
    if (a && operandMasked(a) && condIsAt(c->get(), true, mustMask))
      return true;
    return b && operandMasked(b) && condIsAt(c->get(), false, mustMask);
  }
  if (isa<arith::MinimumFOp>(payload)) {
    OpOperand *a = inputOf(payload->getOperand(0));
    OpOperand *b = inputOf(payload->getOperand(1));
    return (a && operandMasked(a)) || (b && operandMasked(b));
  }
  return false;
}
