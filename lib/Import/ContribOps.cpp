//===- ContribOps.cpp - onnxruntime's com.microsoft ops ---------*- C++ -*-===//
//
// The contrib ops that onnxruntime's transformer optimizer
// (`python -m onnxruntime.transformers.optimizer`) writes in place of the
// standard ops it fuses: the normalizations (SkipLayerNormalization,
// SkipSimplifiedLayerNormalization, SimplifiedLayerNormalization,
// EmbedLayerNormalization), the GELUs, and the attention ops (Attention,
// with the Q/K/V projections packed into one weight, MultiHeadAttention, and
// GroupQueryAttention with its KV cache and rotary embedding, which
// onnxruntime-genai's model builder writes) straight to masformer.attention.
// Each computes what onnxruntime's CPU kernel computes (masked keys get
// mask_filter_value, not -inf); what a handler does not take is one error
// naming the node (docs/import.md).
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <cmath>
#include <functional>
#include <limits>

using namespace mlir;
using namespace mlir::masformer;

namespace {

/// onnxruntime's default for the attribute of the same name.
constexpr float kDefaultMaskFilterValue = -10000.0f;

/// The ops' names in the handler map.
std::string ms(StringRef op) { return ("com.microsoft." + op).str(); }

Value fconst(OpBuilder &b, Location loc, Type et, double v) {
  return arith::ConstantOp::create(b, loc, b.getFloatAttr(et, v));
}

/// `e` as an extract_slice size: a constant where it is one.
OpFoldResult foldedSize(ONNXImporterImpl &im, AffineExpr e) {
  if (auto c = dyn_cast<AffineConstantExpr>(e))
    return im.builder.getIndexAttr(c.getValue());
  return im.dimValue(e);
}

/// An additive mask's element: 0 where `keep`, `masked` elsewhere.
Value maskValue(OpBuilder &b, Location loc, Value keep, Type et,
                double masked) {
  return arith::SelectOp::create(b, loc, keep, fconst(b, loc, et, 0.0),
                                 fconst(b, loc, et, masked));
}

/// An elementwise generic over `dims` whose inputs broadcast to them.
Value elementwise(
    ONNXImporterImpl &im, ValueRange ins, ArrayRef<AffineExpr> dims, Type et,
    llvm::function_ref<Value(OpBuilder &, Location, ValueRange)> body) {
  return buildBroadcastGeneric(im.builder, im.loc, ins, im.typeFor(dims, et),
                               body, im.dynamicSizes(dims));
}

/// Fails, naming the input, unless input `i` is a tensor of `et` that
/// broadcasts to `dims`.
LogicalResult checkOperand(ONNXImporterImpl &im, unsigned i,
                           ArrayRef<AffineExpr> dims, Type et, StringRef what) {
  RankedTensorType t = im.inputType(i);
  if (t.getElementType() != et)
    return im.error() << what << " (input " << i << ") is " << t
                      << "; expected elements of " << et;
  FailureOr<SmallVector<AffineExpr>> bc =
      im.broadcastDims(dims, im.inputDims(i));
  if (failed(bc) || ArrayRef<AffineExpr>(*bc) != dims)
    return im.error() << what << " (input " << i << ") " << t
                      << " does not broadcast to " << im.dimsString(dims);
  return success();
}

/// The sum of the node's inputs `ins` (each broadcast to input 0).
FailureOr<Value> sumInputs(ONNXImporterImpl &im, ArrayRef<unsigned> ins,
                           ArrayRef<StringRef> names) {
  RankedTensorType t = im.inputType(ins[0]);
  SmallVector<AffineExpr> dims = im.inputDims(ins[0]);
  SmallVector<Value> values;
  for (auto [i, name] : llvm::zip(ins, names)) {
    if (failed(checkOperand(im, i, dims, t.getElementType(), name)))
      return failure();
    values.push_back(im.input(i));
  }
  if (values.size() == 1)
    return values[0];
  return elementwise(im, values, dims, t.getElementType(),
                     [](OpBuilder &b, Location loc, ValueRange a) {
                       Value s = a[0];
                       for (Value x : a.drop_front())
                         s = arith::AddFOp::create(b, loc, s, x);
                       return s;
                     });
}

/// GELU: x/2 (1 + erf(x / sqrt 2)), or its tanh approximation
/// x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
Value gelu(OpBuilder &b, Location loc, Value x, bool tanhApprox) {
  Type et = x.getType();
  auto mul = [&](Value l, Value r) -> Value {
    return arith::MulFOp::create(b, loc, l, r);
  };
  Value inner;
  if (tanhApprox) {
    Value cube = mul(mul(x, x), x);
    Value arg = arith::AddFOp::create(b, loc, x,
                                      mul(fconst(b, loc, et, 0.044715), cube));
    inner = math::TanhOp::create(
        b, loc, mul(fconst(b, loc, et, std::sqrt(2.0 / M_PI)), arg));
  } else {
    inner = math::ErfOp::create(b, loc, mul(x, fconst(b, loc, et, M_SQRT1_2)));
  }
  Value onePlus = arith::AddFOp::create(b, loc, fconst(b, loc, et, 1.0), inner);
  return mul(mul(fconst(b, loc, et, 0.5), x), onePlus);
}

/// `x` (dimensions `dims`) with its last two dimensions swapped.
Value swapLastTwo(ONNXImporterImpl &im, Value x,
                  SmallVector<AffineExpr> &dims) {
  int64_t rank = dims.size();
  SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(perm[rank - 1], perm[rank - 2]);
  std::swap(dims[rank - 1], dims[rank - 2]);
  Value init = im.emptyTensor(dims, getElementTypeOrSelf(x.getType()));
  return linalg::TransposeOp::create(im.builder, im.loc, x, init, perm)
      .getResult()[0];
}

/// FusedMatMul (com.microsoft), what onnxruntime's graph optimizer makes of
/// a MatMul with a Transpose of either operand's last two dimensions and a
/// scaling after it (attention's Q K^T / sqrt(d)): alpha * op(A) op(B),
/// op a transpose of the last two dimensions where transA / transB say.
/// transBatchA/B (batch dimensions moved) are refused.
LogicalResult importFusedMatMul(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes(
          {"alpha", "transA", "transB", "transBatchA", "transBatchB"})))
    return failure();
  if (im.attrInt("transBatchA", 0) != 0 || im.attrInt("transBatchB", 0) != 0)
    return im.error() << "transBatchA and transBatchB are not supported";
  RankedTensorType at = im.inputType(0), bt = im.inputType(1);
  if (!isa<FloatType>(at.getElementType()) ||
      at.getElementType() != bt.getElementType())
    return im.error() << "A (input 0) " << at << " and B (input 1) " << bt
                      << " must be floats of one type";
  SmallVector<AffineExpr> ad = im.inputDims(0), bd = im.inputDims(1);
  Value a = im.input(0), b = im.input(1);
  if (im.attrInt("transA", 0) != 0) {
    if (ad.size() < 2)
      return im.error() << "transA needs A of rank 2 or more";
    a = swapLastTwo(im, a, ad);
  }
  if (im.attrInt("transB", 0) != 0) {
    if (bd.size() < 2)
      return im.error() << "transB needs B of rank 2 or more";
    b = swapLastTwo(im, b, bd);
  }
  SmallVector<AffineExpr> outDims;
  FailureOr<Value> y = buildMatMul(im, a, ad, b, bd, outDims);
  if (failed(y))
    return failure();
  float alpha = im.attrFloat("alpha", 1.0f);
  if (alpha != 1.0f) {
    // alpha as a scalar operand, as Mul by a constant imports (the raise
    // reads the scale of the scores from it).
    Type et = at.getElementType();
    auto scalar = RankedTensorType::get({}, et);
    Value c = arith::ConstantOp::create(
        im.builder, im.loc,
        DenseElementsAttr::get(scalar, im.builder.getFloatAttr(et, alpha)));
    *y = buildBroadcastGeneric(
        im.builder, im.loc, {*y, c}, im.typeFor(outDims, et),
        [&](OpBuilder &nb, Location loc, ValueRange v) -> Value {
          return arith::MulFOp::create(nb, loc, v[0], v[1]);
        },
        im.dynamicSizes(outDims));
  }
  im.setOutput(0, *y, outDims);
  return success();
}

/// FastGelu (X, bias), BiasGelu (A, B), Gelu and QuickGelu (com.microsoft),
/// and ONNX's Gelu (opset 20, `approximate`).
LogicalResult importGelu(ONNXImporterImpl &im) {
  StringRef op = im.node->op_type();
  bool contrib = !im.node->domain().empty() && im.node->domain() != "ai.onnx";
  bool quick = op == "QuickGelu";
  if (failed(im.checkAttributes(quick      ? ArrayRef<StringRef>{"alpha"}
                                : !contrib ? ArrayRef<StringRef>{"approximate"}
                                           : ArrayRef<StringRef>{})))
    return failure();
  bool tanhApprox = op == "FastGelu";
  if (!contrib) {
    std::string approx = im.attrString("approximate").value_or("none");
    if (approx != "none" && approx != "tanh")
      return im.error() << "approximate must be 'none' or 'tanh', got '"
                        << approx << "'";
    tanhApprox = approx == "tanh";
  }
  RankedTensorType t = im.inputType(0);
  if (!isa<FloatType>(t.getElementType()))
    return im.error() << "expects a float tensor, got " << t;
  SmallVector<unsigned> ins = {0};
  SmallVector<StringRef> names = {"X"};
  if (im.hasInput(1)) {
    ins.push_back(1);
    names.push_back("bias");
  }
  FailureOr<Value> x = sumInputs(im, ins, names);
  if (failed(x))
    return failure();
  float alpha = im.attrFloat("alpha", 1.702f);
  SmallVector<AffineExpr> dims = im.inputDims(0);
  im.setOutput(
      0,
      elementwise(im, {*x}, dims, t.getElementType(),
                  [&](OpBuilder &b, Location loc, ValueRange a) {
                    if (!quick)
                      return gelu(b, loc, a[0], tanhApprox);
                    // x * sigmoid(alpha x)
                    Type et = a[0].getType();
                    Value ax = arith::MulFOp::create(b, loc, a[0],
                                                     fconst(b, loc, et, alpha));
                    Value e = math::ExpOp::create(
                        b, loc, arith::NegFOp::create(b, loc, ax));
                    Value den = arith::AddFOp::create(
                        b, loc, fconst(b, loc, et, 1.0), e);
                    return arith::DivFOp::create(b, loc, a[0], den).getResult();
                  }),
      dims);
  return success();
}

/// SkipLayerNormalization (input, skip, gamma, beta, bias) and
/// SkipSimplifiedLayerNormalization (input, skip, gamma, bias): the
/// normalized sum input + skip + bias over the last axis, and that sum as
/// output 3 (input_skip_bias_sum, the next residual).
LogicalResult importSkipNorm(ONNXImporterImpl &im) {
  bool rms = im.node->op_type() == "SkipSimplifiedLayerNormalization";
  if (failed(im.checkAttributes({"epsilon"})))
    return failure();
  if (im.hasOutput(1) || im.hasOutput(2))
    return im.error() << "outputs mean and inv_std_var are not supported "
                         "(only output 0 and input_skip_bias_sum)";
  RankedTensorType t = im.inputType(0);
  if (t.getRank() < 1 || !isa<FloatType>(t.getElementType()))
    return im.error() << "expects a float tensor, got " << t;
  unsigned biasInput = rms ? 3 : 4;
  SmallVector<unsigned> ins = {0, 1};
  SmallVector<StringRef> names = {"input", "skip"};
  if (im.hasInput(biasInput)) {
    ins.push_back(biasInput);
    names.push_back("bias");
  }
  FailureOr<Value> sum = sumInputs(im, ins, names);
  if (failed(sum))
    return failure();
  SmallVector<AffineExpr> dims = im.inputDims(0);
  FailureOr<Value> y = buildNormalization(im, *sum, dims, t.getRank() - 1,
                                          im.attrFloat("epsilon", 1e-12f), rms,
                                          2, !rms && im.hasInput(3) ? 3 : -1);
  if (failed(y))
    return failure();
  im.setOutput(0, *y, dims);
  if (im.hasOutput(3))
    im.setOutput(3, *sum, dims);
  return success();
}

/// SimplifiedLayerNormalization (onnxruntime's RMSNorm, in the default
/// domain): X / sqrt(mean(X^2) + epsilon) * scale over the axes from `axis`.
LogicalResult importSimplifiedLayerNorm(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({"axis", "epsilon", "stash_type"})))
    return failure();
  if (im.hasOutput(1))
    return im.error() << "output inv_std_var is not supported";
  RankedTensorType t = im.inputType(0);
  FailureOr<int64_t> axis =
      im.normalizeAxis(im.attrInt("axis", -1), t.getRank());
  if (failed(axis))
    return failure();
  FailureOr<Value> y =
      buildNormalization(im, im.input(0), im.inputDims(0), *axis,
                         im.attrFloat("epsilon", 1e-5f), /*rms=*/true, 1, -1);
  if (failed(y))
    return failure();
  im.setOutput(0, *y, im.inputDims(0));
  return success();
}

/// EmbedLayerNormalization: LayerNorm(word[input_ids] + position[position_ids
/// or s] + segment[segment_ids]), the number of ones of each row of `mask`
/// (int32 [B], zeros without a mask) and the sum before the normalization.
/// Ids outside a table are clamped (onnxruntime fails the run).
LogicalResult importEmbedLayerNorm(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({"epsilon", "mask_index_type"})))
    return failure();
  for (auto [i, name] : {std::pair<unsigned, StringRef>{0, "input_ids"},
                         {2, "word_embedding"},
                         {3, "position_embedding"},
                         {5, "gamma"},
                         {6, "beta"}})
    if (!im.hasInput(i))
      return im.error() << "required input " << i << " (" << name
                        << ") is missing";
  if (im.hasInput(1) != im.hasInput(4))
    return im.error() << "segment_ids and segment_embedding (inputs 1 and 4) "
                         "come together";
  RankedTensorType idsTy = im.inputType(0), wordTy = im.inputType(2);
  auto isIndex = [](RankedTensorType t) {
    return t.getElementType().isInteger(32) || t.getElementType().isInteger(64);
  };
  if (idsTy.getRank() != 2 || !isIndex(idsTy))
    return im.error() << "input_ids must be [batch, sequence] int32, got "
                      << idsTy;
  if (wordTy.getRank() != 2 || wordTy.isDynamicDim(1) ||
      wordTy.isDynamicDim(0) || wordTy.getDimSize(0) < 1 ||
      !isa<FloatType>(wordTy.getElementType()))
    return im.error()
           << "word_embedding must be a [vocabulary >= 1, hidden] float "
              "matrix, got "
           << wordTy;
  Type et = wordTy.getElementType();
  int64_t hidden = wordTy.getDimSize(1);
  SmallVector<AffineExpr> idDims = im.inputDims(0);
  for (auto [i, name] :
       {std::pair<unsigned, StringRef>{3, "position_embedding"},
        {4, "segment_embedding"}}) {
    if (!im.hasInput(i))
      continue;
    RankedTensorType t = im.inputType(i);
    if (t.getRank() != 2 || t.getDimSize(1) != hidden || t.isDynamicDim(0) ||
        t.getDimSize(0) < 1 || t.getElementType() != et)
      return im.error() << name << " must be [rows >= 1, " << hidden << "] of "
                        << et << ", got " << t;
  }
  for (auto [i, name] :
       {std::pair<unsigned, StringRef>{1, "segment_ids"}, {7, "mask"}}) {
    if (!im.hasInput(i))
      continue;
    if (!isIndex(im.inputType(i)) || im.inputDims(i) != idDims)
      return im.error() << name << " must be integers shaped like input_ids ("
                        << im.dimsString(idDims) << "), got "
                        << im.inputType(i);
  }
  bool hasPositionIds = im.hasInput(8);
  if (hasPositionIds) {
    SmallVector<AffineExpr> pd = im.inputDims(8);
    if (!isIndex(im.inputType(8)) || pd.size() != 2 || pd[1] != idDims[1] ||
        (pd[0] != idDims[0] && pd[0] != im.cst(1)))
      return im.error() << "position_ids must be integers shaped [batch or "
                           "1, sequence], got "
                        << im.inputType(8);
  }

  OpBuilder &b = im.builder;
  Location loc = im.loc;
  MLIRContext *ctx = im.getContext();
  SmallVector<AffineExpr> dims = {idDims[0], idDims[1], im.cst(hidden)};
  AffineExpr d0 = getAffineDimExpr(0, ctx), d1 = getAffineDimExpr(1, ctx);
  AffineMap rowMap = AffineMap::get(3, 0, {d0, d1}, ctx);
  SmallVector<Value> ins = {im.input(0)};
  SmallVector<AffineMap> maps = {rowMap};
  bool hasSegments = im.hasInput(1);
  if (hasSegments) {
    ins.push_back(im.input(1));
    maps.push_back(rowMap);
  }
  if (hasPositionIds) {
    ins.push_back(im.input(8));
    maps.push_back(
        im.inputDims(8)[0] == im.cst(1) && idDims[0] != im.cst(1)
            ? AffineMap::get(3, 0, {getAffineConstantExpr(0, ctx), d1}, ctx)
            : rowMap);
  }
  maps.push_back(AffineMap::getMultiDimIdentityMap(3, ctx));
  Value word = im.input(2), position = im.input(3);
  Value segment = hasSegments ? im.input(4) : Value();
  auto rowsOf = [&](Value table) {
    return tensor::DimOp::create(b, loc, table, 0).getResult();
  };
  Value wordRows = rowsOf(word), positionRows = rowsOf(position);
  Value segmentRows = hasSegments ? rowsOf(segment) : Value();
  Value init = im.emptyTensor(dims, et);
  Value sum =
      linalg::GenericOp::create(
          b, loc, im.typeFor(dims, et), ins, ValueRange{init}, maps,
          SmallVector<utils::IteratorType>(3, utils::IteratorType::parallel),
          [&](OpBuilder &nb, Location nloc, ValueRange args) {
            Value h = linalg::IndexOp::create(nb, nloc, 2);
            auto row = [&](Value table, Value id, Value rows) -> Value {
              Value r = normalizedIndex(nb, nloc, id, rows);
              return tensor::ExtractOp::create(nb, nloc, table,
                                               ValueRange{r, h});
            };
            unsigned next = 1;
            Value s = row(word, args[0], wordRows);
            if (hasSegments)
              s = arith::AddFOp::create(
                  nb, nloc, s, row(segment, args[next++], segmentRows));
            Value pos = hasPositionIds
                            ? args[next]
                            : arith::IndexCastOp::create(
                                  nb, nloc, nb.getI64Type(),
                                  linalg::IndexOp::create(nb, nloc, 1))
                                  .getResult();
            s = arith::AddFOp::create(nb, nloc, s,
                                      row(position, pos, positionRows));
            linalg::YieldOp::create(nb, nloc, s);
          })
          .getResult(0);
  FailureOr<Value> y = buildNormalization(
      im, sum, dims, 2, im.attrFloat("epsilon", 1e-12f), false, 5, 6);
  if (failed(y))
    return failure();
  im.setOutput(0, *y, dims);
  if (im.hasOutput(1)) {
    // The number of ones in each row of the mask, as onnxruntime counts
    // them.
    SmallVector<AffineExpr> bDims = {idDims[0]};
    Type i32 = b.getI32Type();
    auto outTy = im.typeFor(bDims, i32);
    Value zeros = buildFilled(b, loc, outTy, 0.0, im.dynamicSizes(bDims));
    Value count = zeros;
    if (im.hasInput(7)) {
      Value mask = im.input(7);
      Type mt = cast<RankedTensorType>(mask.getType()).getElementType();
      count =
          linalg::GenericOp::create(
              b, loc, outTy, ValueRange{mask}, ValueRange{zeros},
              ArrayRef<AffineMap>{
                  AffineMap::getMultiDimIdentityMap(2, ctx),
                  AffineMap::get(2, 0, {getAffineDimExpr(0, ctx)}, ctx)},
              ArrayRef<utils::IteratorType>{utils::IteratorType::parallel,
                                            utils::IteratorType::reduction},
              [&](OpBuilder &nb, Location nloc, ValueRange args) {
                Value one = arith::ConstantOp::create(nb, nloc,
                                                      nb.getIntegerAttr(mt, 1));
                Value isOne = arith::CmpIOp::create(
                    nb, nloc, arith::CmpIPredicate::eq, args[0], one);
                Value inc = arith::ExtUIOp::create(nb, nloc, i32, isOne);
                linalg::YieldOp::create(
                    nb, nloc,
                    arith::AddIOp::create(nb, nloc, args[1], inc).getResult());
              })
              .getResult(0);
    }
    im.setOutput(1, count, bDims);
  }
  if (im.hasOutput(2))
    im.setOutput(2, sum, dims);
  return success();
}

/// An additive mask from onnxruntime's key masks: 0 where a key is
/// attended, `filter` where not. Input `i` is 1-D [B] (keys from the
/// value on masked: right padding), [2B] (and keys before the second half's
/// value), 2-D [B, T] or 3-D [B, S, T] (0 masks); the result is
/// [B, 1, 1, T] or [B, 1, S, T] of `et`.
FailureOr<Value> keyMask(ONNXImporterImpl &im, unsigned i, AffineExpr batch,
                         AffineExpr qSeq, AffineExpr kvSeq, Type et,
                         float filter) {
  RankedTensorType t = im.inputType(i);
  if (!t.getElementType().isInteger(32) && !t.getElementType().isInteger(64))
    return im.error() << "the key mask (input " << i << ") must be int32, got "
                      << t,
           failure();
  SmallVector<AffineExpr> md = im.inputDims(i);
  OpBuilder &b = im.builder;
  Location loc = im.loc;
  MLIRContext *ctx = im.getContext();
  AffineExpr one = im.cst(1);
  Value mask = im.input(i);
  if (t.getRank() == 2 || t.getRank() == 3) {
    bool threeD = t.getRank() == 3;
    if (md[0] != batch || md.back() != kvSeq || (threeD && md[1] != qSeq))
      return im.error() << "the key mask (input " << i << ") "
                        << im.dimsString(md) << " must be [batch, "
                        << (threeD ? "sequence, " : "") << "keys] = "
                        << im.dimsString(
                               threeD
                                   ? SmallVector<AffineExpr>{batch, qSeq, kvSeq}
                                   : SmallVector<AffineExpr>{batch, kvSeq}),
             failure();
    SmallVector<AffineExpr> outDims = {batch, one, threeD ? qSeq : one, kvSeq};
    SmallVector<AffineExpr> src = {getAffineDimExpr(0, ctx)};
    if (threeD)
      src.push_back(getAffineDimExpr(2, ctx));
    src.push_back(getAffineDimExpr(3, ctx));
    Value init = im.emptyTensor(outDims, et);
    return linalg::GenericOp::create(
               b, loc, im.typeFor(outDims, et), ValueRange{mask},
               ValueRange{init},
               ArrayRef<AffineMap>{AffineMap::get(4, 0, src, ctx),
                                   AffineMap::getMultiDimIdentityMap(4, ctx)},
               SmallVector<utils::IteratorType>(4,
                                                utils::IteratorType::parallel),
               [&](OpBuilder &nb, Location nloc, ValueRange args) {
                 Value zero = arith::ConstantOp::create(
                     nb, nloc, nb.getIntegerAttr(args[0].getType(), 0));
                 Value keep = arith::CmpIOp::create(
                     nb, nloc, arith::CmpIPredicate::sgt, args[0], zero);
                 linalg::YieldOp::create(nb, nloc,
                                         maskValue(nb, nloc, keep, et, filter));
               })
        .getResult(0);
  }
  if (t.getRank() != 1)
    return im.error() << "the key mask (input " << i
                      << ") must have rank 1, 2 or 3, got " << t,
           failure();
  bool withStarts = md[0] == batch * 2;
  if (md[0] != batch && !withStarts)
    return im.error() << "the key mask (input " << i << ") "
                      << im.dimsString(md)
                      << " must hold the batch's key lengths ["
                      << im.dimString(batch) << "] or their ends and starts ["
                      << im.dimString(batch * 2) << "]",
           failure();
  SmallVector<AffineExpr> outDims = {batch, one, one, kvSeq};
  Value init = im.emptyTensor(outDims, et);
  Value batchSize = im.dimValue(batch);
  return linalg::GenericOp::create(
             b, loc, im.typeFor(outDims, et), ValueRange{}, ValueRange{init},
             ArrayRef<AffineMap>{AffineMap::getMultiDimIdentityMap(4, ctx)},
             SmallVector<utils::IteratorType>(4, utils::IteratorType::parallel),
             [&](OpBuilder &nb, Location nloc, ValueRange) {
               Value bi = linalg::IndexOp::create(nb, nloc, 0);
               Value key = arith::IndexCastOp::create(
                   nb, nloc, nb.getI64Type(),
                   linalg::IndexOp::create(nb, nloc, 3));
               auto read = [&](Value at) -> Value {
                 Value v = tensor::ExtractOp::create(nb, nloc, mask, at);
                 if (v.getType().isInteger(64))
                   return v;
                 return arith::ExtSIOp::create(nb, nloc, nb.getI64Type(), v)
                     .getResult();
               };
               Value keep = arith::CmpIOp::create(
                   nb, nloc, arith::CmpIPredicate::slt, key, read(bi));
               if (withStarts) {
                 Value at = arith::AddIOp::create(nb, nloc, bi, batchSize);
                 keep = arith::AndIOp::create(
                     nb, nloc, keep,
                     arith::CmpIOp::create(nb, nloc, arith::CmpIPredicate::sge,
                                           key, read(at)));
               }
               linalg::YieldOp::create(nb, nloc,
                                       maskValue(nb, nloc, keep, et, filter));
             })
      .getResult(0);
}

/// `mask` (or none) plus input `i`, the attention_bias [B or 1, H or 1, S,
/// T], broadcast together.
FailureOr<Value> addAttentionBias(ONNXImporterImpl &im, Value mask,
                                  SmallVector<AffineExpr> maskDims, unsigned i,
                                  AffineExpr batch, int64_t heads,
                                  AffineExpr qSeq, AffineExpr kvSeq, Type et) {
  RankedTensorType t = im.inputType(i);
  SmallVector<AffineExpr> bd = im.inputDims(i);
  AffineExpr one = im.cst(1);
  if (t.getElementType() != et || bd.size() != 4 ||
      (bd[0] != batch && bd[0] != one) ||
      (bd[1] != im.cst(heads) && bd[1] != one) || bd[2] != qSeq ||
      bd[3] != kvSeq)
    return im.error() << "attention_bias (input " << i << ") " << t
                      << " must be [batch or 1, " << heads << " or 1, "
                      << im.dimString(qSeq) << ", " << im.dimString(kvSeq)
                      << "] of " << et,
           failure();
  if (!mask)
    return im.input(i);
  FailureOr<SmallVector<AffineExpr>> dims = im.broadcastDims(maskDims, bd);
  if (failed(dims))
    return im.error() << "the key mask and attention_bias do not broadcast: "
                      << im.broadcastProblem(maskDims, bd),
           failure();
  return elementwise(
      im, {mask, im.input(i)}, *dims, et,
      [](OpBuilder &b, Location loc, ValueRange a) {
        return arith::AddFOp::create(b, loc, a[0], a[1]).getResult();
      });
}

/// The attention of [B, S, Hq*D] queries to [B, T, Hkv*D] keys and values
/// with the node's key mask (input `maskInput`) and attention_bias (input
/// `biasInput`); sets output 0 to the heads merged back to [B, S, Hq*Dv].
LogicalResult attend(ONNXImporterImpl &im, Value q, SmallVector<AffineExpr> qd,
                     Value k, SmallVector<AffineExpr> kd, Value v,
                     SmallVector<AffineExpr> vd, int64_t heads,
                     unsigned maskInput, unsigned biasInput) {
  Type et = cast<RankedTensorType>(q.getType()).getElementType();
  bool causal = im.attrInt("unidirectional", 0) != 0;
  if (causal && qd[1] != kd[1])
    return im.error() << "unidirectional with " << im.dimString(qd[1])
                      << " queries and " << im.dimString(kd[1])
                      << " keys is not supported";
  float filter = im.attrFloat("mask_filter_value", kDefaultMaskFilterValue);
  Value mask;
  SmallVector<AffineExpr> maskDims;
  if (im.hasInput(maskInput)) {
    FailureOr<Value> m =
        keyMask(im, maskInput, qd[0], qd[1], kd[1], et, filter);
    if (failed(m))
      return failure();
    mask = *m;
    auto mt = cast<RankedTensorType>(mask.getType());
    maskDims = {qd[0], im.cst(1), mt.getDimSize(2) == 1 ? im.cst(1) : qd[1],
                kd[1]};
  }
  if (im.hasInput(biasInput)) {
    FailureOr<Value> m = addAttentionBias(im, mask, maskDims, biasInput, qd[0],
                                          heads, qd[1], kd[1], et);
    if (failed(m))
      return failure();
    mask = *m;
  }
  std::optional<float> scale;
  if (std::optional<float> s = im.attrFloat("scale"); s && *s != 0.0f)
    scale = *s;
  FailureOr<Value> y = createAttention(
      im, splitHeads(im, q, qd, heads), splitHeads(im, k, kd, heads),
      splitHeads(im, v, vd, heads), mask, causal, scale);
  if (failed(y))
    return failure();
  Value merged = mergeHeads(im, *y, qd);
  SmallVector<AffineExpr> dims = {
      qd[0], qd[1],
      im.cst(cast<RankedTensorType>(merged.getType()).getDimSize(2))};
  im.setOutput(0, merged, dims);
  return success();
}

/// Fails unless every dimension in `sizes` is a positive multiple of
/// `heads`.
LogicalResult checkHeads(ONNXImporterImpl &im, int64_t heads,
                         ArrayRef<std::pair<StringRef, int64_t>> sizes) {
  for (auto [what, size] : sizes)
    if (heads <= 0 || ShapedType::isDynamic(size) || size <= 0 || size % heads)
      return im.error() << "num_heads (" << heads << ") must be positive and "
                        << "divide the static hidden size of " << what << " ("
                        << size << ")";
  return success();
}

/// com.microsoft.Attention: one product of the input [B, S, In] by weights
/// [In, Hq + Hk + Hv] (+ bias) gives Q, K and V (qkv_hidden_sizes, equal
/// thirds by default); mask_index (input 3) and attention_bias (input 5)
/// as keyMask and addAttentionBias take them; unidirectional is causal.
LogicalResult importMSAttention(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({"num_heads", "unidirectional",
                                 "qkv_hidden_sizes", "mask_filter_value",
                                 "scale", "do_rotary", "rotary_embedding_dim",
                                 "past_present_share_buffer"})))
    return failure();
  if (im.attrInt("do_rotary", 0))
    return im.error() << "do_rotary is not supported";
  if (im.hasInput(4) || im.hasInput(6) || im.hasOutput(1))
    return im.error() << "past and present key/value states are not "
                         "supported (export the model without a KV cache)";
  RankedTensorType xt = im.inputType(0), wt = im.inputType(1);
  if (xt.getRank() != 3 || !isa<FloatType>(xt.getElementType()))
    return im.error() << "input must be [batch, sequence, hidden] floats, got "
                      << xt;
  if (wt.getRank() != 2 || !wt.hasStaticShape() ||
      wt.getElementType() != xt.getElementType())
    return im.error() << "weights must be a static [input hidden, Q + K + V "
                         "hidden] matrix of the input's type, got "
                      << wt;
  int64_t total = wt.getDimSize(1);
  SmallVector<int64_t> sizes = {total / 3, total / 3, total / 3};
  if (std::optional<SmallVector<int64_t>> s = im.attrInts("qkv_hidden_sizes"))
    sizes = *s;
  else if (total % 3)
    return im.error() << "weights' " << total
                      << " columns are not three equal parts (and there is "
                         "no qkv_hidden_sizes)";
  if (sizes.size() != 3 || sizes[0] != sizes[1] || sizes[0] <= 0 ||
      sizes[2] <= 0 || sizes[0] + sizes[1] + sizes[2] != total)
    return im.error() << "qkv_hidden_sizes must be three positive sizes, Q's "
                         "equal to K's, adding up to the weights' "
                      << total << " columns";
  std::optional<int64_t> heads = im.attrInt("num_heads");
  if (!heads)
    return im.error() << "the num_heads attribute is missing";
  if (failed(checkHeads(im, *heads,
                        {{"Q", sizes[0]}, {"K", sizes[1]}, {"V", sizes[2]}})))
    return failure();
  if (sizes[2] != sizes[0])
    return im.error() << "V's hidden size (" << sizes[2]
                      << ") differs from Q's and K's (" << sizes[0]
                      << "): masformer.attention takes heads of one size";
  SmallVector<AffineExpr> xd = im.inputDims(0), pd;
  FailureOr<Value> proj =
      buildMatMul(im, im.input(0), xd, im.input(1), im.inputDims(1), pd);
  if (failed(proj))
    return failure();
  Value qkv = *proj;
  if (im.hasInput(2)) {
    RankedTensorType bt = im.inputType(2);
    if (bt.getRank() != 1 || bt.getDimSize(0) != total ||
        bt.getElementType() != xt.getElementType())
      return im.error() << "bias must be [" << total << "] of "
                        << xt.getElementType() << ", got " << bt;
    qkv = elementwise(
        im, {qkv, im.input(2)}, pd, xt.getElementType(),
        [](OpBuilder &b, Location loc, ValueRange a) {
          return arith::AddFOp::create(b, loc, a[0], a[1]).getResult();
        });
  }
  // Q, K and V are column ranges of the product.
  SmallVector<Value> parts;
  SmallVector<SmallVector<AffineExpr>> partDims;
  int64_t offset = 0;
  for (int64_t size : sizes) {
    SmallVector<AffineExpr> d = {pd[0], pd[1], im.cst(size)};
    SmallVector<OpFoldResult> offsets = {im.builder.getIndexAttr(0),
                                         im.builder.getIndexAttr(0),
                                         im.builder.getIndexAttr(offset)};
    SmallVector<OpFoldResult> lens = {foldedSize(im, pd[0]),
                                      foldedSize(im, pd[1]),
                                      im.builder.getIndexAttr(size)};
    SmallVector<OpFoldResult> strides(3, im.builder.getIndexAttr(1));
    auto resultTy = im.typeFor(d, xt.getElementType());
    parts.push_back(tensor::ExtractSliceOp::create(
        im.builder, im.loc, resultTy, qkv, offsets, lens, strides));
    partDims.push_back(d);
    offset += size;
  }
  return attend(im, parts[0], partDims[0], parts[1], partDims[1], parts[2],
                partDims[2], *heads, 3, 5);
}

/// com.microsoft.MultiHeadAttention on separate 3-D query [B, S, H*D], key
/// and value [B, T, H*D]: bias (input 3, [Q + K + V]) added to each,
/// key_padding_mask (input 4) and attention_bias (input 5) as keyMask and
/// addAttentionBias take them. Packed Q/K/V, 4-D keys and caches are
/// refused.
LogicalResult importMultiHeadAttention(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes(
          {"num_heads", "unidirectional", "mask_filter_value", "scale"})))
    return failure();
  for (unsigned i = 6; i < im.numInputs(); ++i)
    if (im.hasInput(i))
      return im.error() << "past key/value states and cache inputs (input " << i
                        << ") are not supported";
  for (unsigned o = 1; o < im.numOutputs(); ++o)
    if (im.hasOutput(o))
      return im.error() << "only output 0 is supported (present key/value "
                           "and qk are requested)";
  if (!im.hasInput(1) || !im.hasInput(2))
    return im.error() << "packed query/key/value (no key or value input) is "
                         "not supported";
  Type et = im.inputType(0).getElementType();
  for (unsigned i = 0; i < 3; ++i) {
    RankedTensorType t = im.inputType(i);
    if (t.getRank() != 3 || t.getElementType() != et || !isa<FloatType>(et))
      return im.error() << (i == 0   ? "query"
                            : i == 1 ? "key"
                                     : "value")
                        << " must be [batch, sequence, hidden] floats of one "
                           "type, got "
                        << t;
  }
  std::optional<int64_t> heads = im.attrInt("num_heads");
  if (!heads)
    return im.error() << "the num_heads attribute is missing";
  int64_t hq = im.inputType(0).getDimSize(2),
          hk = im.inputType(1).getDimSize(2),
          hv = im.inputType(2).getDimSize(2);
  if (failed(
          checkHeads(im, *heads, {{"query", hq}, {"key", hk}, {"value", hv}})))
    return failure();
  if (hq != hk || hq != hv)
    return im.error() << "query, key and value hidden sizes differ (" << hq
                      << ", " << hk << " and " << hv
                      << "): masformer.attention takes heads of one size";
  SmallVector<Value> qkv = {im.input(0), im.input(1), im.input(2)};
  SmallVector<SmallVector<AffineExpr>> dims = {im.inputDims(0), im.inputDims(1),
                                               im.inputDims(2)};
  if (dims[1][0] != dims[0][0] || dims[2][0] != dims[0][0] ||
      dims[1][1] != dims[2][1])
    return im.error() << "query, key and value must share the batch, key and "
                         "value the sequence: "
                      << im.dimsString(dims[0]) << ", "
                      << im.dimsString(dims[1]) << ", "
                      << im.dimsString(dims[2]);
  if (im.hasInput(3)) {
    RankedTensorType bt = im.inputType(3);
    if (bt.getRank() != 1 || bt.getDimSize(0) != hq + hk + hv ||
        bt.getElementType() != et)
      return im.error() << "bias must be [" << hq + hk + hv << "] of " << et
                        << ", got " << bt;
    int64_t offset = 0;
    for (unsigned i = 0; i < 3; ++i) {
      int64_t size = cast<RankedTensorType>(qkv[i].getType()).getDimSize(2);
      auto partTy = RankedTensorType::get({size}, et);
      Value part = tensor::ExtractSliceOp::create(
          im.builder, im.loc, partTy, im.input(3),
          ArrayRef<OpFoldResult>{im.builder.getIndexAttr(offset)},
          ArrayRef<OpFoldResult>{im.builder.getIndexAttr(size)},
          ArrayRef<OpFoldResult>{im.builder.getIndexAttr(1)});
      qkv[i] = elementwise(
          im, {qkv[i], part}, dims[i], et,
          [](OpBuilder &b, Location loc, ValueRange a) {
            return arith::AddFOp::create(b, loc, a[0], a[1]).getResult();
          });
      offset += size;
    }
  }
  return attend(im, qkv[0], dims[0], qkv[1], dims[1], qkv[2], dims[2], *heads,
                4, 5);
}

/// The position of row b's first query (an index value, built in a
/// region): GroupQueryAttention's past length of that row.
using RowOffset = llvm::function_ref<Value(OpBuilder &, Location, Value)>;

/// `x` [B, H, S, D] (dimensions `dims`) with the rotary embedding at
/// positions offset(b) + s from `cos` and `sin` [M, R/2]: its first R
/// features rotated as halves (rotate_half, Llama) or as interleaved pairs
/// (GPT-J), the rest as they are. Positions past the table are clamped.
Value applyRotary(ONNXImporterImpl &im, Value x, ArrayRef<AffineExpr> dims,
                  Value cos, Value sin, RowOffset offset, bool interleaved) {
  OpBuilder &b = im.builder;
  Location loc = im.loc;
  MLIRContext *ctx = im.getContext();
  auto t = cast<RankedTensorType>(x.getType());
  int64_t half = cast<RankedTensorType>(cos.getType()).getDimSize(1);
  Value rows = tensor::DimOp::create(b, loc, cos, 0);
  Value init = im.emptyTensor(dims, t.getElementType());
  return linalg::GenericOp::create(
             b, loc, t, ValueRange{x}, ValueRange{init},
             SmallVector<AffineMap>(2,
                                    AffineMap::getMultiDimIdentityMap(4, ctx)),
             SmallVector<utils::IteratorType>(4, utils::IteratorType::parallel),
             [&](OpBuilder &nb, Location nloc, ValueRange args) {
               auto idx = [&](int64_t v) -> Value {
                 return arith::ConstantIndexOp::create(nb, nloc, v);
               };
               auto cmp = [&](arith::CmpIPredicate p, Value l, Value r) {
                 return arith::CmpIOp::create(nb, nloc, p, l, r).getResult();
               };
               auto sel = [&](Value c, Value l, Value r) {
                 return arith::SelectOp::create(nb, nloc, c, l, r).getResult();
               };
               SmallVector<Value> at;
               for (int64_t d = 0; d < 4; ++d)
                 at.push_back(linalg::IndexOp::create(nb, nloc, d));
               Value d = at[3];
               Value pos = arith::AddIOp::create(nb, nloc, at[2],
                                                 offset(nb, nloc, at[0]));
               pos = arith::MinSIOp::create(
                   nb, nloc, pos,
                   arith::SubIOp::create(nb, nloc, rows, idx(1)));
               Value rotated = cmp(arith::CmpIPredicate::slt, d, idx(2 * half));
               // The feature's table column, its partner and whether it is
               // the first of the pair.
               Value col, partner, first;
               if (interleaved) {
                 col = arith::DivUIOp::create(nb, nloc, d, idx(2));
                 first =
                     cmp(arith::CmpIPredicate::eq,
                         arith::RemUIOp::create(nb, nloc, d, idx(2)), idx(0));
                 partner =
                     sel(first, arith::AddIOp::create(nb, nloc, d, idx(1)),
                         arith::SubIOp::create(nb, nloc, d, idx(1)));
               } else {
                 first = cmp(arith::CmpIPredicate::slt, d, idx(half));
                 col = sel(first, d,
                           arith::SubIOp::create(nb, nloc, d, idx(half)));
                 partner =
                     sel(first, arith::AddIOp::create(nb, nloc, d, idx(half)),
                         arith::SubIOp::create(nb, nloc, d, idx(half)));
               }
               col = sel(rotated, col, idx(0));
               partner = sel(rotated, partner, d);
               Value c = tensor::ExtractOp::create(nb, nloc, cos,
                                                   ValueRange{pos, col});
               Value sn = tensor::ExtractOp::create(nb, nloc, sin,
                                                    ValueRange{pos, col});
               Value other = tensor::ExtractOp::create(
                   nb, nloc, x, ValueRange{at[0], at[1], at[2], partner});
               Value xc = arith::MulFOp::create(nb, nloc, args[0], c);
               Value os = arith::MulFOp::create(nb, nloc, other, sn);
               Value r = sel(first, arith::SubFOp::create(nb, nloc, xc, os),
                             arith::AddFOp::create(nb, nloc, xc, os));
               linalg::YieldOp::create(nb, nloc, sel(rotated, r, args[0]));
             })
      .getResult(0);
}

/// com.microsoft.GroupQueryAttention (onnxruntime-genai's decoders): new Q,
/// K, V ([B, S, H*D] each, or packed in the query) after the past K/V
/// [B, Hkv, P, D], as onnxruntime's CPU kernel computes it. Row b holds
/// L = seqlens_k[b] + 1 tokens, the last S new: its past length is
/// p = clamp(L - S, 0, P) (P for every row when the rows are as long as
/// the cache, as onnxruntime-genai runs one sequence). The new tokens get
/// the rotary embedding at positions p + s and go into the present K/V at
/// p (after the row's past, zeros after them); keys from L on are masked;
/// the layer is causal with the queries at the end of the keys (for a row
/// shorter than the cache the mask hides what that admits beyond L, since
/// onnxruntime takes such rows only with one new token), each row's
/// positions from its first token (row_offset P - p); local_window_size
/// W is the layer's span, a window of W keys (0 <= i - j < W, as
/// onnxruntime defines it since 1.24, transformers' sliding_window and ONNX
/// Attention-25's local_window_size; onnxruntime 1.23 and earlier took W + 1
/// keys).
LogicalResult importGroupQueryAttention(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({"num_heads", "kv_num_heads", "scale",
                                 "local_window_size", "softcap", "do_rotary",
                                 "rotary_interleaved", "smooth_softmax",
                                 "qk_output", "sliding_window_cache"})))
    return failure();
  if (im.attrInt("sliding_window_cache", 0))
    return im.error()
           << "sliding_window_cache (a KV cache of the window's capacity, "
              "which onnxruntime-genai's builder writes for sliding-window "
              "layers by default) is not supported: build the model with "
              "--extra_options windowed_kv_cache=false, a cache that grows";
  if (im.attrInt("smooth_softmax", 0))
    return im.error() << "smooth_softmax is not supported";
  if (im.attrInt("qk_output", 0) || im.hasOutput(3))
    return im.error() << "output_qk is not supported";
  if (im.hasInput(9))
    return im.error() << "position_ids (input 9) are not supported: the "
                         "positions are taken as past length + s";
  if (im.hasInput(11))
    return im.error() << "head_sink (input 11) is not supported";
  if (!im.hasInput(5) || !im.hasInput(6))
    return im.error() << "seqlens_k and total_sequence_length (inputs 5 and "
                         "6) are required";
  std::optional<int64_t> hq = im.attrInt("num_heads"),
                         hkv = im.attrInt("kv_num_heads");
  if (!hq || !hkv || *hq <= 0 || *hkv <= 0 || *hq % *hkv)
    return im.error() << "num_heads and kv_num_heads must be positive, "
                         "kv_num_heads dividing num_heads";
  RankedTensorType qt = im.inputType(0);
  Type et = qt.getElementType();
  if (qt.getRank() != 3 || qt.isDynamicDim(2) || !isa<FloatType>(et))
    return im.error() << "query must be [batch, sequence, hidden] floats with "
                         "a static hidden size, got "
                      << qt;
  bool packed = !im.hasInput(1);
  if (packed == im.hasInput(2))
    return im.error() << "key and value come together (or neither, with Q, K "
                         "and V packed in the query)";
  SmallVector<AffineExpr> qd = im.inputDims(0);
  int64_t d;
  SmallVector<Value> qkv;
  SmallVector<SmallVector<AffineExpr>> dims;
  if (packed) {
    int64_t width = qt.getDimSize(2), parts = *hq + 2 * *hkv;
    if (width % parts)
      return im.error() << "the packed query's " << width
                        << " features are not (num_heads + 2 kv_num_heads) = "
                        << parts << " heads";
    d = width / parts;
    int64_t offset = 0;
    for (int64_t heads : {*hq, *hkv, *hkv}) {
      SmallVector<AffineExpr> pd = {qd[0], qd[1], im.cst(heads * d)};
      qkv.push_back(tensor::ExtractSliceOp::create(
          im.builder, im.loc, im.typeFor(pd, et), im.input(0),
          ArrayRef<OpFoldResult>{im.builder.getIndexAttr(0),
                                 im.builder.getIndexAttr(0),
                                 im.builder.getIndexAttr(offset)},
          ArrayRef<OpFoldResult>{foldedSize(im, qd[0]), foldedSize(im, qd[1]),
                                 im.builder.getIndexAttr(heads * d)},
          ArrayRef<OpFoldResult>(
              SmallVector<OpFoldResult>(3, im.builder.getIndexAttr(1)))));
      dims.push_back(pd);
      offset += heads * d;
    }
  } else {
    if (qt.getDimSize(2) % *hq)
      return im.error() << "num_heads (" << *hq
                        << ") does not divide the query's hidden size ("
                        << qt.getDimSize(2) << ")";
    d = qt.getDimSize(2) / *hq;
    qkv.push_back(im.input(0));
    dims.push_back(qd);
    for (unsigned i : {1u, 2u}) {
      RankedTensorType t = im.inputType(i);
      SmallVector<AffineExpr> td = im.inputDims(i);
      if (t.getRank() != 3 || t.getElementType() != et ||
          t.getDimSize(2) != *hkv * d || td[0] != qd[0] || td[1] != qd[1])
        return im.error() << (i == 1 ? "key" : "value") << " must be ["
                          << im.dimString(qd[0]) << ", " << im.dimString(qd[1])
                          << ", " << *hkv * d << "] of " << et << ", got " << t;
      qkv.push_back(im.input(i));
      dims.push_back(td);
    }
  }
  Value q = splitHeads(im, qkv[0], dims[0], *hq);
  Value k = splitHeads(im, qkv[1], dims[1], *hkv);
  Value v = splitHeads(im, qkv[2], dims[2], *hkv);
  AffineExpr batch = qd[0], seq = qd[1], past = im.cst(0);
  if (im.hasInput(3) != im.hasInput(4))
    return im.error() << "past_key and past_value come together";
  bool hasPast = im.hasInput(3);
  if (hasPast) {
    SmallVector<AffineExpr> kd = im.inputDims(3), vd = im.inputDims(4);
    // onnxruntime-genai declares the head size of the cache inputs as a
    // dim_param ("kv_cache_dim"): it is the head size.
    for (auto *dims : {&kd, &vd})
      if (dims->size() == 4) {
        if (im.requestStaticDim((*dims)[1], *hkv) ||
            im.requestStaticDim((*dims)[3], d))
          return failure();
      }
    SmallVector<AffineExpr> want = {
        batch, im.cst(*hkv), kd.size() == 4 ? kd[2] : im.cst(0), im.cst(d)};
    if (kd.size() != 4 || kd != want || vd != want ||
        im.inputType(3).getElementType() != et ||
        im.inputType(4).getElementType() != et)
      return im.error() << "past_key and past_value must be [batch, " << *hkv
                        << ", past, " << d << "] of " << et << ", got "
                        << im.inputType(3) << " and " << im.inputType(4);
    past = kd[2];
  }
  // seqlens_k, and each row's past length from it.
  RankedTensorType lt = im.inputType(5);
  if (lt.getRank() != 1 || !lt.getElementType().isInteger(32) ||
      im.inputDims(5)[0] != batch)
    return im.error() << "seqlens_k must be [" << im.dimString(batch)
                      << "] int32, got " << lt;
  OpBuilder &b = im.builder;
  Location loc = im.loc;
  MLIRContext *ctx = im.getContext();
  Value lengths = im.input(5);
  Value seqV = im.dimValue(seq), pastV = im.dimValue(past);
  auto rowPast = [&](OpBuilder &nb, Location nloc, Value row) -> Value {
    Value last = arith::IndexCastOp::create(
        nb, nloc, nb.getIndexType(),
        tensor::ExtractOp::create(nb, nloc, lengths, row));
    Value one = arith::ConstantIndexOp::create(nb, nloc, 1);
    Value p = arith::SubIOp::create(
        nb, nloc, arith::AddIOp::create(nb, nloc, last, one), seqV);
    p = arith::MaxSIOp::create(nb, nloc, p,
                               arith::ConstantIndexOp::create(nb, nloc, 0));
    return arith::MinSIOp::create(nb, nloc, p, pastV);
  };
  if (im.attrInt("do_rotary", 0)) {
    if (!im.hasInput(7) || !im.hasInput(8))
      return im.error() << "do_rotary needs cos_cache and sin_cache (inputs 7 "
                           "and 8)";
    RankedTensorType ct = im.inputType(7), st = im.inputType(8);
    if (ct.getRank() != 2 || ct != st || ct.isDynamicDim(1) ||
        ct.isDynamicDim(0) || ct.getDimSize(0) < 1 ||
        ct.getElementType() != et || 2 * ct.getDimSize(1) > d)
      return im.error() << "cos_cache and sin_cache must be [positions >= 1, "
                           "rotary_dim / 2 <= "
                        << d / 2 << "] of " << et << ", got " << ct << " and "
                        << st;
    bool interleaved = im.attrInt("rotary_interleaved", 0) != 0;
    q = applyRotary(im, q, {batch, im.cst(*hq), seq, im.cst(d)}, im.input(7),
                    im.input(8), rowPast, interleaved);
    k = applyRotary(im, k, {batch, im.cst(*hkv), seq, im.cst(d)}, im.input(7),
                    im.input(8), rowPast, interleaved);
  }
  AffineExpr total = past + seq;
  SmallVector<AffineExpr> presentDims = {batch, im.cst(*hkv), total, im.cst(d)};
  // Row b's tokens: its past ones, then the new ones; the attention takes
  // them right-aligned in [0, P + S) (shifted by P - p), so that every
  // row's queries sit at the end of its keys, where masformer.attention's
  // causal triangle and window put them; the present K/V keep
  // onnxruntime's layout (the row's tokens from 0, zeros after).
  auto rowShift = [&](OpBuilder &nb, Location nloc, Value row) -> Value {
    return arith::SubIOp::create(nb, nloc, pastV, rowPast(nb, nloc, row));
  };
  Value presentK = k, presentV = v;
  if (hasPast) {
    auto presentTy = im.typeFor(presentDims, et);
    // Element (b, h, j, :) of `cat` = Concat(past, new) taken from the
    // index `pick` gives (and zeros where it says so).
    using Pick = std::function<std::pair<Value, Value>(OpBuilder &, Location,
                                                       Value, Value)>;
    auto gather = [&](Value cat, const Pick &pick) {
      return linalg::GenericOp::create(
                 b, loc, presentTy, ValueRange{},
                 ValueRange{im.emptyTensor(presentDims, et)},
                 ArrayRef<AffineMap>{AffineMap::getMultiDimIdentityMap(4, ctx)},
                 SmallVector<utils::IteratorType>(
                     4, utils::IteratorType::parallel),
                 [&](OpBuilder &nb, Location nloc, ValueRange) {
                   SmallVector<Value> at;
                   for (int64_t i = 0; i < 4; ++i)
                     at.push_back(linalg::IndexOp::create(nb, nloc, i));
                   auto [src, keep] = pick(nb, nloc, at[0], at[2]);
                   Value x = tensor::ExtractOp::create(
                       nb, nloc, cat, ValueRange{at[0], at[1], src, at[3]});
                   linalg::YieldOp::create(
                       nb, nloc,
                       arith::SelectOp::create(nb, nloc, keep, x,
                                               fconst(nb, nloc, et, 0.0))
                           .getResult());
                 })
          .getResult(0);
    };
    auto cmp = [](OpBuilder &nb, Location nloc, arith::CmpIPredicate pr,
                  Value l, Value r) {
      return arith::CmpIOp::create(nb, nloc, pr, l, r).getResult();
    };
    // onnxruntime's layout: the row's past, its new tokens at p, zeros.
    Pick presentPick = [&](OpBuilder &nb, Location nloc, Value row,
                           Value j) -> std::pair<Value, Value> {
      Value p = rowPast(nb, nloc, row);
      Value fromPast = cmp(nb, nloc, arith::CmpIPredicate::slt, j, p);
      Value offsetNew = arith::SubIOp::create(nb, nloc, j, p);
      Value fromNew = cmp(nb, nloc, arith::CmpIPredicate::slt, offsetNew, seqV);
      Value src = arith::SelectOp::create(
          nb, nloc, fromPast, j,
          arith::SelectOp::create(
              nb, nloc, fromNew,
              arith::AddIOp::create(nb, nloc, pastV, offsetNew), j));
      return {src, arith::OrIOp::create(nb, nloc, fromPast, fromNew)};
    };
    // Right-aligned: the new tokens where Concat put them, the row's past
    // just before them.
    Pick alignedPick = [&](OpBuilder &nb, Location nloc, Value row,
                           Value j) -> std::pair<Value, Value> {
      Value shift = rowShift(nb, nloc, row);
      Value isNew = cmp(nb, nloc, arith::CmpIPredicate::sge, j, pastV);
      Value keep = cmp(nb, nloc, arith::CmpIPredicate::sge, j, shift);
      // New tokens stay where Concat put them; the row's past moves right.
      Value src = arith::SelectOp::create(
          nb, nloc, isNew, j,
          arith::SelectOp::create(
              nb, nloc, keep, arith::SubIOp::create(nb, nloc, j, shift), j));
      return {src, keep};
    };
    Value catK = tensor::ConcatOp::create(b, loc, presentTy, 2,
                                          ValueRange{im.input(3), k});
    Value catV = tensor::ConcatOp::create(b, loc, presentTy, 2,
                                          ValueRange{im.input(4), v});
    // When every row is as long as the cache (one sequence, as
    // onnxruntime-genai runs it), both layouts are Concat(past, new) as it
    // is: the gathers run only for a batch with shorter rows.
    Value allRows = arith::ConstantIntOp::create(b, loc, 1, 1);
    {
      Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
      Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
      auto loop = scf::ForOp::create(
          b, loc, c0, im.dimValue(batch), c1, ValueRange{allRows},
          [&](OpBuilder &lb, Location ll, Value row, ValueRange acc) {
            Value full = arith::CmpIOp::create(lb, ll, arith::CmpIPredicate::eq,
                                               rowPast(lb, ll, row), pastV);
            scf::YieldOp::create(
                lb, ll,
                ValueRange{arith::AndIOp::create(lb, ll, acc[0], full)});
          });
      allRows = loop.getResult(0);
    }
    // Sizes the gathers use, made here so that they dominate both branches.
    (void)im.dynamicSizes(presentDims);
    auto orGather = [&](Value cat, const Pick &pick) {
      auto ifOp = scf::IfOp::create(b, loc, TypeRange{presentTy}, allRows,
                                    /*withElseRegion=*/true);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&ifOp.getThenRegion().front());
      scf::YieldOp::create(b, loc, cat);
      b.setInsertionPointToStart(&ifOp.getElseRegion().front());
      scf::YieldOp::create(b, loc, gather(cat, pick));
      return ifOp.getResult(0);
    };
    presentK = orGather(catK, presentPick);
    presentV = orGather(catV, presentPick);
    k = orGather(catK, alignedPick);
    v = orGather(catV, alignedPick);
  }
  if (im.hasOutput(1))
    im.setOutput(1, presentK, presentDims);
  if (im.hasOutput(2))
    im.setOutput(2, presentV, presentDims);

  // The keys of row b, right-aligned: [P - p, P + L - p), L = seqlens_k + 1
  // (L - p = S but for a padded prompt's shorter rows); -inf elsewhere.
  // A local window is in the mask too (query i at P + i sees the keys
  // from P + i - W + 1 on), so that a rewrite's span applies within it, as
  // it does within a raised layer's own window.
  AffineExpr one = im.cst(1);
  int64_t window = im.attrInt("local_window_size", -1);
  if (window == 0 || window < -1)
    return im.error() << "local_window_size must be -1 (none) or positive, "
                         "got "
                      << window;
  SmallVector<AffineExpr> maskDims = {batch, one, window > 0 ? seq : one,
                                      total};
  Value mask =
      linalg::GenericOp::create(
          b, loc, im.typeFor(maskDims, et), ValueRange{},
          ValueRange{im.emptyTensor(maskDims, et)},
          ArrayRef<AffineMap>{AffineMap::getMultiDimIdentityMap(4, ctx)},
          SmallVector<utils::IteratorType>(4, utils::IteratorType::parallel),
          [&](OpBuilder &nb, Location nloc, ValueRange) {
            Value row = linalg::IndexOp::create(nb, nloc, 0);
            Value key = linalg::IndexOp::create(nb, nloc, 3);
            Value p = rowPast(nb, nloc, row);
            Value len = arith::IndexCastOp::create(
                nb, nloc, nb.getIndexType(),
                tensor::ExtractOp::create(nb, nloc, lengths, row));
            // end = P + L - p = P + (seqlens_k + 1) - p
            Value end = arith::SubIOp::create(
                nb, nloc,
                arith::AddIOp::create(
                    nb, nloc, pastV,
                    arith::AddIOp::create(
                        nb, nloc, len,
                        arith::ConstantIndexOp::create(nb, nloc, 1))),
                p);
            Value keep = arith::AndIOp::create(
                nb, nloc,
                arith::CmpIOp::create(nb, nloc, arith::CmpIPredicate::sge, key,
                                      rowShift(nb, nloc, row)),
                arith::CmpIOp::create(nb, nloc, arith::CmpIPredicate::slt, key,
                                      end));
            if (window > 0) {
              Value query = linalg::IndexOp::create(nb, nloc, 2);
              Value first = arith::SubIOp::create(
                  nb, nloc, arith::AddIOp::create(nb, nloc, pastV, query),
                  arith::ConstantIndexOp::create(nb, nloc, window - 1));
              keep = arith::AndIOp::create(
                  nb, nloc, keep,
                  arith::CmpIOp::create(nb, nloc, arith::CmpIPredicate::sge,
                                        key, first));
            }
            linalg::YieldOp::create(
                nb, nloc,
                maskValue(nb, nloc, keep, et,
                          -std::numeric_limits<double>::infinity()));
          })
          .getResult(0);
  if (im.hasInput(10)) {
    FailureOr<Value> m =
        addAttentionBias(im, mask, maskDims, 10, batch, *hq, seq, total, et);
    if (failed(m))
      return failure();
    mask = *m;
  }
  SpanAttr span;
  if (window > 0)
    span = SpanAttr::get(ctx, SpanKind::Window, window);
  std::optional<float> scale, softcap;
  if (std::optional<float> s = im.attrFloat("scale"); s && *s != 0.0f)
    scale = *s;
  if (std::optional<float> c = im.attrFloat("softcap"); c && *c != 0.0f)
    softcap = *c;
  // Each row's positions start where its tokens do (P - p in the
  // right-aligned keys): a rewrite's blocks and sinks count from the row's
  // first token, as onnxruntime counts them (its keys from 0).
  Value rowOffset;
  if (hasPast) {
    SmallVector<AffineExpr> rows = {batch};
    Type index = b.getIndexType();
    rowOffset =
        linalg::GenericOp::create(
            b, loc, im.typeFor(rows, index), ValueRange{},
            ValueRange{im.emptyTensor(rows, index)},
            ArrayRef<AffineMap>{AffineMap::getMultiDimIdentityMap(1, ctx)},
            SmallVector<utils::IteratorType>(1, utils::IteratorType::parallel),
            [&](OpBuilder &nb, Location nloc, ValueRange) {
              linalg::YieldOp::create(
                  nb, nloc,
                  rowShift(nb, nloc, linalg::IndexOp::create(nb, nloc, 0)));
            })
            .getResult(0);
  }
  FailureOr<Value> y = createAttention(im, q, k, v, mask, /*causal=*/true,
                                       scale, span, softcap, rowOffset);
  if (failed(y))
    return failure();
  if (span)
    y->getDefiningOp()->setAttr(kModelSpanAttrName, span);
  im.setOutput(0, mergeHeads(im, *y, qd), {batch, seq, im.cst(*hq * d)});
  return success();
}

} // namespace

void mlir::masformer::registerContribHandlers(
    llvm::StringMap<NodeHandler> &handlers) {
  handlers["Gelu"] = importGelu;
  handlers["SimplifiedLayerNormalization"] = importSimplifiedLayerNorm;
  for (StringRef op : {"FastGelu", "BiasGelu", "Gelu", "QuickGelu"})
    handlers[ms(op)] = importGelu;
  handlers[ms("FusedMatMul")] = importFusedMatMul;
  handlers[ms("SkipLayerNormalization")] = importSkipNorm;
  handlers[ms("SkipSimplifiedLayerNormalization")] = importSkipNorm;
  handlers[ms("EmbedLayerNormalization")] = importEmbedLayerNorm;
  handlers[ms("Attention")] = importMSAttention;
  handlers[ms("MultiHeadAttention")] = importMultiHeadAttention;
  handlers[ms("GroupQueryAttention")] = importGroupQueryAttention;
}
