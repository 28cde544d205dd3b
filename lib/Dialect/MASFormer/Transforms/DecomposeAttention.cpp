//===- DecomposeAttention.cpp - Reference lowering of attention -*- C++ -*-===//
//
// Rewrites masformer.attention into dense upstream tensor ops. This is the
// semantic reference of the dialect: it computes every (query, key) pair and
// masks the ones outside the span, exactly as the span definition says, so
// every faster lowering is tested against it.
//
//===----------------------------------------------------------------------===//

#include "masformer/Dialect/MASFormer/IR/MASFormerOps.h"
#include "masformer/Dialect/MASFormer/Transforms/Passes.h"
#include "masformer/Dialect/MASFormer/Utils/HeadSpans.h"
#include "masformer/Dialect/MASFormer/Utils/SpanUtils.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

#include <cmath>
#include <limits>

namespace mlir::masformer {
#define GEN_PASS_DEF_DECOMPOSEATTENTION
#include "masformer/Dialect/MASFormer/Transforms/Passes.h.inc"
} // namespace mlir::masformer

using namespace mlir;
using namespace mlir::masformer;

namespace {


/// Key/value as seen by query head h: for a static group size G (1 for
/// multi-head attention) the tensor itself, read at head h floordiv G; for a
/// dynamic group size, a materialized copy with the heads repeated (the
/// reference path favours generality over speed).
struct KVView {
  Value tensor;
  /// Query heads per head of `tensor`; 1 once heads are repeated.
  int64_t groupSize;
};

KVView viewPerQueryHead(OpBuilder &b, Location loc, AttentionOp op,
                        Value kv) {
  if (std::optional<int64_t> g = op.getStaticGroupSize())
    return {kv, *g};
  // Dynamic head counts: repeat kv heads up to q_heads at run time.
  Value qHeads = tensor::DimOp::create(b, loc, op.getQuery(), 1);
  Value kvHeads = tensor::DimOp::create(b, loc, kv, 1);
  Value group = arith::DivUIOp::create(b, loc, qHeads, kvHeads);
  SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(b, loc, kv);
  sizes[1] = qHeads;
  auto kvTy = cast<RankedTensorType>(kv.getType());
  Value empty = tensor::EmptyOp::create(b, loc, sizes, kvTy.getElementType());
  MLIRContext *ctx = b.getContext();
  auto generic = linalg::GenericOp::create(
      b, loc, empty.getType(), ValueRange{}, ValueRange{empty},
      ArrayRef<AffineMap>{AffineMap::getMultiDimIdentityMap(4, ctx)},
      SmallVector<IteratorType>(4, kPar),
      [&](OpBuilder &nb, Location nloc, ValueRange) {
        SmallVector<Value> idx;
        for (unsigned d = 0; d < 4; ++d)
          idx.push_back(linalg::IndexOp::create(nb, nloc, d));
        idx[1] = arith::DivUIOp::create(nb, nloc, idx[1], group);
        Value x = tensor::ExtractOp::create(nb, nloc, kv, idx);
        linalg::YieldOp::create(nb, nloc, x);
      });
  return {generic.getResult(0), 1};
}

/// The affine map from 5 loop dims (b, h, a, c, e) to a kv tensor indexed
/// [b, h floordiv G, seqDim, dDim].
AffineMap kvMap(MLIRContext *ctx, int64_t group, unsigned seqDim,
                unsigned dDim) {
  AffineExpr h = getAffineDimExpr(1, ctx);
  if (group != 1)
    h = h.floorDiv(group);
  return AffineMap::get(5, 0,
                        {getAffineDimExpr(0, ctx), h,
                         getAffineDimExpr(seqDim, ctx),
                         getAffineDimExpr(dDim, ctx)},
                        ctx);
}

/// The map that broadcasts a mask of rank <= 4 (right-aligned, numpy rules)
/// to the 4 loop dims [b, h, i, j]. Static size-1 dims broadcast; the others
/// follow the loop.
struct DecomposeAttentionPattern final : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = op.getContext();
    OpBuilder &b = rewriter;
    Type f32 = b.getF32Type();
    RankedTensorType qTy = op.getQueryType();

    SmallVector<OpFoldResult> qSizes =
        tensor::getMixedSizes(b, loc, op.getQuery());
    OpFoldResult kvSeq = tensor::getMixedSize(b, loc, op.getKey(), 2);
    // [b, h, i, j] and [b, h, i] shapes.
    SmallVector<OpFoldResult> scoreSizes = {qSizes[0], qSizes[1], qSizes[2],
                                            kvSeq};
    SmallVector<OpFoldResult> rowSizes = {qSizes[0], qSizes[1], qSizes[2]};

    KVView key = viewPerQueryHead(b, loc, op, op.getKey());
    KVView value = viewPerQueryHead(b, loc, op, op.getValue());

    AffineMap id4 = AffineMap::getMultiDimIdentityMap(4, ctx);
    AffineMap row4 = dimsMap(ctx, 4, {0, 1, 2});

    // S[b,h,i,j] = sum_d Q[b,h,i,d] * K[b,h/G,j,d], in f32.
    Value scoresInit = filledF32(b, loc, scoreSizes, 0.0);
    Value scores =
        linalg::GenericOp::create(
            b, loc, scoresInit.getType(),
            ValueRange{op.getQuery(), key.tensor}, ValueRange{scoresInit},
            ArrayRef<AffineMap>{dimsMap(ctx, 5, {0, 1, 2, 4}),
                                kvMap(ctx, key.groupSize, 3, 4),
                                dimsMap(ctx, 5, {0, 1, 2, 3})},
            ArrayRef<IteratorType>{kPar, kPar, kPar, kPar, kRed},
            [&](OpBuilder &nb, Location nloc, ValueRange args) {
              Value q = toF32(nb, nloc, args[0]);
              Value k = toF32(nb, nloc, args[1]);
              Value prod = arith::MulFOp::create(nb, nloc, q, k);
              linalg::YieldOp::create(
                  nb, nloc, arith::AddFOp::create(nb, nloc, args[2], prod)
                                .getResult());
            })
            .getResult(0);

    // L[b,h,i,j] = allowed(i + kv_seq - q_seq, j) ? cap(scale * S) + mask
    // : -inf, with cap the softcap (or nothing).
    Value scale = op.buildScale(b, loc);
    Value qSeq = getValueOrCreateConstantIndexOp(b, loc, qSizes[2]);
    Value offset = arith::SubIOp::create(
        b, loc, getValueOrCreateConstantIndexOp(b, loc, kvSeq), qSeq);
    SmallVector<Value> logitInputs = {scores};
    SmallVector<AffineMap> logitMaps = {id4};
    if (Value mask = op.getMask()) {
      logitInputs.push_back(mask);
      logitMaps.push_back(
          getMaskBroadcastMap(ctx, cast<RankedTensorType>(mask.getType())));
    }
    // Row b's positions start row_offset[b] into its keys.
    Value rowOffset = op.getRowOffset();
    int64_t offsetArg = -1;
    if (rowOffset && (op.getCausal() || op.hasSparseSpan())) {
      offsetArg = logitInputs.size();
      logitInputs.push_back(rowOffset);
      logitMaps.push_back(dimsMap(ctx, 4, {0}));
    }
    logitMaps.push_back(id4);
    Value logitsInit = tensor::EmptyOp::create(b, loc, scoreSizes, f32);
    // Each key/value head's span (one for all heads without head_spans).
    SmallVector<SpanAttr> spans = getKVHeadSpans(op);
    bool causal = op.getCausal();
    bool positional = causal || op.hasSparseSpan();
    // Query heads per key/value head (kv_heads is static with head spans;
    // q_heads may be known only at run time).
    Value group = buildHeadGroupSize(b, loc, op, qSizes[1]);
    bool hasMask = op.getMask() != nullptr;
    std::optional<float> softcap = op.getSoftcapValue();
    Value logits =
        linalg::GenericOp::create(
            b, loc, logitsInit.getType(), logitInputs, ValueRange{logitsInit},
            logitMaps, SmallVector<IteratorType>(4, kPar),
            [&](OpBuilder &nb, Location nloc, ValueRange args) {
              Value x = AttentionOp::applySoftcap(
                  nb, nloc, arith::MulFOp::create(nb, nloc, args[0], scale),
                  softcap);
              if (hasMask)
                x = arith::AddFOp::create(nb, nloc, x,
                                          toF32(nb, nloc, args[1]));
              if (positional) {
                Value i = linalg::IndexOp::create(nb, nloc, 2);
                Value j = linalg::IndexOp::create(nb, nloc, 3);
                Value qPos = arith::AddIOp::create(nb, nloc, i, offset);
                if (offsetArg >= 0) {
                  qPos = arith::SubIOp::create(nb, nloc, qPos, args[offsetArg]);
                  j = arith::SubIOp::create(nb, nloc, j, args[offsetArg]);
                }
                Value allowed = buildHeadSpansAllowed(
                    nb, nloc, spans, causal, qPos, j,
                    linalg::IndexOp::create(nb, nloc, 1), group);
                Value negInf = arith::ConstantOp::create(
                    nb, nloc, f32,
                    nb.getF32FloatAttr(
                        -std::numeric_limits<float>::infinity()));
                x = arith::SelectOp::create(nb, nloc, allowed, x, negInf);
              }
              linalg::YieldOp::create(nb, nloc, x);
            })
            .getResult(0);

    // M[b,h,i] = max_j L; rows with no allowed key use 0 so that
    // exp(-inf - 0) = 0 rather than NaN.
    Value maxInit = filledF32(b, loc, rowSizes,
                              -std::numeric_limits<float>::infinity());
    Value rowMax =
        linalg::GenericOp::create(
            b, loc, maxInit.getType(), ValueRange{logits}, ValueRange{maxInit},
            ArrayRef<AffineMap>{id4, row4},
            ArrayRef<IteratorType>{kPar, kPar, kPar, kRed},
            [&](OpBuilder &nb, Location nloc, ValueRange args) {
              linalg::YieldOp::create(
                  nb, nloc,
                  arith::MaximumFOp::create(nb, nloc, args[0], args[1])
                      .getResult());
            })
            .getResult(0);

    // P[b,h,i,j] = exp(L - M).
    Value probsInit = tensor::EmptyOp::create(b, loc, scoreSizes, f32);
    Value probs =
        linalg::GenericOp::create(
            b, loc, probsInit.getType(), ValueRange{logits, rowMax},
            ValueRange{probsInit}, ArrayRef<AffineMap>{id4, row4, id4},
            SmallVector<IteratorType>(4, kPar),
            [&](OpBuilder &nb, Location nloc, ValueRange args) {
              Value negInf = arith::ConstantOp::create(
                  nb, nloc, f32,
                  nb.getF32FloatAttr(-std::numeric_limits<float>::infinity()));
              Value zero = arith::ConstantOp::create(nb, nloc, f32,
                                                     nb.getF32FloatAttr(0.0f));
              Value empty = arith::CmpFOp::create(
                  nb, nloc, arith::CmpFPredicate::OEQ, args[1], negInf);
              Value m = arith::SelectOp::create(nb, nloc, empty, zero, args[1]);
              Value e = math::ExpOp::create(
                  nb, nloc, arith::SubFOp::create(nb, nloc, args[0], m));
              linalg::YieldOp::create(nb, nloc, e);
            })
            .getResult(0);

    // Z[b,h,i] = sum_j P.
    Value sumInit = filledF32(b, loc, rowSizes, 0.0);
    Value rowSum =
        linalg::GenericOp::create(
            b, loc, sumInit.getType(), ValueRange{probs}, ValueRange{sumInit},
            ArrayRef<AffineMap>{id4, row4},
            ArrayRef<IteratorType>{kPar, kPar, kPar, kRed},
            [&](OpBuilder &nb, Location nloc, ValueRange args) {
              linalg::YieldOp::create(
                  nb, nloc,
                  arith::AddFOp::create(nb, nloc, args[0], args[1])
                      .getResult());
            })
            .getResult(0);

    // O[b,h,i,d] = sum_j P[b,h,i,j] * V[b,h/G,j,d], loops (b, h, i, d, j).
    Value outInit = filledF32(b, loc, qSizes, 0.0);
    Value unnormalized =
        linalg::GenericOp::create(
            b, loc, outInit.getType(), ValueRange{probs, value.tensor},
            ValueRange{outInit},
            ArrayRef<AffineMap>{dimsMap(ctx, 5, {0, 1, 2, 4}),
                                kvMap(ctx, value.groupSize, 4, 3),
                                dimsMap(ctx, 5, {0, 1, 2, 3})},
            ArrayRef<IteratorType>{kPar, kPar, kPar, kPar, kRed},
            [&](OpBuilder &nb, Location nloc, ValueRange args) {
              Value prod = arith::MulFOp::create(nb, nloc, args[0],
                                                 toF32(nb, nloc, args[1]));
              linalg::YieldOp::create(
                  nb, nloc, arith::AddFOp::create(nb, nloc, args[2], prod)
                                .getResult());
            })
            .getResult(0);

    // Result = O / Z, zero for rows with no allowed key, in the op's type.
    Type elemTy = qTy.getElementType();
    Value resultInit = tensor::EmptyOp::create(b, loc, qSizes, elemTy);
    Value result =
        linalg::GenericOp::create(
            b, loc, resultInit.getType(), ValueRange{unnormalized, rowSum},
            ValueRange{resultInit}, ArrayRef<AffineMap>{id4, row4, id4},
            SmallVector<IteratorType>(4, kPar),
            [&](OpBuilder &nb, Location nloc, ValueRange args) {
              Value zero = arith::ConstantOp::create(nb, nloc, f32,
                                                     nb.getF32FloatAttr(0.0f));
              Value isEmpty = arith::CmpFOp::create(
                  nb, nloc, arith::CmpFPredicate::OEQ, args[1], zero);
              Value div = arith::DivFOp::create(nb, nloc, args[0], args[1]);
              Value x = arith::SelectOp::create(nb, nloc, isEmpty, zero, div);
              if (!elemTy.isF32())
                x = arith::TruncFOp::create(nb, nloc, elemTy, x);
              linalg::YieldOp::create(nb, nloc, x);
            })
            .getResult(0);
    if (result.getType() != op.getType())
      result = tensor::CastOp::create(b, loc, op.getType(), result);
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct DecomposeAttentionPass final
    : masformer::impl::DecomposeAttentionBase<DecomposeAttentionPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateDecomposeAttentionPatterns(patterns);
    walkAndApplyPatterns(getOperation(), std::move(patterns));
  }
};

} // namespace

void mlir::masformer::populateDecomposeAttentionPatterns(
    RewritePatternSet &patterns) {
  patterns.add<DecomposeAttentionPattern>(patterns.getContext());
}
