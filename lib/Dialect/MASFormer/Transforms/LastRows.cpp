//===- LastRows.cpp - Ops computed on the rows a slice takes ----*- C++ -*-===//
//
// A slice of a function's result moved up through the ops that compute it
// (docs/generate.md: a decode entry's logits of its last rows), each op
// then computed on that part only.
//
//===----------------------------------------------------------------------===//

#include "LastRows.h"
#include "masformer/Dialect/MASFormer/IR/MASFormerOps.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/TilingInterface.h"
#include "mlir/Interfaces/ValueBoundsOpInterface.h"

using namespace mlir;
using namespace mlir::masformer;

namespace {

/// Whether `a` and `b` are provably the same index (two tensor.dim ops of
/// one value, for one).
bool provablyEqual(ValueBoundsConstraintSet::Variable a,
                   ValueBoundsConstraintSet::Variable b) {
  FailureOr<bool> eq = ValueBoundsConstraintSet::areEqual(a, b);
  return succeeded(eq) && *eq;
}
bool provablyEqual(OpFoldResult a, OpFoldResult b) {
  return isEqualConstantIntOrValue(a, b) ||
         provablyEqual(ValueBoundsConstraintSet::Variable(a),
                       ValueBoundsConstraintSet::Variable(b));
}

/// Whether `a` and `b` take the same part of the same tensor.
bool sameSlice(tensor::ExtractSliceOp a, tensor::ExtractSliceOp b) {
  auto same = [](ArrayRef<OpFoldResult> x, ArrayRef<OpFoldResult> y) {
    return x.size() == y.size() && llvm::all_of(llvm::zip(x, y), [](auto p) {
             return provablyEqual(std::get<0>(p), std::get<1>(p));
           });
  };
  return a.getSource() == b.getSource() && a.getType() == b.getType() &&
         same(a.getMixedOffsets(), b.getMixedOffsets()) &&
         same(a.getMixedSizes(), b.getMixedSizes()) &&
         same(a.getMixedStrides(), b.getMixedStrides());
}

/// Whether `slice` takes a box of its source: unit strides, no dimension
/// dropped.
bool isPlainSlice(tensor::ExtractSliceOp slice) {
  return slice.getType().getRank() == slice.getSourceType().getRank() &&
         llvm::all_of(slice.getMixedStrides(),
                      [](OpFoldResult s) { return isConstantIntValue(s, 1); });
}

/// For a slice of an expand_shape's result, the same part of its source,
/// when each reassociation group takes either all of its dimensions or a
/// part of one and unit dimensions otherwise (a [b, s] -> [b, s, 1]
/// expansion sliced on s). Not a part of a merged dimension: [b * s] ->
/// [b, s] sliced on s is not one slice of the source.
FailureOr<Value> sliceExpandSource(OpBuilder &b, tensor::ExtractSliceOp slice,
                                   tensor::ExpandShapeOp expand) {
  if (!isPlainSlice(slice))
    return failure();
  SmallVector<OpFoldResult> offsets = slice.getMixedOffsets();
  SmallVector<OpFoldResult> sizes = slice.getMixedSizes();
  SmallVector<OpFoldResult> outShape = expand.getMixedOutputShape();
  SmallVector<OpFoldResult> srcOffsets, srcSizes;
  Location loc = slice.getLoc();
  for (auto [g, group] : llvm::enumerate(expand.getReassociationIndices())) {
    auto whole = [&](int64_t d) {
      return isConstantIntValue(offsets[d], 0) &&
             provablyEqual(sizes[d], outShape[d]);
    };
    auto unit = [&](int64_t d) {
      return expand.getResultType().getDimSize(d) == 1;
    };
    if (llvm::all_of(group, whole)) {
      srcOffsets.push_back(b.getIndexAttr(0));
      srcSizes.push_back(tensor::getMixedSize(b, loc, expand.getSrc(), g));
      continue;
    }
    // One dimension sliced, the others of size 1.
    int64_t part = -1;
    for (int64_t d : group)
      if (!unit(d)) {
        if (part >= 0)
          return failure();
        part = d;
      }
    if (part < 0)
      return failure();
    srcOffsets.push_back(offsets[part]);
    srcSizes.push_back(sizes[part]);
  }
  SmallVector<OpFoldResult> ones(srcOffsets.size(), b.getIndexAttr(1));
  Value sliced = tensor::ExtractSliceOp::create(b, loc, expand.getSrc(),
                                                srcOffsets, srcSizes, ones);
  return tensor::ExpandShapeOp::create(b, loc, slice.getType(), sliced,
                                       expand.getReassociationIndices(), sizes)
      .getResult();
}

/// For a slice of a collapse_shape's result, the same part of its source,
/// when each dimension merged from several (of static sizes) is taken
/// whole ([b, s, h, d] -> [b, s, h * d] sliced on s). Nothing here may read
/// the collapse's result: it is erased once replaced.
FailureOr<Value> sliceCollapseSource(OpBuilder &b, tensor::ExtractSliceOp slice,
                                     tensor::CollapseShapeOp collapse) {
  if (!isPlainSlice(slice))
    return failure();
  SmallVector<OpFoldResult> offsets = slice.getMixedOffsets();
  SmallVector<OpFoldResult> sizes = slice.getMixedSizes();
  Location loc = slice.getLoc();
  SmallVector<OpFoldResult> srcOffsets, srcSizes;
  for (auto [g, group] : llvm::enumerate(collapse.getReassociationIndices())) {
    if (group.size() == 1) {
      srcOffsets.push_back(offsets[g]);
      srcSizes.push_back(sizes[g]);
      continue;
    }
    // Merged dimensions of static sizes (heads and head size), all taken.
    int64_t merged = 1;
    for (int64_t d : group) {
      if (collapse.getSrcType().isDynamicDim(d))
        return failure();
      merged *= collapse.getSrcType().getDimSize(d);
    }
    if (!isConstantIntValue(offsets[g], 0) ||
        !isConstantIntValue(sizes[g], merged))
      return failure();
    for (int64_t d : group) {
      srcOffsets.push_back(b.getIndexAttr(0));
      srcSizes.push_back(tensor::getMixedSize(b, loc, collapse.getSrc(), d));
    }
  }
  SmallVector<OpFoldResult> ones(srcOffsets.size(), b.getIndexAttr(1));
  Value sliced = tensor::ExtractSliceOp::create(b, loc, collapse.getSrc(),
                                                srcOffsets, srcSizes, ones);
  return tensor::CollapseShapeOp::create(b, loc, slice.getType(), sliced,
                                         collapse.getReassociationIndices())
      .getResult();
}

/// Rows [off, off + rows) of each of `batch` sequences of `seq` positions,
/// of a value whose first dimension merges them ([batch * seq, ...]).
struct MergedRows {
  OpFoldResult batch, seq, off, rows;
};

/// The loop of `op` that its result's first dimension is, when it is a
/// parallel loop that indexes only the first dimension of the operands it
/// reads and the body does not read as an index.
std::optional<unsigned> rowLoop(linalg::LinalgOp op) {
  if (!op.hasPureTensorSemantics() || op->getNumResults() != 1)
    return std::nullopt;
  AffineMap outMap = op.getIndexingMapMatchingResult(op->getResult(0));
  if (outMap.getNumResults() == 0)
    return std::nullopt;
  auto row = dyn_cast<AffineDimExpr>(outMap.getResult(0));
  if (!row || op.getIteratorTypesArray()[row.getPosition()] !=
                  utils::IteratorType::parallel)
    return std::nullopt;
  unsigned loop = row.getPosition();
  bool indexed = false;
  op->walk([&](linalg::IndexOp i) { indexed |= i.getDim() == loop; });
  if (indexed)
    return std::nullopt;
  for (OpOperand &o : op->getOpOperands()) {
    AffineMap m = op.getMatchingIndexingMap(&o);
    if (!m.isFunctionOfDim(loop))
      continue;
    auto first = dyn_cast<AffineDimExpr>(m.getResult(0));
    if (!first || first.getPosition() != loop)
      return std::nullopt;
    for (unsigned r = 1; r < m.getNumResults(); ++r)
      if (m.getResult(r).isFunctionOfDim(loop))
        return std::nullopt;
  }
  return loop;
}

/// Whether restrictMergedRows can compute `v` on the rows of `m` (it then
/// creates ops; this creates none).
bool canRestrictMergedRows(Value v, const MergedRows &m) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  Operation *def = v.getDefiningOp();
  if (!t || t.getRank() < 1 || !def)
    return false;
  if (isa<tensor::EmptyOp>(def))
    return true;
  if (auto fill = dyn_cast<linalg::FillOp>(def);
      fill && fill.hasPureTensorSemantics())
    return canRestrictMergedRows(fill.getOutputs()[0], m);
  if (!v.hasOneUse())
    return false;
  if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(def)) {
    using Var = ValueBoundsConstraintSet::Variable;
    return collapse.getReassociationIndices()[0] ==
               ReassociationIndices{0, 1} &&
           provablyEqual(Var(collapse.getSrc(), 0), Var(m.batch)) &&
           provablyEqual(Var(collapse.getSrc(), 1), Var(m.seq));
  }
  auto op = dyn_cast<linalg::LinalgOp>(def);
  std::optional<unsigned> loop = op ? rowLoop(op) : std::nullopt;
  if (!loop)
    return false;
  for (OpOperand &o : op->getOpOperands())
    if (op.getMatchingIndexingMap(&o).isFunctionOfDim(*loop) &&
        !canRestrictMergedRows(o.get(), m))
      return false;
  return true;
}

/// `v` ([batch * seq, ...]) on the rows of `m` only ([batch * rows, ...]),
/// where canRestrictMergedRows(v, m): linalg ops computed row by row (the
/// products and bias adds of a model that flattens its rows for a Gemm, as
/// GPT-2's Conv1D does), their empty and filled inits, and at the top the
/// collapse of a [batch, seq, ...] value, whose source is sliced instead
/// (the slice is added to `slices`).
Value restrictMergedRows(OpBuilder &b, Value v, const MergedRows &m,
                         SmallVectorImpl<Operation *> &slices) {
  Operation *def = v.getDefiningOp();
  Location loc = v.getLoc();
  if (auto empty = dyn_cast<tensor::EmptyOp>(def)) {
    AffineExpr s0, s1;
    bindSymbols(b.getContext(), s0, s1);
    SmallVector<OpFoldResult> sizes = empty.getMixedSizes();
    sizes[0] = affine::makeComposedFoldedAffineApply(b, loc, s0 * s1,
                                                     {m.batch, m.rows});
    return tensor::EmptyOp::create(b, loc, sizes,
                                   empty.getType().getElementType())
        .getResult();
  }
  if (auto fill = dyn_cast<linalg::FillOp>(def))
    return linalg::FillOp::create(b, loc, fill.getInputs(),
                                  ValueRange{restrictMergedRows(
                                      b, fill.getOutputs()[0], m, slices)})
        .getResult(0);
  if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(def)) {
    Value src = collapse.getSrc();
    int64_t rank = collapse.getSrcType().getRank();
    SmallVector<OpFoldResult> offsets(rank, b.getIndexAttr(0));
    SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(b, loc, src);
    SmallVector<OpFoldResult> ones(rank, b.getIndexAttr(1));
    offsets[1] = m.off;
    sizes[0] = m.batch;
    sizes[1] = m.rows;
    auto part =
        tensor::ExtractSliceOp::create(b, loc, src, offsets, sizes, ones);
    slices.push_back(part);
    return tensor::CollapseShapeOp::create(b, loc, part,
                                           collapse.getReassociationIndices())
        .getResult();
  }
  auto op = cast<linalg::LinalgOp>(def);
  unsigned loop = *rowLoop(op);
  IRMapping map;
  Value init;
  for (OpOperand &o : op->getOpOperands()) {
    if (!op.getMatchingIndexingMap(&o).isFunctionOfDim(loop))
      continue; // a weight or a bias
    Value restricted = restrictMergedRows(b, o.get(), m, slices);
    map.map(o.get(), restricted);
    if (op.isDpsInit(&o))
      init = restricted;
  }
  Operation *clone = b.clone(*op, map);
  clone->getResult(0).setType(init.getType());
  return clone->getResult(0);
}

/// For a slice of an expand_shape of merged rows, [batch * seq, n] ->
/// [batch, seq, n], that takes rows [off, off + rows) of every sequence
/// and all else: the expansion of those rows alone (restrictMergedRows).
FailureOr<Value> sliceMergedRows(OpBuilder &b, tensor::ExtractSliceOp slice,
                                 tensor::ExpandShapeOp expand,
                                 SmallVectorImpl<Operation *> &slices) {
  auto groups = expand.getReassociationIndices();
  if (!isPlainSlice(slice) || groups.empty() ||
      groups[0] != ReassociationIndices{0, 1})
    return failure();
  SmallVector<OpFoldResult> offsets = slice.getMixedOffsets();
  SmallVector<OpFoldResult> sizes = slice.getMixedSizes();
  SmallVector<OpFoldResult> shape = expand.getMixedOutputShape();
  for (int64_t d = 0; d < slice.getType().getRank(); ++d)
    if (d != 1 && (!isConstantIntValue(offsets[d], 0) ||
                   !provablyEqual(sizes[d], shape[d])))
      return failure();
  MergedRows m{shape[0], shape[1], offsets[1], sizes[1]};
  if (!canRestrictMergedRows(expand.getSrc(), m))
    return failure();
  Value rows = restrictMergedRows(b, expand.getSrc(), m, slices);
  return tensor::ExpandShapeOp::create(b, slice.getLoc(), slice.getType(), rows,
                                       groups, sizes)
      .getResult();
}

/// Erases the ops that computed `values` and are now dead, and those
/// before them that die with them.
void eraseDeadProducers(RewriterBase &rewriter, ValueRange values) {
  SmallVector<Operation *> work;
  for (Value v : values)
    if (Operation *d = v.getDefiningOp())
      work.push_back(d);
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (!isOpTriviallyDead(op))
      continue;
    for (Value v : op->getOperands())
      if (Operation *d = v.getDefiningOp())
        work.push_back(d);
    rewriter.eraseOp(op);
  }
}

/// The sizes of an attention's result: its queries' batch, heads and rows,
/// its values' head size.
SmallVector<OpFoldResult> attentionSizes(OpBuilder &b, AttentionOp op) {
  Location loc = op.getLoc();
  SmallVector<OpFoldResult> sizes;
  for (int64_t d = 0; d < 3; ++d)
    sizes.push_back(tensor::getMixedSize(b, loc, op.getQuery(), d));
  sizes.push_back(tensor::getMixedSize(b, loc, op.getValue(), 3));
  return sizes;
}

/// For a slice of an attention's result that takes its last query rows
/// and everything else, the attention of those rows alone: queries align
/// to the end of the keys, so the last rows keep their positions and see
/// the same keys. Not with a mask, which would need the same rows.
FailureOr<Value> sliceAttentionQueries(OpBuilder &b,
                                       tensor::ExtractSliceOp slice,
                                       AttentionOp attn) {
  auto rt = dyn_cast<RankedTensorType>(attn.getResult().getType());
  if (attn.getMask() || !rt || rt.getRank() != 4 || !isPlainSlice(slice))
    return failure();
  SmallVector<OpFoldResult> offsets = slice.getMixedOffsets();
  SmallVector<OpFoldResult> sizes = slice.getMixedSizes();
  SmallVector<OpFoldResult> full = attentionSizes(b, attn);
  for (int64_t d : {0, 1, 3})
    if (!isConstantIntValue(offsets[d], 0) || !provablyEqual(sizes[d], full[d]))
      return failure();
  // The rows end where the queries do.
  AffineExpr s0, s1;
  bindSymbols(b.getContext(), s0, s1);
  ValueBoundsConstraintSet::Variable end(
      AffineMap::get(0, 2, s0 + s1),
      ArrayRef<ValueBoundsConstraintSet::Variable>{
          ValueBoundsConstraintSet::Variable(offsets[2]),
          ValueBoundsConstraintSet::Variable(sizes[2])});
  if (!provablyEqual(end, ValueBoundsConstraintSet::Variable(full[2])))
    return failure();
  Location loc = slice.getLoc();
  Value query = attn.getQuery();
  SmallVector<OpFoldResult> ones(4, b.getIndexAttr(1));
  Value rows = tensor::ExtractSliceOp::create(
      b, loc, query,
      {b.getIndexAttr(0), b.getIndexAttr(0), offsets[2], b.getIndexAttr(0)},
      {sizes[0], sizes[1], sizes[2], tensor::getMixedSize(b, loc, query, 3)},
      ones);
  auto sliced = cast<AttentionOp>(b.clone(*attn));
  sliced.getQueryMutable().assign(rows);
  sliced.getResult().setType(slice.getType());
  return sliced.getResult();
}

} // namespace

/// Computes each slice marked kRowsSliceAttr from the same part of its
/// producer's operands, up the chain of ops that read no other part of
/// theirs: linalg ops (by their tiling interface, which computes exactly
/// the slice), reshapes that keep the slice one slice, and attentions
/// (their last query rows). A producer is sliced only when every reader of
/// its result takes that same slice, so no op is computed twice; the chain
/// ends at one that is read whole elsewhere (a layer's input, which its
/// keys and values read), at an op none of these are (a concat), or at a
/// merged [batch * sequence] dimension.
void mlir::masformer::computeOnlySlices(func::FuncOp f) {
  IRRewriter rewriter(f.getContext());
  auto step = [&](tensor::ExtractSliceOp slice) {
    auto result = dyn_cast<OpResult>(slice.getSource());
    Operation *producer = result ? result.getOwner() : nullptr;
    if (!producer || producer->getNumResults() != 1)
      return false;
    // A part of an empty tensor (an init) is an empty tensor of that size:
    // nothing allocates the whole.
    if (isa<tensor::EmptyOp>(producer)) {
      rewriter.setInsertionPoint(slice);
      SmallVector<OpFoldResult> sizes;
      for (auto [d, size] : llvm::enumerate(slice.getMixedSizes()))
        if (!slice.getDroppedDims().test(d))
          sizes.push_back(size);
      rewriter.replaceOpWithNewOp<tensor::EmptyOp>(
          slice, sizes, slice.getType().getElementType());
      return true;
    }
    // A part of a filled tensor (a reduction's init, which many share):
    // that part filled.
    if (auto fill = dyn_cast<linalg::FillOp>(producer);
        fill && fill.hasPureTensorSemantics() &&
        slice.getType().getRank() == slice.getSourceType().getRank()) {
      rewriter.setInsertionPoint(slice);
      auto part = tensor::ExtractSliceOp::create(
          rewriter, slice.getLoc(), fill.getOutputs()[0],
          slice.getMixedOffsets(), slice.getMixedSizes(),
          slice.getMixedStrides());
      part->setAttr(kRowsSliceAttr, rewriter.getUnitAttr());
      rewriter.replaceOpWithNewOp<linalg::FillOp>(slice, fill.getInputs(),
                                                  ValueRange{part});
      return true;
    }
    SmallVector<Value> inputs(producer->getOperands());
    SmallVector<tensor::ExtractSliceOp> readers;
    SmallVector<tensor::DimOp> sizes;
    for (Operation *u : result.getUsers()) {
      if (auto d = dyn_cast<tensor::DimOp>(u)) {
        sizes.push_back(d);
        continue;
      }
      auto s = dyn_cast<tensor::ExtractSliceOp>(u);
      if (!s || !sameSlice(s, slice))
        return false; // perhaps once the other readers are sliced too
      readers.push_back(s);
    }
    // The result's sizes (the slice's own, for one) from the operands'.
    if (!sizes.empty()) {
      rewriter.setInsertionPoint(producer);
      SmallVector<OpFoldResult> shape;
      if (auto attn = dyn_cast<AttentionOp>(producer)) {
        shape = attentionSizes(rewriter, attn);
      } else {
        ReifiedRankedShapedTypeDims reified;
        if (failed(reifyResultShapes(rewriter, producer, reified)))
          return false;
        shape = reified[0];
      }
      for (tensor::DimOp d : sizes) {
        std::optional<int64_t> i = d.getConstantIndex();
        if (!i)
          return false;
        rewriter.replaceOp(d, getValueOrCreateConstantIndexOp(
                                  rewriter, d.getLoc(), shape[*i]));
      }
    }
    rewriter.setInsertionPoint(slice);
    Value replacement;
    SmallVector<Operation *> newSlices;
    if (auto linalgOp = dyn_cast<linalg::LinalgOp>(producer);
        linalgOp && linalgOp.hasPureTensorSemantics() &&
        isa<TilingInterface>(producer)) {
      FailureOr<TilingResult> tiled =
          tensor::replaceExtractSliceWithTiledProducer(rewriter, slice, result);
      if (failed(tiled) || tiled->tiledValues.size() != 1)
        return false;
      replacement = tiled->tiledValues[0];
      newSlices = tiled->generatedSlices;
    } else if (auto expand = dyn_cast<tensor::ExpandShapeOp>(producer)) {
      FailureOr<Value> v = sliceExpandSource(rewriter, slice, expand);
      if (succeeded(v))
        newSlices.push_back(cast<tensor::ExpandShapeOp>(v->getDefiningOp())
                                .getSrc()
                                .getDefiningOp());
      else
        v = sliceMergedRows(rewriter, slice, expand, newSlices);
      if (failed(v))
        return false;
      replacement = *v;
    } else if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(producer)) {
      FailureOr<Value> v = sliceCollapseSource(rewriter, slice, collapse);
      if (failed(v))
        return false;
      replacement = *v;
      newSlices.push_back(cast<tensor::CollapseShapeOp>(v->getDefiningOp())
                              .getSrc()
                              .getDefiningOp());
    } else if (auto attn = dyn_cast<AttentionOp>(producer)) {
      FailureOr<Value> v = sliceAttentionQueries(rewriter, slice, attn);
      if (failed(v))
        return false;
      replacement = *v;
      newSlices.push_back(
          cast<AttentionOp>(v->getDefiningOp()).getQuery().getDefiningOp());
    } else {
      return false;
    }
    for (Operation *s : newSlices) {
      if (!isa_and_nonnull<tensor::ExtractSliceOp>(s))
        continue;
      // All of an operand (a weight) is the operand, as the passes after
      // expect it (--masformer-mixed-precision finds weights by their
      // constants).
      SmallVector<OpFoldResult> folded;
      if (succeeded(s->fold(folded)) && folded.size() == 1 &&
          isa<Value>(folded[0])) {
        rewriter.replaceOp(s, cast<Value>(folded[0]));
        continue;
      }
      s->setAttr(kRowsSliceAttr, rewriter.getUnitAttr());
    }
    for (tensor::ExtractSliceOp s : readers)
      rewriter.replaceOp(s, replacement);
    rewriter.eraseOp(producer);
    // What computed only the producer's operands (a merged-rows chain).
    eraseDeadProducers(rewriter, inputs);
    return true;
  };
  for (bool changed = true; changed;) {
    changed = false;
    SmallVector<tensor::ExtractSliceOp> marked;
    f.walk([&](tensor::ExtractSliceOp s) {
      if (s->hasAttr(kRowsSliceAttr))
        marked.push_back(s);
    });
    for (tensor::ExtractSliceOp s : marked)
      if ((changed = step(s)))
        break;
  }
  f.walk([](tensor::ExtractSliceOp s) { s->removeAttr(kRowsSliceAttr); });
}
