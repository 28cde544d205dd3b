//===- Parallelize.cpp - Top-level linalg ops as parallel tiles -*- C++ -*-===//
//
// The element-wise ops, normalizations and reductions of a whole model run
// between the tiled contractions and attention layers; left as loops they
// run on one core while the others wait. This pass tiles each top-level
// linalg op (one whose parent is the function) over its parallel dimensions
// with scf.forall, which the CPU pipeline runs with OpenMP.
//
//===----------------------------------------------------------------------===//

#include "masformer/Utils/IRBuilders.h"
#include "masformer/Codegen/CPU/Passes.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/TileUsingInterface.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/TilingInterface.h"

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
    IRRewriter rewriter(&getContext());
    for (linalg::LinalgOp op : ops) {
      SmallVector<OpFoldResult> sizes = tileSizes(op, grain, minElements);
      if (sizes.empty())
        continue;
      scf::SCFTilingOptions options;
      options.setLoopType(scf::SCFTilingOptions::LoopType::ForallOp);
      options.setTileSizes(sizes);
      rewriter.setInsertionPoint(op);
      FailureOr<scf::SCFTilingResult> tiled = scf::tileUsingSCF(
          rewriter, cast<TilingInterface>(op.getOperation()), options);
      if (failed(tiled))
        continue; // stays a serial loop nest
      rewriter.replaceOp(op, tiled->replacements);
    }
  }
};

} // namespace
