//===- SearchOps.cpp - ONNX TopK, ArgMax, NonZero, OneHot -------*- C++ -*-===//
//
// Ops between values and positions, which a mixture of experts' router
// uses: TopK (ArgMax in PhiMoE) picks each token's experts, OneHot and
// NonZero turn the picks into the tokens each expert takes. NonZero's
// result has a size known only at run time: a fresh dimension symbol,
// which the ops that follow (the gathers, the experts' products, the
// scatters) carry.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <limits>

using namespace mlir;
using namespace mlir::masformer;

namespace {

using utils::IteratorType;

/// Whether `x` is not zero (NaN is not zero, as ONNX and numpy count it).
Value isNonZero(OpBuilder &b, Location loc, Value x) {
  Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(x.getType()));
  if (isa<FloatType>(x.getType()))
    return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, x, zero);
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, x, zero);
}

/// Whether x comes strictly before y in a search's order of values, and
/// whether they are level: descending when `greater`, ascending otherwise;
/// NaN (equal to NaN) first when `nanFirst`, last otherwise.
std::pair<Value, Value> compareValues(OpBuilder &b, Location loc, Value x,
                                      Value y, bool greater, bool nanFirst) {
  if (!isa<FloatType>(x.getType())) {
    using P = arith::CmpIPredicate;
    return {arith::CmpIOp::create(b, loc, greater ? P::sgt : P::slt, x, y),
            arith::CmpIOp::create(b, loc, P::eq, x, y)};
  }
  using P = arith::CmpFPredicate;
  Value nanX = arith::CmpFOp::create(b, loc, P::UNO, x, x);
  Value nanY = arith::CmpFOp::create(b, loc, P::UNO, y, y);
  Value yes = arith::ConstantIntOp::create(b, loc, 1, 1);
  // x NaN and y a number (nanFirst), or the other way round.
  Value nanAhead =
      nanFirst ? arith::AndIOp::create(b, loc, nanX,
                                       arith::XOrIOp::create(b, loc, nanY, yes))
               : arith::AndIOp::create(
                     b, loc, arith::XOrIOp::create(b, loc, nanX, yes), nanY);
  Value ahead = arith::OrIOp::create(
      b, loc, arith::CmpFOp::create(b, loc, greater ? P::OGT : P::OLT, x, y),
      nanAhead);
  Value level =
      arith::OrIOp::create(b, loc, arith::CmpFOp::create(b, loc, P::OEQ, x, y),
                           arith::AndIOp::create(b, loc, nanX, nanY));
  return {ahead, level};
}

/// TopK's and ArgMax's input: rank 1 or more, float or int32/int64.
LogicalResult checkSearchInput(ONNXImporterImpl &im) {
  RankedTensorType t = im.inputType(0);
  Type et = t.getElementType();
  if (t.getRank() == 0)
    return im.error() << "expects a tensor of rank 1 or more, got " << t;
  if (!isa<FloatType>(et) && !et.isInteger(32) && !et.isInteger(64))
    return im.error() << "expects a float, int32 or int64 tensor, got " << t;
  return success();
}

/// NonZero: the coordinates of the non-zero elements, [rank, count], in
/// row-major order. On the host when the input is known there; otherwise a
/// reduction counts them (the result's size, a new symbol) and one loop over
/// the elements writes each one's coordinates: O(elements), sequential.
LogicalResult importNonZero(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({})))
    return failure();
  RankedTensorType t = im.inputType(0);
  int64_t rank = t.getRank();
  Type et = t.getElementType();
  if (rank == 0)
    return im.error() << "expects a tensor of rank 1 or more, got " << t;
  if (!isa<FloatType, IntegerType>(et))
    return im.error() << "expects a float, integer or bool tensor, got " << t;
  Type i64 = im.builder.getI64Type();
  if (const HostTensor *h = im.hostInput(0); h && !h->isSymbolic()) {
    SmallVector<int64_t> strides = stridesOf(h->shape);
    std::vector<int64_t> positions;
    for (int64_t e = 0, n = h->numElements(); e < n; ++e)
      if (h->isFloat() ? h->floats[e] != 0.0 : h->ints[e] != 0)
        positions.push_back(e);
    int64_t count = positions.size();
    HostTensor out;
    out.shape = {rank, count};
    out.elemType = i64;
    out.ints.resize(rank * count);
    for (int64_t k = 0; k < count; ++k)
      for (int64_t d = 0; d < rank; ++d)
        out.ints[d * count + k] = positions[k] / strides[d] % h->shape[d];
    im.setHostOutput(0, std::move(out));
    return success();
  }
  MLIRContext *ctx = im.getContext();
  OpBuilder &b = im.builder;
  Location loc = im.loc;
  Value x = im.input(0);
  SmallVector<AffineExpr> dims = im.inputDims(0);
  SmallVector<Value> sizes;
  for (AffineExpr e : dims)
    sizes.push_back(sizeValue(im, e));

  // count = sum over every element of (x != 0).
  Value zero0d = buildFilled(b, loc, RankedTensorType::get({}, i64), 0.0);
  auto count = linalg::GenericOp::create(
      b, loc, zero0d.getType(), ValueRange{x}, ValueRange{zero0d},
      ArrayRef<AffineMap>{AffineMap::getMultiDimIdentityMap(rank, ctx),
                          AffineMap::get(rank, 0, {}, ctx)},
      SmallVector<IteratorType>(rank, IteratorType::reduction),
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        Value one = arith::ExtUIOp::create(nb, nl, nb.getI64Type(),
                                           isNonZero(nb, nl, args[0]));
        linalg::YieldOp::create(
            nb, nl, arith::AddIOp::create(nb, nl, args[1], one).getResult());
      });
  Value n = arith::IndexCastOp::create(
      b, loc, b.getIndexType(),
      tensor::ExtractOp::create(b, loc, count.getResult(0), ValueRange{}));
  auto outType = RankedTensorType::get({rank, ShapedType::kDynamic}, i64);
  Value out = tensor::EmptyOp::create(b, loc, outType, ValueRange{n});

  // for e in [0, elements): if x[coords(e)] != 0, out[:, k++] = coords(e).
  Value total = arith::ConstantIndexOp::create(b, loc, 1);
  for (Value s : sizes)
    total = arith::MulIOp::create(b, loc, total, s);
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
  auto loop = scf::ForOp::create(
      b, loc, c0, total, c1, ValueRange{out, c0},
      [&](OpBuilder &lb, Location ll, Value e, ValueRange iter) {
        SmallVector<Value> coords = delinearize(lb, ll, e, sizes);
        Value v = tensor::ExtractOp::create(lb, ll, x, coords);
        auto branch = scf::IfOp::create(
            lb, ll, isNonZero(lb, ll, v),
            [&](OpBuilder &tb, Location tl) {
              Value acc = iter[0];
              for (int64_t d = 0; d < rank; ++d) {
                Value row = arith::ConstantIndexOp::create(tb, tl, d);
                Value c = arith::IndexCastOp::create(tb, tl, tb.getI64Type(),
                                                     coords[d]);
                acc = tensor::InsertOp::create(tb, tl, c, acc,
                                               ValueRange{row, iter[1]});
              }
              Value next = arith::AddIOp::create(
                  tb, tl, iter[1], arith::ConstantIndexOp::create(tb, tl, 1));
              scf::YieldOp::create(tb, tl, ValueRange{acc, next});
            },
            [&](OpBuilder &fb, Location fl) {
              scf::YieldOp::create(fb, fl, iter);
            });
        scf::YieldOp::create(lb, ll, branch.getResults());
      });
  // The count as the result's size: a new symbol bound to its tensor.dim.
  im.setOutput(0, loop.getResult(0));
  return success();
}

/// TopK: the k largest (or smallest) elements along an axis and their
/// positions, sorted, ties to the lower position; NaN counts as larger than
/// every number (as torch.topk and numpy's sort order it). One generic over
/// the results: output slot j scans the axis j + 1 times, each scan taking
/// the first element after the previous scan's in that order, so a row
/// costs n * k * (k + 1) / 2 comparisons (k is small: a router's experts
/// per token) and nothing is sorted or stored between slots.
LogicalResult importTopK(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({"axis", "largest", "sorted"})))
    return failure();
  if (failed(checkSearchInput(im)))
    return failure();
  RankedTensorType t = im.inputType(0);
  int64_t rank = t.getRank();
  Type et = t.getElementType();
  FailureOr<int64_t> axis = im.normalizeAxis(im.attrInt("axis", -1), rank);
  if (failed(axis))
    return failure();
  bool largest = im.attrInt("largest", 1) != 0;
  // sorted = 0 allows any order; the sorted one is one of them.
  FailureOr<const HostTensor *> kIn = im.requireHostScalar(1, "k");
  if (failed(kIn))
    return failure();
  int64_t k = (*kIn)->getInt(0);
  int64_t n = t.getDimSize(*axis);
  if (k < 0)
    return im.error() << "k is negative (" << k << ")";
  if (!ShapedType::isDynamic(n) && k > n)
    return im.error() << "k (" << k << ") is larger than dimension " << *axis
                      << " (" << n << ")";
  SmallVector<AffineExpr> inDims = im.inputDims(0);
  SmallVector<AffineExpr> dims(inDims);
  dims[*axis] = im.cst(k);
  if (ONNXImporterImpl::isBadDims(dims))
    return im.error() << "result has too many elements";

  MLIRContext *ctx = im.getContext();
  OpBuilder &b = im.builder;
  Location loc = im.loc;
  Value x = im.input(0);
  Value size = sizeValue(im, inDims[*axis]);
  Type i64 = b.getI64Type();
  Value valuesInit = im.emptyTensor(dims, et);
  Value indicesInit = im.emptyTensor(dims, i64);
  AffineMap id = AffineMap::getMultiDimIdentityMap(rank, ctx);

  // Whether (va, ia) comes strictly before (vb, ib) in the output's order:
  // NaN is the largest, first when largest, last otherwise.
  auto before = [&](OpBuilder &nb, Location nl, Value va, Value ia, Value vb,
                    Value ib) -> Value {
    auto [ahead, level] = compareValues(nb, nl, va, vb, largest, largest);
    Value firstIndex =
        arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::ult, ia, ib);
    return arith::OrIOp::create(
        nb, nl, ahead, arith::AndIOp::create(nb, nl, level, firstIndex));
  };

  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{valuesInit.getType(), indicesInit.getType()},
      ValueRange{}, ValueRange{valuesInit, indicesInit},
      ArrayRef<AffineMap>{id, id},
      SmallVector<IteratorType>(rank, IteratorType::parallel),
      [&](OpBuilder &nb, Location nl, ValueRange) {
        SmallVector<Value> at;
        for (int64_t d = 0; d < rank; ++d)
          at.push_back(linalg::IndexOp::create(nb, nl, d));
        Value slot = at[*axis];
        auto read = [&](OpBuilder &rb, Location rl, Value i) {
          SmallVector<Value> idx(at);
          idx[*axis] = i;
          return tensor::ExtractOp::create(rb, rl, x, idx).getResult();
        };
        Value c0 = arith::ConstantIndexOp::create(nb, nl, 0);
        Value c1 = arith::ConstantIndexOp::create(nb, nl, 1);
        Value none = arith::ConstantIndexOp::create(nb, nl, -1);
        Value zeroV = arith::ConstantOp::create(nb, nl, nb.getZeroAttr(et));
        Value noneYet = arith::ConstantIntOp::create(nb, nl, 1, 1);
        // Scan j + 1 times; scan p picks the first element after scan
        // p - 1's pick (none before the first scan).
        auto scans = scf::ForOp::create(
            nb, nl, c0, arith::AddIOp::create(nb, nl, slot, c1), c1,
            ValueRange{none, zeroV, noneYet},
            [&](OpBuilder &sb, Location sl, Value, ValueRange prev) {
              auto scan = scf::ForOp::create(
                  sb, sl, c0, size, c1, ValueRange{none, zeroV, noneYet},
                  [&](OpBuilder &ib, Location il, Value i, ValueRange best) {
                    Value v = read(ib, il, i);
                    Value afterPrev = arith::OrIOp::create(
                        ib, il, prev[2],
                        before(ib, il, prev[1], prev[0], v, i));
                    Value better = arith::OrIOp::create(
                        ib, il, best[2],
                        before(ib, il, v, i, best[1], best[0]));
                    Value take =
                        arith::AndIOp::create(ib, il, afterPrev, better);
                    Value notTake = arith::XOrIOp::create(
                        ib, il, take,
                        arith::ConstantIntOp::create(ib, il, 1, 1));
                    scf::YieldOp::create(
                        ib, il,
                        ValueRange{
                            arith::SelectOp::create(ib, il, take, i, best[0]),
                            arith::SelectOp::create(ib, il, take, v, best[1]),
                            arith::AndIOp::create(ib, il, best[2], notTake)});
                  });
              // A scan that finds nothing (k > n on a dynamic axis) keeps
              // the previous pick: the slots past the end repeat the last.
              Value found = arith::XOrIOp::create(
                  sb, sl, scan.getResult(2),
                  arith::ConstantIntOp::create(sb, sl, 1, 1));
              scf::YieldOp::create(
                  sb, sl,
                  ValueRange{arith::SelectOp::create(
                                 sb, sl, found, scan.getResult(0), prev[0]),
                             arith::SelectOp::create(
                                 sb, sl, found, scan.getResult(1), prev[1]),
                             arith::AndIOp::create(sb, sl, prev[2],
                                                   scan.getResult(2))});
            });
        // An empty axis (k > n = 0 at run time) has nothing to read: its
        // slots hold zero and position 0.
        Value pick = arith::MaxSIOp::create(nb, nl, scans.getResult(0), c0);
        Value value = arith::SelectOp::create(nb, nl, scans.getResult(2), zeroV,
                                              scans.getResult(1));
        linalg::YieldOp::create(
            nb, nl,
            ValueRange{value, arith::IndexCastOp::create(
                                  nb, nl, nb.getI64Type(), pick)});
      });
  im.setOutput(0, generic.getResult(0), dims);
  im.setOutput(1, generic.getResult(1), dims);
  return success();
}

/// OneHot: out[..., d, ...] = values[1] where the index (negative ones
/// counted from depth) equals d, else values[0]; indices outside
/// [-depth, depth) give a row of values[0].
LogicalResult importOneHot(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({"axis"})))
    return failure();
  RankedTensorType it = im.inputType(0), vt = im.inputType(2);
  Type ie = it.getElementType();
  if (!isa<IntegerType, FloatType>(ie))
    return im.error() << "indices must be integers or floats, got " << it;
  if (vt.getRank() != 1 || vt.getDimSize(0) != 2)
    return im.error() << "values must be a tensor of 2 elements ([off, on]), "
                         "got "
                      << vt;
  int64_t rank = it.getRank() + 1;
  FailureOr<int64_t> axis = im.normalizeAxis(im.attrInt("axis", -1), rank);
  if (failed(axis))
    return failure();
  FailureOr<const HostTensor *> depthIn =
      im.requireHostScalar(1, "depth", /*allowSymbolic=*/false,
                           /*integer=*/false);
  if (failed(depthIn))
    return failure();
  int64_t depth = (*depthIn)->getInt(0);
  if (depth < 1)
    return im.error() << "depth must be positive, got " << depth;
  SmallVector<AffineExpr> dims = im.inputDims(0);
  dims.insert(dims.begin() + *axis, im.cst(depth));
  if (ONNXImporterImpl::isBadDims(dims))
    return im.error() << "result has too many elements";
  MLIRContext *ctx = im.getContext();
  SmallVector<AffineExpr> indExprs;
  for (int64_t d = 0; d < rank; ++d)
    if (d != *axis)
      indExprs.push_back(getAffineDimExpr(d, ctx));
  Type et = vt.getElementType();
  Value values = im.input(2);
  Value init = im.emptyTensor(dims, et);
  auto generic = linalg::GenericOp::create(
      im.builder, im.loc, init.getType(), ValueRange{im.input(0)},
      ValueRange{init},
      ArrayRef<AffineMap>{AffineMap::get(rank, 0, indExprs, ctx),
                          AffineMap::getMultiDimIdentityMap(rank, ctx)},
      SmallVector<IteratorType>(rank, IteratorType::parallel),
      [&](OpBuilder &b, Location loc, ValueRange args) {
        Type i64 = b.getI64Type();
        Value index = args[0];
        // Float indices count by their integer part, as ONNX casts them.
        if (isa<FloatType>(index.getType()))
          index = arith::FPToSIOp::create(b, loc, i64, index);
        else if (index.getType() != i64)
          index = arith::ExtSIOp::create(b, loc, i64, index);
        Value depthV = arith::ConstantIntOp::create(b, loc, i64, depth);
        Value zero = arith::ConstantIntOp::create(b, loc, i64, 0);
        Value neg = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                          index, zero);
        index = arith::SelectOp::create(
            b, loc, neg, arith::AddIOp::create(b, loc, index, depthV), index);
        Value d = arith::IndexCastOp::create(
            b, loc, i64, linalg::IndexOp::create(b, loc, *axis));
        Value on =
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, index, d);
        Value pick = arith::SelectOp::create(
            b, loc, on, arith::ConstantIndexOp::create(b, loc, 1),
            arith::ConstantIndexOp::create(b, loc, 0));
        linalg::YieldOp::create(
            b, loc,
            tensor::ExtractOp::create(b, loc, values, ValueRange{pick})
                .getResult());
      });
  im.setOutput(0, generic.getResult(0), dims);
  return success();
}

/// ArgMax / ArgMin: the position of the largest (smallest) element along
/// an axis, the first one of equal elements (the last with
/// select_last_index); NaN counts as larger than every number for ArgMax
/// and smaller for ArgMin, so that it is picked as numpy and torch pick it.
/// One reduction generic carrying the best value and its position.
LogicalResult importArgMax(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({"axis", "keepdims", "select_last_index"})))
    return failure();
  if (failed(checkSearchInput(im)))
    return failure();
  bool isMax = im.node->op_type() == "ArgMax";
  RankedTensorType t = im.inputType(0);
  int64_t rank = t.getRank();
  Type et = t.getElementType();
  FailureOr<int64_t> axis = im.normalizeAxis(im.attrInt("axis", 0), rank);
  if (failed(axis))
    return failure();
  bool keepDims = im.attrInt("keepdims", 1) != 0;
  bool last = im.attrInt("select_last_index", 0) != 0;
  SmallVector<AffineExpr> inDims = im.inputDims(0), dims, keptDims;
  for (int64_t d = 0; d < rank; ++d) {
    if (d != *axis)
      dims.push_back(inDims[d]);
    keptDims.push_back(d == *axis ? im.cst(1) : inDims[d]);
  }
  MLIRContext *ctx = im.getContext();
  OpBuilder &b = im.builder;
  Location loc = im.loc;
  bool isFloat = isa<FloatType>(et);
  Type i64 = b.getI64Type();
  // The best value so far starts at the far end of the order (any element
  // replaces it, the first one included), its position at 0.
  double start;
  if (isFloat)
    start = isMax ? -std::numeric_limits<double>::infinity()
                  : std::numeric_limits<double>::infinity();
  else
    start = static_cast<double>(isMax ? std::numeric_limits<int64_t>::min()
                                      : std::numeric_limits<int64_t>::max());
  if (!isFloat && et.isInteger(32))
    start = isMax ? std::numeric_limits<int32_t>::min()
                  : std::numeric_limits<int32_t>::max();
  Value bestInit =
      buildFilled(b, loc, im.typeFor(dims, et), start, im.dynamicSizes(dims));
  Value posInit =
      buildFilled(b, loc, im.typeFor(dims, i64), 0.0, im.dynamicSizes(dims));
  // The first position is taken whatever it holds: `seen` is false until
  // then (a row of -inf, or of NaN for ArgMin, must give its first index).
  Value seenInit = buildFilled(b, loc, im.typeFor(dims, b.getI1Type()), 0.0,
                               im.dynamicSizes(dims));
  SmallVector<AffineExpr> outExprs;
  SmallVector<IteratorType> iters;
  for (int64_t d = 0; d < rank; ++d) {
    iters.push_back(d == *axis ? IteratorType::reduction
                               : IteratorType::parallel);
    if (d != *axis)
      outExprs.push_back(getAffineDimExpr(d, ctx));
  }
  AffineMap outMap = AffineMap::get(rank, 0, outExprs, ctx);
  auto generic = linalg::GenericOp::create(
      b, loc,
      TypeRange{bestInit.getType(), posInit.getType(), seenInit.getType()},
      ValueRange{im.input(0)}, ValueRange{bestInit, posInit, seenInit},
      ArrayRef<AffineMap>{AffineMap::getMultiDimIdentityMap(rank, ctx), outMap,
                          outMap, outMap},
      iters, [&](OpBuilder &nb, Location nl, ValueRange args) {
        Value x = args[0], best = args[1], pos = args[2], seen = args[3];
        // NaN is picked by both (numpy's and torch's argmax and argmin).
        auto [better, same] =
            compareValues(nb, nl, x, best, isMax, /*nanFirst=*/true);
        Value take = better;
        if (last)
          take = arith::OrIOp::create(nb, nl, take, same);
        Value notSeen = arith::XOrIOp::create(
            nb, nl, seen, arith::ConstantIntOp::create(nb, nl, 1, 1));
        take = arith::OrIOp::create(nb, nl, take, notSeen);
        Value here = arith::IndexCastOp::create(
            nb, nl, nb.getI64Type(), linalg::IndexOp::create(nb, nl, *axis));
        linalg::YieldOp::create(
            nb, nl,
            ValueRange{arith::SelectOp::create(nb, nl, take, x, best),
                       arith::SelectOp::create(nb, nl, take, here, pos),
                       arith::ConstantIntOp::create(nb, nl, 1, 1)});
      });
  Value out = generic.getResult(1);
  if (keepDims) {
    im.setOutput(0, buildReshapeDims(im, out, dims, keptDims), keptDims);
    return success();
  }
  im.setOutput(0, out, dims);
  return success();
}

} // namespace

void mlir::masformer::registerSearchHandlers(
    llvm::StringMap<NodeHandler> &handlers) {
  handlers["NonZero"] = importNonZero;
  handlers["TopK"] = importTopK;
  handlers["OneHot"] = importOneHot;
  handlers["ArgMax"] = importArgMax;
  handlers["ArgMin"] = importArgMax;
}
