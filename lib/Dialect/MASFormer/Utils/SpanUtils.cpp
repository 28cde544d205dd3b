//===- SpanUtils.cpp - The span semantics as IR -----------------*- C++ -*-===//

#include "masformer/Dialect/MASFormer/Utils/SpanUtils.h"

using namespace mlir;
using namespace mlir::masformer;

Value mlir::masformer::buildSpanAllowed(OpBuilder &b, Location loc,
                                        SpanAttr span, bool causal, Value qPos,
                                        Value j) {
  // Without sinks the span's conditions join the causal one in a single
  // chain; with sinks they form their own term, `j < sink` or'ed in.
  bool sinks = span.getSink() > 0;
  Value allowed, rule;
  auto andInto = [&](Value &acc, Value cond) {
    acc = acc ? arith::AndIOp::create(b, loc, acc, cond).getResult() : cond;
  };
  auto andWith = [&](Value cond) { andInto(sinks ? rule : allowed, cond); };
  if (causal)
    andInto(allowed,
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle, j, qPos));
  switch (span.getKind()) {
  case SpanKind::Full:
    break;
  case SpanKind::Block: {
    Value size = arith::ConstantIndexOp::create(b, loc, span.getSize());
    Value qBlock = arith::FloorDivSIOp::create(b, loc, qPos, size);
    Value kBlock = arith::FloorDivSIOp::create(b, loc, j, size);
    andWith(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, qBlock,
                                  kBlock));
    break;
  }
  case SpanKind::Window: {
    Value size = arith::ConstantIndexOp::create(b, loc, span.getSize());
    Value dist = arith::SubIOp::create(b, loc, qPos, j);
    andWith(
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, dist, size));
    if (causal) {
      Value zero = arith::ConstantIndexOp::create(b, loc, 0);
      andWith(
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, dist, zero));
    } else {
      Value negSize = arith::ConstantIndexOp::create(b, loc, -span.getSize());
      andWith(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt, dist,
                                    negSize));
    }
    break;
  }
  }
  if (rule) {
    Value sink = arith::ConstantIndexOp::create(b, loc, span.getSink());
    // 0 <= j < sink in one unsigned comparison: a key at a negative
    // position (a row's padding under a row offset) is no sink.
    Value isSink =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, j, sink);
    andInto(allowed, arith::OrIOp::create(b, loc, isSink, rule));
  }
  return allowed;
}

Value mlir::masformer::buildHeadSpansAllowed(OpBuilder &b, Location loc,
                                             ArrayRef<SpanAttr> spans,
                                             bool causal, Value qPos, Value j,
                                             Value queryHead, Value group) {
  auto allowedBy = [&](SpanAttr span) -> Value {
    if (Value a = buildSpanAllowed(b, loc, span, causal, qPos, j))
      return a;
    return arith::ConstantIntOp::create(b, loc, 1, 1);
  };
  // The span of key/value head h / group, chosen by a chain of selects.
  Value allowed = allowedBy(spans.back());
  if (spans.size() > 1) {
    Value kvHead = arith::DivUIOp::create(b, loc, queryHead, group);
    for (int64_t h = spans.size() - 2; h >= 0; --h) {
      Value isH =
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, kvHead,
                                arith::ConstantIndexOp::create(b, loc, h));
      allowed =
          arith::SelectOp::create(b, loc, isH, allowedBy(spans[h]), allowed);
    }
  }
  return allowed;
}

Value mlir::masformer::buildSinkKeyEnd(Idx &ix, SpanAttr span, bool causal,
                                       Value qPosLast, Value skv) {
  if (span.getSink() <= 0)
    return {};
  Value end = ix.min(ix.c(span.getSink()), skv);
  if (causal)
    end = ix.min(end, ix.add(qPosLast, ix.c(1)));
  return end;
}

std::pair<Value, Value>
mlir::masformer::buildSpanKeyRange(Idx &ix, SpanAttr span, bool causal,
                                   Value qPos0, Value qPosLast, Value skv) {
  Value lo = ix.c(0), hi = skv;
  if (causal)
    hi = ix.min(hi, ix.add(qPosLast, ix.c(1)));
  if (span.getKind() == SpanKind::Block) {
    Value bs = ix.c(span.getSize());
    lo = ix.max(lo, ix.mul(ix.fdiv(qPos0, bs), bs));
    hi = ix.min(hi, ix.mul(ix.add(ix.fdiv(qPosLast, bs), ix.c(1)), bs));
  } else if (span.getKind() == SpanKind::Window) {
    Value w = ix.c(span.getSize());
    lo = ix.max(lo, ix.add(ix.sub(qPos0, w), ix.c(1)));
    if (!causal)
      hi = ix.min(hi, ix.add(qPosLast, w));
  }
  return {lo, hi};
}

Value mlir::masformer::buildSpanTileInterior(Idx &ix, SpanAttr span,
                                             bool causal, Value qPos0,
                                             Value qPosLast, Value k0,
                                             Value kLast) {
  using P = arith::CmpIPredicate;
  // As in buildSpanAllowed: with sinks, the span's conditions form a term
  // of their own, or'ed with "every key of the tile is a sink".
  bool sinks = span.getSink() > 0;
  Value interior, rule;
  auto andInto = [&](Value &acc, Value c) {
    acc = acc ? ix.andI(acc, c) : c;
  };
  auto andWith = [&](Value c) { andInto(sinks ? rule : interior, c); };
  if (causal)
    andInto(interior, ix.cmp(P::sle, kLast, qPos0));
  if (span.getKind() == SpanKind::Block) {
    Value bs = ix.c(span.getSize());
    Value blk = ix.fdiv(qPos0, bs);
    andWith(ix.cmp(P::eq, blk, ix.fdiv(qPosLast, bs)));
    andWith(ix.cmp(P::eq, blk, ix.fdiv(k0, bs)));
    andWith(ix.cmp(P::eq, blk, ix.fdiv(kLast, bs)));
  } else if (span.getKind() == SpanKind::Window) {
    Value w = ix.c(span.getSize());
    andWith(ix.cmp(P::slt, ix.sub(qPosLast, k0), w));
    if (causal)
      andWith(ix.cmp(P::sge, ix.sub(qPos0, kLast), ix.c(0)));
    else
      andWith(ix.cmp(P::slt, ix.sub(kLast, qPos0), w));
  }
  if (rule) {
    Value allSinks = ix.cmp(P::slt, kLast, ix.c(span.getSink()));
    andInto(interior, arith::OrIOp::create(ix.b, ix.loc, allSinks, rule));
  }
  return interior;
}
