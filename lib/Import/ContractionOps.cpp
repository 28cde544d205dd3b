//===- ContractionOps.cpp - ONNX contractions, norms, reduction -*- C++ -*-===//
//
// MatMul, Gemm and Einsum as linalg.generic contractions (batch dimensions
// broadcast through the indexing maps), Softmax as linalg.softmax,
// LayerNormalization and the reductions as generics, and the opset-23
// Attention op straight to masformer.attention.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

#include "masformer/Dialect/MASFormer/IR/MASFormerOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringSwitch.h"

#include <algorithm>
#include <limits>

using namespace mlir;
using namespace mlir::masformer;

namespace {

using utils::IteratorType;

/// out[dims of outMap] += prod(inputs[k][dims of maps[k]]), accumulating in
/// the output element type.
Value buildContraction(OpBuilder &b, Location loc, ValueRange inputs,
                       ArrayRef<AffineMap> inputMaps, AffineMap outMap,
                       RankedTensorType outType,
                       ArrayRef<IteratorType> iterators,
                       ValueRange dynSizes = {}) {
  Value init = buildFilled(b, loc, outType, 0.0, dynSizes);
  SmallVector<AffineMap> maps(inputMaps);
  maps.push_back(outMap);
  Type et = outType.getElementType();
  bool isFloat = isa<FloatType>(et);
  return linalg::GenericOp::create(
             b, loc, outType, inputs, ValueRange{init}, maps, iterators,
             [&](OpBuilder &nb, Location nloc, ValueRange args) {
               Value prod = castScalar(nb, nloc, args[0], et);
               for (Value a : args.drop_front().drop_back()) {
                 Value x = castScalar(nb, nloc, a, et);
                 prod = isFloat ? arith::MulFOp::create(nb, nloc, prod, x)
                                      .getResult()
                                : arith::MulIOp::create(nb, nloc, prod, x)
                                      .getResult();
               }
               Value acc = args.back();
               Value sum =
                   isFloat
                       ? arith::AddFOp::create(nb, nloc, acc, prod).getResult()
                       : arith::AddIOp::create(nb, nloc, acc, prod).getResult();
               linalg::YieldOp::create(nb, nloc, sum);
             })
      .getResult(0);
}

} // namespace

FailureOr<Value> mlir::masformer::buildMatMul(
    ONNXImporterImpl &im, Value a, SmallVector<AffineExpr> ad, Value bv,
    SmallVector<AffineExpr> bd, SmallVector<AffineExpr> &outDims) {
  auto at = cast<RankedTensorType>(a.getType()),
       bt = cast<RankedTensorType>(bv.getType());
  if (at.getElementType() != bt.getElementType())
    return im.error() << "operand element types differ", failure();
  if (at.getRank() == 0 || bt.getRank() == 0)
    return im.error() << "operands must have rank >= 1", failure();
  MLIRContext *ctx = im.getContext();
  AffineExpr one = im.cst(1);
  // Vectors are promoted to matrices as numpy does, and the extra unit
  // dimension dropped from the result.
  bool aVec = ad.size() == 1, bVec = bd.size() == 1;
  if (aVec) {
    SmallVector<AffineExpr> to = {one, ad[0]};
    a = buildReshapeDims(im, a, ad, to);
    ad = to;
  }
  if (bVec) {
    SmallVector<AffineExpr> to = {bd[0], one};
    bv = buildReshapeDims(im, bv, bd, to);
    bd = to;
  }
  AffineExpr m = ad[ad.size() - 2], k = ad.back();
  AffineExpr k2 = bd[bd.size() - 2], n = bd.back();
  if (k != k2)
    return im.error() << "contraction sizes differ: " << at << " x " << bt,
           failure();
  FailureOr<SmallVector<AffineExpr>> batch = im.broadcastDims(
      ArrayRef<AffineExpr>(ad).drop_back(2),
      ArrayRef<AffineExpr>(bd).drop_back(2));
  if (failed(batch))
    return im.error() << "batch dimensions of " << at << " and " << bt
                      << " do not broadcast: "
                      << im.broadcastProblem(
                             ArrayRef<AffineExpr>(ad).drop_back(2),
                             ArrayRef<AffineExpr>(bd).drop_back(2)),
           failure();
  int64_t br = batch->size(), rank = br + 3;
  auto operandMap = [&](ArrayRef<AffineExpr> td, int64_t d0, int64_t d1) {
    SmallVector<AffineExpr> exprs;
    int64_t tb = td.size() - 2;
    for (int64_t d = 0; d < tb; ++d) {
      int64_t o = br - tb + d;
      exprs.push_back(td[d] == one && (*batch)[o] != one
                          ? getAffineConstantExpr(0, ctx)
                          : getAffineDimExpr(o, ctx));
    }
    exprs.push_back(getAffineDimExpr(d0, ctx));
    exprs.push_back(getAffineDimExpr(d1, ctx));
    return AffineMap::get(rank, 0, exprs, ctx);
  };
  // Loops: batch..., m, n, k.
  int64_t dm = br, dn = br + 1, dk = br + 2;
  outDims.assign(batch->begin(), batch->end());
  outDims.push_back(m);
  outDims.push_back(n);
  auto outType = im.typeFor(outDims, at.getElementType());
  SmallVector<AffineExpr> outExprs;
  for (int64_t d = 0; d < br + 2; ++d)
    outExprs.push_back(getAffineDimExpr(d, ctx));
  SmallVector<IteratorType> iters(br + 2, IteratorType::parallel);
  iters.push_back(IteratorType::reduction);
  Value result = buildContraction(
      im.builder, im.loc, {a, bv},
      {operandMap(ad, dm, dk), operandMap(bd, dk, dn)},
      AffineMap::get(rank, 0, outExprs, ctx), outType, iters,
      im.dynamicSizes(outDims));
  if (aVec || bVec) {
    SmallVector<AffineExpr> dims(*batch);
    if (!aVec)
      dims.push_back(m);
    if (!bVec)
      dims.push_back(n);
    result = buildReshapeDims(im, result, outDims, dims);
    outDims = dims;
  }
  return result;
}

namespace {

LogicalResult importMatMul(ONNXImporterImpl &im) {
  SmallVector<AffineExpr> outDims;
  FailureOr<Value> result = buildMatMul(im, im.input(0), im.inputDims(0),
                                        im.input(1), im.inputDims(1), outDims);
  if (failed(result))
    return failure();
  im.setOutput(0, *result, outDims);
  return success();
}

LogicalResult importGemm(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({"alpha", "beta", "transA", "transB"})))
    return failure();
  RankedTensorType at = im.inputType(0), bt = im.inputType(1);
  if (at.getRank() != 2 || bt.getRank() != 2)
    return im.error() << "A and B must be matrices";
  bool ta = im.attrInt("transA", 0), tb = im.attrInt("transB", 0);
  float alpha = im.attrFloat("alpha", 1.0f), beta = im.attrFloat("beta", 1.0f);
  SmallVector<AffineExpr> ad = im.inputDims(0), bd = im.inputDims(1);
  AffineExpr m = ad[ta ? 1 : 0], k = ad[ta ? 0 : 1];
  AffineExpr k2 = bd[tb ? 1 : 0], n = bd[tb ? 0 : 1];
  if (k != k2)
    return im.error() << "contraction sizes differ: " << at << " x " << bt;
  MLIRContext *ctx = im.getContext();
  AffineExpr dm = getAffineDimExpr(0, ctx), dn = getAffineDimExpr(1, ctx),
             dk = getAffineDimExpr(2, ctx);
  SmallVector<AffineExpr> outDims = {m, n};
  auto outType = im.typeFor(outDims, at.getElementType());
  Value result = buildContraction(
      im.builder, im.loc, {im.input(0), im.input(1)},
      {AffineMap::get(3, 0, {ta ? dk : dm, ta ? dm : dk}, ctx),
       AffineMap::get(3, 0, {tb ? dn : dk, tb ? dk : dn}, ctx)},
      AffineMap::get(3, 0, {dm, dn}, ctx), outType,
      {IteratorType::parallel, IteratorType::parallel,
       IteratorType::reduction},
      im.dynamicSizes(outDims));
  bool hasC = im.hasInput(2) && beta != 0.0f;
  if (alpha != 1.0f || hasC) {
    SmallVector<Value> ins = {result};
    if (hasC)
      ins.push_back(im.input(2));
    if (hasC) {
      FailureOr<SmallVector<AffineExpr>> bc =
          im.broadcastDims(outDims, im.inputDims(2));
      if (failed(bc) || *bc != outDims)
        return im.error() << "C " << im.inputType(2)
                          << " does not broadcast to " << outType;
    }
    result = buildBroadcastGeneric(
        im.builder, im.loc, ins, outType,
        [&](OpBuilder &b, Location loc, ValueRange args) {
          Type et = outType.getElementType();
          Value x = args[0];
          if (alpha != 1.0f)
            x = arith::MulFOp::create(
                b, loc, x,
                arith::ConstantOp::create(b, loc, b.getFloatAttr(et, alpha)));
          if (args.size() > 1) {
            Value c = args[1];
            if (beta != 1.0f)
              c = arith::MulFOp::create(
                  b, loc, c,
                  arith::ConstantOp::create(b, loc,
                                            b.getFloatAttr(et, beta)));
            x = arith::AddFOp::create(b, loc, x, c);
          }
          return x;
        },
        im.dynamicSizes(outDims));
  }
  im.setOutput(0, result, outDims);
  return success();
}

LogicalResult importEinsum(ONNXImporterImpl &im) {
  std::optional<std::string> eq = im.attrString("equation");
  if (!eq)
    return im.error() << "missing attribute 'equation'";
  std::string spec;
  for (char c : *eq)
    if (c != ' ')
      spec.push_back(c);
  StringRef s(spec);
  if (s.contains("..."))
    return im.error() << "equation '" << *eq
                      << "': ellipsis is not supported";
  auto [lhs, out] = s.split("->");
  if (!s.contains("->"))
    return im.error() << "equation '" << *eq
                      << "': implicit output is not supported";
  SmallVector<StringRef> terms;
  lhs.split(terms, ',');
  if (terms.size() != im.numInputs())
    return im.error() << "equation '" << *eq << "' has " << terms.size()
                      << " operands, the node " << im.numInputs();
  // Loop order: output letters, then reduced letters in order of appearance.
  std::string letters(out);
  for (StringRef t : terms)
    for (char c : t)
      if (!StringRef(letters).contains(c))
        letters.push_back(c);
  llvm::DenseMap<char, AffineExpr> sizes;
  MLIRContext *ctx = im.getContext();
  SmallVector<AffineMap> maps;
  SmallVector<Value> inputs;
  for (auto [i, t] : llvm::enumerate(terms)) {
    RankedTensorType ty = im.inputType(i);
    SmallVector<AffineExpr> tyDims = im.inputDims(i);
    if ((int64_t)t.size() != ty.getRank())
      return im.error() << "operand " << i << " " << ty << " does not match '"
                        << t << "'";
    SmallVector<AffineExpr> exprs;
    for (auto [d, c] : llvm::enumerate(t)) {
      if (t.count(c) > 1)
        return im.error() << "equation '" << *eq
                          << "': repeated indices (diagonals) are not "
                             "supported";
      AffineExpr size = tyDims[d];
      auto [it, inserted] = sizes.try_emplace(c, size);
      if (!inserted && it->second != size)
        return im.error() << "index '" << c << "' has sizes "
                          << im.dimString(it->second) << " and "
                          << im.dimString(size);
      exprs.push_back(getAffineDimExpr(letters.find(c), ctx));
    }
    maps.push_back(AffineMap::get(letters.size(), 0, exprs, ctx));
    inputs.push_back(im.input(i));
  }
  SmallVector<AffineExpr> outDims;
  SmallVector<AffineExpr> outExprs;
  for (char c : out) {
    if (!sizes.count(c))
      return im.error() << "output index '" << c << "' is not an input index";
    outDims.push_back(sizes[c]);
    outExprs.push_back(getAffineDimExpr(letters.find(c), ctx));
  }
  SmallVector<IteratorType> iters;
  for (size_t d = 0; d < letters.size(); ++d)
    iters.push_back(d < out.size() ? IteratorType::parallel
                                   : IteratorType::reduction);
  auto outType = im.typeFor(outDims, im.inputType(0).getElementType());
  im.setOutput(0,
               buildContraction(im.builder, im.loc, inputs, maps,
                                AffineMap::get(letters.size(), 0, outExprs,
                                               ctx),
                                outType, iters, im.dynamicSizes(outDims)),
               outDims);
  return success();
}

LogicalResult importSoftmax(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({"axis"})))
    return failure();
  RankedTensorType t = im.inputType(0);
  if (!isa<FloatType>(t.getElementType()))
    return im.error() << "expects a float tensor, got " << t;
  int64_t axis = im.attrInt("axis", im.opset >= 13 ? -1 : 1);
  FailureOr<int64_t> ax = im.normalizeAxis(axis, t.getRank());
  if (failed(ax))
    return failure();
  // Before opset 13 Softmax flattened from `axis` on; that equals a softmax
  // over the last axis only when `axis` is the last one.
  if (im.opset < 13 && *ax != t.getRank() - 1)
    return im.error() << "opset " << im.opset
                      << " Softmax over a non-last axis is not supported";
  SmallVector<AffineExpr> dims = im.inputDims(0);
  Value init = im.emptyTensor(dims, t.getElementType());
  im.setOutput(0,
               linalg::SoftmaxOp::create(im.builder, im.loc, t, im.input(0),
                                         init, *ax)
                   .getResult()[0],
               dims);
  return success();
}

/// How reduceDims combines the elements: ONNX's ReduceSum (and Mean),
/// ReduceMax, ReduceMin, ReduceProd, ReduceL1 (sum of |x|) and
/// ReduceSumSquare (sum of x^2; ReduceL2 is its square root).
enum class ReduceKind { Sum, Max, Min, Prod, L1, SumSquare };

/// x reduced over the dimensions marked in `reduced` (dropped), combined as
/// `kind` says, in the element type.
Value reduceDims(ONNXImporterImpl &im, Value x, ArrayRef<AffineExpr> xDims,
                 ArrayRef<bool> reduced, ReduceKind kind) {
  OpBuilder &b = im.builder;
  Location loc = im.loc;
  auto t = cast<RankedTensorType>(x.getType());
  MLIRContext *ctx = b.getContext();
  SmallVector<AffineExpr> dims;
  SmallVector<AffineExpr> outExprs;
  SmallVector<IteratorType> iters;
  for (int64_t d = 0; d < t.getRank(); ++d) {
    iters.push_back(reduced[d] ? IteratorType::reduction
                               : IteratorType::parallel);
    if (!reduced[d]) {
      dims.push_back(xDims[d]);
      outExprs.push_back(getAffineDimExpr(d, ctx));
    }
  }
  auto outType = im.typeFor(dims, t.getElementType());
  bool isFloat = isa<FloatType>(t.getElementType());
  double initValue = 0.0;
  if (kind == ReduceKind::Prod)
    initValue = 1.0;
  if (kind == ReduceKind::Max)
    initValue = isFloat
                    ? -std::numeric_limits<double>::infinity()
                    : static_cast<double>(std::numeric_limits<int64_t>::min());
  if (kind == ReduceKind::Min)
    initValue = isFloat
                    ? std::numeric_limits<double>::infinity()
                    : static_cast<double>(std::numeric_limits<int64_t>::max());
  Value init = buildFilled(b, loc, outType, initValue, im.dynamicSizes(dims));
  return linalg::GenericOp::create(
             b, loc, outType, ValueRange{x}, ValueRange{init},
             ArrayRef<AffineMap>{
                 AffineMap::getMultiDimIdentityMap(t.getRank(), ctx),
                 AffineMap::get(t.getRank(), 0, outExprs, ctx)},
             iters,
             [&](OpBuilder &nb, Location nloc, ValueRange args) {
               Value x = args[0], acc = args[1];
               auto add = [&](Value a, Value c) -> Value {
                 return isFloat
                            ? arith::AddFOp::create(nb, nloc, a, c).getResult()
                            : arith::AddIOp::create(nb, nloc, a, c).getResult();
               };
               auto mul = [&](Value a, Value c) -> Value {
                 return isFloat
                            ? arith::MulFOp::create(nb, nloc, a, c).getResult()
                            : arith::MulIOp::create(nb, nloc, a, c).getResult();
               };
               Value r;
               switch (kind) {
               case ReduceKind::Sum:
                 r = add(acc, x);
                 break;
               case ReduceKind::Max:
                 r = isFloat
                         ? arith::MaximumFOp::create(nb, nloc, x, acc)
                               .getResult()
                         : arith::MaxSIOp::create(nb, nloc, x, acc).getResult();
                 break;
               case ReduceKind::Min:
                 r = isFloat
                         ? arith::MinimumFOp::create(nb, nloc, x, acc)
                               .getResult()
                         : arith::MinSIOp::create(nb, nloc, x, acc).getResult();
                 break;
               case ReduceKind::Prod:
                 r = mul(acc, x);
                 break;
               case ReduceKind::L1: {
                 Value a;
                 if (isFloat) {
                   a = math::AbsFOp::create(nb, nloc, x);
                 } else {
                   Value zero = arith::ConstantOp::create(
                       nb, nloc, nb.getZeroAttr(x.getType()));
                   a = arith::MaxSIOp::create(
                       nb, nloc, x, arith::SubIOp::create(nb, nloc, zero, x));
                 }
                 r = add(acc, a);
                 break;
               }
               case ReduceKind::SumSquare:
                 r = add(acc, mul(x, x));
                 break;
               }
               linalg::YieldOp::create(nb, nloc, r);
             })
      .getResult(0);
}

/// Conv (group 1, any number of spatial dimensions): ViT's patch embedding,
/// Whisper's audio front end. The padded input, then one generic:
/// out[n, m, o...] = B[m] + sum over c, r... of
/// X[n, c, o * stride + r * dilation] * W[m, c, r...]. Spatial sizes may be
/// dynamic (explicit pads or VALID); SAME padding needs static ones.
LogicalResult importConv(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({"auto_pad", "dilations", "group",
                                 "kernel_shape", "pads", "strides"})))
    return failure();
  RankedTensorType xt = im.inputType(0), wt = im.inputType(1);
  Type et = xt.getElementType();
  if (!isa<FloatType>(et) || wt.getElementType() != et)
    return im.error() << "expects float X and W of one type, got " << xt
                      << " and " << wt;
  int64_t rank = xt.getRank(), k = rank - 2;
  if (k < 1 || wt.getRank() != rank)
    return im.error() << "expects X and W of one rank, 3 or more, got " << xt
                      << " and " << wt;
  if (im.attrInt("group", 1) != 1)
    return im.error() << "group " << im.attrInt("group", 1)
                      << " is not supported (only 1)";
  for (int64_t d = 2; d < rank; ++d)
    if (wt.isDynamicDim(d))
      return im.error() << "the kernel's spatial sizes must be static, got "
                        << wt;
  SmallVector<AffineExpr> xd = im.inputDims(0), wd = im.inputDims(1);
  if (xd[1] != wd[1])
    return im.error() << "X has " << im.dimString(xd[1])
                      << " channels, W expects " << im.dimString(wd[1]);
  auto ints = [&](StringRef name, int64_t n,
                  int64_t dflt) -> FailureOr<SmallVector<int64_t>> {
    SmallVector<int64_t> v =
        im.attrInts(name).value_or(SmallVector<int64_t>(n, dflt));
    if (static_cast<int64_t>(v.size()) != n)
      return im.error() << name << " must hold " << n << " values, got "
                        << v.size(),
             failure();
    return v;
  };
  FailureOr<SmallVector<int64_t>> strides = ints("strides", k, 1),
                                  dilations = ints("dilations", k, 1),
                                  pads = ints("pads", 2 * k, 0);
  if (failed(strides) || failed(dilations) || failed(pads))
    return failure();
  if (auto ks = im.attrInts("kernel_shape"))
    if (*ks != ArrayRef<int64_t>(wt.getShape()).drop_front(2))
      return im.error() << "kernel_shape does not match W " << wt;
  for (int64_t i = 0; i < k; ++i)
    if ((*strides)[i] < 1 || (*dilations)[i] < 1 || (*pads)[i] < 0 ||
        (*pads)[k + i] < 0)
      return im.error() << "strides and dilations must be positive and pads "
                           "not negative";
  std::string autoPad = im.attrString("auto_pad").value_or("NOTSET");
  if (autoPad == "VALID") {
    pads->assign(2 * k, 0);
  } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    for (int64_t i = 0; i < k; ++i) {
      int64_t in = xt.getDimSize(2 + i);
      if (ShapedType::isDynamic(in))
        return im.error() << "auto_pad " << autoPad
                          << " needs static spatial sizes, got " << xt;
      int64_t s = (*strides)[i], out = (in + s - 1) / s;
      int64_t span = (*dilations)[i] * (wt.getDimSize(2 + i) - 1) + 1;
      int64_t total = std::max<int64_t>(0, (out - 1) * s + span - in);
      int64_t small = total / 2;
      (*pads)[i] = autoPad == "SAME_UPPER" ? small : total - small;
      (*pads)[k + i] = total - (*pads)[i];
    }
  } else if (autoPad != "NOTSET") {
    return im.error() << "auto_pad '" << autoPad << "' is not supported";
  }
  // Output sizes: (in + pads - dilation * (kernel - 1) - 1) / stride + 1.
  SmallVector<AffineExpr> outDims = {xd[0], wd[0]}, paddedDims = {xd[0], xd[1]};
  for (int64_t i = 0; i < k; ++i) {
    AffineExpr padded = xd[2 + i] + (*pads)[i] + (*pads)[k + i];
    int64_t reach = (*dilations)[i] * (wt.getDimSize(2 + i) - 1) + 1;
    if (auto c = dyn_cast<AffineConstantExpr>(padded);
        c && c.getValue() < reach)
      return im.error() << "spatial dimension " << i << " (" << c.getValue()
                        << " with padding) is smaller than the kernel's reach ("
                        << reach << ")";
    paddedDims.push_back(padded);
    outDims.push_back((padded - reach).floorDiv((*strides)[i]) + 1);
  }
  Value x = im.input(0);
  if (llvm::any_of(*pads, [](int64_t p) { return p != 0; })) {
    SmallVector<OpFoldResult> low(rank, im.builder.getIndexAttr(0)),
        high(rank, im.builder.getIndexAttr(0));
    for (int64_t i = 0; i < k; ++i) {
      low[2 + i] = im.builder.getIndexAttr((*pads)[i]);
      high[2 + i] = im.builder.getIndexAttr((*pads)[k + i]);
    }
    Value zero = arith::ConstantOp::create(im.builder, im.loc,
                                           im.builder.getZeroAttr(et));
    x = tensor::PadOp::create(im.builder, im.loc, im.typeFor(paddedDims, et), x,
                              low, high, zero)
            .getResult();
  }
  // Iteration space: n, m, o_1..o_k (parallel), c, r_1..r_k (reduction).
  MLIRContext *ctx = im.getContext();
  unsigned numLoops = 3 + 2 * k;
  auto dim = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
  SmallVector<AffineExpr> xExprs = {dim(0), dim(2 + k)},
                          wExprs = {dim(1), dim(2 + k)},
                          oExprs = {dim(0), dim(1)};
  for (int64_t i = 0; i < k; ++i) {
    xExprs.push_back(dim(2 + i) * (*strides)[i] +
                     dim(3 + k + i) * (*dilations)[i]);
    wExprs.push_back(dim(3 + k + i));
    oExprs.push_back(dim(2 + i));
  }
  SmallVector<IteratorType> iters(2 + k, IteratorType::parallel);
  iters.append(1 + k, IteratorType::reduction);
  auto outType = im.typeFor(outDims, et);
  Value init;
  if (im.hasInput(2)) {
    RankedTensorType bt = im.inputType(2);
    if (bt.getRank() != 1 || im.inputDims(2)[0] != wd[0])
      return im.error() << "B " << bt << " must hold one value per output "
                        << "channel (" << im.dimString(wd[0]) << ")";
    Value empty = im.emptyTensor(outDims, et);
    AffineMap bMap = AffineMap::get(2 + k, 0, {dim(1)}, ctx);
    init = linalg::GenericOp::create(
               im.builder, im.loc, outType, ValueRange{im.input(2)},
               ValueRange{empty},
               ArrayRef<AffineMap>{
                   bMap, AffineMap::getMultiDimIdentityMap(2 + k, ctx)},
               SmallVector<IteratorType>(2 + k, IteratorType::parallel),
               [&](OpBuilder &b, Location loc, ValueRange args) {
                 linalg::YieldOp::create(b, loc, args[0]);
               })
               .getResult(0);
  } else {
    init =
        buildFilled(im.builder, im.loc, outType, 0.0, im.dynamicSizes(outDims));
  }
  auto conv = linalg::GenericOp::create(
      im.builder, im.loc, outType, ValueRange{x, im.input(1)}, ValueRange{init},
      ArrayRef<AffineMap>{AffineMap::get(numLoops, 0, xExprs, ctx),
                          AffineMap::get(numLoops, 0, wExprs, ctx),
                          AffineMap::get(numLoops, 0, oExprs, ctx)},
      iters, [&](OpBuilder &b, Location loc, ValueRange args) {
        Value prod = arith::MulFOp::create(b, loc, args[0], args[1]);
        linalg::YieldOp::create(
            b, loc, arith::AddFOp::create(b, loc, args[2], prod).getResult());
      });
  im.setOutput(0, conv.getResult(0), outDims);
  return success();
}

/// CumSum along `axis` (a scalar input known at import), inclusive or
/// `exclusive`, forward or `reverse`. Exporters use it on small tensors
/// (position ids from a padding mask), so on the device it is a reduction
/// over the whole axis per output element, masked to the prefix: no loop
/// carried between elements, in every pipeline's linalg.
LogicalResult importCumSum(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({"exclusive", "reverse"})))
    return failure();
  RankedTensorType t = im.inputType(0);
  int64_t rank = t.getRank();
  Type et = t.getElementType();
  if (!isa<FloatType>(et) && !et.isInteger(32) && !et.isInteger(64))
    return im.error() << "expects a float, int32 or int64 tensor, got " << t;
  FailureOr<const HostTensor *> a = im.requireHostScalar(1, "axis");
  if (failed(a))
    return failure();
  FailureOr<int64_t> axis = im.normalizeAxis((*a)->getInt(0), rank);
  if (failed(axis))
    return failure();
  bool exclusive = im.attrInt("exclusive", 0) != 0;
  bool reverse = im.attrInt("reverse", 0) != 0;
  SmallVector<AffineExpr> dims = im.inputDims(0);
  // Whether element k of the axis counts towards element i.
  auto counts = [&](int64_t k, int64_t i) {
    return reverse ? (exclusive ? k > i : k >= i)
                   : (exclusive ? k < i : k <= i);
  };
  if (const HostTensor *h = im.hostInput(0); h && !h->isSymbolic()) {
    HostTensor out = *h;
    SmallVector<int64_t> strides = stridesOf(h->shape);
    int64_t n = h->shape[*axis], stride = strides[*axis];
    for (int64_t e = 0, total = h->numElements(); e < total; ++e) {
      int64_t i = (e / stride) % n, base = e - i * stride;
      double fsum = 0;
      int64_t isum = 0;
      for (int64_t k = 0; k < n; ++k) {
        if (!counts(k, i))
          continue;
        if (h->isFloat())
          fsum += h->floats[base + k * stride];
        else
          isum = static_cast<int64_t>(
              static_cast<uint64_t>(isum) +
              static_cast<uint64_t>(h->ints[base + k * stride]));
      }
      if (h->isFloat())
        out.set(e, fsum);
      else
        out.setInt(e, isum);
    }
    im.setHostOutput(0, std::move(out));
    return success();
  }
  // out[d...] = sum over k of (k counts towards d[axis]) ? x[d with k] : 0.
  MLIRContext *ctx = im.getContext();
  SmallVector<AffineExpr> inExprs;
  for (int64_t d = 0; d < rank; ++d)
    inExprs.push_back(getAffineDimExpr(d == *axis ? rank : d, ctx));
  AffineMap inMap = AffineMap::get(rank + 1, 0, inExprs, ctx);
  AffineMap outMap =
      AffineMap::getMultiDimIdentityMap(rank + 1, ctx).getMajorSubMap(rank);
  SmallVector<IteratorType> iters(rank, IteratorType::parallel);
  iters.push_back(IteratorType::reduction);
  Value init = buildFilled(im.builder, im.loc, im.typeFor(dims, et), 0.0,
                           im.dynamicSizes(dims));
  auto generic = linalg::GenericOp::create(
      im.builder, im.loc, init.getType(), ValueRange{im.input(0)},
      ValueRange{init}, ArrayRef<AffineMap>{inMap, outMap}, iters,
      [&](OpBuilder &b, Location loc, ValueRange args) {
        Value i = linalg::IndexOp::create(b, loc, *axis);
        Value k = linalg::IndexOp::create(b, loc, rank);
        auto pred = reverse ? (exclusive ? arith::CmpIPredicate::ugt
                                         : arith::CmpIPredicate::uge)
                            : (exclusive ? arith::CmpIPredicate::ult
                                         : arith::CmpIPredicate::ule);
        Value take = arith::CmpIOp::create(b, loc, pred, k, i);
        Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(et));
        Value x = arith::SelectOp::create(b, loc, take, args[0], zero);
        Value sum = isa<FloatType>(et)
                        ? arith::AddFOp::create(b, loc, args[1], x).getResult()
                        : arith::AddIOp::create(b, loc, args[1], x).getResult();
        linalg::YieldOp::create(b, loc, sum);
      });
  im.setOutput(0, generic.getResult(0), dims);
  return success();
}

LogicalResult importReduce(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({"axes", "keepdims", "noop_with_empty_axes"})))
    return failure();
  StringRef op = im.node->op_type();
  RankedTensorType t = im.inputType(0);
  int64_t rank = t.getRank();
  SmallVector<int64_t> axes;
  if (im.hasInput(1)) {
    FailureOr<const HostTensor *> a = im.requireHostInput(1, "axes");
    if (failed(a))
      return failure();
    axes.assign((*a)->ints.begin(), (*a)->ints.end());
  } else if (auto a = im.attrInts("axes")) {
    axes = *a;
  }
  bool keepDims = im.attrInt("keepdims", 1);
  SmallVector<AffineExpr> inDims = im.inputDims(0);
  if (axes.empty() && im.attrInt("noop_with_empty_axes", 0)) {
    im.setOutput(0, im.input(0), inDims);
    return success();
  }
  SmallVector<bool> reduced(rank, axes.empty());
  for (int64_t a : axes) {
    FailureOr<int64_t> ax = im.normalizeAxis(a, rank);
    if (failed(ax))
      return failure();
    reduced[*ax] = true;
  }
  ReduceKind kind =
      llvm::StringSwitch<ReduceKind>(op)
          .Case("ReduceMax", ReduceKind::Max)
          .Case("ReduceMin", ReduceKind::Min)
          .Case("ReduceProd", ReduceKind::Prod)
          .Case("ReduceL1", ReduceKind::L1)
          .Cases({"ReduceL2", "ReduceSumSquare"}, ReduceKind::SumSquare)
          .Case("ReduceLogSumExp", ReduceKind::Sum)
          .Default(ReduceKind::Sum);
  Type et = t.getElementType();
  if ((op == "ReduceL2" || op == "ReduceLogSumExp") && !isa<FloatType>(et))
    return im.error() << "expects a float tensor, got " << t;
  Value x = im.input(0);
  if (op == "ReduceLogSumExp") {
    // log(sum(exp(x - m))) + m with m the maximum over the same axes (so
    // that exp cannot overflow), as onnxruntime computes it.
    Value m = reduceDims(im, x, inDims, reduced, ReduceKind::Max);
    SmallVector<AffineExpr> mDims;
    for (int64_t d = 0; d < rank; ++d)
      mDims.push_back(reduced[d] ? im.cst(1) : inDims[d]);
    SmallVector<AffineExpr> rDims0;
    for (int64_t d = 0; d < rank; ++d)
      if (!reduced[d])
        rDims0.push_back(inDims[d]);
    Value mKept = buildReshapeDims(im, m, rDims0, mDims);
    // The maximum to shift by; 0 for a row of -inf, which keeps its -inf
    // (exp(-inf - -inf) would be NaN).
    auto shiftOf = [](OpBuilder &b, Location loc, Value m) -> Value {
      Value ninf = arith::ConstantOp::create(
          b, loc,
          b.getFloatAttr(m.getType(),
                         -std::numeric_limits<double>::infinity()));
      Value zero =
          arith::ConstantOp::create(b, loc, b.getFloatAttr(m.getType(), 0.0));
      Value isInf =
          arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, m, ninf);
      return arith::SelectOp::create(b, loc, isInf, zero, m);
    };
    Value shifted = buildBroadcastGeneric(
        im.builder, im.loc, {x, mKept}, t,
        [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
          return math::ExpOp::create(
              b, loc,
              arith::SubFOp::create(b, loc, args[0], shiftOf(b, loc, args[1])));
        },
        im.dynamicSizes(inDims));
    Value sum = reduceDims(im, shifted, inDims, reduced, ReduceKind::Sum);
    Value out = buildBroadcastGeneric(
        im.builder, im.loc, {sum, m}, cast<RankedTensorType>(sum.getType()),
        [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
          return arith::AddFOp::create(b, loc,
                                       math::LogOp::create(b, loc, args[0]),
                                       shiftOf(b, loc, args[1]));
        },
        im.dynamicSizes(rDims0));
    if (keepDims) {
      out = buildReshapeDims(im, out, rDims0, mDims);
      im.setOutput(0, out, mDims);
    } else {
      im.setOutput(0, out, rDims0);
    }
    return success();
  }
  Value r = reduceDims(im, x, inDims, reduced, kind);
  auto rt = cast<RankedTensorType>(r.getType());
  SmallVector<AffineExpr> rDims, keptDims;
  AffineExpr count = im.cst(1);
  for (int64_t d = 0; d < rank; ++d) {
    if (!reduced[d])
      rDims.push_back(inDims[d]);
    else
      count = count * inDims[d];
    keptDims.push_back(reduced[d] ? im.cst(1) : inDims[d]);
  }
  if (op == "ReduceL2")
    r = buildBroadcastGeneric(
        im.builder, im.loc, {r}, rt,
        [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
          return math::SqrtOp::create(b, loc, args[0]);
        },
        im.dynamicSizes(rDims));
  if (op == "ReduceMean") {
    if (!isa<FloatType>(t.getElementType()))
      return im.error() << "expects a float tensor, got " << t;
    Value countV;
    if (!isa<AffineConstantExpr>(count))
      countV = im.dimValue(count);
    r = buildBroadcastGeneric(
        im.builder, im.loc, {r}, rt,
        [&](OpBuilder &b, Location loc, ValueRange args) {
          Type et = args[0].getType();
          Value c =
              countV
                  ? arith::SIToFPOp::create(
                        b, loc, et,
                        arith::IndexCastOp::create(b, loc, b.getI64Type(),
                                                   countV))
                        .getResult()
                  : arith::ConstantOp::create(
                        b, loc,
                        b.getFloatAttr(et,
                                       (double)cast<AffineConstantExpr>(count)
                                           .getValue()))
                        .getResult();
          return arith::DivFOp::create(b, loc, args[0], c).getResult();
        },
        im.dynamicSizes(rDims));
  }
  if (keepDims) {
    r = buildReshapeDims(im, r, rDims, keptDims);
    rDims = keptDims;
  }
  im.setOutput(0, r, rDims);
  return success();
}

} // namespace

FailureOr<Value> mlir::masformer::buildNormalization(
    ONNXImporterImpl &im, Value x, ArrayRef<AffineExpr> dims, int64_t axis,
    double eps, bool rms, int scaleInput, int biasInput) {
  auto t = cast<RankedTensorType>(x.getType());
  Type et = t.getElementType();
  if (!isa<FloatType>(et))
    return im.error() << "expects a float tensor, got " << t, failure();
  int64_t rank = t.getRank(), count = 1;
  SmallVector<bool> reduced(rank, false);
  for (int64_t d = axis; d < rank; ++d) {
    reduced[d] = true;
    if (t.isDynamicDim(d))
      return im.error() << "normalizing over dynamic dimension " << d
                        << " is not supported",
             failure();
    count *= t.getDimSize(d);
  }
  for (int i : {scaleInput, biasInput}) {
    if (i < 0)
      continue;
    FailureOr<SmallVector<AffineExpr>> bc =
        im.broadcastDims(dims, im.inputDims(i));
    if (failed(bc) || *bc != SmallVector<AffineExpr>(dims))
      return im.error() << "input " << i << " " << im.inputType(i)
                        << " does not broadcast to " << t,
             failure();
    if (im.inputType(i).getElementType() != et)
      return im.error() << "input " << i << " " << im.inputType(i)
                        << " has another element type than " << t,
             failure();
  }
  OpBuilder &b = im.builder;
  Location loc = im.loc;
  SmallVector<AffineExpr> keptDims, rDims;
  for (int64_t d = 0; d < rank; ++d) {
    keptDims.push_back(reduced[d] ? im.cst(1) : dims[d]);
    if (!reduced[d])
      rDims.push_back(dims[d]);
  }
  SmallVector<Value> rSizes = im.dynamicSizes(rDims);
  SmallVector<Value> sizes = im.dynamicSizes(dims);
  auto scaleBy = [&](Value v, double c) {
    auto vt = cast<RankedTensorType>(v.getType());
    return buildBroadcastGeneric(
        b, loc, {v}, vt,
        [&](OpBuilder &nb, Location nloc, ValueRange args) {
          Value cst = arith::ConstantOp::create(nb, nloc,
                                                nb.getFloatAttr(et, c));
          return arith::MulFOp::create(nb, nloc, args[0], cst).getResult();
        },
        rSizes);
  };
  auto meanOf = [&](Value v) {
    return buildReshapeDims(
        im,
        scaleBy(reduceDims(im, v, dims, reduced, ReduceKind::Sum), 1.0 / count),
        rDims, keptDims);
  };
  // LayerNormalization centres the rows; RMSNorm (SimplifiedLayerNormalization)
  // divides them by their root mean square.
  Value centered = x;
  if (!rms)
    centered = buildBroadcastGeneric(
        b, loc, {x, meanOf(x)}, t,
        [](OpBuilder &nb, Location nloc, ValueRange args) {
          return arith::SubFOp::create(nb, nloc, args[0], args[1]).getResult();
        },
        sizes);
  Value sq = buildBroadcastGeneric(
      b, loc, {centered}, t,
      [](OpBuilder &nb, Location nloc, ValueRange args) {
        return arith::MulFOp::create(nb, nloc, args[0], args[0]).getResult();
      },
      sizes);
  SmallVector<Value> ins = {centered, meanOf(sq)};
  if (scaleInput >= 0)
    ins.push_back(im.input(scaleInput));
  if (biasInput >= 0)
    ins.push_back(im.input(biasInput));
  return buildBroadcastGeneric(
      b, loc, ins, t,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        Value e = arith::ConstantOp::create(nb, nloc, nb.getFloatAttr(et, eps));
        Value d = math::SqrtOp::create(
            nb, nloc, arith::AddFOp::create(nb, nloc, args[1], e));
        Value y = arith::DivFOp::create(nb, nloc, args[0], d);
        unsigned next = 2;
        if (scaleInput >= 0)
          y = arith::MulFOp::create(nb, nloc, y, args[next++]);
        if (biasInput >= 0)
          y = arith::AddFOp::create(nb, nloc, y, args[next]);
        return y;
      },
      sizes);
}

namespace {

LogicalResult importLayerNorm(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({"axis", "epsilon", "stash_type"})))
    return failure();
  if (im.hasOutput(1) || im.hasOutput(2))
    return im.error() << "only output Y is supported (Mean and InvStdDev are "
                         "requested)";
  RankedTensorType t = im.inputType(0);
  FailureOr<int64_t> axis =
      im.normalizeAxis(im.attrInt("axis", -1), t.getRank());
  if (failed(axis))
    return failure();
  FailureOr<Value> y = buildNormalization(
      im, im.input(0), im.inputDims(0), *axis, im.attrFloat("epsilon", 1e-5f),
      /*rms=*/false, 1, im.hasInput(2) ? 2 : -1);
  if (failed(y))
    return failure();
  im.setOutput(0, *y, im.inputDims(0));
  return success();
}

} // namespace

Value mlir::masformer::splitHeads(ONNXImporterImpl &im, Value x,
                                  ArrayRef<AffineExpr> dims, int64_t heads) {
  auto t = cast<RankedTensorType>(x.getType());
  AffineExpr d = dims[2].floorDiv(heads), h = im.cst(heads);
  Value r = buildReshapeDims(im, x, dims, {dims[0], dims[1], h, d});
  Value init = im.emptyTensor({dims[0], h, dims[1], d}, t.getElementType());
  return linalg::TransposeOp::create(im.builder, im.loc, r, init,
                                     ArrayRef<int64_t>{0, 2, 1, 3})
      .getResult()[0];
}

Value mlir::masformer::mergeHeads(ONNXImporterImpl &im, Value y,
                                  ArrayRef<AffineExpr> qDims) {
  auto t = cast<RankedTensorType>(y.getType());
  int64_t h = t.getDimSize(1), dv = t.getDimSize(3);
  SmallVector<AffineExpr> bshd = {qDims[0], qDims[1], im.cst(h), im.cst(dv)};
  Value init = im.emptyTensor(bshd, t.getElementType());
  y = linalg::TransposeOp::create(im.builder, im.loc, y, init,
                                  ArrayRef<int64_t>{0, 2, 1, 3})
          .getResult()[0];
  return buildReshapeDims(im, y, bshd, {qDims[0], qDims[1], im.cst(h * dv)});
}

FailureOr<Value> mlir::masformer::createAttention(
    ONNXImporterImpl &im, Value q, Value k, Value v, Value mask, bool causal,
    std::optional<float> scale, SpanAttr span, std::optional<float> softcap,
    Value rowOffset) {
  OpBuilder &b = im.builder;
  if (!span)
    span = SpanAttr::get(im.getContext(), SpanKind::Full);
  auto op = AttentionOp::create(
      b, im.loc, q.getType(), q, k, v, mask, rowOffset, span,
      b.getBoolAttr(causal), scale ? b.getF32FloatAttr(*scale) : FloatAttr(),
      IntegerAttr(), ArrayAttr(),
      softcap ? b.getF32FloatAttr(*softcap) : FloatAttr());
  // The op's verifier checks how Q, K, V and the mask agree (batch, heads,
  // sizes); its message is re-emitted under the node's name.
  std::string problem;
  LogicalResult verified = success();
  {
    ScopedDiagnosticHandler capture(im.getContext(), [&](Diagnostic &d) {
      if (problem.empty())
        problem = d.str();
      return success();
    });
    verified = mlir::verify(op);
  }
  if (failed(verified)) {
    op->erase();
    return im.error() << "Q, K, V and the mask do not form an attention: "
                      << problem,
           failure();
  }
  return op.getResult();
}

namespace {

LogicalResult importAttention(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({"is_causal", "kv_num_heads", "q_num_heads",
                                 "qk_matmul_output_mode", "scale", "softcap",
                                 "softmax_precision"})))
    return failure();
  if (im.hasInput(4) || im.hasInput(5))
    return im.error() << "past_key/past_value inputs are not supported";
  if (im.numInputs() > 6)
    return im.error() << "nonpad_kv_seqlen is not supported";
  for (unsigned o = 1; o < 4; ++o)
    if (im.hasOutput(o))
      return im.error() << "only output Y is supported";
  if (im.attrFloat("softcap", 0.0f) != 0.0f)
    return im.error()
           << "softcap is not supported: Attention-23 caps the scores after "
              "adding the mask (a masked score becomes -softcap, not -inf), "
              "while masformer.attention caps them before the mask, as "
              "Gemma 2 and FlashAttention do";
  RankedTensorType qt = im.inputType(0), kt = im.inputType(1);
  if (qt.getRank() != 3 && qt.getRank() != 4)
    return im.error() << "Q must have rank 3 or 4, got " << qt;
  // Shapes are read by position below: every operand first gets its rank.
  for (unsigned i = 1; i < 3; ++i)
    if (im.inputType(i).getRank() != qt.getRank())
      return im.error() << (i == 1 ? "K" : "V") << " must have the rank of Q ("
                        << qt.getRank() << "), got " << im.inputType(i);
  OpBuilder &b = im.builder;
  Location loc = im.loc;
  Value q = im.input(0), k = im.input(1), v = im.input(2);
  bool threeD = qt.getRank() == 3;
  if (threeD) {
    std::optional<int64_t> qh = im.attrInt("q_num_heads"),
                           kh = im.attrInt("kv_num_heads");
    RankedTensorType vt = im.inputType(2);
    if (!qh || !kh)
      return im.error() << "3-D inputs need the q_num_heads and "
                           "kv_num_heads attributes";
    if (*qh <= 0 || *kh <= 0 || qt.isDynamicDim(2) || kt.isDynamicDim(2) ||
        vt.isDynamicDim(2) || qt.getDimSize(2) % *qh ||
        kt.getDimSize(2) % *kh || vt.getDimSize(2) % *kh)
      return im.error() << "q_num_heads (" << *qh << ") and kv_num_heads ("
                        << *kh
                        << ") must be positive and divide the static "
                           "hidden sizes of Q, K and V (the last dimension: "
                        << qt << ", " << kt << ", " << vt << ")";
    q = splitHeads(im, q, im.inputDims(0), *qh);
    k = splitHeads(im, k, im.inputDims(1), *kh);
    v = splitHeads(im, v, im.inputDims(2), *kh);
  } else if (qt.getRank() != 4) {
    return im.error() << "Q must have rank 3 or 4, got " << qt;
  }
  bool causal = im.attrInt("is_causal", 0);
  // ONNX aligns the causal triangle to the top-left, masformer (like
  // FlashAttention) to the bottom-right: they agree only for square scores.
  AffineExpr qSeq = im.inputDims(0)[threeD ? 1 : 2],
             kvSeq = im.inputDims(1)[threeD ? 1 : 2];
  if (causal && qSeq != kvSeq)
    return im.error() << "is_causal with q_seq (" << im.dimString(qSeq)
                      << ") != kv_seq (" << im.dimString(kvSeq)
                      << ") is not supported";
  Value mask;
  if (im.hasInput(3)) {
    mask = im.input(3);
    auto mt = cast<RankedTensorType>(mask.getType());
    if (mt.getElementType().isInteger(1)) {
      auto ft = RankedTensorType::get(mt.getShape(), b.getF32Type());
      mask = buildBroadcastGeneric(
          b, loc, {mask}, ft,
          [](OpBuilder &nb, Location nloc, ValueRange a) {
            Value zero = arith::ConstantOp::create(nb, nloc,
                                                   nb.getF32FloatAttr(0.0f));
            Value ninf = arith::ConstantOp::create(
                nb, nloc,
                nb.getF32FloatAttr(-std::numeric_limits<float>::infinity()));
            return arith::SelectOp::create(nb, nloc, a[0], zero, ninf)
                .getResult();
          },
          im.dynamicSizes(im.inputDims(3)));
    }
  }
  FailureOr<Value> y = createAttention(
      im, q, k, v, mask, causal,
      im.attrFloat("scale") ? std::optional<float>(*im.attrFloat("scale"))
                            : std::nullopt);
  if (failed(y))
    return failure();
  SmallVector<AffineExpr> dims = im.inputDims(0);
  if (!threeD) {
    im.setOutput(0, *y, dims);
    return success();
  }
  Value merged = mergeHeads(im, *y, dims);
  dims[2] = im.cst(cast<RankedTensorType>(merged.getType()).getDimSize(2));
  im.setOutput(0, merged, dims);
  return success();
}

} // namespace

void mlir::masformer::registerContractionHandlers(
    llvm::StringMap<NodeHandler> &handlers) {
  handlers["MatMul"] = importMatMul;
  handlers["Gemm"] = importGemm;
  handlers["Einsum"] = importEinsum;
  handlers["Softmax"] = importSoftmax;
  handlers["ReduceMean"] = importReduce;
  handlers["CumSum"] = importCumSum;
  handlers["Conv"] = importConv;
  handlers["ReduceSum"] = importReduce;
  handlers["ReduceMax"] = importReduce;
  for (StringRef op : {"ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                       "ReduceSumSquare", "ReduceLogSumExp"})
    handlers[op] = importReduce;
  handlers["LayerNormalization"] = importLayerNorm;
  handlers["Attention"] = importAttention;
}
