//===- TensorOps.cpp - ONNX data-movement and shape ops ----------*- C++ -*-===//
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

namespace {

/// Sets output 0 to `input` reshaped to `shape` (host or MLIR).
LogicalResult reshapeTo(ONNXImporterImpl &im, ArrayRef<int64_t> shape) {
  RankedTensorType t = im.inputType(0);
  auto outType = RankedTensorType::get(shape, t.getElementType());
  if (outType.getNumElements() != t.getNumElements())
    return im.error() << "cannot reshape " << t << " to " << outType;
  if (const HostTensor *h = im.hostInput(0)) {
    HostTensor out = *h;
    out.shape.assign(shape.begin(), shape.end());
    im.setHostOutput(0, std::move(out));
    return success();
  }
  im.setOutput(0, buildReshape(im.builder, im.loc, im.input(0), outType));
  return success();
}

LogicalResult importShape(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({"start", "end"})))
    return failure();
  ArrayRef<int64_t> shape = im.inputType(0).getShape();
  int64_t rank = shape.size();
  int64_t start = im.attrInt("start", 0), end = im.attrInt("end", rank);
  start = std::clamp(start < 0 ? start + rank : start, int64_t(0), rank);
  end = std::clamp(end < 0 ? end + rank : end, int64_t(0), rank);
  SmallVector<int64_t> dims(shape.begin() + start,
                            shape.begin() + std::max(start, end));
  im.setHostOutput(0, HostTensor::vectorInt(im.builder.getI64Type(), dims));
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
  FailureOr<const HostTensor *> shapeT = im.requireHostInput(0, "shape");
  if (failed(shapeT))
    return failure();
  SmallVector<int64_t> shape((*shapeT)->ints.begin(), (*shapeT)->ints.end());
  if (isBadShape(shape))
    return im.error() << "shape [" << shape
                      << "] has a negative dimension or too many elements";
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
  if (type.getNumElements() <= kMaxHostElements) {
    im.setHostOutput(0, gatherHost(value, shape, [](ArrayRef<int64_t>) {
                       return int64_t(0);
                     }));
    return success();
  }
  im.setOutput(0, buildFilled(im.builder, im.loc, type, value.getDouble(0)));
  return success();
}

LogicalResult importRange(ONNXImporterImpl &im) {
  for (unsigned i = 0; i < 3; ++i)
    if (failed(im.requireHostInput(i, i == 0   ? "start"
                                      : i == 1 ? "limit"
                                               : "delta")))
      return failure();
  const HostTensor &start = *im.hostInput(0), &limit = *im.hostInput(1),
                   &delta = *im.hostInput(2);
  HostTensor out;
  out.elemType = start.elemType;
  double s = start.getDouble(0), l = limit.getDouble(0),
         d = delta.getDouble(0);
  if (d == 0)
    return im.error() << "delta is zero";
  double count = std::ceil((l - s) / d);
  if (!(count < static_cast<double>(kMaxHostElements)))
    return im.error() << "Range of " << count
                      << " elements is too large (or not finite)";
  int64_t n = std::max<int64_t>(0, static_cast<int64_t>(count));
  out.shape = {n};
  out.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    if (out.isFloat())
      out.set(i, s + i * d);
    else
      out.setInt(i, start.getInt(0) + i * delta.getInt(0));
  }
  im.setHostOutput(0, std::move(out));
  return success();
}

LogicalResult importIdentity(ONNXImporterImpl &im) {
  if (const HostTensor *h = im.hostInput(0)) {
    im.setHostOutput(0, *h);
    return success();
  }
  im.setOutput(0, im.input(0));
  return success();
}

LogicalResult importReshape(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({"allowzero"})))
    return failure();
  FailureOr<const HostTensor *> target = im.requireHostInput(1, "shape");
  if (failed(target))
    return failure();
  ArrayRef<int64_t> in = im.inputType(0).getShape();
  bool allowZero = im.attrInt("allowzero", 0);
  SmallVector<int64_t> shape;
  int64_t inferred = -1, known = 1;
  for (auto [i, dim] : llvm::enumerate((*target)->ints)) {
    int64_t d = dim;
    if (d == 0 && !allowZero) {
      if (i >= in.size())
        return im.error() << "shape copies dimension " << i
                          << " that the input does not have";
      d = in[i];
    }
    if (d == -1) {
      if (inferred >= 0)
        return im.error() << "shape has more than one -1";
      inferred = i;
      d = 1;
    } else if (d < 0) {
      return im.error() << "invalid target dimension " << d;
    }
    if (__builtin_mul_overflow(known, d, &known) || known > kMaxTensorElements)
      return im.error() << "target shape has too many elements";
    shape.push_back(d);
  }
  int64_t total = im.inputType(0).getNumElements();
  if (isBadShape(shape))
    return im.error() << "target shape has too many elements";
  if (inferred >= 0) {
    if (known == 0 || total % known)
      return im.error() << "cannot infer -1 reshaping " << im.inputType(0);
    shape[inferred] = total / known;
  }
  return reshapeTo(im, shape);
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
  ArrayRef<int64_t> in = im.inputType(0).getShape();
  SmallVector<bool> drop(in.size(), false);
  if (axes->empty()) {
    for (size_t d = 0; d < in.size(); ++d)
      drop[d] = in[d] == 1;
  }
  for (int64_t a : *axes) {
    FailureOr<int64_t> ax = im.normalizeAxis(a, in.size());
    if (failed(ax))
      return failure();
    if (in[*ax] != 1)
      return im.error() << "cannot squeeze dimension " << *ax << " of size "
                        << in[*ax];
    drop[*ax] = true;
  }
  SmallVector<int64_t> shape;
  for (size_t d = 0; d < in.size(); ++d)
    if (!drop[d])
      shape.push_back(in[d]);
  return reshapeTo(im, shape);
}

LogicalResult importUnsqueeze(ONNXImporterImpl &im) {
  FailureOr<SmallVector<int64_t>> axes = axesOf(im);
  if (failed(axes))
    return failure();
  ArrayRef<int64_t> in = im.inputType(0).getShape();
  int64_t rank = in.size() + axes->size();
  SmallVector<bool> isNew(rank, false);
  for (int64_t a : *axes) {
    FailureOr<int64_t> ax = im.normalizeAxis(a, rank);
    if (failed(ax))
      return failure();
    isNew[*ax] = true;
  }
  SmallVector<int64_t> shape;
  size_t next = 0;
  for (int64_t d = 0; d < rank; ++d)
    shape.push_back(isNew[d] ? 1 : in[next++]);
  return reshapeTo(im, shape);
}

LogicalResult importFlatten(ONNXImporterImpl &im) {
  ArrayRef<int64_t> in = im.inputType(0).getShape();
  int64_t axis = im.attrInt("axis", 1);
  if (axis < 0)
    axis += in.size();
  if (axis < 0 || axis > (int64_t)in.size())
    return im.error() << "axis out of range";
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < (int64_t)in.size(); ++d)
    (d < axis ? outer : inner) *= in[d];
  return reshapeTo(im, {outer, inner});
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
  for (int64_t p : perm)
    shape.push_back(t.getDimSize(p));
  if (const HostTensor *h = im.hostInput(0)) {
    im.setHostOutput(0, gatherHost(*h, shape, [&](ArrayRef<int64_t> idx) {
                       SmallVector<int64_t> src(rank);
                       for (int64_t d = 0; d < rank; ++d)
                         src[perm[d]] = idx[d];
                       return linearIndex(src, h->shape);
                     }));
    return success();
  }
  Value init = tensor::EmptyOp::create(im.builder, im.loc, shape,
                                       t.getElementType());
  im.setOutput(0, linalg::TransposeOp::create(im.builder, im.loc, im.input(0),
                                              init, perm)
                      .getResult()[0]);
  return success();
}

LogicalResult importExpand(ONNXImporterImpl &im) {
  FailureOr<const HostTensor *> target = im.requireHostInput(1, "shape");
  if (failed(target))
    return failure();
  RankedTensorType t = im.inputType(0);
  SmallVector<int64_t> want((*target)->ints.begin(), (*target)->ints.end());
  FailureOr<SmallVector<int64_t>> shape = broadcastShapes(t.getShape(), want);
  if (failed(shape))
    return im.error() << t << " cannot expand to shape [" << want << "]";
  auto outType = RankedTensorType::get(*shape, t.getElementType());
  if (const HostTensor *h = im.hostInput(0);
      h && outType.getNumElements() <= kMaxHostElements) {
    HostTensor out;
    out.shape = *shape;
    out.elemType = t.getElementType();
    out.resize(outType.getNumElements());
    ArrayRef<int64_t> shapes[] = {h->shape};
    forEachBroadcast(*shape, shapes, [&](int64_t o, ArrayRef<int64_t> in) {
      if (out.isFloat())
        out.floats[o] = h->floats[in[0]];
      else
        out.ints[o] = h->ints[in[0]];
    });
    im.setHostOutput(0, std::move(out));
    return success();
  }
  im.setOutput(0, buildBroadcastGeneric(
                      im.builder, im.loc, {im.input(0)}, outType,
                      [](OpBuilder &, Location, ValueRange args) {
                        return args[0];
                      }));
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
    FailureOr<const HostTensor *> kt = im.requireHostInput(1, "k");
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
                      }));
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
