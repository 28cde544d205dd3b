//===- Parallelize.cpp - Top-level linalg ops as parallel tiles -*- C++ -*-===//
//
// The element-wise ops, normalizations and reductions of a whole model run
// between the tiled contractions and attention layers; left as loops they
// run on one core while the others wait. This pass tiles each top-level
// linalg op (one whose parent is the function) over its parallel dimensions
// with scf.forall, which the CPU pipeline runs with OpenMP. The ops whose
// results only one op reads, directly or through other such ops (a norm's
// row sums and centered rows, read only by its scaling), are computed a
// tile at a time inside that op's loop: one pass over memory for the whole
// norm instead of one per op.
//
//===----------------------------------------------------------------------===//

#include "masformer/Utils/IRBuilders.h"
#include "masformer/Codegen/CPU/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/MemRef/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/TileUsingInterface.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Dominance.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/TilingInterface.h"
#include "mlir/Transforms/CSE.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::masformer {
#define GEN_PASS_DEF_PARALLELIZE
#include "masformer/Codegen/CPU/Passes.h.inc"
} // namespace mlir::masformer

using namespace mlir;
using namespace mlir::masformer;

namespace {

/// Tile sizes: every parallel loop but the innermost loop is tiled, by 1,
/// except the last of them, by `grain` (so that a task keeps `grain`
/// contiguous rows); the innermost loop stays whole for the vectorizer, as
/// do reductions. An op with one loop is tiled by 64 * grain. Empty when
/// the op has too little work to share.
SmallVector<OpFoldResult> tileSizes(linalg::LinalgOp op, int64_t grain,
                                    int64_t minElements) {
  OpBuilder b(op);
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  SmallVector<utils::IteratorType> iters = op.getIteratorTypesArray();
  int64_t n = ranges.size();
  SmallVector<OpFoldResult> sizes(n, b.getIndexAttr(0));
  if (n == 0)
    return {};
  bool dynamic = llvm::any_of(ranges, ShapedType::isDynamic);
  if (!dynamic) {
    int64_t total = 1;
    for (int64_t r : ranges)
      total *= r;
    if (total < minElements)
      return {};
  }
  if (n == 1) {
    if (iters[0] != utils::IteratorType::parallel)
      return {};
    sizes[0] = b.getIndexAttr(64 * grain);
    return sizes;
  }
  int64_t last = -1;
  for (int64_t d = 0; d + 1 < n; ++d)
    if (iters[d] == utils::IteratorType::parallel) {
      sizes[d] = b.getIndexAttr(1);
      last = d;
    }
  if (last < 0)
    return {};
  sizes[last] = b.getIndexAttr(grain);
  return sizes;
}

/// The op that defines `v`, seen through reshapes.
Operation *producerOf(Value v) {
  Operation *def = v.getDefiningOp();
  while (def && isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(def))
    def = def->getOperand(0).getDefiningOp();
  return def;
}

/// Whether every reader of `op`'s results (seen through reshapes) is in
/// `group`.
bool readOnlyBy(Operation *op, const llvm::SetVector<Operation *> &group) {
  SmallVector<Value> values(op->getResults());
  while (!values.empty()) {
    Value v = values.pop_back_val();
    for (Operation *user : v.getUsers()) {
      if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(user))
        llvm::append_range(values, user->getResults());
      else if (!group.contains(user))
        return false;
    }
  }
  return true;
}

/// `root` and the ops among `candidates` that a tile of it computes too:
/// those whose results only ops of the group read, found back from `root`
/// through the operands (a norm's scaling reads its centered rows and their
/// sum of squares, which reads the centered rows, which read the row sums).
llvm::SetVector<Operation *>
fusionGroup(Operation *root, const DenseSet<Operation *> &candidates) {
  llvm::SetVector<Operation *> group;
  group.insert(root);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < group.size(); ++i) {
      for (Value v : group[i]->getOperands()) {
        Operation *p = producerOf(v);
        if (!p || group.contains(p) || !candidates.contains(p) ||
            !readOnlyBy(p, group))
          continue;
        group.insert(p);
        changed = true;
      }
    }
  }
  return group;
}

struct ParallelizePass final
    : masformer::impl::ParallelizeBase<ParallelizePass> {
  using ParallelizeBase::ParallelizeBase;

  void runOnOperation() override {
    if (grain <= 0) {
      emitError(getOperation()->getLoc())
          << "--masformer-parallelize: grain must be positive";
      return signalPassFailure();
    }
    SmallVector<linalg::LinalgOp> ops;
    getOperation()->walk([&](linalg::LinalgOp op) {
      if (isa<FunctionOpInterface>(op->getParentOp()) &&
          op.hasPureTensorSemantics() && isa<TilingInterface>(*op))
        ops.push_back(op);
    });
    DenseSet<Operation *> candidates;
    for (linalg::LinalgOp op : ops)
      candidates.insert(op);
    // Slices of a producer's result taken through a reshape move above the
    // reshape, so that the producer itself is sliced (a norm's sums are
    // read as [batch, seq, 1, d]).
    RewritePatternSet cleanup(&getContext());
    tensor::populateBubbleUpExtractSliceOpPatterns(cleanup);
    // Sizes of the producers' results, which the slices read, taken from
    // their operands instead (a tensor.dim of the whole producer would keep
    // it alive).
    memref::populateResolveRankedShapedTypeResultDimsPatterns(cleanup);
    FrozenRewritePatternSet cleanupPatterns(std::move(cleanup));
    RewritePatternSet resolve(&getContext());
    memref::populateResolveRankedShapedTypeResultDimsPatterns(resolve);
    FrozenRewritePatternSet resolveDims(std::move(resolve));
    // A fused producer's init is a slice of its whole init: an empty
    // tensor of the tile's size instead, so that the tile's temporaries
    // are the tile's (on the stack, --masformer-stack-loop-temporaries)
    // and not slices of a whole buffer.
    RewritePatternSet local(&getContext());
    tensor::populateFoldTensorEmptyPatterns(local);
    // And the indices the fusion computes for a producer's slices folded
    // (x * 1 + 0 is x), so that two fusions of one producer read the same
    // slice and CSE merges them.
    affine::AffineLinearizeIndexOp::getCanonicalizationPatterns(local,
                                                                &getContext());
    affine::AffineDelinearizeIndexOp::getCanonicalizationPatterns(
        local, &getContext());
    affine::AffineApplyOp::getCanonicalizationPatterns(local, &getContext());
    FrozenRewritePatternSet localInits(std::move(local));
    IRRewriter rewriter(&getContext());
    DenseSet<Operation *> fused;
    // Consumers first: each takes the producers only it reads.
    for (linalg::LinalgOp op : llvm::reverse(ops)) {
      if (fused.contains(op))
        continue;
      SmallVector<OpFoldResult> sizes = tileSizes(op, grain, minElements);
      if (sizes.empty())
        continue;
      scf::SCFTilingOptions options;
      options.setLoopType(scf::SCFTilingOptions::LoopType::ForallOp);
      options.setTileSizes(sizes);
      rewriter.setInsertionPoint(op);
      llvm::SetVector<Operation *> group = fusionGroup(op, candidates);
      if (group.size() == 1) {
        FailureOr<scf::SCFTilingResult> tiled = scf::tileUsingSCF(
            rewriter, cast<TilingInterface>(op.getOperation()), options);
        if (failed(tiled))
          continue; // stays a serial loop nest
        rewriter.replaceOp(op, tiled->replacements);
        continue;
      }
      scf::SCFTileAndFuseOptions fuseOptions;
      fuseOptions.setTilingOptions(options);
      fuseOptions.cleanupPatterns = cleanupPatterns;
      // A producer of the group, along a slice that this tile's indices
      // place (a slice at constant offsets would be computed whole by
      // every tile).
      fuseOptions.setFusionControlFn(
          [&](tensor::ExtractSliceOp slice, OpResult producer, bool)
              -> std::optional<scf::SCFTileAndFuseOptions::ControlFnResult> {
            if (!group.contains(producer.getOwner()) ||
                llvm::all_of(slice.getMixedOffsets(), [](OpFoldResult o) {
                  return getConstantIntValue(o).has_value();
                }))
              return std::nullopt;
            return scf::SCFTileAndFuseOptions::ControlFnResult{};
          });
      FailureOr<scf::SCFTileAndFuseResult> tiled =
          scf::tileConsumerAndFuseProducersUsingSCF(
              rewriter, cast<TilingInterface>(op.getOperation()), fuseOptions);
      if (failed(tiled)) {
        // Tiled alone then, as if it had no producers to take.
        FailureOr<scf::SCFTilingResult> alone = scf::tileUsingSCF(
            rewriter, cast<TilingInterface>(op.getOperation()), options);
        if (succeeded(alone))
          rewriter.replaceOp(op, alone->replacements);
        continue;
      }
      for (Value result : op->getResults())
        rewriter.replaceAllUsesWith(result, tiled->replacements.lookup(result));
      // The slices the fusion replaced, left in the loop, read the
      // producers: erased first. A producer that two of the group read
      // (a norm's centered rows) was fused for each: computed once.
      for (LoopLikeOpInterface loop : tiled->loops) {
        (void)applyPatternsGreedily(loop->getRegions().front(), localInits);
        DominanceInfo dominance;
        eliminateCommonSubExpressions(rewriter, dominance, loop);
        for (Block &body : loop->getRegion(0))
          for (Operation &o : llvm::make_early_inc_range(llvm::reverse(body)))
            if (isOpTriviallyDead(&o))
              rewriter.eraseOp(&o);
      }
      // The loop's bounds, sizes of the group's results: from their
      // operands instead.
      SmallVector<Operation *> dims;
      for (Operation *g : group) {
        SmallVector<Value> values(g->getResults());
        while (!values.empty()) {
          Value v = values.pop_back_val();
          for (Operation *user : v.getUsers()) {
            if (isa<tensor::DimOp>(user))
              dims.push_back(user);
            else if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(user))
              llvm::append_range(values, user->getResults());
          }
        }
      }
      (void)applyOpPatternsGreedily(dims, resolveDims);
      // The group's ops now read by nothing (their tiles are in the loop)
      // and the reshapes between them.
      llvm::SetVector<Operation *> dead(group.begin(), group.end());
      while (!dead.empty()) {
        Operation *d = dead.pop_back_val();
        if (!d->use_empty() || !isMemoryEffectFree(d))
          continue;
        for (Value operand : d->getOperands())
          if (Operation *def = operand.getDefiningOp();
              def && def->getBlock() == d->getBlock() && !fused.contains(def))
            dead.insert(def);
        fused.insert(d);
        rewriter.eraseOp(d);
      }
    }
  }
};

} // namespace
