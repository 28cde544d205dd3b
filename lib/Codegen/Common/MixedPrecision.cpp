//===- MixedPrecision.cpp - Products and attention in bf16 ------*- C++ -*-===//
//
// An f32 model's matrix products and attention layers on bf16 operands,
// accumulated in f32: on the GPU they then run on full-rate bf16 tensor
// cores instead of three TF32 products each. Weights are converted at
// compile time (half the bytes to upload and to read); activations by an
// element-wise truncf, placed before their reshapes so that the
// element-wise fusion puts it into the kernel that produces them. Everything else (norms, softmax outside attention,
// residuals, the products' results) stays f32.
//
//===----------------------------------------------------------------------===//

#include "masformer/Utils/ConstantData.h"
#include "masformer/Utils/Contractions.h"
#include "masformer/Dialect/MASFormer/IR/MASFormerOps.h"
#include "masformer/Codegen/Common/Passes.h"

#include "mlir/IR/IRMapping.h"

#include <cstring>

namespace mlir::masformer {
#define GEN_PASS_DEF_MIXEDPRECISION
#include "masformer/Codegen/Common/Passes.h.inc"
} // namespace mlir::masformer

using namespace mlir;
using namespace mlir::masformer;

namespace {

bool isF32Tensor(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.getElementType().isF32();
}

/// Whether `v` is a constant (a weight), seen through reshapes.
bool isConstantTensor(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (isa<arith::ConstantOp>(def))
      return true;
    if (auto c = dyn_cast<tensor::CollapseShapeOp>(def))
      v = c.getSrc();
    else if (auto e = dyn_cast<tensor::ExpandShapeOp>(def))
      v = e.getSrc();
    else
      return false;
  }
  return false;
}

/// The shortest reduction a product must have to run on bf16: shorter
/// products gain nothing, and they are where exact values meet (rotary
/// embeddings multiply the positions by the frequencies with k = 1, and
/// bf16 holds integers exactly only up to 256).
constexpr int64_t kMinReduction = 16;

/// Whether the product `op` runs on bf16 operands: f32 operands and
/// result, a reduction of at least kMinReduction, and a constant operand
/// (activations times weights; a product of two activations keeps f32).
bool convertsToBF16(linalg::GenericOp op) {
  if (op.getNumDpsInputs() != 2 || !isF32Tensor(op.getDpsInputs()[0]) ||
      !isF32Tensor(op.getDpsInputs()[1]) || !isF32Tensor(op.getDpsInits()[0]))
    return false;
  FailureOr<MatmulDims> dims = matchMatmul(op);
  if (failed(dims))
    return false;
  int64_t k = op.getStaticLoopRanges()[dims->k];
  return !ShapedType::isDynamic(k) && k >= kMinReduction &&
         (isConstantTensor(op.getDpsInputs()[0]) ||
          isConstantTensor(op.getDpsInputs()[1]));
}

struct MixedPrecisionPass final
    : masformer::impl::MixedPrecisionBase<MixedPrecisionPass> {
  using Base::Base;

  /// `v` (an f32 tensor) in bf16: a converted constant, or a truncf after
  /// its definition. One conversion per value.
  Value toLow(Value v, OpBuilder &b) {
    if (Value done = converted.lookup(v))
      return done;
    auto ty = cast<RankedTensorType>(v.getType());
    auto lowTy = ty.clone(b.getBF16Type());
    // A bf16 value extended (an attention's result feeding the output
    // projection): the value itself.
    if (auto ext = v.getDefiningOp<arith::ExtFOp>())
      if (ext.getIn().getType() == lowTy)
        return ext.getIn();
    // A reshape (the batch dimensions of an activation collapsed for a
    // product): the reshape of the converted source, so that the truncf
    // meets the op that produces the source, and fuses into it.
    if (auto c = v.getDefiningOp<tensor::CollapseShapeOp>()) {
      Value src = toLow(c.getSrc(), b);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointAfter(c);
      Value low = tensor::CollapseShapeOp::create(
          b, c.getLoc(), lowTy, src, c.getReassociationIndices());
      converted[v] = low;
      return low;
    }
    if (auto e = v.getDefiningOp<tensor::ExpandShapeOp>()) {
      Value src = toLow(e.getSrc(), b);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointAfter(e);
      Value low = tensor::ExpandShapeOp::create(
          b, e.getLoc(), lowTy, src, e.getReassociationIndices(),
          e.getMixedOutputShape());
      converted[v] = low;
      return low;
    }
    // A slice of a tensor read only through slices (the query, key and
    // value columns of a fused QKV projection): the slice of the converted
    // source, so that the whole tensor is rounded once, by the op that
    // produces it (on the CPU, the product's tile), and the head splits
    // become copies of bf16, or views an attention reads through
    // (--masformer-tile-attention).
    if (auto s = v.getDefiningOp<tensor::ExtractSliceOp>();
        s && isF32Tensor(s.getSource()) &&
        (converted.count(s.getSource()) ||
         llvm::all_of(s.getSource().getUsers(),
                      llvm::IsaPred<tensor::ExtractSliceOp>))) {
      Value src = toLow(s.getSource(), b);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointAfter(s);
      Value low = tensor::ExtractSliceOp::create(
          b, s.getLoc(), lowTy, src, s.getMixedOffsets(), s.getMixedSizes(),
          s.getMixedStrides());
      converted[v] = low;
      return low;
    }
    // A transpose (heads split off or merged back): the transpose of the
    // converted source, in bf16. The truncf then meets the source's
    // producer, and an attention's result, extended to f32 and transposed
    // for the output projection, is transposed in bf16 with no conversion.
    if (auto t = v.getDefiningOp<linalg::TransposeOp>();
        t && t.hasPureTensorSemantics()) {
      Value src = toLow(t.getInput(), b);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointAfter(t);
      Value init = tensor::EmptyOp::create(
          b, t.getLoc(), tensor::getMixedSizes(b, t.getLoc(), t.getInit()),
          b.getBF16Type());
      Value low = linalg::TransposeOp::create(b, t.getLoc(), src, init,
                                              t.getPermutation())
                      .getResult()[0];
      converted[v] = low;
      return low;
    }
    Value low;
    OpBuilder::InsertionGuard guard(b);
    if (Operation *def = v.getDefiningOp())
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointToStart(cast<BlockArgument>(v).getOwner());
    Location loc = v.getLoc();
    auto cst = v.getDefiningOp<arith::ConstantOp>();
    if (cst && ty.hasStaticShape()) {
      if (auto splat = dyn_cast<SplatElementsAttr>(cst.getValue())) {
        float f = splat.getSplatValue<APFloat>().convertToFloat();
        uint16_t h = toBF16(f);
        low = arith::ConstantOp::create(
            b, loc,
            DenseElementsAttr::get(
                lowTy, APFloat(APFloat::BFloat(), APInt(16, h))));
      } else if (std::optional<ArrayRef<char>> bytes =
                     constantBytes(cst.getValue());
                 bytes && static_cast<int64_t>(bytes->size()) ==
                              ty.getNumElements() * 4) {
        int64_t n = ty.getNumElements();
        AsmResourceBlob blob = HeapAsmResourceBlob::allocate(
            n * 2, alignof(uint64_t), /*dataIsMutable=*/true);
        auto *out = reinterpret_cast<uint16_t *>(blob.getMutableData().data());
        const char *in = bytes->data();
        for (int64_t i = 0; i < n; ++i) {
          float f;
          std::memcpy(&f, in + 4 * i, 4);
          out[i] = toBF16(f);
        }
        low = arith::ConstantOp::create(
            b, loc,
            DenseResourceElementsAttr::get(lowTy, "bf16_weight",
                                           std::move(blob)));
      }
    }
    if (!low)
      low = arith::TruncFOp::create(b, loc, lowTy, v);
    converted[v] = low;
    return low;
  }

  /// The product `op` (f32 operands) on bf16 operands, still f32 out.
  void convertMatmul(linalg::GenericOp op, OpBuilder &b) {
    Value a = toLow(op.getDpsInputs()[0], b);
    Value w = toLow(op.getDpsInputs()[1], b);
    op->setOperand(0, a);
    op->setOperand(1, w);
    // The body extends the bf16 elements to f32.
    Block &body = op.getRegion().front();
    OpBuilder bb = OpBuilder::atBlockBegin(&body);
    for (unsigned i = 0; i < 2; ++i) {
      BlockArgument arg = body.getArgument(i);
      arg.setType(bb.getBF16Type());
      auto ext = arith::ExtFOp::create(bb, op.getLoc(), bb.getF32Type(), arg);
      arg.replaceAllUsesExcept(ext, ext);
    }
  }

  /// `op` on bf16 query, key and value, its result extended back to f32.
  void convertAttention(AttentionOp op, OpBuilder &b) {
    Value q = toLow(op.getQuery(), b);
    Value k = toLow(op.getKey(), b);
    Value v = toLow(op.getValue(), b);
    b.setInsertionPoint(op);
    IRMapping map;
    map.map(op.getQuery(), q);
    map.map(op.getKey(), k);
    map.map(op.getValue(), v);
    Operation *low = b.clone(*op, map);
    auto ty = cast<RankedTensorType>(op.getResult().getType());
    low->getResult(0).setType(ty.clone(b.getBF16Type()));
    Value back = arith::ExtFOp::create(b, op.getLoc(), ty, low->getResult(0));
    op.getResult().replaceAllUsesWith(back);
    op.erase();
  }

  void runOnOperation() override {
    if (type != "bf16") {
      getOperation()->emitError()
          << "masformer-mixed-precision: type=" << type << ": expected bf16";
      return signalPassFailure();
    }
    converted.clear();
    OpBuilder b(&getContext());
    SmallVector<linalg::GenericOp> products;
    SmallVector<AttentionOp> attentions;
    getOperation()->walk([&](Operation *op) {
      if (auto generic = dyn_cast<linalg::GenericOp>(op)) {
        if (convertsToBF16(generic))
          products.push_back(generic);
      } else if (auto attn = dyn_cast<AttentionOp>(op); attn && attention) {
        if (takesBF16Operands(attn, headDimMultiple))
          attentions.push_back(attn);
      }
    });
    // Attention first: a product of its result then reads the bf16 result.
    for (AttentionOp op : attentions)
      convertAttention(op, b);
    for (linalg::GenericOp op : products)
      convertMatmul(op, b);
    // Weights now used only in bf16.
    SmallVector<Operation *> dead;
    for (auto &[from, to] : converted)
      if (Operation *def = from.getDefiningOp())
        if (isa<arith::ConstantOp>(def) && def->use_empty())
          dead.push_back(def);
    for (Operation *op : dead)
      op->erase();
  }

  DenseMap<Value, Value> converted;
};

} // namespace
