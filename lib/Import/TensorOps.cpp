//===- TensorOps.cpp - ONNX data-movement and shape ops ----------*- C++ -*-===//
//
// Shape, Constant, ConstantOfShape, Range, Identity, Reshape, Squeeze,
// Unsqueeze, Flatten, Transpose, Slice, Split, Concat, Gather, Expand and
// Trilu. All of them are evaluated on the host when their inputs are known
// there, which is how shape subgraphs fold away.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mlir::masformer;

namespace {

/// A host tensor of `shape` whose element n is element srcIndex(n) of `src`.
HostTensor gatherHost(const HostTensor &src, ArrayRef<int64_t> shape,
                      llvm::function_ref<int64_t(ArrayRef<int64_t>)> srcIndex) {
  HostTensor out;
  out.shape.assign(shape.begin(), shape.end());
  out.elemType = src.elemType;
  int64_t n = out.numElements();
  out.resize(n);
  SmallVector<int64_t> idx(shape.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t s = srcIndex(idx);
    if (out.isFloat())
      out.floats[i] = src.floats[s];
    else
      out.ints[i] = src.ints[s];
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      if (++idx[d] < shape[d])
        break;
      idx[d] = 0;
    }
  }
  return out;
}

int64_t linearIndex(ArrayRef<int64_t> idx, ArrayRef<int64_t> shape) {
  int64_t l = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    l = l * shape[d] + idx[d];
  return l;
}

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

/// One axis of a slice: start, size and positive step.
struct SliceDim {
  int64_t start = 0, size = 0, step = 1;
};

LogicalResult importSlice(ONNXImporterImpl &im) {
  RankedTensorType t = im.inputType(0);
  int64_t rank = t.getRank();
  FailureOr<const HostTensor *> starts = im.requireHostInput(1, "starts");
  if (failed(starts))
    return failure();
  FailureOr<const HostTensor *> ends = im.requireHostInput(2, "ends");
  if (failed(ends))
    return failure();
  SmallVector<int64_t> axes, steps;
  if (im.hasInput(3)) {
    FailureOr<const HostTensor *> a = im.requireHostInput(3, "axes");
    if (failed(a))
      return failure();
    axes.assign((*a)->ints.begin(), (*a)->ints.end());
  } else {
    for (int64_t i = 0; i < (*starts)->numElements(); ++i)
      axes.push_back(i);
  }
  if (im.hasInput(4)) {
    FailureOr<const HostTensor *> s = im.requireHostInput(4, "steps");
    if (failed(s))
      return failure();
    steps.assign((*s)->ints.begin(), (*s)->ints.end());
  } else {
    steps.assign(axes.size(), 1);
  }
  if ((int64_t)axes.size() != (*starts)->numElements() ||
      (int64_t)axes.size() != (*ends)->numElements() ||
      axes.size() != steps.size())
    return im.error() << "starts, ends, axes and steps differ in length";
  SmallVector<SliceDim> dims(rank);
  for (int64_t d = 0; d < rank; ++d)
    dims[d].size = t.getDimSize(d);
  for (size_t k = 0; k < axes.size(); ++k) {
    FailureOr<int64_t> ax = im.normalizeAxis(axes[k], rank);
    if (failed(ax))
      return failure();
    int64_t n = t.getDimSize(*ax), step = steps[k];
    if (step <= 0)
      return im.error() << "only positive steps are supported, got " << step;
    int64_t s = (*starts)->ints[k], e = (*ends)->ints[k];
    if (s < 0)
      s += n;
    if (e < 0)
      e += n;
    s = std::clamp<int64_t>(s, 0, n);
    e = std::clamp<int64_t>(e, 0, n);
    dims[*ax] = {s, e > s ? (e - s + step - 1) / step : 0, step};
  }
  SmallVector<int64_t> shape, offsets, sizes, strides;
  for (const SliceDim &d : dims) {
    shape.push_back(d.size);
    offsets.push_back(d.start);
    sizes.push_back(d.size);
    strides.push_back(d.step);
  }
  if (const HostTensor *h = im.hostInput(0)) {
    im.setHostOutput(0, gatherHost(*h, shape, [&](ArrayRef<int64_t> idx) {
                       SmallVector<int64_t> src(rank);
                       for (int64_t d = 0; d < rank; ++d)
                         src[d] = offsets[d] + idx[d] * strides[d];
                       return linearIndex(src, h->shape);
                     }));
    return success();
  }
  auto outType = RankedTensorType::get(shape, t.getElementType());
  im.setOutput(0, tensor::ExtractSliceOp::create(
                      im.builder, im.loc, outType, im.input(0), ValueRange{},
                      ValueRange{}, ValueRange{}, offsets, sizes, strides));
  return success();
}

LogicalResult importSplit(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({"axis", "split", "num_outputs"})))
    return failure();
  RankedTensorType t = im.inputType(0);
  FailureOr<int64_t> axis = im.normalizeAxis(im.attrInt("axis", 0), t.getRank());
  if (failed(axis))
    return failure();
  int64_t n = t.getDimSize(*axis), outs = im.numOutputs();
  SmallVector<int64_t> split;
  if (im.hasInput(1)) {
    FailureOr<const HostTensor *> s = im.requireHostInput(1, "split");
    if (failed(s))
      return failure();
    split.assign((*s)->ints.begin(), (*s)->ints.end());
  } else if (auto s = im.attrInts("split")) {
    split = *s;
  } else {
    int64_t chunk = (n + outs - 1) / outs;
    for (int64_t i = 0; i < outs; ++i)
      split.push_back(std::min(chunk, n - i * chunk));
  }
  int64_t total = 0;
  for (int64_t s : split)
    total += s;
  if ((int64_t)split.size() != outs || total != n)
    return im.error() << "split sizes do not add up to dimension " << *axis
                      << " (" << n << ")";
  int64_t offset = 0;
  for (int64_t o = 0; o < outs; ++o) {
    SmallVector<int64_t> offsets(t.getRank(), 0), sizes(t.getShape()),
        strides(t.getRank(), 1);
    offsets[*axis] = offset;
    sizes[*axis] = split[o];
    if (const HostTensor *h = im.hostInput(0)) {
      im.setHostOutput(o, gatherHost(*h, sizes, [&](ArrayRef<int64_t> idx) {
                         SmallVector<int64_t> src(idx);
                         src[*axis] += offsets[*axis];
                         return linearIndex(src, h->shape);
                       }));
    } else {
      auto outType = RankedTensorType::get(sizes, t.getElementType());
      im.setOutput(o, tensor::ExtractSliceOp::create(
                          im.builder, im.loc, outType, im.input(0),
                          ValueRange{}, ValueRange{}, ValueRange{}, offsets,
                          sizes, strides));
    }
    offset += split[o];
  }
  return success();
}

LogicalResult importConcat(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({"axis"})))
    return failure();
  std::optional<int64_t> axisAttr = im.attrInt("axis");
  if (!axisAttr)
    return im.error() << "missing attribute 'axis'";
  RankedTensorType t0 = im.inputType(0);
  FailureOr<int64_t> axis = im.normalizeAxis(*axisAttr, t0.getRank());
  if (failed(axis))
    return failure();
  SmallVector<int64_t> shape(t0.getShape());
  shape[*axis] = 0;
  SmallVector<unsigned> present;
  for (unsigned i = 0; i < im.numInputs(); ++i) {
    RankedTensorType ti = im.inputType(i);
    if (ti.getRank() != t0.getRank() ||
        ti.getElementType() != t0.getElementType())
      return im.error() << "input " << i << " (" << ti
                        << ") does not match input 0 (" << t0 << ")";
    for (int64_t d = 0; d < t0.getRank(); ++d)
      if (d != *axis && ti.getDimSize(d) != t0.getDimSize(d))
        return im.error() << "input " << i << " (" << ti
                          << ") does not match input 0 (" << t0 << ")";
    shape[*axis] += ti.getDimSize(*axis);
    // Empty inputs (a common artifact of shape arithmetic) contribute nothing.
    if (ti.getNumElements() > 0)
      present.push_back(i);
  }
  if (im.allInputsOnHost()) {
    HostTensor out;
    out.shape = shape;
    out.elemType = t0.getElementType();
    SmallVector<int64_t> starts;
    int64_t acc = 0;
    for (unsigned i = 0; i < im.numInputs(); ++i) {
      starts.push_back(acc);
      acc += im.inputType(i).getDimSize(*axis);
    }
    out.resize(out.numElements());
    SmallVector<int64_t> idx(shape.size(), 0);
    for (int64_t n = 0, e = out.numElements(); n < e; ++n) {
      unsigned k = 0;
      while (k + 1 < starts.size() && idx[*axis] >= starts[k + 1])
        ++k;
      const HostTensor &src = *im.hostInput(k);
      SmallVector<int64_t> s(idx);
      s[*axis] -= starts[k];
      int64_t l = linearIndex(s, src.shape);
      if (out.isFloat())
        out.floats[n] = src.floats[l];
      else
        out.ints[n] = src.ints[l];
      for (int64_t d = (int64_t)shape.size() - 1; d >= 0; --d) {
        if (++idx[d] < shape[d])
          break;
        idx[d] = 0;
      }
    }
    im.setHostOutput(0, std::move(out));
    return success();
  }
  SmallVector<Value> inputs;
  for (unsigned i : present)
    inputs.push_back(im.input(i));
  if (isBadShape(shape))
    return im.error() << "result has too many elements";
  auto outType = RankedTensorType::get(shape, t0.getElementType());
  im.setOutput(0, inputs.size() == 1
                      ? inputs[0]
                      : tensor::ConcatOp::create(im.builder, im.loc, outType,
                                                 *axis, inputs)
                            .getResult());
  return success();
}

LogicalResult importGather(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({"axis"})))
    return failure();
  RankedTensorType dt = im.inputType(0), it = im.inputType(1);
  FailureOr<int64_t> axis = im.normalizeAxis(im.attrInt("axis", 0), dt.getRank());
  if (failed(axis))
    return failure();
  if (!it.getElementType().isInteger(64) && !it.getElementType().isInteger(32))
    return im.error() << "indices must be int32 or int64, got " << it;
  int64_t n = dt.getDimSize(*axis);
  SmallVector<int64_t> shape(dt.getShape().take_front(*axis));
  llvm::append_range(shape, it.getShape());
  llvm::append_range(shape, dt.getShape().drop_front(*axis + 1));
  if (isBadShape(shape))
    return im.error() << "result has too many elements";
  int64_t ir = it.getRank();
  if (im.allInputsOnHost()) {
    const HostTensor &data = *im.hostInput(0), &ind = *im.hostInput(1);
    for (int64_t v : ind.ints)
      if (v < -n || v >= n)
        return im.error() << "index " << v << " is out of range for "
                          << "dimension " << *axis << " of size " << n;
    im.setHostOutput(0, gatherHost(data, shape, [&](ArrayRef<int64_t> idx) {
                       SmallVector<int64_t> src(idx.take_front(*axis));
                       int64_t v = ind.ints[linearIndex(
                           idx.slice(*axis, ir), ind.shape)];
                       src.push_back(v < 0 ? v + n : v);
                       llvm::append_range(src, idx.drop_front(*axis + ir));
                       return linearIndex(src, data.shape);
                     }));
    return success();
  }
  if (const HostTensor *ind = im.hostInput(1))
    for (int64_t v : ind->ints)
      if (v < -n || v >= n)
        return im.error() << "index " << v << " is out of range for "
                          << "dimension " << *axis << " of size " << n;
  // out[pre, ind..., post] = data[pre, norm(indices[ind...]), post]. Indices
  // outside [-n, n) are clamped rather than read out of bounds.
  MLIRContext *ctx = im.getContext();
  int64_t rank = shape.size();
  SmallVector<AffineExpr> indExprs;
  for (int64_t d = 0; d < ir; ++d)
    indExprs.push_back(getAffineDimExpr(*axis + d, ctx));
  AffineMap indMap = AffineMap::get(rank, 0, indExprs, ctx);
  AffineMap outMap = AffineMap::getMultiDimIdentityMap(rank, ctx);
  Value data = im.input(0);
  Value init = tensor::EmptyOp::create(im.builder, im.loc, shape,
                                       dt.getElementType());
  auto outType = RankedTensorType::get(shape, dt.getElementType());
  auto generic = linalg::GenericOp::create(
      im.builder, im.loc, outType, ValueRange{im.input(1)}, ValueRange{init},
      ArrayRef<AffineMap>{indMap, outMap},
      SmallVector<utils::IteratorType>(rank, utils::IteratorType::parallel),
      [&](OpBuilder &b, Location loc, ValueRange args) {
        Value v = arith::IndexCastOp::create(b, loc, b.getIndexType(), args[0]);
        Value size = arith::ConstantIndexOp::create(b, loc, n);
        Value zero = arith::ConstantIndexOp::create(b, loc, 0);
        Value neg = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                          v, zero);
        v = arith::SelectOp::create(
            b, loc, neg, arith::AddIOp::create(b, loc, v, size), v);
        Value maxIdx = arith::ConstantIndexOp::create(b, loc, n - 1);
        v = arith::MaxSIOp::create(b, loc, v, zero);
        v = arith::MinSIOp::create(b, loc, v, maxIdx);
        SmallVector<Value> idx;
        for (int64_t d = 0; d < *axis; ++d)
          idx.push_back(linalg::IndexOp::create(b, loc, d));
        idx.push_back(v);
        for (int64_t d = *axis + ir; d < rank; ++d)
          idx.push_back(linalg::IndexOp::create(b, loc, d));
        Value x = tensor::ExtractOp::create(b, loc, data, idx);
        linalg::YieldOp::create(b, loc, x);
      });
  im.setOutput(0, generic.getResult(0));
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

/// ScatterND with reduction "none". Exporters use it to write a whole box
/// (indices built from Ranges), which becomes a tensor.insert_slice; other
/// index patterns are only supported on the host.
LogicalResult importScatterND(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({"reduction"})))
    return failure();
  if (im.attrString("reduction").value_or("none") != "none")
    return im.error() << "reduction '" << *im.attrString("reduction")
                      << "' is not supported";
  RankedTensorType dt = im.inputType(0), it = im.inputType(1),
                   ut = im.inputType(2);
  if (it.getRank() < 1)
    return im.error() << "indices must have rank >= 1";
  int64_t r = it.getDimSize(it.getRank() - 1);
  if (r > dt.getRank())
    return im.error() << "index tuples of length " << r << " for data "
                      << dt;
  SmallVector<int64_t> expectUpd(it.getShape().drop_back());
  llvm::append_range(expectUpd, dt.getShape().drop_front(r));
  if (ut.getShape() != ArrayRef<int64_t>(expectUpd) ||
      ut.getElementType() != dt.getElementType())
    return im.error() << "updates " << ut << " do not match indices " << it
                      << " and data " << dt;
  FailureOr<const HostTensor *> ind = im.requireHostInput(1, "indices");
  if (failed(ind))
    return failure();
  int64_t tuples = it.getNumElements() / std::max<int64_t>(r, 1);
  int64_t slice = 1;
  for (int64_t d = r; d < dt.getRank(); ++d)
    slice *= dt.getDimSize(d);
  auto tupleAt = [&](int64_t k, int64_t d) {
    int64_t v = (*ind)->ints[k * r + d];
    return v < 0 ? v + dt.getDimSize(d) : v;
  };
  for (int64_t k = 0; k < tuples; ++k)
    for (int64_t d = 0; d < r; ++d)
      if (tupleAt(k, d) < 0 || tupleAt(k, d) >= dt.getDimSize(d))
        return im.error() << "index out of range";
  if (im.allInputsOnHost()) {
    HostTensor out = *im.hostInput(0);
    const HostTensor &upd = *im.hostInput(2);
    SmallVector<int64_t> strides = stridesOf(dt.getShape());
    for (int64_t k = 0; k < tuples; ++k) {
      int64_t base = 0;
      for (int64_t d = 0; d < r; ++d)
        base += tupleAt(k, d) * strides[d];
      for (int64_t e = 0; e < slice; ++e) {
        if (out.isFloat())
          out.floats[base + e] = upd.floats[k * slice + e];
        else
          out.ints[base + e] = upd.ints[k * slice + e];
      }
    }
    im.setHostOutput(0, std::move(out));
    return success();
  }
  // The tuples must enumerate a box, row-major.
  SmallVector<int64_t> lo(r, INT64_MAX), hi(r, INT64_MIN);
  for (int64_t k = 0; k < tuples; ++k)
    for (int64_t d = 0; d < r; ++d) {
      lo[d] = std::min(lo[d], tupleAt(k, d));
      hi[d] = std::max(hi[d], tupleAt(k, d));
    }
  SmallVector<int64_t> box;
  int64_t boxSize = 1;
  for (int64_t d = 0; d < r; ++d) {
    box.push_back(tuples ? hi[d] - lo[d] + 1 : 0);
    boxSize *= box.back();
  }
  bool isBox = boxSize == tuples;
  SmallVector<int64_t> idx(r, 0);
  for (int64_t k = 0; isBox && k < tuples; ++k) {
    for (int64_t d = 0; d < r; ++d)
      isBox &= tupleAt(k, d) == lo[d] + idx[d];
    for (int64_t d = r - 1; d >= 0; --d) {
      if (++idx[d] < box[d])
        break;
      idx[d] = 0;
    }
  }
  if (!isBox || tuples == 0)
    return im.error() << "indices that do not enumerate a box in row-major "
                         "order need to be known with the data on the host";
  SmallVector<int64_t> sizes(box), offsets(lo);
  for (int64_t d = r; d < dt.getRank(); ++d) {
    sizes.push_back(dt.getDimSize(d));
    offsets.push_back(0);
  }
  Value upd = buildReshape(im.builder, im.loc, im.input(2),
                           RankedTensorType::get(sizes, dt.getElementType()));
  SmallVector<int64_t> strides(dt.getRank(), 1);
  im.setOutput(0, tensor::InsertSliceOp::create(
                      im.builder, im.loc, upd, im.input(0), ValueRange{},
                      ValueRange{}, ValueRange{}, offsets, sizes, strides));
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
  handlers["Slice"] = importSlice;
  handlers["Split"] = importSplit;
  handlers["Concat"] = importConcat;
  handlers["Gather"] = importGather;
  handlers["Expand"] = importExpand;
  handlers["Trilu"] = importTrilu;
  handlers["ScatterND"] = importScatterND;
}
