//===- TensorOps.cpp - ONNX data-movement and shape ops ---------*- C++ -*-===//
//
// Shape, Constant, ConstantOfShape, Range, Identity, Reshape, Squeeze,
// Unsqueeze, Flatten, Transpose, Expand and Trilu (slicing and gathering
// are in IndexingOps.cpp). All of them are evaluated on the host when their
// inputs are known there, which is how shape subgraphs fold away.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mlir::masformer;

/// `input` (dimensions `in`) reshaped to `out`: collapse_shape or
/// expand_shape where the dimensions group, tensor.reshape otherwise.
Value mlir::masformer::buildReshapeDims(ONNXImporterImpl &im, Value input,
                       ArrayRef<AffineExpr> in, ArrayRef<AffineExpr> out) {
  auto srcType = cast<RankedTensorType>(input.getType());
  RankedTensorType resultType = im.typeFor(out, srcType.getElementType());
  if (!im.isDynamic(in) && !im.isDynamic(out))
    return buildReshape(im.builder, im.loc, input, resultType);
  OpBuilder &b = im.builder;
  if (ArrayRef<AffineExpr>(in) == ArrayRef<AffineExpr>(out)) {
    if (srcType != resultType)
      return tensor::CastOp::create(b, im.loc, resultType, input);
    return input;
  }
  // Group the dimensions of the longer list into runs whose products are
  // the dimensions of the shorter one.
  bool collapse = in.size() > out.size();
  ArrayRef<AffineExpr> lng = collapse ? in : out, shrt = collapse ? out : in;
  SmallVector<ReassociationIndices> groups;
  size_t j = 0;
  bool ok = !shrt.empty() || llvm::all_of(lng, [](AffineExpr e) {
    return e == getAffineConstantExpr(1, e.getContext());
  });
  for (size_t i = 0; ok && i < shrt.size(); ++i) {
    ReassociationIndices group;
    SizeProduct want = SizeProduct::of(shrt[i]), have;
    while (j < lng.size() && !(have == want && !group.empty())) {
      have.multiply(lng[j]);
      group.push_back(j++);
    }
    // A group must take at least one dimension ([b, 2, 2] -> [4b, 1] has
    // nothing left for the 1).
    ok = have == want && !group.empty();
    // Trailing unit dimensions join the last group.
    if (i + 1 == shrt.size())
      while (ok && j < lng.size() &&
             lng[j] == getAffineConstantExpr(1, lng[j].getContext()))
        group.push_back(j++);
    groups.push_back(group);
  }
  ok = ok && j == lng.size() && in.size() != out.size();
  if (ok && collapse) {
    Value r = tensor::CollapseShapeOp::create(b, im.loc, input, groups);
    if (r.getType() != resultType)
      r = tensor::CastOp::create(b, im.loc, resultType, r);
    return r;
  }
  if (ok) {
    SmallVector<OpFoldResult> shape;
    for (AffineExpr e : out) {
      if (auto c = dyn_cast<AffineConstantExpr>(e))
        shape.push_back(b.getIndexAttr(c.getValue()));
      else
        shape.push_back(im.dimValue(e));
    }
    return tensor::ExpandShapeOp::create(b, im.loc, resultType, input, groups,
                                         shape);
  }
  // Otherwise through one dimension: collapse everything, expand to `out`.
  Value v = input;
  if (in.size() != 1) {
    ReassociationIndices all;
    for (size_t d = 0; d < in.size(); ++d)
      all.push_back(d);
    v = tensor::CollapseShapeOp::create(b, im.loc, input,
                                        ArrayRef<ReassociationIndices>{all});
  }
  if (out.size() == 1) {
    if (v.getType() != resultType)
      v = tensor::CastOp::create(b, im.loc, resultType, v);
    return v;
  }
  ReassociationIndices all;
  SmallVector<OpFoldResult> shape;
  for (size_t d = 0; d < out.size(); ++d) {
    all.push_back(d);
    if (auto c = dyn_cast<AffineConstantExpr>(out[d]))
      shape.push_back(b.getIndexAttr(c.getValue()));
    else
      shape.push_back(im.dimValue(out[d]));
  }
  return tensor::ExpandShapeOp::create(b, im.loc, resultType, v,
                                       ArrayRef<ReassociationIndices>{all},
                                       shape);
}


namespace {

/// Sets output 0 to input 0 reshaped to `dims` (host or MLIR).
LogicalResult reshapeTo(ONNXImporterImpl &im, ArrayRef<AffineExpr> dims) {
  RankedTensorType t = im.inputType(0);
  SmallVector<AffineExpr> in = im.inputDims(0);
  if (!(SizeProduct::of(in) == SizeProduct::of(dims)))
    return im.error() << "cannot reshape " << t << " to "
                      << im.typeFor(dims, t.getElementType());
  const HostTensor *h = im.hostInput(0);
  if (h && !im.isDynamic(dims)) {
    HostTensor out = *h;
    out.shape = ONNXImporterImpl::staticShape(dims);
    im.setHostOutput(0, std::move(out));
    return success();
  }
  im.setOutput(0, buildReshapeDims(im, im.input(0), in, dims), dims);
  return success();
}


LogicalResult importShape(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({"start", "end"})))
    return failure();
  SmallVector<AffineExpr> shape = im.inputDims(0);
  int64_t rank = shape.size();
  int64_t start = im.attrInt("start", 0), end = im.attrInt("end", rank);
  start = std::clamp(start < 0 ? start + rank : start, int64_t(0), rank);
  end = std::clamp(end < 0 ? end + rank : end, int64_t(0), rank);
  int64_t n = std::max(start, end) - start;
  HostTensor out =
      HostTensor::vectorInt(im.builder.getI64Type(), SmallVector<int64_t>(n));
  for (int64_t i = 0; i < n; ++i)
    out.setExpr(i, shape[start + i]);
  im.setHostOutput(0, std::move(out));
  return success();
}

LogicalResult importConstant(ONNXImporterImpl &im) {
  if (im.node->attribute_size() != 1)
    return im.error() << "expects exactly one value attribute";
  const onnx::AttributeProto &a = im.node->attribute(0);
  Type i64 = im.builder.getI64Type(), f32 = im.builder.getF32Type();
  if (a.name() == "value") {
    SmallVector<int64_t> dims(a.t().dims().begin(), a.t().dims().end());
    if (isBadShape(dims))
      return im.error() << "value has a negative dimension or too many "
                           "elements";
    int64_t n = 1;
    for (int64_t d : dims)
      n *= d;
    Type et = im.convertElementType(a.t().data_type());
    if (et && (et.isIntOrIndex() ? n <= kMaxHostElements : n <= 4096)) {
      FailureOr<HostTensor> h = im.readHostTensor(a.t());
      if (failed(h))
        return failure();
      im.setHostOutput(0, std::move(*h));
      return success();
    }
    return im.setTensorOutput(0, a.t());
  }
  HostTensor h;
  if (a.name() == "value_int") {
    h = HostTensor::scalarInt(i64, a.i());
  } else if (a.name() == "value_ints") {
    h = HostTensor::vectorInt(
        i64, SmallVector<int64_t>(a.ints().begin(), a.ints().end()));
  } else if (a.name() == "value_float" || a.name() == "value_floats") {
    h.elemType = f32;
    if (a.name() == "value_float") {
      h.floats = {a.f()};
    } else {
      h.shape = {a.floats_size()};
      h.floats.assign(a.floats().begin(), a.floats().end());
    }
  } else {
    return im.error() << "unsupported attribute '" << a.name() << "'";
  }
  im.setHostOutput(0, std::move(h));
  return success();
}

LogicalResult importConstantOfShape(ONNXImporterImpl &im) {
  FailureOr<const HostTensor *> shapeT =
      im.requireHostInput(0, "shape", /*allowSymbolic=*/true);
  if (failed(shapeT))
    return failure();
  SmallVector<AffineExpr> dims;
  for (int64_t i = 0, e = (*shapeT)->numElements(); i < e; ++i)
    dims.push_back((*shapeT)->getExpr(i, im.getContext()));
  SmallVector<int64_t> shape = ONNXImporterImpl::staticShape(dims);
  if (ONNXImporterImpl::isBadDims(dims))
    return im.error() << "shape " << im.dimsString(dims)
                      << " has a negative dimension or too many elements";
  HostTensor value;
  value.elemType = im.builder.getF32Type();
  value.floats = {0.0};
  if (const onnx::TensorProto *t = im.attrTensor("value")) {
    FailureOr<HostTensor> v = im.readHostTensor(*t);
    if (failed(v))
      return failure();
    value = *v;
  }
  if (value.numElements() != 1)
    return im.error() << "value must have one element";
  auto type = RankedTensorType::get(shape, value.elemType);
  if (im.isDynamic(dims)) {
    im.setOutput(0,
                 buildFilled(im.builder, im.loc, type, value.getDouble(0),
                             im.dynamicSizes(dims)),
                 dims);
    return success();
  }
  if (type.getNumElements() <= kMaxHostElements) {
    im.setHostOutput(0, gatherHost(value, shape, [](ArrayRef<int64_t>) {
                       return int64_t(0);
                     }));
    return success();
  }
  im.setOutput(0, buildFilled(im.builder, im.loc, type, value.getDouble(0)));
  return success();
}

/// A size cast to float (PhiMoE's rotary table: arange(float(last
/// position + 1))): the symbolic integer behind input `i`'s Cast, or null.
const HostTensor *sizeBehindCast(ONNXImporterImpl &im, unsigned i) {
  const onnx::NodeProto *cast = im.producerOf(im.node->input(i));
  if (!cast || cast->op_type() != "Cast" || cast->input_size() != 1)
    return nullptr;
  const HostTensor *h = im.hostValueOf(cast->input(0));
  return h && h->isSymbolic() && h->numElements() == 1 ? h : nullptr;
}

LogicalResult importRange(ONNXImporterImpl &im) {
  // Start and limit may be sizes cast to float.
  const HostTensor *viaCast[2] = {nullptr, nullptr};
  for (unsigned i = 0; i < 3; ++i) {
    if (i < 2 && !im.hostInput(i) && (viaCast[i] = sizeBehindCast(im, i)))
      continue;
    if (failed(im.requireHostScalar(i,
                                    i == 0   ? "start"
                                    : i == 1 ? "limit"
                                             : "delta",
                                    /*allowSymbolic=*/i < 2,
                                    /*integer=*/false)))
      return failure();
  }
  const HostTensor &start = viaCast[0] ? *viaCast[0] : *im.hostInput(0),
                   &limit = viaCast[1] ? *viaCast[1] : *im.hostInput(1),
                   &delta = *im.hostInput(2);
  if (start.isSymbolic() || limit.isSymbolic()) {
    // A range over a dynamic size (positions, causal masks): computed at
    // run time, start + i * delta.
    int64_t d = delta.getInt(0);
    if (d <= 0 || static_cast<double>(d) != delta.getDouble(0))
      return im.error() << "a range over dynamic sizes needs a positive "
                           "integer constant delta, got "
                        << delta.getDouble(0);
    MLIRContext *ctx = im.getContext();
    // A float start that is not a size must be a whole number.
    if (!start.isSymbolic() &&
        static_cast<double>(start.getInt(0)) != start.getDouble(0))
      return im.error() << "a range over dynamic sizes needs a whole start, "
                           "got "
                        << start.getDouble(0);
    AffineExpr s0 = start.getExpr(0, ctx), l0 = limit.getExpr(0, ctx);
    AffineExpr count = (l0 - s0).ceilDiv(d);
    // The element type is the op's (a float start makes a float range).
    Type et = im.inputType(0).getElementType();
    auto type = im.typeFor({count}, et);
    Value init = im.emptyTensor({count}, et);
    Value first = im.dimValue(s0);
    im.setOutput(
        0,
        linalg::GenericOp::create(
            im.builder, im.loc, type, ValueRange{}, ValueRange{init},
            ArrayRef<AffineMap>{AffineMap::getMultiDimIdentityMap(1, ctx)},
            ArrayRef<utils::IteratorType>{utils::IteratorType::parallel},
            [&](OpBuilder &b, Location loc, ValueRange) {
              Value i = linalg::IndexOp::create(b, loc, 0);
              Value v = arith::AddIOp::create(
                  b, loc, first,
                  arith::MulIOp::create(
                      b, loc, i, arith::ConstantIndexOp::create(b, loc, d)));
              Value x = isa<FloatType>(et)
                            ? arith::SIToFPOp::create(
                                  b, loc, et,
                                  arith::IndexCastOp::create(
                                      b, loc, b.getI64Type(), v))
                                  .getResult()
                            : arith::IndexCastOp::create(b, loc, et, v)
                                  .getResult();
              linalg::YieldOp::create(b, loc, x);
            })
            .getResult(0),
        {count});
    return success();
  }
  HostTensor out;
  out.elemType = start.elemType;
  double s = start.getDouble(0), l = limit.getDouble(0),
         d = delta.getDouble(0);
  if (d == 0)
    return im.error() << "delta is zero";
  double count = std::ceil((l - s) / d);
  if (!(count < static_cast<double>(kMaxHostElements))) {
    if (count < 9e18) // Finite and printable as an integer.
      return im.error() << "Range of " << static_cast<int64_t>(count)
                        << " elements is more than the 2^22 the importer "
                           "computes";
    return im.error() << "Range of " << count
                      << " elements is too large (or not finite)";
  }
  int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
  out.shape = {n};
  out.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    if (out.isFloat())
      out.set(i, s + i * d);
    else
      // Wrapping, as numpy's int64: the count was computed in double and
      // may pass the limit by one step.
      out.setInt(
          i, static_cast<int64_t>(static_cast<uint64_t>(start.getInt(0)) +
                                  static_cast<uint64_t>(i) *
                                      static_cast<uint64_t>(delta.getInt(0))));
  }
  im.setHostOutput(0, std::move(out));
  return success();
}

LogicalResult importIdentity(ONNXImporterImpl &im) {
  if (const HostTensor *h = im.hostInput(0)) {
    im.setHostOutput(0, *h);
    return success();
  }
  im.setOutput(0, im.input(0), im.inputDims(0));
  return success();
}

LogicalResult importReshape(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({"allowzero"})))
    return failure();
  FailureOr<const HostTensor *> target =
      im.requireHostInput(1, "shape", /*allowSymbolic=*/true);
  if (failed(target))
    return failure();
  SmallVector<AffineExpr> in = im.inputDims(0);
  bool allowZero = im.attrInt("allowzero", 0);
  MLIRContext *ctx = im.getContext();
  SmallVector<AffineExpr> dims;
  int64_t inferred = -1, known = 1;
  for (int64_t i = 0, e = (*target)->numElements(); i < e; ++i) {
    AffineExpr d = (*target)->getExpr(i, ctx);
    auto c = dyn_cast<AffineConstantExpr>(d);
    if (c && c.getValue() == 0 && !allowZero) {
      if (i >= static_cast<int64_t>(in.size()))
        return im.error() << "shape copies dimension " << i
                          << " that the input does not have";
      d = in[i];
      c = dyn_cast<AffineConstantExpr>(d);
    }
    if (c && c.getValue() == -1) {
      if (inferred >= 0)
        return im.error() << "shape has more than one -1";
      inferred = i;
      d = im.cst(1);
    } else if (c && c.getValue() < 0) {
      return im.error() << "invalid target dimension " << c.getValue();
    } else if (c && (__builtin_mul_overflow(known, c.getValue(), &known) ||
                     known > kMaxTensorElements)) {
      return im.error() << "target shape has too many elements";
    }
    dims.push_back(d);
  }
  if (inferred >= 0) {
    std::optional<AffineExpr> rest =
        SizeProduct::of(in).divide(SizeProduct::of(dims), ctx);
    if (!rest)
      return im.error() << "cannot infer -1 reshaping " << im.inputType(0)
                        << " to " << im.typeFor(dims, im.builder.getI8Type())
                        << " (with -1 as 1)";
    dims[inferred] = *rest;
  }
  return reshapeTo(im, dims);
}

/// Axes of Squeeze/Unsqueeze: input 1 from opset 13, the attribute before.
FailureOr<SmallVector<int64_t>> axesOf(ONNXImporterImpl &im) {
  if (im.hasInput(1)) {
    FailureOr<const HostTensor *> t = im.requireHostInput(1, "axes");
    if (failed(t))
      return failure();
    return SmallVector<int64_t>((*t)->ints.begin(), (*t)->ints.end());
  }
  if (auto a = im.attrInts("axes"))
    return *a;
  return SmallVector<int64_t>();
}

LogicalResult importSqueeze(ONNXImporterImpl &im) {
  FailureOr<SmallVector<int64_t>> axes = axesOf(im);
  if (failed(axes))
    return failure();
  SmallVector<AffineExpr> in = im.inputDims(0);
  AffineExpr one = im.cst(1);
  SmallVector<bool> drop(in.size(), false);
  if (axes->empty()) {
    for (size_t d = 0; d < in.size(); ++d)
      drop[d] = in[d] == one;
  }
  for (int64_t a : *axes) {
    FailureOr<int64_t> ax = im.normalizeAxis(a, in.size());
    if (failed(ax))
      return failure();
    if (in[*ax] != one)
      return im.error() << "cannot squeeze dimension " << *ax << " of size "
                        << im.dimString(in[*ax]);
    drop[*ax] = true;
  }
  SmallVector<AffineExpr> dims;
  for (size_t d = 0; d < in.size(); ++d)
    if (!drop[d])
      dims.push_back(in[d]);
  return reshapeTo(im, dims);
}

LogicalResult importUnsqueeze(ONNXImporterImpl &im) {
  FailureOr<SmallVector<int64_t>> axes = axesOf(im);
  if (failed(axes))
    return failure();
  SmallVector<AffineExpr> in = im.inputDims(0);
  int64_t rank = in.size() + axes->size();
  SmallVector<bool> isNew(rank, false);
  for (int64_t a : *axes) {
    FailureOr<int64_t> ax = im.normalizeAxis(a, rank);
    if (failed(ax))
      return failure();
    if (isNew[*ax])
      return im.error() << "axis " << a << " appears more than once";
    isNew[*ax] = true;
  }
  SmallVector<AffineExpr> dims;
  size_t next = 0;
  for (int64_t d = 0; d < rank; ++d)
    dims.push_back(isNew[d] ? im.cst(1) : in[next++]);
  return reshapeTo(im, dims);
}

LogicalResult importFlatten(ONNXImporterImpl &im) {
  SmallVector<AffineExpr> in = im.inputDims(0);
  int64_t axis = im.attrInt("axis", 1);
  if (axis < 0)
    axis += in.size();
  if (axis < 0 || axis > (int64_t)in.size())
    return im.error() << "axis out of range";
  AffineExpr outer = im.cst(1), inner = im.cst(1);
  for (int64_t d = 0; d < (int64_t)in.size(); ++d)
    (d < axis ? outer : inner) = (d < axis ? outer : inner) * in[d];
  return reshapeTo(im, ArrayRef<AffineExpr>{outer, inner});
}

LogicalResult importTranspose(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({"perm"})))
    return failure();
  RankedTensorType t = im.inputType(0);
  int64_t rank = t.getRank();
  SmallVector<int64_t> perm;
  if (auto p = im.attrInts("perm"))
    perm = *p;
  else
    for (int64_t d = rank - 1; d >= 0; --d)
      perm.push_back(d);
  SmallVector<bool> seen(rank, false);
  if ((int64_t)perm.size() != rank)
    return im.error() << "perm has " << perm.size() << " entries for rank "
                      << rank;
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[p])
      return im.error() << "perm is not a permutation";
    seen[p] = true;
  }
  SmallVector<int64_t> shape;
  SmallVector<AffineExpr> in = im.inputDims(0), dims;
  for (int64_t p : perm) {
    shape.push_back(t.getDimSize(p));
    dims.push_back(in[p]);
  }
  if (const HostTensor *h = im.hostInput(0)) {
    im.setHostOutput(0, gatherHost(*h, shape, [&](ArrayRef<int64_t> idx) {
                       SmallVector<int64_t> src(rank);
                       for (int64_t d = 0; d < rank; ++d)
                         src[perm[d]] = idx[d];
                       return linearIndex(src, h->shape);
                     }));
    return success();
  }
  Value init = im.emptyTensor(dims, t.getElementType());
  im.setOutput(0,
               linalg::TransposeOp::create(im.builder, im.loc, im.input(0),
                                           init, perm)
                   .getResult()[0],
               dims);
  return success();
}

LogicalResult importExpand(ONNXImporterImpl &im) {
  FailureOr<const HostTensor *> target =
      im.requireHostInput(1, "shape", /*allowSymbolic=*/true);
  if (failed(target))
    return failure();
  RankedTensorType t = im.inputType(0);
  SmallVector<AffineExpr> want;
  for (int64_t i = 0, e = (*target)->numElements(); i < e; ++i)
    want.push_back((*target)->getExpr(i, im.getContext()));
  FailureOr<SmallVector<AffineExpr>> dims =
      im.broadcastDims(im.inputDims(0), want);
  if (failed(dims))
    return im.error() << t << " cannot expand to shape " << im.dimsString(want)
                      << ": " << im.broadcastProblem(im.inputDims(0), want);
  auto outType = im.typeFor(*dims, t.getElementType());
  if (const HostTensor *h = im.hostInput(0);
      h && outType.hasStaticShape() &&
      outType.getNumElements() <= kMaxHostElements) {
    HostTensor out;
    out.shape.assign(outType.getShape().begin(), outType.getShape().end());
    out.elemType = t.getElementType();
    out.resize(outType.getNumElements());
    ArrayRef<int64_t> shapes[] = {h->shape};
    forEachBroadcast(out.shape, shapes, [&](int64_t o, ArrayRef<int64_t> in) {
      if (out.isFloat())
        out.floats[o] = h->floats[in[0]];
      else if (h->isSymbolic())
        out.setExpr(o, h->syms[in[0]]);
      else
        out.ints[o] = h->ints[in[0]];
    });
    im.setHostOutput(0, std::move(out));
    return success();
  }
  im.setOutput(0,
               buildBroadcastGeneric(
                   im.builder, im.loc, {im.input(0)}, outType,
                   [](OpBuilder &, Location, ValueRange args) {
                     return args[0];
                   },
                   im.dynamicSizes(*dims)),
               *dims);
  return success();
}

LogicalResult importTrilu(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({"upper"})))
    return failure();
  RankedTensorType t = im.inputType(0);
  if (t.getRank() < 2)
    return im.error() << "input must have rank >= 2, got " << t;
  bool upper = im.attrInt("upper", 1);
  int64_t k = 0;
  if (im.hasInput(1)) {
    FailureOr<const HostTensor *> kt = im.requireHostScalar(1, "k");
    if (failed(kt))
      return failure();
    k = (*kt)->getInt(0);
  }
  int64_t rank = t.getRank();
  auto keep = [&](int64_t i, int64_t j) {
    return upper ? j - i >= k : j - i <= k;
  };
  if (const HostTensor *h = im.hostInput(0)) {
    HostTensor out = *h;
    SmallVector<int64_t> idx(rank, 0);
    for (int64_t n = 0, e = out.numElements(); n < e; ++n) {
      if (!keep(idx[rank - 2], idx[rank - 1]))
        out.setInt(n, 0);
      for (int64_t d = rank - 1; d >= 0; --d) {
        if (++idx[d] < t.getDimSize(d))
          break;
        idx[d] = 0;
      }
    }
    im.setHostOutput(0, std::move(out));
    return success();
  }
  Type et = t.getElementType();
  SmallVector<AffineExpr> dims = im.inputDims(0);
  im.setOutput(0, buildBroadcastGeneric(
                      im.builder, im.loc, {im.input(0)}, t,
                      [&](OpBuilder &b, Location loc, ValueRange args) {
                        Value i = linalg::IndexOp::create(b, loc, rank - 2);
                        Value j = linalg::IndexOp::create(b, loc, rank - 1);
                        Value diff = arith::SubIOp::create(b, loc, j, i);
                        Value kc = arith::ConstantIndexOp::create(b, loc, k);
                        Value cond = arith::CmpIOp::create(
                            b, loc,
                            upper ? arith::CmpIPredicate::sge
                                  : arith::CmpIPredicate::sle,
                            diff, kc);
                        TypedAttr zeroAttr =
                            isa<FloatType>(et)
                                ? TypedAttr(b.getFloatAttr(et, 0.0))
                                : TypedAttr(b.getIntegerAttr(et, 0));
                        Value zero = arith::ConstantOp::create(b, loc, zeroAttr);
                        return arith::SelectOp::create(b, loc, cond, args[0],
                                                       zero)
                            .getResult();
                      },
                      im.dynamicSizes(dims)),
               dims);
  return success();
}

} // namespace

void mlir::masformer::registerTensorHandlers(
    llvm::StringMap<NodeHandler> &handlers) {
  handlers["Shape"] = importShape;
  handlers["Constant"] = importConstant;
  handlers["ConstantOfShape"] = importConstantOfShape;
  handlers["Range"] = importRange;
  handlers["Identity"] = importIdentity;
  handlers["Reshape"] = importReshape;
  handlers["Squeeze"] = importSqueeze;
  handlers["Unsqueeze"] = importUnsqueeze;
  handlers["Flatten"] = importFlatten;
  handlers["Transpose"] = importTranspose;
  handlers["Expand"] = importExpand;
  handlers["Trilu"] = importTrilu;
}
