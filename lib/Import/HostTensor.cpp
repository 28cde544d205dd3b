//===- HostTensor.cpp - Small constant tensors evaluated at imp -*- C++ -*-===//
//
// Storage and conversions of HostTensor.
//
//===----------------------------------------------------------------------===//

#include "HostTensor.h"

#include "llvm/ADT/APFloat.h"

using namespace mlir;
using namespace mlir::masformer;

int64_t HostTensor::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

AffineExpr mlir::masformer::simplifySizeExpr(AffineExpr e) {
  unsigned dims = 0, symbols = 0;
  e.walk([&](AffineExpr x) {
    if (auto d = dyn_cast<AffineDimExpr>(x))
      dims = std::max(dims, d.getPosition() + 1);
    if (auto s = dyn_cast<AffineSymbolExpr>(x))
      symbols = std::max(symbols, s.getPosition() + 1);
  });
  return simplifyAffineExpr(e, dims, symbols);
}

void HostTensor::setExpr(int64_t i, AffineExpr e) {
  // sequence + past - past is sequence: equal sizes compare equal.
  e = simplifySizeExpr(e);
  if (auto c = dyn_cast<AffineConstantExpr>(e)) {
    ints[i] = c.getValue();
    if (isSymbolic())
      syms[i] = e;
    return;
  }
  if (!isSymbolic()) {
    syms.reserve(ints.size());
    for (int64_t v : ints)
      syms.push_back(getAffineConstantExpr(v, e.getContext()));
  }
  syms[i] = e;
  ints[i] = 0;
}

void HostTensor::resize(int64_t n) {
  if (isFloat())
    floats.assign(n, 0.0);
  else
    ints.assign(n, 0);
}

/// Rounds `v` to the precision of `type`, as an op computing in that type
/// would.
static double roundTo(Type type, double v) {
  if (type.isF64())
    return v;
  if (type.isF32())
    return static_cast<double>(static_cast<float>(v));
  APFloat f(v);
  bool lost;
  f.convert(cast<FloatType>(type).getFloatSemantics(),
            APFloat::rmNearestTiesToEven, &lost);
  return f.convertToDouble();
}

void HostTensor::set(int64_t i, double v) {
  if (isFloat())
    floats[i] = roundTo(elemType, v);
  else if (elemType.isInteger(1))
    ints[i] = v != 0.0;
  else
    ints[i] = saturatingInt(v);
}

void HostTensor::setInt(int64_t i, int64_t v) {
  if (isFloat())
    floats[i] = roundTo(elemType, static_cast<double>(v));
  else if (elemType.isInteger(1))
    ints[i] = v != 0;
  else
    ints[i] = v;
}

DenseElementsAttr HostTensor::toAttr() const {
  RankedTensorType type = getType();
  if (auto ft = dyn_cast<FloatType>(elemType)) {
    SmallVector<APFloat> values;
    values.reserve(floats.size());
    for (double v : floats) {
      APFloat f(v);
      bool lost;
      f.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      values.push_back(f);
    }
    return DenseElementsAttr::get(type, values);
  }
  unsigned width = elemType.getIntOrFloatBitWidth();
  if (width == 1) {
    SmallVector<bool> values(ints.begin(), ints.end());
    return DenseElementsAttr::get(type, ArrayRef<bool>(values));
  }
  SmallVector<APInt> values;
  values.reserve(ints.size());
  for (int64_t v : ints)
    values.push_back(APInt(width, v, /*isSigned=*/true, /*implicitTrunc=*/true));
  return DenseElementsAttr::get(type, values);
}

std::optional<HostTensor> HostTensor::fromAttr(DenseElementsAttr attr) {
  auto type = dyn_cast<RankedTensorType>(attr.getType());
  if (!type)
    return std::nullopt;
  HostTensor t;
  t.shape.assign(type.getShape().begin(), type.getShape().end());
  t.elemType = type.getElementType();
  if (isa<FloatType>(t.elemType)) {
    for (const APFloat &v : attr.getValues<APFloat>())
      t.floats.push_back(v.convertToDouble());
    if (attr.isSplat())
      t.floats.assign(t.numElements(), t.floats.front());
    return t;
  }
  if (!t.elemType.isIntOrIndex())
    return std::nullopt;
  bool isBool = t.elemType.isInteger(1);
  for (const APInt &v : attr.getValues<APInt>())
    t.ints.push_back(isBool ? v.getZExtValue() : v.getSExtValue());
  if (attr.isSplat())
    t.ints.assign(t.numElements(), t.ints.front());
  return t;
}

HostTensor HostTensor::scalarInt(Type type, int64_t v) {
  HostTensor t;
  t.elemType = type;
  t.ints = {v};
  return t;
}

HostTensor HostTensor::vectorInt(Type type, ArrayRef<int64_t> values) {
  HostTensor t;
  t.elemType = type;
  t.shape = {static_cast<int64_t>(values.size())};
  t.ints.assign(values.begin(), values.end());
  return t;
}

bool mlir::masformer::isBadShape(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n) || n > kMaxTensorElements)
      return true;
  }
  return false;
}

FailureOr<SmallVector<int64_t>>
mlir::masformer::broadcastShapes(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return failure();
    out[i] = da == 1 ? db : da;
  }
  if (isBadShape(out))
    return failure();
  return out;
}

SmallVector<int64_t> mlir::masformer::stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

void mlir::masformer::forEachBroadcast(
    ArrayRef<int64_t> outShape, ArrayRef<ArrayRef<int64_t>> inputShapes,
    llvm::function_ref<void(int64_t, ArrayRef<int64_t>)> fn) {
  size_t rank = outShape.size();
  int64_t total = 1;
  for (int64_t d : outShape)
    total *= d;
  // Per input, the stride of each output dim (0 where broadcast).
  SmallVector<SmallVector<int64_t>> inStrides;
  for (ArrayRef<int64_t> in : inputShapes) {
    SmallVector<int64_t> s = stridesOf(in);
    SmallVector<int64_t> aligned(rank, 0);
    for (size_t i = 0; i < in.size(); ++i) {
      size_t o = rank - in.size() + i;
      aligned[o] = in[i] == 1 ? 0 : s[i];
    }
    inStrides.push_back(aligned);
  }
  SmallVector<int64_t> idx(rank, 0), lin(inputShapes.size(), 0);
  for (int64_t n = 0; n < total; ++n) {
    for (size_t k = 0; k < inputShapes.size(); ++k) {
      int64_t l = 0;
      for (size_t d = 0; d < rank; ++d)
        l += idx[d] * inStrides[k][d];
      lin[k] = l;
    }
    fn(n, lin);
    for (int64_t d = static_cast<int64_t>(rank) - 1; d >= 0; --d) {
      if (++idx[d] < outShape[d])
        break;
      idx[d] = 0;
    }
  }
}

HostTensor mlir::masformer::gatherHost(
    const HostTensor &src, ArrayRef<int64_t> shape,
    llvm::function_ref<int64_t(ArrayRef<int64_t>)> srcIndex) {
  HostTensor out;
  out.shape.assign(shape.begin(), shape.end());
  out.elemType = src.elemType;
  int64_t n = out.numElements();
  out.resize(n);
  SmallVector<int64_t> idx(shape.size(), 0);
  if (src.isSymbolic())
    out.syms.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    int64_t s = srcIndex(idx);
    if (out.isFloat())
      out.floats[i] = src.floats[s];
    else
      out.ints[i] = src.ints[s];
    if (src.isSymbolic())
      out.syms[i] = src.syms[s];
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      if (++idx[d] < shape[d])
        break;
      idx[d] = 0;
    }
  }
  return out;
}

int64_t mlir::masformer::linearIndex(ArrayRef<int64_t> idx,
                                     ArrayRef<int64_t> shape) {
  int64_t l = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    l = l * shape[d] + idx[d];
  return l;
}
