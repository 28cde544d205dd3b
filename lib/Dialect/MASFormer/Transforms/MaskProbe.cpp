//===- MaskProbe.cpp - Masks computed from dynamic sizes --------*- C++ -*-===//
//
// With dynamic batch and sequence sizes, the causal masks of exported
// models are not constants: they are computed from the sizes at run time
// (a slice of a triangular buffer, Range / Trilu / comparisons of positions).
// A mask that depends only on sizes (not on the model's input data) is
// evaluated here at small concrete sizes, so that the raise can see whether
// it is causal. The evaluator covers the ops the ONNX importer emits for
// such masks; anything else (input data, weights, reductions) makes it give
// up, and the mask is then treated as an opaque additive mask.
//
//===----------------------------------------------------------------------===//

#include "AttentionMatchers.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallBitVector.h"

#include <cmath>
#include <functional>
#include <map>
#include <memory>

using namespace mlir;
using namespace mlir::masformer;

namespace {

/// A tensor of the evaluation: its shape and an element function (lazy, so
/// that a slice of a large constant reads only the elements it needs).
struct ProbeTensor {
  SmallVector<int64_t> shape;
  std::function<std::optional<double>(ArrayRef<int64_t>)> at;
};

/// Elements above which the evaluator gives up materializing (masks at
/// probe sizes are a few hundred elements).
constexpr int64_t kMaxProbeElements = 1 << 16;
/// Lazily read tensors may be larger (a slice of a model's 1024 x 1024
/// causal buffer), up to this.
constexpr int64_t kMaxLazyElements = int64_t(1) << 22;

int64_t numElements(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

SmallVector<int64_t> delinearize(int64_t n, ArrayRef<int64_t> shape) {
  SmallVector<int64_t> idx(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = shape[d] ? n % shape[d] : 0;
    n = shape[d] ? n / shape[d] : 0;
  }
  return idx;
}

int64_t linearize(ArrayRef<int64_t> idx, ArrayRef<int64_t> shape) {
  int64_t l = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    l = l * shape[d] + idx[d];
  return l;
}

/// A scalar constant (float, integer or index, or a one-element tensor).
std::optional<double> constScalar(Value v) {
  Attribute a;
  if (!matchPattern(v, m_Constant(&a)))
    return std::nullopt;
  if (auto f = dyn_cast<FloatAttr>(a))
    return f.getValueAsDouble();
  if (auto i = dyn_cast<IntegerAttr>(a))
    return i.getType().isInteger(1)
               ? static_cast<double>(i.getValue().getZExtValue())
               : static_cast<double>(i.getValue().getSExtValue());
  return getScalarConstant(v);
}

class Evaluator {
public:
  /// `base`: the probe size of the first dynamic input dimension; the k-th
  /// distinct one gets base + k, or bigBase + k when bit k of `big` is set.
  explicit Evaluator(int64_t base, int64_t bigBase = 0, unsigned big = 0)
      : base(base), bigBase(bigBase), big(big) {}

  /// The distinct dynamic input dimensions met so far.
  size_t numDims() const { return argDims.size(); }

  std::optional<ProbeTensor> tensor(Value v, int depth = 64);
  std::optional<int64_t> index(Value v, int depth = 64);
  /// Dimension d of tensor `v` at the probe sizes.
  std::optional<int64_t> dimOf(Value v, int64_t d, int depth = 64);

private:
  std::optional<ProbeTensor> materialize(SmallVector<int64_t> shape,
                                         llvm::function_ref<std::optional<
                                             double>(ArrayRef<int64_t>)>
                                             fn);
  std::optional<ProbeTensor> generic(linalg::GenericOp g, int depth);
  std::optional<double> scalar(Value v, ArrayRef<int64_t> loopIdx,
                               linalg::GenericOp g,
                               ArrayRef<ProbeTensor> inputs,
                               DenseMap<Value, double> &memo, int depth);
  std::optional<SmallVector<int64_t>> sizesOf(ArrayRef<OpFoldResult> ofrs,
                                              int depth);

  int64_t base, bigBase;
  unsigned big;
  /// Probe sizes of the dynamic dimensions of function arguments.
  std::map<std::pair<void *, int64_t>, int64_t> argDims;
  DenseMap<Value, ProbeTensor> tensors;
};

std::optional<ProbeTensor>
Evaluator::materialize(SmallVector<int64_t> shape,
                       llvm::function_ref<std::optional<double>(
                           ArrayRef<int64_t>)>
                           fn) {
  int64_t n = numElements(shape);
  if (n > kMaxProbeElements)
    return std::nullopt;
  auto data = std::make_shared<std::vector<double>>(n);
  for (int64_t i = 0; i < n; ++i) {
    std::optional<double> x = fn(delinearize(i, shape));
    if (!x)
      return std::nullopt;
    (*data)[i] = *x;
  }
  SmallVector<int64_t> s = shape;
  return ProbeTensor{shape, [data, s](ArrayRef<int64_t> idx) {
                       return std::optional<double>(
                           (*data)[linearize(idx, s)]);
                     }};
}

std::optional<SmallVector<int64_t>>
Evaluator::sizesOf(ArrayRef<OpFoldResult> ofrs, int depth) {
  SmallVector<int64_t> out;
  for (OpFoldResult f : ofrs) {
    if (auto a = dyn_cast<Attribute>(f)) {
      out.push_back(cast<IntegerAttr>(a).getInt());
      continue;
    }
    std::optional<int64_t> x = index(cast<Value>(f), depth - 1);
    if (!x)
      return std::nullopt;
    out.push_back(*x);
  }
  return out;
}

std::optional<int64_t> Evaluator::dimOf(Value src, int64_t d, int depth) {
  if (depth <= 0)
    return std::nullopt;
  auto ty = cast<RankedTensorType>(src.getType());
  if (d < 0 || d >= ty.getRank())
    return std::nullopt;
  if (!ty.isDynamicDim(d))
    return ty.getDimSize(d);
  // A dynamic dimension of a function argument: a probe size.
  if (auto arg = dyn_cast<BlockArgument>(src)) {
    if (!isa<func::FuncOp>(arg.getOwner()->getParentOp()))
      return std::nullopt;
    auto key = std::make_pair(arg.getAsOpaquePointer(), d);
    auto it = argDims.find(key);
    if (it == argDims.end()) {
      int64_t k = argDims.size();
      bool isBig = k < 32 && (big >> k & 1);
      it = argDims.emplace(key, (isBig ? bigBase : base) + k).first;
    }
    return it->second;
  }
  // Otherwise the size the producer was built with.
  Operation *p = src.getDefiningOp();
  if (auto empty = dyn_cast_or_null<tensor::EmptyOp>(p))
    return index(empty.getDynamicSize(d), depth - 1);
  if (auto slice = dyn_cast_or_null<tensor::ExtractSliceOp>(p)) {
    llvm::SmallBitVector dropped = slice.getDroppedDims();
    SmallVector<OpFoldResult> sizes = slice.getMixedSizes();
    int64_t k = -1;
    for (size_t i = 0; i < sizes.size(); ++i)
      if (!dropped[i] && ++k == d)
        return sizesOf({sizes[i]}, depth).value_or(SmallVector<int64_t>{-1})[0];
    return std::nullopt;
  }
  if (auto e = dyn_cast_or_null<tensor::ExpandShapeOp>(p)) {
    auto s = sizesOf({e.getMixedOutputShape()[d]}, depth);
    return s ? std::optional<int64_t>((*s)[0]) : std::nullopt;
  }
  if (auto c = dyn_cast_or_null<tensor::CastOp>(p))
    return dimOf(c.getSource(), d, depth - 1);
  if (auto dps = dyn_cast_or_null<DestinationStyleOpInterface>(p)) {
    auto res = cast<OpResult>(src);
    return dimOf(dps.getDpsInitOperand(res.getResultNumber())->get(), d,
                 depth - 1);
  }
  std::optional<ProbeTensor> t = tensor(src, depth - 1);
  if (!t)
    return std::nullopt;
  return t->shape[d];
}

std::optional<int64_t> Evaluator::index(Value v, int depth) {
  if (depth <= 0)
    return std::nullopt;
  APInt c;
  if (matchPattern(v, m_ConstantInt(&c)))
    return c.getSExtValue();
  Operation *def = v.getDefiningOp();
  if (!def)
    return std::nullopt;
  if (auto dim = dyn_cast<tensor::DimOp>(def)) {
    std::optional<int64_t> d = index(dim.getIndex(), depth - 1);
    if (!d)
      return std::nullopt;
    return dimOf(dim.getSource(), *d, depth - 1);
  }
  auto bin = [&](auto fn) -> std::optional<int64_t> {
    std::optional<int64_t> a = index(def->getOperand(0), depth - 1);
    std::optional<int64_t> b = index(def->getOperand(1), depth - 1);
    if (!a || !b)
      return std::nullopt;
    return fn(*a, *b);
  };
  if (isa<arith::AddIOp>(def))
    return bin([](int64_t a, int64_t b) { return a + b; });
  if (isa<arith::SubIOp>(def))
    return bin([](int64_t a, int64_t b) { return a - b; });
  if (isa<arith::MulIOp>(def))
    return bin([](int64_t a, int64_t b) { return a * b; });
  if (isa<arith::FloorDivSIOp, arith::DivSIOp, arith::CeilDivSIOp>(def))
    return bin([&](int64_t a, int64_t b) -> int64_t {
      if (b == 0)
        return 0;
      if (isa<arith::CeilDivSIOp>(def))
        return (a + b - 1) / b;
      return a / b;
    });
  if (isa<arith::MinSIOp>(def))
    return bin([](int64_t a, int64_t b) { return std::min(a, b); });
  if (isa<arith::MaxSIOp>(def))
    return bin([](int64_t a, int64_t b) { return std::max(a, b); });
  if (isa<arith::IndexCastOp>(def))
    return index(def->getOperand(0), depth - 1);
  if (auto extract = dyn_cast<tensor::ExtractOp>(def)) {
    std::optional<ProbeTensor> t = tensor(extract.getTensor(), depth - 1);
    SmallVector<int64_t> idx;
    for (Value i : extract.getIndices()) {
      std::optional<int64_t> x = index(i, depth - 1);
      if (!x)
        return std::nullopt;
      idx.push_back(*x);
    }
    if (!t)
      return std::nullopt;
    std::optional<double> x = t->at(idx);
    if (!x)
      return std::nullopt;
    return static_cast<int64_t>(*x);
  }
  return std::nullopt;
}

std::optional<ProbeTensor> Evaluator::tensor(Value v, int depth) {
  if (depth <= 0)
    return std::nullopt;
  auto it = tensors.find(v);
  if (it != tensors.end())
    return it->second;
  std::optional<ProbeTensor> r;
  Operation *def = v.getDefiningOp();
  auto ty = dyn_cast<RankedTensorType>(v.getType());
  if (!def || !ty)
    return std::nullopt;
  DenseElementsAttr attr;
  if (matchConstantElements(v, attr)) {
    SmallVector<int64_t> shape(ty.getShape());
    bool isFloat = isa<FloatType>(ty.getElementType());
    bool isBool = ty.getElementType().isInteger(1);
    r = ProbeTensor{shape, [attr, shape, isFloat,
                            isBool](ArrayRef<int64_t> idx) {
                      int64_t l = attr.isSplat() ? 0 : linearize(idx, shape);
                      if (isFloat)
                        return std::optional<double>(
                            attr.getValues<APFloat>()[l].convertToDouble());
                      APInt x = attr.getValues<APInt>()[l];
                      return std::optional<double>(
                          isBool ? x.getZExtValue() : x.getSExtValue());
                    }};
  } else if (auto empty = dyn_cast<tensor::EmptyOp>(def)) {
    std::optional<SmallVector<int64_t>> s =
        sizesOf(empty.getMixedSizes(), depth);
    if (s)
      r = ProbeTensor{*s, [](ArrayRef<int64_t>) {
                        return std::optional<double>(0.0);
                      }};
  } else if (auto fill = dyn_cast<linalg::FillOp>(def)) {
    std::optional<ProbeTensor> init = tensor(fill.getOutputs()[0], depth - 1);
    std::optional<double> x = constScalar(fill.getInputs()[0]);
    if (!x)
      if (auto i = index(fill.getInputs()[0], depth - 1))
        x = static_cast<double>(*i);
    if (init && x)
      r = ProbeTensor{init->shape, [x](ArrayRef<int64_t>) { return x; }};
  } else if (auto castOp = dyn_cast<tensor::CastOp>(def)) {
    r = tensor(castOp.getSource(), depth - 1);
  } else if (auto slice = dyn_cast<tensor::ExtractSliceOp>(def)) {
    std::optional<ProbeTensor> src = tensor(slice.getSource(), depth - 1);
    auto offs = sizesOf(slice.getMixedOffsets(), depth);
    auto sizes = sizesOf(slice.getMixedSizes(), depth);
    auto strides = sizesOf(slice.getMixedStrides(), depth);
    if (src && offs && sizes && strides) {
      // The dropped (unit) dims of a rank-reducing slice.
      llvm::SmallBitVector dropped = slice.getDroppedDims();
      SmallVector<int64_t> shape;
      for (size_t d = 0; d < sizes->size(); ++d)
        if (!dropped[d])
          shape.push_back((*sizes)[d]);
      bool inBounds = true;
      for (size_t d = 0; d < sizes->size(); ++d)
        inBounds &= (*sizes)[d] == 0 ||
                    ((*offs)[d] >= 0 &&
                     (*offs)[d] + ((*sizes)[d] - 1) * (*strides)[d] <
                         src->shape[d]);
      if (inBounds) {
        ProbeTensor s = *src;
        SmallVector<int64_t> o = *offs, st = *strides;
        r = ProbeTensor{shape, [s, o, st, dropped](ArrayRef<int64_t> idx) {
                          SmallVector<int64_t> full;
                          size_t k = 0;
                          for (size_t d = 0; d < o.size(); ++d)
                            full.push_back(o[d] +
                                           (dropped[d] ? 0 : idx[k++]) * st[d]);
                          return s.at(full);
                        }};
      }
    }
  } else if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(def)) {
    std::optional<ProbeTensor> src = tensor(def->getOperand(0), depth - 1);
    SmallVector<int64_t> shape;
    if (auto e = dyn_cast<tensor::ExpandShapeOp>(def)) {
      if (auto s = sizesOf(e.getMixedOutputShape(), depth))
        shape = *s;
      else
        src.reset();
    } else if (src) {
      auto c = cast<tensor::CollapseShapeOp>(def);
      for (const ReassociationIndices &g : c.getReassociationIndices()) {
        int64_t n = 1;
        for (int64_t d : g)
          n *= src->shape[d];
        shape.push_back(n);
      }
    }
    if (src && numElements(shape) == numElements(src->shape)) {
      ProbeTensor s = *src;
      r = ProbeTensor{shape, [s, shape](ArrayRef<int64_t> idx) {
                        return s.at(
                            delinearize(linearize(idx, shape), s.shape));
                      }};
    }
  } else if (auto tr = dyn_cast<linalg::TransposeOp>(def)) {
    std::optional<ProbeTensor> src = tensor(tr.getInput(), depth - 1);
    if (src) {
      SmallVector<int64_t> perm(tr.getPermutation());
      SmallVector<int64_t> shape;
      for (int64_t p : perm)
        shape.push_back(src->shape[p]);
      ProbeTensor s = *src;
      r = ProbeTensor{shape, [s, perm](ArrayRef<int64_t> idx) {
                        SmallVector<int64_t> from(idx.size());
                        for (size_t d = 0; d < perm.size(); ++d)
                          from[perm[d]] = idx[d];
                        return s.at(from);
                      }};
    }
  } else if (auto ins = dyn_cast<tensor::InsertSliceOp>(def)) {
    std::optional<ProbeTensor> dst = tensor(ins.getDest(), depth - 1);
    std::optional<ProbeTensor> src = tensor(ins.getSource(), depth - 1);
    auto offs = sizesOf(ins.getMixedOffsets(), depth);
    auto sizes = sizesOf(ins.getMixedSizes(), depth);
    auto strides = sizesOf(ins.getMixedStrides(), depth);
    if (dst && src && offs && sizes && strides &&
        numElements(*sizes) == numElements(src->shape)) {
      ProbeTensor d = *dst, s = *src;
      SmallVector<int64_t> o = *offs, sz = *sizes, st = *strides;
      r = ProbeTensor{d.shape, [d, s, o, sz, st](ArrayRef<int64_t> idx) {
                        SmallVector<int64_t> in;
                        for (size_t k = 0; k < idx.size(); ++k) {
                          int64_t x = idx[k] - o[k];
                          if (x < 0 || x % st[k] || x / st[k] >= sz[k])
                            return d.at(idx);
                          in.push_back(x / st[k]);
                        }
                        return s.at(delinearize(linearize(in, sz), s.shape));
                      }};
    }
  } else if (auto g = dyn_cast<linalg::GenericOp>(def)) {
    r = generic(g, depth);
  } else if (auto fromElements = dyn_cast<tensor::FromElementsOp>(def)) {
    // Sizes gathered into a tensor (transformers 5's masks scale the batch
    // index by the sequence length this way).
    SmallVector<double> values;
    for (Value e : fromElements.getElements()) {
      std::optional<int64_t> x = index(e, depth - 1);
      if (!x || !e.getType().isIntOrIndex())
        break;
      values.push_back(static_cast<double>(*x));
    }
    if (values.size() == fromElements.getElements().size() &&
        ty.hasStaticShape()) {
      SmallVector<int64_t> shape(ty.getShape());
      r = ProbeTensor{shape, [values, shape](ArrayRef<int64_t> idx) {
                        return std::optional<double>(
                            values[linearize(idx, shape)]);
                      }};
    }
  }
  if (r && numElements(r->shape) > kMaxLazyElements)
    r.reset();
  if (r)
    tensors[v] = *r;
  return r;
}

std::optional<ProbeTensor> Evaluator::generic(linalg::GenericOp g,
                                              int depth) {
  if (g.getNumDpsInits() != 1 || g.getNumLoops() != g.getNumParallelLoops() ||
      !g.getIndexingMapsArray().back().isPermutation())
    return std::nullopt;
  std::optional<ProbeTensor> init = tensor(g.getDpsInits()[0], depth - 1);
  if (!init)
    return std::nullopt;
  SmallVector<ProbeTensor> inputs;
  for (Value in : g.getDpsInputs()) {
    std::optional<ProbeTensor> t = tensor(in, depth - 1);
    if (!t)
      return std::nullopt;
    inputs.push_back(*t);
  }
  AffineMap outMap = g.getIndexingMapsArray().back();
  SmallVector<int64_t> shape = init->shape;
  return materialize(shape, [&](ArrayRef<int64_t> outIdx) {
    SmallVector<int64_t> loops(outMap.getNumDims());
    for (unsigned r = 0; r < outMap.getNumResults(); ++r)
      loops[cast<AffineDimExpr>(outMap.getResult(r)).getPosition()] =
          outIdx[r];
    DenseMap<Value, double> memo;
    Value yielded = g.getRegion().front().getTerminator()->getOperand(0);
    return scalar(yielded, loops, g, inputs, memo, depth);
  });
}

std::optional<double> Evaluator::scalar(Value v, ArrayRef<int64_t> loops,
                                        linalg::GenericOp g,
                                        ArrayRef<ProbeTensor> inputs,
                                        DenseMap<Value, double> &memo,
                                        int depth) {
  if (depth <= 0)
    return std::nullopt;
  if (auto m = memo.find(v); m != memo.end())
    return m->second;
  Block &body = g.getRegion().front();
  std::optional<double> r;
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    if (arg.getOwner() != &body)
      return std::nullopt;
    unsigned n = arg.getArgNumber();
    if (n >= g.getNumDpsInputs())
      return std::nullopt; // the init's value: not used by parallel maps
    AffineMap map = g.getIndexingMapsArray()[n];
    SmallVector<int64_t> idx;
    for (AffineExpr e : map.getResults()) {
      if (auto d = dyn_cast<AffineDimExpr>(e))
        idx.push_back(loops[d.getPosition()]);
      else if (auto c = dyn_cast<AffineConstantExpr>(e))
        idx.push_back(c.getValue());
      else
        return std::nullopt;
    }
    r = inputs[n].at(idx);
  } else if (v.getParentBlock() != &body) {
    // A value from above: an index or a scalar constant.
    if (auto f = constScalar(v))
      r = f;
    else if (auto i = index(v, depth - 1))
      r = static_cast<double>(*i);
  } else {
    Operation *op = v.getDefiningOp();
    SmallVector<double> xs;
    if (!isa<linalg::IndexOp, arith::ConstantOp, tensor::ExtractOp>(op))
      for (Value o : op->getOperands()) {
        std::optional<double> x = scalar(o, loops, g, inputs, memo, depth - 1);
        if (!x)
          return std::nullopt;
        xs.push_back(*x);
      }
    if (auto idx = dyn_cast<linalg::IndexOp>(op)) {
      r = static_cast<double>(loops[idx.getDim()]);
    } else if (auto c = dyn_cast<arith::ConstantOp>(op)) {
      if (auto f = dyn_cast<FloatAttr>(c.getValue()))
        r = f.getValueAsDouble();
      else if (auto i = dyn_cast<IntegerAttr>(c.getValue()))
        r = c.getType().isInteger(1) ? static_cast<double>(i.getValue().getZExtValue())
                                     : static_cast<double>(i.getInt());
    } else if (auto ex = dyn_cast<tensor::ExtractOp>(op)) {
      std::optional<ProbeTensor> t = tensor(ex.getTensor(), depth - 1);
      SmallVector<int64_t> idx;
      for (Value i : ex.getIndices()) {
        std::optional<double> x = scalar(i, loops, g, inputs, memo, depth - 1);
        if (!x)
          return std::nullopt;
        idx.push_back(static_cast<int64_t>(*x));
      }
      bool ok = t.has_value();
      for (size_t d = 0; ok && d < idx.size(); ++d)
        ok = idx[d] >= 0 && idx[d] < t->shape[d];
      if (ok)
        r = t->at(idx);
    } else if (isa<arith::AddFOp, arith::AddIOp>(op)) {
      r = xs[0] + xs[1];
    } else if (isa<arith::SubFOp, arith::SubIOp>(op)) {
      r = xs[0] - xs[1];
    } else if (isa<arith::MulFOp, arith::MulIOp>(op)) {
      r = xs[0] * xs[1];
    } else if (isa<arith::DivFOp>(op)) {
      r = xs[0] / xs[1];
    } else if (isa<arith::NegFOp>(op)) {
      r = -xs[0];
    } else if (isa<arith::MaximumFOp, arith::MaxNumFOp, arith::MaxSIOp>(op)) {
      r = std::max(xs[0], xs[1]);
    } else if (isa<arith::MinimumFOp, arith::MinNumFOp, arith::MinSIOp>(op)) {
      r = std::min(xs[0], xs[1]);
    } else if (isa<arith::AndIOp>(op)) {
      r = static_cast<double>(static_cast<int64_t>(xs[0]) &
                              static_cast<int64_t>(xs[1]));
    } else if (isa<arith::OrIOp>(op)) {
      r = static_cast<double>(static_cast<int64_t>(xs[0]) |
                              static_cast<int64_t>(xs[1]));
    } else if (isa<arith::XOrIOp>(op)) {
      r = static_cast<double>(static_cast<int64_t>(xs[0]) ^
                              static_cast<int64_t>(xs[1]));
    } else if (isa<arith::SelectOp>(op)) {
      r = xs[0] != 0 ? xs[1] : xs[2];
    } else if (isa<arith::ExtFOp, arith::TruncFOp, arith::SIToFPOp,
                   arith::UIToFPOp, arith::IndexCastOp, arith::ExtSIOp,
                   arith::ExtUIOp, arith::FPToSIOp>(op)) {
      r = xs[0];
    } else if (isa<arith::TruncIOp>(op)) {
      r = op->getResult(0).getType().isInteger(1)
              ? static_cast<double>(static_cast<int64_t>(xs[0]) & 1)
              : xs[0];
    } else if (auto cmp = dyn_cast<arith::CmpIOp>(op)) {
      using P = arith::CmpIPredicate;
      double a = xs[0], b = xs[1];
      switch (cmp.getPredicate()) {
      case P::eq: r = a == b; break;
      case P::ne: r = a != b; break;
      case P::slt: case P::ult: r = a < b; break;
      case P::sle: case P::ule: r = a <= b; break;
      case P::sgt: case P::ugt: r = a > b; break;
      case P::sge: case P::uge: r = a >= b; break;
      }
    } else if (auto cmp = dyn_cast<arith::CmpFOp>(op)) {
      using P = arith::CmpFPredicate;
      double a = xs[0], b = xs[1];
      switch (cmp.getPredicate()) {
      case P::OEQ: case P::UEQ: r = a == b; break;
      case P::ONE: case P::UNE: r = a != b; break;
      case P::OLT: case P::ULT: r = a < b; break;
      case P::OLE: case P::ULE: r = a <= b; break;
      case P::OGT: case P::UGT: r = a > b; break;
      case P::OGE: case P::UGE: r = a >= b; break;
      default: break;
      }
    }
  }
  if (r)
    memo[v] = *r;
  return r;
}

/// The probe bases: two sets of sizes, so that a mask must have the causal
/// structure at two different sequence lengths (and batch sizes).
constexpr int64_t kProbeBases[] = {3, 8};
/// Integer constants up to this are taken as positions or lengths (a
/// window's width); larger ones are sentinels (INT32_MAX, float-min).
constexpr double kMaxPositionConstant = 1 << 20;
/// The distinct dynamic sizes the large probe varies (2^k combinations).
constexpr unsigned kMaxBigDims = 4;

/// The constant masks of folded windows are too large to list; from one of
/// rank >= 2 ([..., q, kv], queries aligned to the end of the keys), the
/// band widths W past which every pair is masked (a float at most
/// kMaskedThreshold), or every pair is true, or every pair is false (a
/// boolean condition either way round): a window the mask may express.
void noteConstantWindows(DenseElementsAttr d, SmallVectorImpl<int64_t> &out) {
  auto ty = cast<ShapedType>(d.getType());
  if (d.isSplat() || ty.getRank() < 2 || d.getNumElements() > (1 << 22))
    return;
  int64_t q = ty.getDimSize(ty.getRank() - 2),
          kv = ty.getDimSize(ty.getRank() - 1);
  if (q > kv || q * kv == 0)
    return;
  // kinds: 0 masked / true, 1 false.
  SmallVector<std::function<bool(int64_t)>> kinds;
  if (isa<FloatType>(d.getElementType())) {
    auto values = d.getValues<APFloat>();
    kinds.push_back([values](int64_t i) {
      return values[i].convertToDouble() <= kMaskedThreshold;
    });
  } else if (d.getElementType().isInteger(1)) {
    auto values = d.getValues<bool>();
    kinds.push_back([values](int64_t i) { return values[i]; });
    kinds.push_back([values](int64_t i) { return !values[i]; });
  } else {
    return;
  }
  for (const auto &is : kinds) {
    // 1 + the largest distance pos - key >= 0 of a pair that is not `is`.
    int64_t w = 1;
    for (int64_t i = 0, n = d.getNumElements(); i < n; ++i) {
      int64_t r = (i / kv) % q, key = i % kv, pos = r + kv - q;
      if (pos - key >= w && !is(i))
        w = pos - key + 1;
    }
    if (w < kv)
      out.push_back(w);
  }
}

} // namespace

SmallVector<int64_t> mlir::masformer::positionConstants(Value mask) {
  SmallVector<int64_t> found;
  auto note = [&](double x) {
    x = std::fabs(x);
    if (x <= kMaxPositionConstant && x == std::floor(x))
      found.push_back(static_cast<int64_t>(x));
  };
  // A float at its type's largest finite magnitude is a mask's fill value
  // (f16's -65504, finfo.min of a half-precision model), not a length.
  auto noteFloat = [&](const APFloat &x) {
    if (!x.isFinite() ||
        APFloat::getLargest(x.getSemantics(), x.isNegative()) != x)
      note(x.convertToDouble());
  };
  SmallVector<Value> work = {mask};
  DenseSet<Value> seen;
  DenseSet<Operation *> walked;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (!seen.insert(v).second)
      continue;
    Operation *op = v.getDefiningOp();
    if (!op || !walked.insert(op).second)
      continue;
    Attribute a;
    DenseElementsAttr elements;
    if (matchConstantElements(v, elements))
      a = elements;
    if (a || matchPattern(v, m_Constant(&a))) {
      if (auto f = dyn_cast<FloatAttr>(a))
        noteFloat(f.getValue());
      else if (auto i = dyn_cast<IntegerAttr>(a))
        note(static_cast<double>(i.getValue().getSExtValue()));
      else if (auto d = dyn_cast<DenseElementsAttr>(a)) {
        noteConstantWindows(d, found);
        if (d.isSplat() || d.getNumElements() <= 64) {
          if (isa<FloatType>(d.getElementType())) {
            for (APFloat x : d.getValues<APFloat>()) {
              noteFloat(x);
              if (d.isSplat())
                break;
            }
          } else if (d.getElementType().isIntOrIndex()) {
            for (APInt x : d.getValues<APInt>()) {
              note(static_cast<double>(x.getSExtValue()));
              if (d.isSplat())
                break;
            }
          }
        }
      }
      continue;
    }
    for (Value operand : op->getOperands())
      work.push_back(operand);
    // The operands of ops inside its regions too: the constants of linalg
    // bodies and the scalars they capture from above.
    op->walk([&](Operation *inner) {
      if (inner != op)
        llvm::append_range(work, inner->getOperands());
    });
  }
  llvm::sort(found);
  found.erase(llvm::unique(found), found.end());
  return found;
}

namespace {

/// Evaluates `mask` with `ev` and runs `check` on it: true, false, or
/// nullopt when it could not be evaluated (an unknown op, input data, or
/// more than kMaxProbeElements elements).
std::optional<bool>
probeOnce(Evaluator &ev, Value mask,
          llvm::function_ref<bool(ArrayRef<int64_t> shape,
                                  llvm::function_ref<double(int64_t)> at)>
              check,
          SmallVector<int64_t> &shape) {
  std::optional<ProbeTensor> t = ev.tensor(mask);
  if (!t)
    return std::nullopt;
  int64_t n = numElements(t->shape);
  if (n > kMaxProbeElements)
    return std::nullopt;
  std::vector<double> data(n);
  for (int64_t i = 0; i < n; ++i) {
    std::optional<double> x = t->at(delinearize(i, t->shape));
    if (!x)
      return std::nullopt;
    data[i] = *x;
  }
  shape = t->shape;
  return check(t->shape, [&](int64_t i) { return data[i]; });
}

} // namespace

/// The small probes cannot tell a causal mask from a sliding window (or
/// any rule) whose width exceeds their sizes: a window of 16 is the causal
/// triangle at 3 and 8 tokens. So a mask that passes them is probed once
/// more with sequence sizes beyond every position constant its computation
/// uses (each distinct dynamic size small or large in turn, so that the
/// batch can stay small while the sequence grows). It holds only if the
/// check passes wherever the mask could be evaluated, and it was evaluated
/// with both of its last two sizes that large; when no such evaluation
/// fits in kMaxProbeElements, nothing is concluded (the caller keeps the
/// mask as a mask).
bool mlir::masformer::probeMask(
    Value mask,
    llvm::function_ref<bool(ArrayRef<int64_t> shape,
                            llvm::function_ref<double(int64_t)> at)>
        check,
    int64_t minSeq) {
  auto ty = dyn_cast<RankedTensorType>(mask.getType());
  if (!ty)
    return false;
  SmallVector<int64_t> shape;
  // Static sizes: one evaluation at the only sizes there are.
  if (ty.hasStaticShape()) {
    Evaluator ev(kProbeBases[0]);
    return probeOnce(ev, mask, check, shape) == true;
  }
  size_t dims = 0;
  for (int64_t base : kProbeBases) {
    Evaluator ev(base);
    if (probeOnce(ev, mask, check, shape) != true)
      return false;
    dims = ev.numDims();
  }
  SmallVector<int64_t> constants = positionConstants(mask);
  int64_t bigBase =
      std::max((constants.empty() ? 0 : constants.back()) + 2, minSeq);
  if (bigBase <= kProbeBases[std::size(kProbeBases) - 1])
    return true;
  bool verified = false;
  unsigned combos = 1u << std::min<size_t>(dims, kMaxBigDims);
  for (unsigned big = 1; big < combos; ++big) {
    Evaluator ev(kProbeBases[0], bigBase, big);
    std::optional<bool> ok = probeOnce(ev, mask, check, shape);
    if (!ok)
      continue;
    if (!*ok)
      return false;
    if (shape.size() >= 2 && shape[shape.size() - 2] >= bigBase &&
        shape.back() >= bigBase)
      verified = true;
  }
  return verified;
}
