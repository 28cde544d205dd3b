//===- VectorizeRowCopies.cpp - Copies of rows as vector loads and stores -===//
//
// A copy between buffers whose rows stay rows (a head split or merge: the
// sequence and head dimensions swapped, the head dimension kept
// innermost), optionally rounding or extending each element, lowered to
// loops over the outer dimensions around one vector load and one vector
// store of each row. convert-linalg-to-loops gives LLVM a scalar loop that
// it unrolls whole (64 iterations) before its vectorizers run, and whose
// loads and stores it then cannot reorder into vectors (the buffers might
// alias): a scalar load and store per element.
//
//===----------------------------------------------------------------------===//

#include "masformer/Codegen/CPU/Passes.h"
#include "masformer/Utils/IRBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace mlir::masformer {
#define GEN_PASS_DEF_VECTORIZEROWCOPIES
#include "masformer/Codegen/CPU/Passes.h.inc"
} // namespace mlir::masformer

using namespace mlir;

namespace {

/// Rows up to this many elements are one vector each; longer rows go in
/// vectors of kChunk elements (their length a multiple of it).
constexpr int64_t kMaxVector = 256;
constexpr int64_t kChunk = 64;

/// The static length of `op`'s rows, when `op` is a row copy this pass
/// lowers: on buffers, one input and one output, all loops parallel, both
/// maps permutations of the loops whose last result is the innermost loop,
/// both buffers of unit stride in their last dimension, of the same static
/// size there (at most kMaxVector, or a multiple of kChunk), and a body
/// that yields its input, or its input converted by one arith.truncf or
/// arith.extf.
std::optional<int64_t> rowCopyLength(linalg::GenericOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInputs() != 1 ||
      op.getNumDpsInits() != 1 ||
      op.getNumParallelLoops() != op.getNumLoops() || op.getNumLoops() == 0)
    return std::nullopt;
  unsigned inner = op.getNumLoops() - 1;
  std::optional<int64_t> length;
  for (OpOperand &operand : op->getOpOperands()) {
    AffineMap map = op.getMatchingIndexingMap(&operand);
    auto ty = dyn_cast<MemRefType>(operand.get().getType());
    if (!ty || !map.isPermutation() ||
        map.getDimPosition(map.getNumResults() - 1) != inner ||
        !ty.isLastDimUnitStride() || ty.isDynamicDim(ty.getRank() - 1))
      return std::nullopt;
    int64_t n = ty.getDimSize(ty.getRank() - 1);
    if (length && *length != n)
      return std::nullopt;
    length = n;
  }
  if (*length <= 0 || (*length > kMaxVector && *length % kChunk))
    return std::nullopt;
  Block &body = op.getRegion().front();
  Value in = body.getArgument(0);
  Value yielded = cast<linalg::YieldOp>(body.getTerminator()).getOperand(0);
  if (yielded == in && body.getOperations().size() == 1)
    return length;
  Operation *conv = yielded.getDefiningOp();
  if (body.getOperations().size() == 2 && conv &&
      isa<arith::TruncFOp, arith::ExtFOp>(conv) && conv->getOperand(0) == in)
    return length;
  return std::nullopt;
}

/// The indices `map` (a permutation) gives for the loop indices `ivs`.
SmallVector<Value> permute(AffineMap map, ValueRange ivs) {
  SmallVector<Value> indices;
  for (unsigned r = 0; r < map.getNumResults(); ++r)
    indices.push_back(ivs[map.getDimPosition(r)]);
  return indices;
}

void lowerRowCopy(linalg::GenericOp op, int64_t length) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  masformer::OuterLoops loops =
      masformer::outerLoops(b, loc, cast<linalg::LinalgOp>(op.getOperation()));
  OpOperand *in = op.getDpsInputOperand(0);
  OpOperand *out = op.getDpsInitOperand(0);
  AffineMap inMap = op.getMatchingIndexingMap(in);
  AffineMap outMap = op.getMatchingIndexingMap(out);
  Type inElem = getElementTypeOrSelf(in->get().getType());
  Type outElem = getElementTypeOrSelf(out->get().getType());
  int64_t width = length <= kMaxVector ? length : kChunk;
  Block &body = op.getRegion().front();
  Operation *conv = body.getOperations().size() == 2 ? &body.front() : nullptr;

  scf::buildLoopNest(
      b, loc, loops.lbs, loops.ubs, loops.steps,
      [&](OpBuilder &nb, Location nloc, ValueRange outer) {
        auto copyAt = [&](OpBuilder &cb, Value c0) {
          SmallVector<Value> ivs(outer.begin(), outer.end());
          ivs.push_back(c0);
          Value pad =
              arith::ConstantOp::create(cb, nloc, cb.getZeroAttr(inElem));
          Value v = vector::TransferReadOp::create(
              cb, nloc, VectorType::get({width}, inElem), in->get(),
              permute(inMap, ivs), pad, ArrayRef<bool>{true});
          auto outTy = VectorType::get({width}, outElem);
          if (conv) {
            OperationState state(nloc, conv->getName());
            state.addOperands(v);
            state.addTypes(outTy);
            state.addAttributes(conv->getAttrs());
            v = cb.create(state)->getResult(0);
          }
          vector::TransferWriteOp::create(cb, nloc, v, out->get(),
                                          permute(outMap, ivs),
                                          ArrayRef<bool>{true});
        };
        if (width == length) {
          copyAt(nb, arith::ConstantIndexOp::create(nb, nloc, 0));
          return;
        }
        scf::ForOp::create(
            nb, nloc, arith::ConstantIndexOp::create(nb, nloc, 0),
            arith::ConstantIndexOp::create(nb, nloc, length),
            arith::ConstantIndexOp::create(nb, nloc, width), ValueRange{},
            [&](OpBuilder &lb, Location, Value c0, ValueRange) {
              copyAt(lb, c0);
              scf::YieldOp::create(lb, nloc);
            });
      });
  op.erase();
}

struct VectorizeRowCopiesPass final
    : masformer::impl::VectorizeRowCopiesBase<VectorizeRowCopiesPass> {
  void runOnOperation() override {
    SmallVector<std::pair<linalg::GenericOp, int64_t>> copies;
    getOperation()->walk([&](linalg::GenericOp op) {
      if (std::optional<int64_t> length = rowCopyLength(op))
        copies.push_back({op, *length});
    });
    for (auto [op, length] : copies)
      lowerRowCopy(op, length);
  }
};

} // namespace
