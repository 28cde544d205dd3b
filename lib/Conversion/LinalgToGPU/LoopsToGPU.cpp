//===- LoopsToGPU.cpp - Linalg ops and loops as GPU kernels -----*- C++ -*-===//
//
// Once the matrix products and attention are tensor-core kernels, a model's
// other ops (element-wise chains, normalizations, reductions, copies) are
// linalg ops on buffers. This pass launches each of them:
//
//   - a reduction over the innermost loop (a norm's mean and variance, a
//     softmax's max and sum) with one warp per output element: lanes
//     stride the row, so a warp reads 32 consecutive elements at a time,
//     and butterfly shuffles combine them;
//   - anything else as its parallel loops with one thread per iteration,
//     over a linearized iteration space: neighbouring threads take
//     neighbouring iterations of the innermost dimension, so a warp's loads
//     and stores of a row-major buffer are coalesced whatever the loop's
//     rank (upstream's gpu-map-parallel-loops puts the threads on the first
//     dimension, often a batch of one).
//
//===----------------------------------------------------------------------===//

#include "masformer/Utils/GPUKernels.h"
#include "masformer/Utils/IRBuilders.h"
#include "masformer/Conversion/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::masformer {
#define GEN_PASS_DEF_LOOPSTOGPU
#include "masformer/Conversion/Passes.h.inc"
} // namespace mlir::masformer

using namespace mlir;
using namespace mlir::masformer;

namespace {

/// " (ONNX node 'name')" for an op the importer made, found in its
/// location (a NameLoc, possibly inside a fused or call-site one).
std::string nodeOf(Operation *op) {
  std::string name;
  op->getLoc()->walk([&](Location l) {
    if (auto n = dyn_cast<NameLoc>(l); n && name.empty())
      name = n.getName().str();
    return name.empty() ? WalkResult::advance() : WalkResult::interrupt();
  });
  return name.empty() ? "" : " (ONNX node '" + name + "')";
}

/// Threads per block: four warps. Enough for full occupancy on sm_80 and
/// sm_90 (32 blocks of 128 threads per SM) with few idle threads in the
/// last block of a small op.
constexpr int64_t kThreads = kBlockThreads;

/// A 1-D `gpu.launch` of `blocks` x `threads` at `b`, which is left at the
/// start of its body (before the terminator).
gpu::LaunchOp createLaunch(OpBuilder &b, Location loc, Value blocks,
                           Value threads) {
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  auto launch =
      gpu::LaunchOp::create(b, loc, blocks, one, one, threads, one, one);
  Block &body = launch.getBody().front();
  b.setInsertionPointToStart(&body);
  gpu::TerminatorOp::create(b, loc);
  b.setInsertionPointToStart(&body);
  return launch;
}

/// True when `op` (or an op nested in it) reads or writes memory.
bool touchesMemory(Operation *op) {
  WalkResult r = op->walk([](Operation *nested) {
    auto effects = dyn_cast<MemoryEffectOpInterface>(nested);
    if (!effects)
      return nested->hasTrait<OpTrait::HasRecursiveMemoryEffects>()
                 ? WalkResult::advance()
                 : WalkResult::interrupt();
    if (effects.hasEffect<MemoryEffects::Read>() ||
        effects.hasEffect<MemoryEffects::Write>())
      return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return r.wasInterrupted();
}

/// A parallel loop nested in a thread's work (a reduction dimension before
/// a parallel one) as sequential loops.
LogicalResult sequentialize(scf::ParallelOp loop) {
  if (loop.getNumResults() != 0)
    return loop.emitError() << "a parallel loop with reductions inside a "
                               "kernel is not supported";
  OpBuilder b(loop);
  scf::buildLoopNest(
      b, loop.getLoc(), loop.getLowerBound(), loop.getUpperBound(),
      loop.getStep(), [&](OpBuilder &nb, Location, ValueRange ivs) {
        IRMapping map;
        map.map(loop.getInductionVars(), ivs);
        for (Operation &op : loop.getBody()->without_terminator())
          nb.clone(op, map);
      });
  loop.erase();
  return success();
}

/// Launches `loop` with one thread per iteration.
void launchParallel(scf::ParallelOp loop) {
  OpBuilder b(loop);
  Location loc = loop.getLoc();
  Idx ix{b, loc};
  // Trip counts (a negative one, an empty loop, counts as zero).
  SmallVector<Value> trips;
  Value total = ix.c(1);
  for (auto [lb, ub, step] : llvm::zip(loop.getLowerBound(),
                                       loop.getUpperBound(), loop.getStep())) {
    Value trip = ix.max(ix.cdiv(ix.sub(ub, lb), step), ix.c(0));
    trips.push_back(trip);
    total = ix.mul(total, trip);
  }
  // An empty loop still launches one block (a grid of zero blocks is an
  // error for the driver), whose threads all fail the bound check.
  Value blocks = ix.max(ix.cdiv(total, ix.c(kThreads)), ix.c(1));
  gpu::LaunchOp launch = createLaunch(b, loc, blocks, ix.c(kThreads));
  Value linear =
      arith::AddIOp::create(
          b, loc,
          arith::MulIOp::create(b, loc, launch.getBlockIds().x, ix.c(kThreads)),
          launch.getThreadIds().x);
  Value inside = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                       linear, total);
  auto guard = scf::IfOp::create(b, loc, inside, /*withElseRegion=*/false);
  b.setInsertionPointToStart(guard.thenBlock());
  // The innermost dimension varies fastest.
  IRMapping map;
  Value rest = linear;
  for (int64_t d = static_cast<int64_t>(trips.size()) - 1; d >= 0; --d) {
    Value idx = rest;
    if (d > 0) {
      idx = arith::RemUIOp::create(b, loc, rest, trips[d]);
      rest = arith::DivUIOp::create(b, loc, rest, trips[d]);
    }
    Value iv = ix.add(loop.getLowerBound()[d], ix.mul(idx, loop.getStep()[d]));
    map.map(loop.getInductionVars()[d], iv);
  }
  for (Operation &op : loop.getBody()->without_terminator())
    b.clone(op, map);
  loop.erase();
}

/// `copy` as a parallel loop of loads and stores (bufferization's copies of
/// slices, concatenations and pads).
scf::ParallelOp copyAsLoop(memref::CopyOp copy) {
  OpBuilder b(copy);
  Location loc = copy.getLoc();
  Value src = copy.getSource(), dst = copy.getTarget();
  auto ty = cast<MemRefType>(dst.getType());
  assert(ty.getRank() > 0 && "a rank-0 copy is a load and a store");
  SmallVector<Value> lbs, ubs, steps;
  for (int64_t d = 0; d < ty.getRank(); ++d) {
    lbs.push_back(arith::ConstantIndexOp::create(b, loc, 0));
    ubs.push_back(memref::DimOp::create(b, loc, dst, d));
    steps.push_back(arith::ConstantIndexOp::create(b, loc, 1));
  }
  auto loop = scf::ParallelOp::create(
      b, loc, lbs, ubs, steps,
      [&](OpBuilder &nb, Location nloc, ValueRange ivs) {
        Value v = memref::LoadOp::create(nb, nloc, src, ivs);
        memref::StoreOp::create(nb, nloc, v, dst, ivs);
      });
  copy.erase();
  return loop;
}

/// Runs `ops` (consecutive in their block: a loop that no thread mapping
/// splits, or the loads, arithmetic and stores of an op without loops) in
/// one thread.
void launchSingleThread(ArrayRef<Operation *> ops) {
  OpBuilder b(ops.front());
  Location loc = ops.front()->getLoc();
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  gpu::LaunchOp launch = createLaunch(b, loc, one, one);
  for (Operation *op : ops)
    op->moveBefore(launch.getBody().front().getTerminator());
}

/// True for ops that may join a single-thread group: memory accesses, and
/// the pure scalar computations between them.
bool joinsGroup(Operation &op) {
  if (isa<memref::LoadOp, memref::StoreOp>(op))
    return true;
  return isPure(&op) && op.getNumRegions() == 0 &&
         llvm::none_of(op.getResultTypes(),
                       [](Type t) { return isa<ShapedType>(t); });
}

//===----------------------------------------------------------------------===//
// Reductions: one warp per output element
//===----------------------------------------------------------------------===//

/// The combiner of a reduction over the innermost loop (`out = comb(out,
/// f(inputs))`) whose warp-parallel form this pass builds, with its
/// identity; null when `op` is not one.
struct Reduction {
  Operation *combiner = nullptr;
  TypedAttr identity;
};

Reduction matchWarpReduction(linalg::GenericOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInits() != 1 ||
      op.getNumLoops() < 1 || op.getNumReductionLoops() != 1 ||
      !linalg::isReductionIterator(op.getIteratorTypesArray().back()))
    return {};
  Block &body = op.getRegion().front();
  BlockArgument out = op.getRegionOutputArgs()[0];
  auto floatTy = dyn_cast<FloatType>(out.getType());
  if (!floatTy || !out.hasOneUse())
    return {};
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  Operation *comb = yield.getValues()[0].getDefiningOp();
  if (!comb || comb->getBlock() != &body || comb->getNumOperands() != 2 ||
      !llvm::is_contained(comb->getOperands(), out))
    return {};
  auto inf = [&](bool negative) {
    return FloatAttr::get(floatTy,
                          APFloat::getInf(floatTy.getFloatSemantics(),
                                          negative));
  };
  TypedAttr identity =
      llvm::TypeSwitch<Operation *, TypedAttr>(comb)
          .Case<arith::AddFOp>(
              [&](auto) { return FloatAttr::get(floatTy, 0.0); })
          .Case<arith::MulFOp>(
              [&](auto) { return FloatAttr::get(floatTy, 1.0); })
          .Case<arith::MaxNumFOp, arith::MaximumFOp>(
              [&](auto) { return inf(true); })
          .Case<arith::MinNumFOp, arith::MinimumFOp>(
              [&](auto) { return inf(false); })
          .Default([](Operation *) { return TypedAttr(); });
  if (!identity)
    return {};
  // The output's map must not use the reduction dimension.
  AffineMap outMap = op.getIndexingMapsArray().back();
  if (outMap.isFunctionOfDim(op.getNumLoops() - 1))
    return {};
  return {comb, identity};
}

/// `comb` (an arith op on two floats) applied to `a` and `b`.
Value combine(OpBuilder &b, Location loc, Operation *comb, Value a, Value x) {
  OperationState state(loc, comb->getName());
  state.addOperands({a, x});
  state.addTypes(a.getType());
  state.addAttributes(comb->getAttrs());
  return b.create(state)->getResult(0);
}

/// Launches `op` (a reduction of `red`'s form) with one warp per output
/// element: each lane folds every 32nd element of the reduced dimension,
/// in order, then the warp combines the lanes' partial results with
/// butterfly shuffles and lane 0 folds them into the output. A warp reads
/// 32 consecutive elements of a row at a time, where one thread per row
/// would read the rows' elements 32 rows apart.
void launchWarpReduction(linalg::GenericOp op, const Reduction &red) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  Idx ix{b, loc};
  constexpr int64_t kWarp = kThreadsPerWarp, kWarps = kThreads / kWarp;
  SmallVector<Range> ranges =
      cast<linalg::LinalgOp>(op.getOperation()).createLoopRanges(b, loc);
  int64_t numLoops = ranges.size();
  SmallVector<Value> sizes;
  Value rows = ix.c(1);
  for (int64_t d = 0; d < numLoops; ++d) {
    Value size = getValueOrCreateConstantIndexOp(b, loc, ranges[d].size);
    sizes.push_back(size);
    if (d < numLoops - 1)
      rows = ix.mul(rows, size);
  }
  Value blocks = ix.max(ix.cdiv(rows, ix.c(kWarps)), ix.c(1));
  gpu::LaunchOp launch = createLaunch(b, loc, blocks, ix.c(kThreads));
  Value tid = launch.getThreadIds().x;
  Value warp = arith::DivUIOp::create(b, loc, tid, ix.c(kWarp));
  Value lane = arith::RemUIOp::create(b, loc, tid, ix.c(kWarp));
  Value row = arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, launch.getBlockIds().x,
                                    ix.c(kWarps)),
      warp);
  // A whole warp is in or out: the shuffles see all 32 lanes.
  Value inside =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, row, rows);
  auto guard = scf::IfOp::create(b, loc, inside, /*withElseRegion=*/false);
  b.setInsertionPointToStart(guard.thenBlock());
  SmallVector<Value> ivs(numLoops);
  Value rest = row;
  for (int64_t d = numLoops - 2; d >= 0; --d) {
    Value idx = rest;
    if (d > 0) {
      idx = arith::RemUIOp::create(b, loc, rest, sizes[d]);
      rest = arith::DivUIOp::create(b, loc, rest, sizes[d]);
    }
    ivs[d] = idx;
  }
  Block &body = op.getRegion().front();
  BlockArgument outArg = op.getRegionOutputArgs()[0];
  auto indicesOf = [&](OpBuilder &nb, AffineMap map, ArrayRef<Value> at) {
    SmallVector<Value> idx;
    for (AffineExpr e : map.getResults())
      idx.push_back(affine::AffineApplyOp::create(
          nb, loc, AffineMap::get(map.getNumDims(), 0, e), at));
    return idx;
  };
  Value identity = arith::ConstantOp::create(b, loc, red.identity);
  auto loop = scf::ForOp::create(
      b, loc, lane, sizes.back(), ix.c(kWarp), ValueRange{identity},
      [&](OpBuilder &nb, Location nloc, Value k, ValueRange iters) {
        SmallVector<Value> at(ivs.begin(), ivs.end() - 1);
        at.push_back(k);
        IRMapping map;
        for (OpOperand *input : op.getDpsInputOperands()) {
          AffineMap m = op.getMatchingIndexingMap(input);
          Value v = memref::LoadOp::create(nb, nloc, input->get(),
                                           indicesOf(nb, m, at));
          map.map(op.getMatchingBlockArgument(input), v);
        }
        for (Operation &bodyOp : body.without_terminator()) {
          if (&bodyOp == red.combiner)
            continue;
          if (auto index = dyn_cast<linalg::IndexOp>(bodyOp)) {
            map.map(index.getResult(), at[index.getDim()]);
            continue;
          }
          nb.clone(bodyOp, map);
        }
        Value contribution =
            red.combiner->getOperand(0) == outArg
                ? map.lookupOrDefault(red.combiner->getOperand(1))
                : map.lookupOrDefault(red.combiner->getOperand(0));
        scf::YieldOp::create(
            nb, nloc,
            combine(nb, nloc, red.combiner, iters[0], contribution));
      });
  Value acc = loop.getResult(0);
  for (int32_t offset = kWarp / 2; offset > 0; offset /= 2) {
    Value other = gpu::ShuffleOp::create(b, loc, acc, offset, kWarp,
                                         gpu::ShuffleMode::XOR)
                      .getShuffleResult();
    acc = combine(b, loc, red.combiner, acc, other);
  }
  Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane,
                                      ix.c(0));
  auto store = scf::IfOp::create(b, loc, first, /*withElseRegion=*/false);
  b.setInsertionPointToStart(store.thenBlock());
  OpOperand *init = op.getDpsInitOperand(0);
  SmallVector<Value> at(ivs.begin(), ivs.end() - 1);
  at.push_back(ix.c(0));
  SmallVector<Value> outIdx =
      indicesOf(b, op.getMatchingIndexingMap(init), at);
  Value old = memref::LoadOp::create(b, loc, init->get(), outIdx);
  memref::StoreOp::create(b, loc, combine(b, loc, red.combiner, old, acc),
                          init->get(), outIdx);
  op.erase();
}

struct LoopsToGPUPass final
    : masformer::impl::LoopsToGPUBase<LoopsToGPUPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    // Linalg ops: reductions over the innermost loop one warp per output
    // element, the others parallel loops, mapped below.
    SmallVector<linalg::LinalgOp> linalgOps;
    for (Block &block : func.getBody())
      for (auto op : block.getOps<linalg::LinalgOp>())
        linalgOps.push_back(op);
    IRRewriter rewriter(&getContext());
    for (linalg::LinalgOp op : linalgOps) {
      if (auto generic = dyn_cast<linalg::GenericOp>(op.getOperation())) {
        Reduction red = matchWarpReduction(generic);
        if (red.combiner) {
          launchWarpReduction(generic, red);
          continue;
        }
      }
      if (!op.hasPureBufferSemantics()) {
        op->emitError() << "masformer-loops-to-gpu runs on buffers: "
                           "bufferize first";
        return signalPassFailure();
      }
      rewriter.setInsertionPoint(op);
      if (failed(linalg::linalgOpToParallelLoops(rewriter, op))) {
        op->emitError() << "cannot be lowered to parallel loops";
        return signalPassFailure();
      }
      rewriter.eraseOp(op);
    }
    SmallVector<Operation *> work;
    SmallVector<SmallVector<Operation *>> groups;
    for (Block &block : func.getBody()) {
      for (auto it = block.begin(); it != block.end(); ++it) {
        Operation &op = *it;
        if ((isa<scf::ParallelOp, scf::ForOp>(op) && touchesMemory(&op)) ||
            isa<memref::CopyOp>(op)) {
          work.push_back(&op);
          continue;
        }
        if (!isa<memref::LoadOp, memref::StoreOp>(op))
          continue;
        // An op without loops (rank 0): its loads, arithmetic and stores,
        // up to the last store, in one thread.
        SmallVector<Operation *> group;
        auto end = it;
        for (auto j = it; j != block.end() && joinsGroup(*j); ++j) {
          group.push_back(&*j);
          if (isa<memref::StoreOp>(*j))
            end = j;
        }
        group.resize(std::distance(it, end) + 1);
        llvm::SmallPtrSet<Operation *, 8> inGroup(group.begin(), group.end());
        for (Operation *g : group)
          for (Operation *user : g->getUsers())
            if (!inGroup.contains(block.findAncestorOpInBlock(*user))) {
              user->emitError()
                  << "uses a value loaded from memory on the host"
                  << nodeOf(user)
                  << ": masformer-loops-to-gpu cannot move it to the GPU "
                     "(sizes and loops that depend on the data, as NonZero, "
                     "TopK and scatters at run-time indices make them, run "
                     "only on the CPU target)";
              return signalPassFailure();
            }
        groups.push_back(std::move(group));
        it = end;
      }
    }
    for (ArrayRef<Operation *> group : groups)
      launchSingleThread(group);
    for (Operation *op : work) {
      if (auto copy = dyn_cast<memref::CopyOp>(op)) {
        if (cast<MemRefType>(copy.getTarget().getType()).getRank() == 0) {
          OpBuilder b(copy);
          Value v = memref::LoadOp::create(b, copy.getLoc(),
                                           copy.getSource(), ValueRange{});
          auto store = memref::StoreOp::create(b, copy.getLoc(), v,
                                               copy.getTarget(), ValueRange{});
          copy.erase();
          launchSingleThread({v.getDefiningOp(), store});
          continue;
        }
        launchParallel(copyAsLoop(copy));
        continue;
      }
      auto loop = dyn_cast<scf::ParallelOp>(op);
      if (!loop || loop.getNumResults() != 0) {
        // A reduction into a value (no parallel dimension left to split).
        if (op->getNumResults() != 0) {
          op->emitError() << "'" << op->getName()
                          << "' returns values: only loops that write their "
                             "results to memory run on the GPU";
          return signalPassFailure();
        }
        launchSingleThread({op});
        continue;
      }
      launchParallel(loop);
    }
    // A thread's own parallel loops run in sequence (innermost first: the
    // walk is post-order, and an outer loop's body is cloned).
    SmallVector<scf::ParallelOp> nested;
    func.walk([&](scf::ParallelOp loop) {
      if (loop->getParentOfType<gpu::LaunchOp>())
        nested.push_back(loop);
    });
    for (scf::ParallelOp loop : nested)
      if (failed(sequentialize(loop)))
        return signalPassFailure();
  }
};

} // namespace
