//===- IndexingOps.cpp - ONNX slicing, gathering and scattering -*- C++ -*-===//
//
// Slice, Split, Concat, Gather and ScatterND: host evaluation when the
// inputs are known at import time, tensor.extract_slice / concat /
// insert_slice and a bounds-clamped gather generic otherwise.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <cmath>

using namespace mlir;
using namespace mlir::masformer;

namespace {

/// One axis of a slice: start, size and positive step.
struct SliceDim {
  AffineExpr start, size;
  int64_t step = 1;
};

/// `v` as an index OpFoldResult: an attribute when constant.
OpFoldResult foldResult(ONNXImporterImpl &im, AffineExpr e) {
  if (auto c = dyn_cast<AffineConstantExpr>(e))
    return im.builder.getIndexAttr(c.getValue());
  return im.dimValue(e);
}

/// The sign of `e`, an expression over sizes (each at least 1): -1 or +1
/// when every term has that sign (a constant, or a size times a constant),
/// 0 when it is zero or not known.
int signOfSizes(AffineExpr e) {
  if (auto c = dyn_cast<AffineConstantExpr>(e))
    return c.getValue() < 0 ? -1 : (c.getValue() > 0 ? 1 : 0);
  if (isa<AffineDimExpr, AffineSymbolExpr>(e))
    return 1;
  auto bin = dyn_cast<AffineBinaryOpExpr>(e);
  if (!bin)
    return 0;
  int l = signOfSizes(bin.getLHS()), r = signOfSizes(bin.getRHS());
  switch (bin.getKind()) {
  case AffineExprKind::Add:
    if (l == 0)
      return isa<AffineConstantExpr>(bin.getLHS()) ? r : 0;
    if (r == 0)
      return isa<AffineConstantExpr>(bin.getRHS()) ? l : 0;
    return l == r ? l : 0;
  case AffineExprKind::Mul:
    return l * r;
  default:
    return 0;
  }
}

/// ONNX's clamping of a slice bound `v` to [0, n]. Where v or n is a dynamic
/// size, the bound is taken as given (a dynamic start or end must lie
/// within its dimension, as an exporter's shape arithmetic makes them);
/// a dynamic bound that is negative for every size counts from the end
/// (T5's `bias[:, :, -seq:, :]`).
AffineExpr clampBound(ONNXImporterImpl &im, AffineExpr v, AffineExpr n) {
  auto cv = dyn_cast<AffineConstantExpr>(v);
  auto cn = dyn_cast<AffineConstantExpr>(n);
  if (cv && cn) {
    int64_t x = cv.getValue(), size = cn.getValue();
    if (x < 0)
      x += size;
    return im.cst(std::clamp<int64_t>(x, 0, size));
  }
  if (cv) {
    int64_t x = cv.getValue();
    // "To the end" (INT_MAX and friends) and negative offsets from the end.
    if (x >= (int64_t(1) << 31) - 1)
      return n;
    if (x < 0)
      return n + x;
    return v;
  }
  if (signOfSizes(v) < 0)
    return n + v;
  return v;
}

LogicalResult importSlice(ONNXImporterImpl &im) {
  RankedTensorType t = im.inputType(0);
  int64_t rank = t.getRank();
  FailureOr<const HostTensor *> starts =
      im.requireHostInput(1, "starts", /*allowSymbolic=*/true);
  if (failed(starts))
    return failure();
  FailureOr<const HostTensor *> ends =
      im.requireHostInput(2, "ends", /*allowSymbolic=*/true);
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
  MLIRContext *ctx = im.getContext();
  SmallVector<AffineExpr> in = im.inputDims(0);
  SmallVector<SliceDim> dims(rank);
  for (int64_t d = 0; d < rank; ++d)
    dims[d] = {im.cst(0), in[d], 1};
  SmallVector<bool> sliced(rank, false);
  for (size_t k = 0; k < axes.size(); ++k) {
    FailureOr<int64_t> ax = im.normalizeAxis(axes[k], rank);
    if (failed(ax))
      return failure();
    // ONNX requires distinct axes (onnxruntime refuses repeats).
    if (sliced[*ax])
      return im.error() << "axis " << axes[k] << " appears more than once";
    sliced[*ax] = true;
    AffineExpr n = in[*ax];
    int64_t step = steps[k];
    if (step <= 0)
      return im.error() << "only positive steps are supported, got " << step;
    AffineExpr s = clampBound(im, (*starts)->getExpr(k, ctx), n);
    AffineExpr e = clampBound(im, (*ends)->getExpr(k, ctx), n);
    AffineExpr size = (e - s).ceilDiv(step);
    if (auto c = dyn_cast<AffineConstantExpr>(size); c && c.getValue() < 0)
      size = im.cst(0);
    dims[*ax] = {s, size, step};
  }
  SmallVector<AffineExpr> outDims;
  SmallVector<OpFoldResult> offsets, sizes, strides;
  bool staticOffsets = true;
  for (const SliceDim &d : dims) {
    outDims.push_back(d.size);
    offsets.push_back(foldResult(im, d.start));
    sizes.push_back(foldResult(im, d.size));
    strides.push_back(im.builder.getIndexAttr(d.step));
    staticOffsets &= isa<AffineConstantExpr>(d.start);
  }
  const HostTensor *h = im.hostInput(0);
  if (h && staticOffsets && !im.isDynamic(outDims)) {
    SmallVector<int64_t> shape = ONNXImporterImpl::staticShape(outDims);
    SmallVector<int64_t> off, str;
    for (const SliceDim &d : dims) {
      off.push_back(cast<AffineConstantExpr>(d.start).getValue());
      str.push_back(d.step);
    }
    im.setHostOutput(0, gatherHost(*h, shape, [&](ArrayRef<int64_t> idx) {
                       SmallVector<int64_t> src(rank);
                       for (int64_t d = 0; d < rank; ++d)
                         src[d] = off[d] + idx[d] * str[d];
                       return linearIndex(src, h->shape);
                     }));
    return success();
  }
  auto outType = im.typeFor(outDims, t.getElementType());
  // Nothing to read (Phi-3's q[..., rotary_dim:] with a rotary dimension
  // as large as the head): an empty tensor, whose start may be the
  // dimension's end, where an extract_slice may not begin.
  if (llvm::any_of(outType.getShape(), [](int64_t d) { return d == 0; })) {
    im.setOutput(0,
                 tensor::EmptyOp::create(im.builder, im.loc, outType.getShape(),
                                         t.getElementType(),
                                         im.dynamicSizes(outDims)),
                 outDims);
    return success();
  }
  im.setOutput(0,
               tensor::ExtractSliceOp::create(im.builder, im.loc, outType,
                                              im.input(0), offsets, sizes,
                                              strides),
               outDims);
  return success();
}

LogicalResult importSplit(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({"axis", "split", "num_outputs"})))
    return failure();
  RankedTensorType t = im.inputType(0);
  FailureOr<int64_t> axis = im.normalizeAxis(im.attrInt("axis", 0), t.getRank());
  if (failed(axis))
    return failure();
  if (t.isDynamicDim(*axis))
    return im.error() << "splitting dynamic dimension " << *axis
                      << " is not supported";
  SmallVector<AffineExpr> inDims = im.inputDims(0);
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
  if ((int64_t)split.size() != outs)
    return im.error() << "has " << outs << " outputs but " << split.size()
                      << " split sizes";
  int64_t total = 0;
  for (auto [o, s] : llvm::enumerate(split)) {
    if (s < 0)
      return im.error() << "split size " << s << " (output " << o
                        << ") is negative";
    if (__builtin_add_overflow(total, s, &total))
      total = -1;
  }
  if (total != n)
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
      SmallVector<AffineExpr> outDims(inDims);
      outDims[*axis] = im.cst(split[o]);
      SmallVector<OpFoldResult> offs, szs, strs;
      for (int64_t d = 0; d < t.getRank(); ++d) {
        offs.push_back(im.builder.getIndexAttr(offsets[d]));
        szs.push_back(foldResult(im, outDims[d]));
        strs.push_back(im.builder.getIndexAttr(1));
      }
      auto outType = im.typeFor(outDims, t.getElementType());
      // A part of size 0 (last, it starts at the dimension's end): empty.
      Value part =
          split[o] == 0
              ? tensor::EmptyOp::create(im.builder, im.loc, outType.getShape(),
                                        t.getElementType(),
                                        im.dynamicSizes(outDims))
                    .getResult()
              : tensor::ExtractSliceOp::create(im.builder, im.loc, outType,
                                               im.input(0), offs, szs, strs)
                    .getResult();
      im.setOutput(o, part, outDims);
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
  SmallVector<AffineExpr> dims = im.inputDims(0);
  dims[*axis] = im.cst(0);
  SmallVector<unsigned> present;
  bool symbolic = false;
  for (unsigned i = 0; i < im.numInputs(); ++i) {
    RankedTensorType ti = im.inputType(i);
    if (ti.getRank() != t0.getRank() ||
        ti.getElementType() != t0.getElementType())
      return im.error() << "input " << i << " (" << ti
                        << ") does not match input 0 (" << t0 << ")";
    SmallVector<AffineExpr> di = im.inputDims(i);
    for (int64_t d = 0; d < t0.getRank(); ++d)
      if (d != *axis && di[d] != dims[d])
        return im.error() << "input " << i << " (" << ti
                          << ") does not match input 0 (" << t0 << ")";
    dims[*axis] = dims[*axis] + di[*axis];
    // Empty inputs (a common artifact of shape arithmetic) contribute nothing.
    if (!llvm::is_contained(di, im.cst(0)))
      present.push_back(i);
    if (const HostTensor *h = im.hostInput(i))
      symbolic |= h->isSymbolic();
  }
  SmallVector<int64_t> shape = ONNXImporterImpl::staticShape(dims);
  if (im.allInputsOnHost() && !im.isDynamic(dims)) {
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
      else if (symbolic)
        out.setExpr(n, src.getExpr(l, im.getContext()));
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
  if (ONNXImporterImpl::isBadDims(dims))
    return im.error() << "result has too many elements";
  auto outType = RankedTensorType::get(shape, t0.getElementType());
  Value result = inputs.size() == 1 ? inputs[0]
                                    : tensor::ConcatOp::create(
                                          im.builder, im.loc, outType, *axis,
                                          inputs)
                                          .getResult();
  if (result.getType() != outType)
    result = tensor::CastOp::create(im.builder, im.loc, outType, result);
  im.setOutput(0, result, dims);
  return success();
}

/// Indices (input 1) known at import that lie outside [-n, n) of dimension
/// `axis` are an error; at run time they are clamped.
LogicalResult checkKnownIndices(ONNXImporterImpl &im, int64_t axis, int64_t n) {
  const HostTensor *ind = im.hostInput(1);
  if (!ind || ind->isSymbolic() || ShapedType::isDynamic(n))
    return success();
  for (int64_t v : ind->ints)
    if (v < -n || v >= n)
      return im.error() << "index " << v << " is out of range for "
                        << "dimension " << axis << " of size " << n;
  return success();
}

} // namespace

Value mlir::masformer::normalizedIndex(OpBuilder &b, Location loc, Value index,
                                       Value size) {
  Value v = arith::IndexCastOp::create(b, loc, b.getIndexType(), index);
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value neg = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, v, zero);
  v = arith::SelectOp::create(b, loc, neg,
                              arith::AddIOp::create(b, loc, v, size), v);
  v = arith::MaxSIOp::create(b, loc, v, zero);
  return arith::MinSIOp::create(b, loc, v,
                                arith::SubIOp::create(b, loc, size, one));
}

Value mlir::masformer::buildGather(ONNXImporterImpl &im, Value data,
                                   ArrayRef<AffineExpr> dDims, Value indices,
                                   ArrayRef<AffineExpr> iDims, int64_t axis) {
  // out[pre, ind..., post] = data[pre, norm(indices[ind...]), post]. Indices
  // outside [-n, n) are clamped rather than read out of bounds.
  SmallVector<AffineExpr> dims(dDims.take_front(axis));
  llvm::append_range(dims, iDims);
  llvm::append_range(dims, dDims.drop_front(axis + 1));
  Type et = cast<RankedTensorType>(data.getType()).getElementType();
  MLIRContext *ctx = im.getContext();
  int64_t rank = dims.size(), ir = iDims.size();
  SmallVector<AffineExpr> indExprs;
  for (int64_t d = 0; d < ir; ++d)
    indExprs.push_back(getAffineDimExpr(axis + d, ctx));
  AffineMap indMap = AffineMap::get(rank, 0, indExprs, ctx);
  AffineMap outMap = AffineMap::getMultiDimIdentityMap(rank, ctx);
  Value init = im.emptyTensor(dims, et);
  Value sizeV = im.dimValue(dDims[axis]);
  auto generic = linalg::GenericOp::create(
      im.builder, im.loc, im.typeFor(dims, et), ValueRange{indices},
      ValueRange{init}, ArrayRef<AffineMap>{indMap, outMap},
      SmallVector<utils::IteratorType>(rank, utils::IteratorType::parallel),
      [&](OpBuilder &b, Location loc, ValueRange args) {
        Value v = normalizedIndex(b, loc, args[0], sizeV);
        SmallVector<Value> idx;
        for (int64_t d = 0; d < axis; ++d)
          idx.push_back(linalg::IndexOp::create(b, loc, d));
        idx.push_back(v);
        for (int64_t d = axis + ir; d < rank; ++d)
          idx.push_back(linalg::IndexOp::create(b, loc, d));
        Value x = tensor::ExtractOp::create(b, loc, data, idx);
        linalg::YieldOp::create(b, loc, x);
      });
  return generic.getResult(0);
}

namespace {

LogicalResult importGather(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({"axis"})))
    return failure();
  RankedTensorType dt = im.inputType(0), it = im.inputType(1);
  FailureOr<int64_t> axis = im.normalizeAxis(im.attrInt("axis", 0), dt.getRank());
  if (failed(axis))
    return failure();
  if (!it.getElementType().isInteger(64) && !it.getElementType().isInteger(32))
    return im.error() << "indices must be int32 or int64, got " << it;
  SmallVector<AffineExpr> dDims = im.inputDims(0), iDims = im.inputDims(1);
  SmallVector<AffineExpr> dims(ArrayRef<AffineExpr>(dDims).take_front(*axis));
  llvm::append_range(dims, iDims);
  llvm::append_range(dims, ArrayRef<AffineExpr>(dDims).drop_front(*axis + 1));
  SmallVector<int64_t> shape = ONNXImporterImpl::staticShape(dims);
  if (ONNXImporterImpl::isBadDims(dims))
    return im.error() << "result has too many elements";
  int64_t ir = it.getRank();
  // The size of the gathered axis; kDynamic where it is a dynamic size.
  int64_t n = dt.getDimSize(*axis);
  // Elements of a Range over sizes, picked by constant indices (PhiMoE's
  // rotary length: the last position + 1): start + i * delta, as sizes.
  if (const onnx::NodeProto *range = im.producerOf(im.node->input(0));
      range && range->op_type() == "Range" && dt.getRank() == 1 &&
      !isa<FloatType>(dt.getElementType()) && range->input_size() == 3) {
    const HostTensor *start = im.hostValueOf(range->input(0));
    const HostTensor *limit = im.hostValueOf(range->input(1));
    const HostTensor *delta = im.hostValueOf(range->input(2));
    const HostTensor *ind = im.hostInput(1);
    if (start && limit && delta && ind && !ind->isSymbolic() &&
        !delta->isSymbolic() && delta->getInt(0) > 0 &&
        (start->isSymbolic() || limit->isSymbolic())) {
      MLIRContext *ctx = im.getContext();
      AffineExpr s0 = start->getExpr(0, ctx), d0 = im.cst(delta->getInt(0));
      AffineExpr count = (limit->getExpr(0, ctx) - s0).ceilDiv(d0);
      HostTensor out;
      out.shape.assign(ind->shape.begin(), ind->shape.end());
      out.elemType = dt.getElementType();
      out.resize(ind->numElements());
      for (int64_t e = 0; e < ind->numElements(); ++e) {
        int64_t v = ind->getInt(e);
        out.setExpr(e, s0 + (v < 0 ? count + v : im.cst(v)) * d0);
      }
      im.setHostOutput(0, std::move(out));
      return success();
    }
  }
  if (im.allInputsOnHost() && !im.hostInput(1)->isSymbolic() &&
      !im.isDynamic(dims)) {
    const HostTensor &data = *im.hostInput(0), &ind = *im.hostInput(1);
    if (failed(checkKnownIndices(im, *axis, n)))
      return failure();
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
  if (failed(checkKnownIndices(im, *axis, n)))
    return failure();
  Value data = im.input(0), indices = im.input(1);
  im.setOutput(0, buildGather(im, data, dDims, indices, iDims, *axis), dims);
  return success();
}

/// Output `dims` (element type of `src`) read from `src`: out[i...] =
/// src[index(i...)], `ins` read at i... as the body's arguments; `sizes`
/// are `src`'s dimensions as index values for `index` to clamp or wrap by.
Value buildIndexedRead(ONNXImporterImpl &im, Value src,
                       ArrayRef<AffineExpr> srcDims, ArrayRef<AffineExpr> dims,
                       ValueRange ins,
                       llvm::function_ref<SmallVector<Value>(
                           OpBuilder &, Location, ValueRange, ArrayRef<Value>)>
                           index) {
  auto srcTy = cast<RankedTensorType>(src.getType());
  int64_t rank = dims.size();
  SmallVector<Value> sizes;
  for (AffineExpr e : srcDims)
    sizes.push_back(sizeValue(im, e));
  AffineMap id = AffineMap::getMultiDimIdentityMap(rank, im.getContext());
  SmallVector<AffineMap> maps(ins.size() + 1, id);
  return linalg::GenericOp::create(
             im.builder, im.loc, im.typeFor(dims, srcTy.getElementType()), ins,
             ValueRange{im.emptyTensor(dims, srcTy.getElementType())}, maps,
             SmallVector<utils::IteratorType>(rank,
                                              utils::IteratorType::parallel),
             [&](OpBuilder &b, Location loc, ValueRange args) {
               SmallVector<Value> idx = index(b, loc, args, sizes);
               linalg::YieldOp::create(
                   b, loc,
                   tensor::ExtractOp::create(b, loc, src, idx).getResult());
             })
      .getResult(0);
}

/// GatherND (batch_dims 0): indices [..., k] pick slices of data:
/// out[i..., r...] = data[indices[i..., 0], ..., indices[i..., k-1], r...]
/// (the dynamo exporter's `qkv[:, :, -2]` on a fused projection). Indices
/// outside [-n, n) are clamped at run time, errors when known at import.
LogicalResult importGatherND(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({"batch_dims"})))
    return failure();
  if (im.attrInt("batch_dims", 0) != 0)
    return im.error() << "batch_dims " << im.attrInt("batch_dims", 0)
                      << " is not supported (only 0)";
  RankedTensorType dt = im.inputType(0), it = im.inputType(1);
  if (!it.getElementType().isInteger(64))
    return im.error() << "indices must be int64, got " << it;
  int64_t ir = it.getRank(), dr = dt.getRank();
  int64_t k = ir > 0 ? it.getDimSize(ir - 1) : ShapedType::kDynamic;
  if (ir < 1 || ShapedType::isDynamic(k) || k < 1 || k > dr)
    return im.error() << "the last dimension of the indices (" << it
                      << ") must be static, between 1 and the data's rank ("
                      << dr << ")";
  SmallVector<AffineExpr> dDims = im.inputDims(0), iDims = im.inputDims(1);
  SmallVector<AffineExpr> dims(ArrayRef<AffineExpr>(iDims).drop_back());
  llvm::append_range(dims, ArrayRef<AffineExpr>(dDims).drop_front(k));
  if (ONNXImporterImpl::isBadDims(dims))
    return im.error() << "result has too many elements";
  if (const HostTensor *ind = im.hostInput(1); ind && !ind->isSymbolic()) {
    for (int64_t e = 0; e < ind->numElements(); ++e) {
      int64_t n = dt.getDimSize(e % k), v = ind->ints[e];
      if (!ShapedType::isDynamic(n) && (v < -n || v >= n))
        return im.error() << "index " << v << " is out of range for "
                          << "dimension " << e % k << " of size " << n;
    }
  }
  int64_t lead = ir - 1;
  Value indices = im.input(1);
  Value out = buildIndexedRead(
      im, im.input(0), dDims, dims, ValueRange{},
      [&](OpBuilder &b, Location loc, ValueRange,
          ArrayRef<Value> sizes) -> SmallVector<Value> {
        SmallVector<Value> at, idx;
        for (int64_t d = 0; d < lead; ++d)
          at.push_back(linalg::IndexOp::create(b, loc, d));
        at.push_back(Value());
        for (int64_t c = 0; c < k; ++c) {
          at.back() = arith::ConstantIndexOp::create(b, loc, c);
          Value v = tensor::ExtractOp::create(b, loc, indices, at);
          idx.push_back(normalizedIndex(b, loc, v, sizes[c]));
        }
        for (int64_t d = k; d < dr; ++d)
          idx.push_back(linalg::IndexOp::create(b, loc, lead + d - k));
        return idx;
      });
  im.setOutput(0, out, dims);
  return success();
}

/// The indices (input 1) of GatherElements and ScatterElements against the
/// data (input 0): the data's rank, int32 or int64, no dimension other than
/// `axis` larger than the data's, and in range where known at import.
LogicalResult checkElementsIndices(ONNXImporterImpl &im, int64_t axis) {
  RankedTensorType dt = im.inputType(0), it = im.inputType(1);
  int64_t rank = dt.getRank();
  if (it.getRank() != rank)
    return im.error() << "indices must have the data's rank (" << rank
                      << "), got " << it;
  if (!it.getElementType().isInteger(64) && !it.getElementType().isInteger(32))
    return im.error() << "indices must be int32 or int64, got " << it;
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis && ShapedType::isStatic(dt.getDimSize(d)) &&
        ShapedType::isStatic(it.getDimSize(d)) &&
        it.getDimSize(d) > dt.getDimSize(d))
      return im.error() << "indices dimension " << d << " (" << it.getDimSize(d)
                        << ") is larger than the data's (" << dt.getDimSize(d)
                        << ")";
  return checkKnownIndices(im, axis, dt.getDimSize(axis));
}

/// GatherElements: out[i] = data[i with i[axis] = indices[i]], with the
/// indices' shape. Indices outside [-n, n) are clamped at run time (errors
/// when known at import), and so are positions past the data's other
/// dimensions.
LogicalResult importGatherElements(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({"axis"})))
    return failure();
  RankedTensorType dt = im.inputType(0), it = im.inputType(1);
  int64_t rank = dt.getRank();
  FailureOr<int64_t> axis = im.normalizeAxis(im.attrInt("axis", 0), rank);
  if (failed(axis))
    return failure();
  if (failed(checkElementsIndices(im, *axis)))
    return failure();
  SmallVector<AffineExpr> dDims = im.inputDims(0), dims = im.inputDims(1);
  SmallVector<int64_t> shape = ONNXImporterImpl::staticShape(dims);
  int64_t n = dt.getDimSize(*axis);
  if (im.allInputsOnHost() && !im.hostInput(1)->isSymbolic() &&
      !im.isDynamic(dims)) {
    const HostTensor &data = *im.hostInput(0), &ind = *im.hostInput(1);
    im.setHostOutput(0, gatherHost(data, shape, [&](ArrayRef<int64_t> idx) {
                       SmallVector<int64_t> src(idx);
                       int64_t v = ind.ints[linearIndex(idx, ind.shape)];
                       src[*axis] = v < 0 ? v + n : v;
                       return linearIndex(src, data.shape);
                     }));
    return success();
  }
  Value out = buildIndexedRead(
      im, im.input(0), dDims, dims, ValueRange{im.input(1)},
      [&](OpBuilder &b, Location loc, ValueRange args, ArrayRef<Value> sizes) {
        SmallVector<Value> idx;
        for (int64_t d = 0; d < rank; ++d) {
          if (d == *axis) {
            idx.push_back(normalizedIndex(b, loc, args[0], sizes[d]));
            continue;
          }
          Value i = linalg::IndexOp::create(b, loc, d);
          if (it.getDimSize(d) != dt.getDimSize(d) ||
              ShapedType::isDynamic(dt.getDimSize(d)))
            i = arith::MinSIOp::create(
                b, loc, i,
                arith::SubIOp::create(
                    b, loc, sizes[d],
                    arith::ConstantIndexOp::create(b, loc, 1)));
          idx.push_back(i);
        }
        return idx;
      });
  im.setOutput(0, out, dims);
  return success();
}

/// Tile: the input repeated `repeats[d]` times along each dimension d;
/// `repeats` must be known at import, as numbers or sizes (a model tiles
/// by its batch size).
LogicalResult importTile(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({})))
    return failure();
  RankedTensorType t = im.inputType(0);
  int64_t rank = t.getRank();
  FailureOr<const HostTensor *> r =
      im.requireHostInput(1, "repeats", /*allowSymbolic=*/true);
  if (failed(r))
    return failure();
  const HostTensor &repeats = **r;
  if (repeats.shape.size() != 1 || repeats.numElements() != rank)
    return im.error() << "repeats must hold one value per dimension (" << rank
                      << "), got " << repeats.numElements();
  SmallVector<AffineExpr> inDims = im.inputDims(0), dims;
  SmallVector<bool> once;
  for (int64_t d = 0; d < rank; ++d) {
    AffineExpr k = repeats.getExpr(d, im.getContext());
    if (auto c = dyn_cast<AffineConstantExpr>(k); c && c.getValue() < 0)
      return im.error() << "repeats[" << d << "] is negative (" << c.getValue()
                        << ")";
    once.push_back(k == im.cst(1));
    dims.push_back(inDims[d] * k);
  }
  if (ONNXImporterImpl::isBadDims(dims))
    return im.error() << "result has too many elements";
  SmallVector<int64_t> shape = ONNXImporterImpl::staticShape(dims);
  if (const HostTensor *h = im.hostInput(0);
      h && !im.isDynamic(dims) &&
      ShapedType::getNumElements(shape) <= kMaxHostElements) {
    im.setHostOutput(0, gatherHost(*h, shape, [&](ArrayRef<int64_t> idx) {
                       SmallVector<int64_t> src(idx);
                       for (int64_t d = 0; d < rank; ++d)
                         src[d] %= h->shape[d];
                       return linearIndex(src, h->shape);
                     }));
    return success();
  }
  Value out = buildIndexedRead(
      im, im.input(0), inDims, dims, ValueRange{},
      [&](OpBuilder &b, Location loc, ValueRange, ArrayRef<Value> sizes) {
        SmallVector<Value> idx;
        for (int64_t d = 0; d < rank; ++d) {
          Value i = linalg::IndexOp::create(b, loc, d);
          idx.push_back(
              once[d]
                  ? i
                  : arith::RemUIOp::create(b, loc, i, sizes[d]).getResult());
        }
        return idx;
      });
  im.setOutput(0, out, dims);
  return success();
}

/// The integers of a host input of `n`, or nullopt.
std::optional<SmallVector<int64_t>> hostInts(ONNXImporterImpl &im,
                                             const onnx::NodeProto &n, int i) {
  if (i >= n.input_size() || n.input(i).empty())
    return std::nullopt;
  const HostTensor *h = im.hostValueOf(n.input(i));
  if (!h || h->isSymbolic() || h->isFloat())
    return std::nullopt;
  return SmallVector<int64_t>(h->ints.begin(), h->ints.end());
}

/// For ScatterND indices that exporters build from sizes (TorchScript's
/// index_put on slices): Concat(axis -1) of one Unsqueeze(Expand(iota))
/// per indexed axis j, the iota a Range(0, n, 1) (or a Slice of one from 0)
/// reshaped to [n, 1, ..., 1] of rank r - j so that it broadcasts along
/// axis j. Returns the iota's length per axis (the
/// box is [0, n_j) on each), or nullopt when the indices are not built so.
std::optional<SmallVector<AffineExpr>> indexBoxFromSizes(ONNXImporterImpl &im,
                                                         int64_t r) {
  auto producer = [&](const std::string &name) { return im.producerOf(name); };
  // One index tuple per position of an [n_0, ..., n_{r-1}] box: the
  // components stacked along a new last axis.
  const onnx::NodeProto *concat = producer(im.node->input(1));
  auto lastAxis = [&](int64_t a) { return a == -1 || a == r; };
  if (im.inputType(1).getRank() != r + 1 || !concat ||
      concat->op_type() != "Concat" || concat->input_size() != r)
    return std::nullopt;
  for (const onnx::AttributeProto &a : concat->attribute())
    if (a.name() == "axis" && !lastAxis(a.i()))
      return std::nullopt;
  SmallVector<AffineExpr> sizes;
  for (int64_t j = 0; j < r; ++j) {
    const onnx::NodeProto *un = producer(concat->input(j));
    if (!un || un->op_type() != "Unsqueeze")
      return std::nullopt;
    std::optional<SmallVector<int64_t>> axes = hostInts(im, *un, 1);
    for (const onnx::AttributeProto &a : un->attribute())
      if (a.name() == "axes")
        axes = SmallVector<int64_t>(a.ints().begin(), a.ints().end());
    if (!axes || axes->size() != 1 || !lastAxis((*axes)[0]))
      return std::nullopt;
    const onnx::NodeProto *ex = producer(un->input(0));
    if (!ex || ex->op_type() != "Expand")
      return std::nullopt;
    // The iota along axis j, broadcast right-aligned: reshaped to
    // [n, 1, ..., 1] of rank r - j, or 1-D for the last axis.
    std::string iota = ex->input(0);
    const onnx::NodeProto *re = producer(iota);
    if (re && re->op_type() == "Reshape") {
      std::optional<SmallVector<int64_t>> shape = hostInts(im, *re, 1);
      if (!shape || static_cast<int64_t>(shape->size()) != r - j)
        return std::nullopt;
      for (int64_t d = 1; d < r - j; ++d)
        if ((*shape)[d] != 1)
          return std::nullopt;
      iota = re->input(0);
    } else if (j != r - 1) {
      return std::nullopt;
    }
    const onnx::NodeProto *p = producer(iota);
    if (p && p->op_type() == "Slice") {
      // From the start, step 1, along axis 0.
      std::optional<SmallVector<int64_t>> starts = hostInts(im, *p, 1);
      std::optional<SmallVector<int64_t>> axes = hostInts(im, *p, 3);
      std::optional<SmallVector<int64_t>> steps = hostInts(im, *p, 4);
      if (!starts || starts->size() != 1 || (*starts)[0] != 0 ||
          (p->input_size() > 3 && (!axes || (*axes)[0] != 0)) ||
          (p->input_size() > 4 && (!steps || (*steps)[0] != 1)))
        return std::nullopt;
      p = producer(p->input(0));
    }
    std::optional<SmallVector<int64_t>> start =
        p && p->op_type() == "Range" ? hostInts(im, *p, 0) : std::nullopt;
    std::optional<SmallVector<int64_t>> delta =
        p ? hostInts(im, *p, 2) : std::nullopt;
    if (!start || start->size() != 1 || (*start)[0] != 0 || !delta ||
        delta->size() != 1 || (*delta)[0] != 1)
      return std::nullopt;
    SmallVector<AffineExpr> iotaDims = im.dimsOf(iota);
    if (iotaDims.size() != 1)
      return std::nullopt;
    sizes.push_back(iotaDims[0]);
  }
  return sizes;
}

/// A ScatterND reduction ("none" replaces) of an element of the data by one
/// of the updates.
Value combineScatter(OpBuilder &b, Location loc, StringRef reduction, Value old,
                     Value update) {
  bool isFloat = isa<FloatType>(old.getType());
  if (reduction == "add")
    return isFloat ? arith::AddFOp::create(b, loc, old, update).getResult()
                   : arith::AddIOp::create(b, loc, old, update).getResult();
  if (reduction == "mul")
    return isFloat ? arith::MulFOp::create(b, loc, old, update).getResult()
                   : arith::MulIOp::create(b, loc, old, update).getResult();
  if (reduction == "max")
    return isFloat ? arith::MaximumFOp::create(b, loc, old, update).getResult()
                   : arith::MaxSIOp::create(b, loc, old, update).getResult();
  if (reduction == "min")
    return isFloat ? arith::MinimumFOp::create(b, loc, old, update).getResult()
                   : arith::MinSIOp::create(b, loc, old, update).getResult();
  return update;
}

double combineScatterHost(StringRef reduction, double old, double update) {
  if (reduction == "add")
    return old + update;
  if (reduction == "mul")
    return old * update;
  if (reduction == "max")
    return std::isnan(old) || std::isnan(update) ? NAN : std::max(old, update);
  if (reduction == "min")
    return std::isnan(old) || std::isnan(update) ? NAN : std::min(old, update);
  return update;
}

/// ScatterND at run time, for any indices: one step per index tuple, in
/// order, each combining its slice of the updates into the slice of the
/// data it names (a mixture of experts adds each expert's outputs to the
/// rows of the tokens it took). Indices outside [-n, n) are clamped, as
/// the gathers clamp them.
Value buildScatterLoop(ONNXImporterImpl &im, StringRef reduction, int64_t r,
                       ArrayRef<AffineExpr> dDims, ArrayRef<AffineExpr> iDims,
                       ArrayRef<AffineExpr> uDims) {
  OpBuilder &b = im.builder;
  Location loc = im.loc;
  auto dt = cast<RankedTensorType>(im.input(0).getType());
  Type et = dt.getElementType();
  int64_t rank = dDims.size();
  AffineExpr tuples = im.cst(1);
  for (AffineExpr e : iDims.drop_back())
    tuples = tuples * e;
  SmallVector<AffineExpr> rest(dDims.drop_front(r));
  SmallVector<AffineExpr> flatUpd{tuples};
  llvm::append_range(flatUpd, rest);
  Value indices = buildReshapeDims(im, im.input(1), iDims, {tuples, im.cst(r)});
  Value updates = buildReshapeDims(im, im.input(2), uDims, flatUpd);
  SmallVector<Value> dataSizes;
  for (AffineExpr e : dDims)
    dataSizes.push_back(sizeValue(im, e));
  auto sliceType = im.typeFor(rest, et);
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
  auto loop = scf::ForOp::create(
      b, loc, c0, sizeValue(im, tuples), c1, ValueRange{im.input(0)},
      [&](OpBuilder &lb, Location ll, Value t, ValueRange iter) {
        SmallVector<OpFoldResult> offsets, sizes,
            strides(rank + 1, lb.getIndexAttr(1));
        for (int64_t c = 0; c < r; ++c) {
          Value c_ = arith::ConstantIndexOp::create(lb, ll, c);
          Value v =
              tensor::ExtractOp::create(lb, ll, indices, ValueRange{t, c_});
          offsets.push_back(normalizedIndex(lb, ll, v, dataSizes[c]));
          sizes.push_back(lb.getIndexAttr(1));
        }
        SmallVector<OpFoldResult> updOffsets{t}, updSizes{lb.getIndexAttr(1)};
        for (int64_t d = r; d < rank; ++d) {
          OpFoldResult size = dataSizes[d];
          if (auto c = dyn_cast<AffineConstantExpr>(dDims[d]))
            size = lb.getIndexAttr(c.getValue());
          offsets.push_back(lb.getIndexAttr(0));
          sizes.push_back(size);
          updOffsets.push_back(lb.getIndexAttr(0));
          updSizes.push_back(size);
        }
        Value slice = tensor::ExtractSliceOp::create(
            lb, ll, sliceType, updates, updOffsets, updSizes,
            ArrayRef<OpFoldResult>(strides).take_front(rank - r + 1));
        ArrayRef<OpFoldResult> dataStrides =
            ArrayRef<OpFoldResult>(strides).take_front(rank);
        if (reduction != "none") {
          Value old = tensor::ExtractSliceOp::create(
              lb, ll, sliceType, iter[0], offsets, sizes, dataStrides);
          AffineMap id =
              AffineMap::getMultiDimIdentityMap(rank - r, lb.getContext());
          slice =
              linalg::GenericOp::create(
                  lb, ll, sliceType, ValueRange{slice}, ValueRange{old},
                  ArrayRef<AffineMap>{id, id},
                  SmallVector<utils::IteratorType>(
                      rank - r, utils::IteratorType::parallel),
                  [&](OpBuilder &gb, Location gl, ValueRange args) {
                    linalg::YieldOp::create(
                        gb, gl,
                        combineScatter(gb, gl, reduction, args[1], args[0]));
                  })
                  .getResult(0);
        }
        Value next = tensor::InsertSliceOp::create(lb, ll, slice, iter[0],
                                                   offsets, sizes, dataStrides);
        scf::YieldOp::create(lb, ll, next);
      });
  return loop.getResult(0);
}

/// ScatterND, reduction none, add, mul, max or min. Indices known at import
/// are checked there; a whole box written with reduction none becomes a
/// tensor.insert_slice (or, with dynamic shapes, indices that exporters
/// build from sizes covering the whole data make the result the updates);
/// every other case runs buildScatterLoop.
LogicalResult importScatterND(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({"reduction"})))
    return failure();
  std::string reduction = im.attrString("reduction").value_or("none");
  if (!llvm::is_contained({"none", "add", "mul", "max", "min"}, reduction))
    return im.error() << "unknown reduction '" << reduction << "'";
  RankedTensorType dt = im.inputType(0), it = im.inputType(1),
                   ut = im.inputType(2);
  if (!it.getElementType().isInteger(64))
    return im.error() << "indices must be int64, got " << it;
  if (it.getRank() < 1 || it.isDynamicDim(it.getRank() - 1))
    return im.error() << "the last dimension of the indices (" << it
                      << ") must be static";
  int64_t r = it.getDimSize(it.getRank() - 1);
  if (r < 1 || r > dt.getRank())
    return im.error() << "index tuples of length " << r << " for data " << dt;
  if (ut.getElementType() != dt.getElementType())
    return im.error() << "updates " << ut << " and data " << dt
                      << " differ in element type";
  SmallVector<AffineExpr> dDims = im.inputDims(0), iDims = im.inputDims(1),
                          uDims = im.inputDims(2);
  SmallVector<AffineExpr> expectUpd(ArrayRef<AffineExpr>(iDims).drop_back());
  llvm::append_range(expectUpd, ArrayRef<AffineExpr>(dDims).drop_front(r));
  if (uDims != ArrayRef<AffineExpr>(expectUpd))
    return im.error() << "updates " << im.dimsString(uDims)
                      << " do not match indices " << im.dimsString(iDims)
                      << " and data " << im.dimsString(dDims) << " (expected "
                      << im.dimsString(expectUpd) << ")";
  bool replace = reduction == "none";
  if (replace && !dt.hasStaticShape()) {
    // The TorchScript decoders' padding mask: indices built from sizes that
    // enumerate the whole of the data's leading dimensions make the result
    // the updates.
    std::optional<SmallVector<AffineExpr>> box =
        ut.getRank() == dt.getRank() ? indexBoxFromSizes(im, r) : std::nullopt;
    bool whole = box.has_value();
    for (int64_t d = 0; whole && d < dt.getRank(); ++d)
      whole = uDims[d] == dDims[d] && (d >= r || (*box)[d] == dDims[d]);
    if (whole) {
      im.setOutput(0, im.input(2), dDims);
      return success();
    }
  }
  const HostTensor *ind = im.hostInput(1);
  if (!dt.hasStaticShape() || !it.hasStaticShape() || !ind ||
      ind->isSymbolic()) {
    im.setOutput(0, buildScatterLoop(im, reduction, r, dDims, iDims, uDims),
                 dDims);
    return success();
  }
  int64_t tuples = it.getNumElements() / r;
  int64_t slice = 1;
  for (int64_t d = r; d < dt.getRank(); ++d)
    slice *= dt.getDimSize(d);
  auto tupleAt = [&](int64_t k, int64_t d) {
    int64_t v = ind->ints[k * r + d];
    return v < 0 ? v + dt.getDimSize(d) : v;
  };
  for (int64_t k = 0; k < tuples; ++k)
    for (int64_t d = 0; d < r; ++d)
      if (tupleAt(k, d) < 0 || tupleAt(k, d) >= dt.getDimSize(d))
        return im.error() << "index " << ind->ints[k * r + d]
                          << " is out of range for dimension " << d
                          << " of size " << dt.getDimSize(d);
  if (im.allInputsOnHost()) {
    HostTensor out = *im.hostInput(0);
    const HostTensor &upd = *im.hostInput(2);
    SmallVector<int64_t> strides = stridesOf(dt.getShape());
    for (int64_t k = 0; k < tuples; ++k) {
      int64_t base = 0;
      for (int64_t d = 0; d < r; ++d)
        base += tupleAt(k, d) * strides[d];
      for (int64_t e = 0; e < slice; ++e) {
        if (out.isFloat()) {
          out.floats[base + e] = combineScatterHost(
              reduction, out.floats[base + e], upd.floats[k * slice + e]);
          continue;
        }
        int64_t o = out.ints[base + e], u = upd.ints[k * slice + e];
        uint64_t uo = static_cast<uint64_t>(o), uu = static_cast<uint64_t>(u);
        out.ints[base + e] = reduction == "add" ? static_cast<int64_t>(uo + uu)
                             : reduction == "mul"
                                 ? static_cast<int64_t>(uo * uu)
                             : reduction == "max" ? std::max(o, u)
                             : reduction == "min" ? std::min(o, u)
                                                  : u;
      }
    }
    im.setHostOutput(0, std::move(out));
    return success();
  }
  // Reduction none over tuples that enumerate a box, row-major: one
  // insert_slice.
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
  bool isBox = replace && tuples > 0 && boxSize == tuples;
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
  if (!isBox) {
    im.setOutput(0, buildScatterLoop(im, reduction, r, dDims, iDims, uDims),
                 dDims);
    return success();
  }
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

/// ScatterElements, reduction none, add, mul, max or min: for each position
/// i of the indices, out[i with i[axis] = indices[i]] combines updates[i].
/// On the host when everything is known there; otherwise one sequential loop
/// over the positions (TorchScript's index_add_ in a mixture of experts:
/// each expert's weighted outputs scattered into zeros, row by row).
/// Indices outside [-n, n) are clamped at run time (errors when known).
LogicalResult importScatterElements(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({"axis", "reduction"})))
    return failure();
  std::string reduction = im.attrString("reduction").value_or("none");
  if (!llvm::is_contained({"none", "add", "mul", "max", "min"}, reduction))
    return im.error() << "unknown reduction '" << reduction << "'";
  RankedTensorType dt = im.inputType(0), it = im.inputType(1),
                   ut = im.inputType(2);
  int64_t rank = dt.getRank();
  FailureOr<int64_t> axis = im.normalizeAxis(im.attrInt("axis", 0), rank);
  if (failed(axis))
    return failure();
  if (failed(checkElementsIndices(im, *axis)))
    return failure();
  if (ut.getElementType() != dt.getElementType())
    return im.error() << "updates " << ut << " and data " << dt
                      << " differ in element type";
  SmallVector<AffineExpr> dDims = im.inputDims(0), iDims = im.inputDims(1),
                          uDims = im.inputDims(2);
  if (uDims != iDims)
    return im.error() << "updates " << im.dimsString(uDims) << " and indices "
                      << im.dimsString(iDims) << " differ in shape";
  int64_t n = dt.getDimSize(*axis);
  if (im.allInputsOnHost() && !im.hostInput(1)->isSymbolic() &&
      !im.hostInput(0)->isSymbolic() && !im.hostInput(2)->isSymbolic() &&
      dt.hasStaticShape()) {
    HostTensor out = *im.hostInput(0);
    const HostTensor &ind = *im.hostInput(1), &upd = *im.hostInput(2);
    SmallVector<int64_t> dStrides = stridesOf(dt.getShape()),
                         iStrides = stridesOf(ind.shape);
    for (int64_t e = 0, total = ind.numElements(); e < total; ++e) {
      int64_t at = 0;
      for (int64_t d = 0; d < rank; ++d) {
        int64_t c = e / iStrides[d] % ind.shape[d];
        if (d == *axis)
          c = ind.ints[e] < 0 ? ind.ints[e] + n : ind.ints[e];
        at += c * dStrides[d];
      }
      if (out.isFloat()) {
        out.floats[at] =
            combineScatterHost(reduction, out.floats[at], upd.floats[e]);
        continue;
      }
      int64_t o = out.ints[at], u = upd.ints[e];
      uint64_t uo = static_cast<uint64_t>(o), uu = static_cast<uint64_t>(u);
      out.ints[at] = reduction == "add"   ? static_cast<int64_t>(uo + uu)
                     : reduction == "mul" ? static_cast<int64_t>(uo * uu)
                     : reduction == "max" ? std::max(o, u)
                     : reduction == "min" ? std::min(o, u)
                                          : u;
    }
    im.setHostOutput(0, std::move(out));
    return success();
  }
  OpBuilder &b = im.builder;
  Location loc = im.loc;
  Value indices = im.input(1), updates = im.input(2);
  SmallVector<Value> iSizes, dSizes;
  Value total = arith::ConstantIndexOp::create(b, loc, 1);
  for (int64_t d = 0; d < rank; ++d) {
    iSizes.push_back(sizeValue(im, iDims[d]));
    dSizes.push_back(sizeValue(im, dDims[d]));
    total = arith::MulIOp::create(b, loc, total, iSizes.back());
  }
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
  auto loop = scf::ForOp::create(
      b, loc, c0, total, c1, ValueRange{im.input(0)},
      [&](OpBuilder &lb, Location ll, Value e, ValueRange iter) {
        SmallVector<Value> at = delinearize(lb, ll, e, iSizes);
        SmallVector<Value> dst(at);
        for (int64_t d = 0; d < rank; ++d) {
          if (d == *axis) {
            Value v = tensor::ExtractOp::create(lb, ll, indices, at);
            dst[d] = normalizedIndex(lb, ll, v, dSizes[d]);
          } else if (it.getDimSize(d) != dt.getDimSize(d) ||
                     ShapedType::isDynamic(dt.getDimSize(d))) {
            dst[d] = arith::MinSIOp::create(
                lb, ll, at[d], arith::SubIOp::create(lb, ll, dSizes[d], c1));
          }
        }
        Value u = tensor::ExtractOp::create(lb, ll, updates, at);
        if (reduction != "none")
          u = combineScatter(lb, ll, reduction,
                             tensor::ExtractOp::create(lb, ll, iter[0], dst),
                             u);
        scf::YieldOp::create(
            lb, ll,
            tensor::InsertOp::create(lb, ll, u, iter[0], dst).getResult());
      });
  im.setOutput(0, loop.getResult(0), dDims);
  return success();
}

} // namespace

Value mlir::masformer::sizeValue(ONNXImporterImpl &im, AffineExpr e) {
  if (auto c = dyn_cast<AffineConstantExpr>(e))
    return arith::ConstantIndexOp::create(im.builder, im.loc, c.getValue());
  return im.dimValue(e);
}

SmallVector<Value> mlir::masformer::delinearize(OpBuilder &b, Location loc,
                                                Value linear,
                                                ArrayRef<Value> sizes) {
  SmallVector<Value> coords(sizes.size());
  for (int64_t d = sizes.size() - 1; d > 0; --d) {
    coords[d] = arith::RemUIOp::create(b, loc, linear, sizes[d]);
    linear = arith::DivUIOp::create(b, loc, linear, sizes[d]);
  }
  if (!sizes.empty())
    coords[0] = linear;
  return coords;
}

void mlir::masformer::registerIndexingHandlers(
    llvm::StringMap<NodeHandler> &handlers) {
  handlers["Slice"] = importSlice;
  handlers["Split"] = importSplit;
  handlers["Concat"] = importConcat;
  handlers["Gather"] = importGather;
  handlers["GatherElements"] = importGatherElements;
  handlers["GatherND"] = importGatherND;
  handlers["Tile"] = importTile;
  handlers["ScatterND"] = importScatterND;
  handlers["ScatterElements"] = importScatterElements;
}
