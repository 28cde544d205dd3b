//===- FuseProductEpilogues.cpp - Consumers computed on product tiles -----===//
//
// The element-wise op that consumes a tiled product (a bias and GELU, a
// residual add, a rounding to bf16) runs on each tile of the product inside
// its parallel loop, while the tile is in cache: the product's result is
// never written to memory whole, nor read back by a loop of its own.
//
//===----------------------------------------------------------------------===//

#include "masformer/Codegen/CPU/Passes.h"
#include "masformer/Utils/Bounds.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/Transforms/Transforms.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ValueBoundsOpInterface.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::masformer {
#define GEN_PASS_DEF_FUSEPRODUCTEPILOGUES
#include "masformer/Codegen/CPU/Passes.h.inc"
} // namespace mlir::masformer

using namespace mlir;
using namespace mlir::masformer;

namespace {

/// A product's tile loop and the one op that consumes its result.
struct Epilogue {
  scf::ForallOp loop;
  tensor::ParallelInsertSliceOp insert;
  linalg::GenericOp consumer;
  /// Shape queries of the product's result (answered by its init's).
  SmallVector<tensor::DimOp> dims;
  /// The loop dimensions the tile keeps (the rest are unit dimensions the
  /// insert drops), in order.
  SmallVector<unsigned> kept;
};

/// Whether `v` is available before `loop`: defined before it, a constant,
/// or the result of a side-effect-free op (a reshape of a residual) whose
/// operands are defined before it, which can move there.
bool availableBefore(Value v, scf::ForallOp loop, DominanceInfo &dominance) {
  if (dominance.properlyDominates(v, loop) || matchPattern(v, m_Constant()))
    return true;
  Operation *def = v.getDefiningOp();
  return def && def->getNumRegions() == 0 && isMemoryEffectFree(def) &&
         def->getBlock() == loop->getBlock() &&
         llvm::all_of(def->getOperands(), [&](Value x) {
           return dominance.properlyDominates(x, loop);
         });
}

/// The epilogue of `loop` that can be fused, or none: the loop's one
/// result is consumed by one element-wise linalg.generic (all loops
/// parallel, the result read and written with identity maps, the other
/// inputs broadcasts defined before the loop or constants, no
/// linalg.index, the init not read), and the body inserts one tile with
/// unit strides, its only uses of the shared result besides slices that
/// the product's fill overwrites.
std::optional<Epilogue> matchEpilogue(scf::ForallOp loop,
                                      DominanceInfo &dominance) {
  if (loop.getNumResults() != 1)
    return std::nullopt;
  Epilogue e;
  e.loop = loop;
  Value result = loop.getResult(0);
  for (OpOperand &use : result.getUses()) {
    if (auto dim = dyn_cast<tensor::DimOp>(use.getOwner())) {
      e.dims.push_back(dim);
      continue;
    }
    auto generic = dyn_cast<linalg::GenericOp>(use.getOwner());
    if (!generic || (e.consumer && e.consumer != generic))
      return std::nullopt;
    e.consumer = generic;
  }
  linalg::GenericOp c = e.consumer;
  if (!c || c.getNumDpsInits() != 1 || c->getNumResults() != 1 ||
      c.getNumParallelLoops() != c.getNumLoops() || c.hasIndexSemantics() ||
      !c.getIndexingMapMatchingResult(c->getResult(0)).isIdentity() ||
      c.payloadUsesValueFromOperand(c.getDpsInitOperand(0)) ||
      c.getNumLoops() != cast<RankedTensorType>(result.getType()).getRank())
    return std::nullopt;
  for (OpOperand *in : c.getDpsInputOperands()) {
    AffineMap map = c.getMatchingIndexingMap(in);
    if (in->get() == result) {
      if (!map.isIdentity())
        return std::nullopt;
      continue;
    }
    if (!isa<RankedTensorType>(in->get().getType()) ||
        !map.isProjectedPermutation(/*allowZeroInResults=*/false))
      return std::nullopt;
    if (!availableBefore(in->get(), loop, dominance))
      return std::nullopt;
  }

  // The tile and where it goes.
  Value shared = loop.getRegionIterArgs()[0];
  for (Operation &op : loop.getTerminator().getYieldingOps()) {
    auto insert = dyn_cast<tensor::ParallelInsertSliceOp>(op);
    if (!insert || e.insert || insert.getDest() != shared)
      return std::nullopt;
    e.insert = insert;
  }
  if (!e.insert || !llvm::all_of(e.insert.getMixedStrides(), isOneInteger))
    return std::nullopt;
  for (Operation *user : shared.getUsers()) {
    if (user == e.insert)
      continue;
    auto slice = dyn_cast<tensor::ExtractSliceOp>(user);
    if (!slice || slice.getSource() != shared)
      return std::nullopt;
  }
  std::optional<llvm::SmallDenseSet<unsigned>> dropped =
      computeRankReductionMask(e.insert.getStaticSizes(),
                               e.insert.getSourceType().getShape(),
                               /*matchDynamic=*/true);
  if (!dropped)
    return std::nullopt;
  for (unsigned d = 0; d < c.getNumLoops(); ++d)
    if (!dropped->contains(d))
      e.kept.push_back(d);
  return e;
}

/// Rebuilds the loop with the consumer's result as its shared result: each
/// iteration computes its tile of the product into a temporary (the slices
/// of the old shared result become empty tensors, which the product's fill
/// overwrites), applies the consumer to it and to the matching slices of
/// the consumer's other inputs, and inserts that.
void fuse(Epilogue &e, DominanceInfo &dominance) {
  scf::ForallOp loop = e.loop;
  linalg::GenericOp consumer = e.consumer;
  Location loc = consumer.getLoc();
  Value result = loop.getResult(0);
  OpBuilder b(loop);

  // The consumer's other inputs before the loop: constants cloned, other
  // side-effect-free ops (a reshape of the residual) moved.
  IRMapping hoisted;
  for (OpOperand *in : consumer.getDpsInputOperands()) {
    Value v = in->get();
    if (v == result || dominance.properlyDominates(v, loop))
      continue;
    Operation *def = v.getDefiningOp();
    if (def->hasTrait<OpTrait::ConstantLike>()) {
      if (!hoisted.contains(v))
        hoisted.map(v, b.clone(*def)->getResult(0));
      continue;
    }
    def->moveBefore(loop);
  }

  Value init = loop.getOutputs()[0];
  auto resultTy = cast<RankedTensorType>(consumer->getResult(0).getType());
  Value newInit = tensor::EmptyOp::create(
      b, loc, tensor::getMixedSizes(b, loc, init), resultTy.getElementType());
  auto newLoop = scf::ForallOp::create(
      b, loop.getLoc(), loop.getMixedLowerBound(), loop.getMixedUpperBound(),
      loop.getMixedStep(), ValueRange{newInit}, loop.getMapping());

  // The product's tile into a temporary.
  Value shared = loop.getRegionIterArgs()[0];
  for (Operation *user : llvm::make_early_inc_range(shared.getUsers())) {
    auto slice = dyn_cast<tensor::ExtractSliceOp>(user);
    if (!slice)
      continue;
    OpBuilder sb(slice);
    llvm::SmallBitVector droppedDims = slice.getDroppedDims();
    SmallVector<OpFoldResult> sizes;
    for (auto [i, size] : llvm::enumerate(slice.getMixedSizes()))
      if (!droppedDims.test(i))
        sizes.push_back(size);
    // Of the tile's static size where its sizes have constant bounds (a
    // stack slot, --masformer-stack-loop-temporaries), viewed at this
    // tile's size.
    Type elem = slice.getType().getElementType();
    SmallVector<int64_t> bound;
    for (OpFoldResult size : sizes) {
      std::optional<int64_t> b = getConstantIntValue(size);
      if (!b)
        if (auto v = dyn_cast<Value>(size))
          b = constantUpperBound(v);
      bound.push_back(b ? *b : ShapedType::kDynamic);
    }
    Value temp;
    if (llvm::none_of(bound, ShapedType::isDynamic)) {
      Value whole = tensor::EmptyOp::create(sb, slice.getLoc(), bound, elem);
      SmallVector<OpFoldResult> zeros(sizes.size(), sb.getIndexAttr(0));
      SmallVector<OpFoldResult> ones(sizes.size(), sb.getIndexAttr(1));
      temp = tensor::ExtractSliceOp::create(sb, slice.getLoc(), whole, zeros,
                                            sizes, ones);
    } else {
      temp = tensor::EmptyOp::create(sb, slice.getLoc(), sizes, elem);
    }
    if (temp.getType() != slice.getType())
      temp = tensor::CastOp::create(sb, slice.getLoc(), slice.getType(), temp);
    slice.replaceAllUsesWith(temp);
    slice.erase();
  }

  // The body moves over.
  Block *oldBody = loop.getBody(), *newBody = newLoop.getBody();
  for (auto [oldIv, newIv] :
       llvm::zip(loop.getInductionVars(), newLoop.getInductionVars()))
    oldIv.replaceAllUsesWith(newIv);
  newBody->getOperations().splice(newBody->getTerminator()->getIterator(),
                                  oldBody->getOperations(), oldBody->begin(),
                                  std::prev(oldBody->end()));

  // The consumer on the tile.
  tensor::ParallelInsertSliceOp insert = e.insert;
  SmallVector<OpFoldResult> offsets = insert.getMixedOffsets();
  SmallVector<OpFoldResult> sizes = insert.getMixedSizes();
  SmallVector<OpFoldResult> strides = insert.getMixedStrides();
  DenseMap<unsigned, unsigned> position;
  for (auto [i, d] : llvm::enumerate(e.kept))
    position[d] = i;
  MLIRContext *ctx = b.getContext();
  b.setInsertionPoint(newBody->getTerminator());
  // The slice of `t` (read through `map`) that this tile reads, without the
  // dropped dimensions, and the map that reads it from the tile's loops.
  auto sliceOf = [&](Value t, AffineMap map) -> std::pair<Value, AffineMap> {
    auto ty = cast<RankedTensorType>(t.getType());
    SmallVector<OpFoldResult> offs, szs, strs;
    SmallVector<int64_t> shape;
    SmallVector<AffineExpr> exprs;
    for (unsigned p = 0; p < map.getNumResults(); ++p) {
      unsigned d = map.getDimPosition(p);
      offs.push_back(offsets[d]);
      szs.push_back(sizes[d]);
      strs.push_back(b.getIndexAttr(1));
      if (!position.contains(d))
        continue;
      std::optional<int64_t> size = getConstantIntValue(sizes[d]);
      shape.push_back(size ? *size : ShapedType::kDynamic);
      exprs.push_back(getAffineDimExpr(position[d], ctx));
    }
    auto sliceTy = RankedTensorType::get(shape, ty.getElementType());
    Value s =
        tensor::ExtractSliceOp::create(b, loc, sliceTy, t, offs, szs, strs);
    return {s, AffineMap::get(e.kept.size(), 0, exprs, ctx)};
  };
  SmallVector<Value> inputs;
  SmallVector<AffineMap> maps;
  AffineMap tileMap = AffineMap::getMultiDimIdentityMap(e.kept.size(), ctx);
  for (OpOperand *in : consumer.getDpsInputOperands()) {
    if (in->get() == result) {
      inputs.push_back(insert.getSource());
      maps.push_back(tileMap);
      continue;
    }
    Value v = hoisted.lookupOrDefault(in->get());
    auto [s, map] = sliceOf(v, consumer.getMatchingIndexingMap(in));
    inputs.push_back(s);
    maps.push_back(map);
  }
  Value sharedOut = newLoop.getRegionIterArgs()[0];
  auto [outTile, outMap] =
      sliceOf(sharedOut,
              AffineMap::getMultiDimIdentityMap(consumer.getNumLoops(), ctx));
  maps.push_back(outMap);
  SmallVector<utils::IteratorType> iterators(e.kept.size(),
                                             utils::IteratorType::parallel);
  auto tileOp =
      linalg::GenericOp::create(b, loc, TypeRange{outTile.getType()}, inputs,
                                ValueRange{outTile}, maps, iterators);
  IRMapping bodyMap;
  consumer.getRegion().cloneInto(&tileOp.getRegion(), bodyMap);
  b.setInsertionPointToStart(newLoop.getTerminator().getBody());
  tensor::ParallelInsertSliceOp::create(b, insert.getLoc(), tileOp.getResult(0),
                                        sharedOut, offsets, sizes, strides);

  // Uses of the old results.
  for (tensor::DimOp dim : e.dims) {
    OpBuilder db(dim);
    dim.replaceAllUsesWith(
        tensor::DimOp::create(db, dim.getLoc(), init, dim.getIndex())
            .getResult());
    dim.erase();
  }
  // (The consumer's type may know more of the shape, or less.)
  Value fused = newLoop.getResult(0);
  if (fused.getType() != resultTy) {
    OpBuilder cb(consumer);
    fused = tensor::CastOp::create(cb, loc, resultTy, fused);
  }
  consumer->getResult(0).replaceAllUsesWith(fused);
  consumer.erase();
  loop.erase();
}

struct FuseProductEpiloguesPass final
    : masformer::impl::FuseProductEpiloguesBase<FuseProductEpiloguesPass> {
  void runOnOperation() override {
    // A product of rows (batch and sequence collapsed) reshaped back before
    // its consumer: the consumer is collapsed the same way (its other
    // inputs collapsed, its result expanded), so that it reads the
    // product's result as it is.
    RewritePatternSet patterns(&getContext());
    linalg::populateFoldReshapeOpsByCollapsingPatterns(
        patterns, [](OpOperand *operand) {
          auto expand = operand->get().getDefiningOp<tensor::ExpandShapeOp>();
          auto loop =
              expand ? expand.getSrc().getDefiningOp<scf::ForallOp>() : nullptr;
          if (!loop || !loop->hasAttr(kProductTilesAttrName) ||
              !isa<linalg::GenericOp>(operand->getOwner()))
            return false;
          // Not when another input is a part of a tensor that collapsing
          // the rows would copy: one that does not take every position of
          // each sequence (a decode entry's last ops read the last rows).
          return llvm::all_of(operand->getOwner()->getOperands(), [](Value v) {
            auto slice = v.getDefiningOp<tensor::ExtractSliceOp>();
            if (!slice || slice.getSourceType().getRank() < 2)
              return true;
            using Var = ValueBoundsConstraintSet::Variable;
            FailureOr<bool> whole = ValueBoundsConstraintSet::areEqual(
                Var(slice.getMixedSizes()[1]), Var(slice.getSource(), 1));
            return isConstantIntValue(slice.getMixedOffsets()[1], 0) &&
                   succeeded(whole) && *whole;
          });
        });
    // (The sizes of the result it expands, taken from the reshape's
    // operands: the reshape is then gone.)
    memref::populateResolveRankedShapedTypeResultDimsPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();

    SmallVector<scf::ForallOp> loops;
    getOperation()->walk([&](scf::ForallOp loop) {
      if (loop->hasAttr(kProductTilesAttrName))
        loops.push_back(loop);
    });
    DominanceInfo dominance(getOperation());
    for (scf::ForallOp loop : loops)
      if (std::optional<Epilogue> e = matchEpilogue(loop, dominance))
        fuse(*e, dominance);
  }
};

} // namespace
