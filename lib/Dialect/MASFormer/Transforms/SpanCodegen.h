//===- SpanCodegen.h - The span predicate as IR ------------------*- C++ -*-===//
//
// Shared by the lowerings of masformer.attention (the reference
// decomposition and the tiled kernels), so that the span semantics are
// written once.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_LIB_DIALECT_MASFORMER_TRANSFORMS_SPANCODEGEN_H
#define MASFORMER_LIB_DIALECT_MASFORMER_TRANSFORMS_SPANCODEGEN_H

#include "masformer/Dialect/MASFormer/IR/MASFormerAttrs.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

namespace mlir::masformer {

/// Extends a float scalar to f32 (no-op for f32).
inline Value toF32(OpBuilder &b, Location loc, Value v) {
  if (v.getType().isF32())
    return v;
  return arith::ExtFOp::create(b, loc, b.getF32Type(), v);
}

/// Builds the i1 "query position qPos may attend key position j" from the
/// span and the causal flag, in index arithmetic inside a linalg body; a null
/// value when every pair is allowed.
inline Value buildSpanAllowed(OpBuilder &b, Location loc, SpanAttr span,
                              bool causal, Value qPos, Value j) {
  Value allowed;
  auto andWith = [&](Value cond) {
    allowed = allowed ? arith::AndIOp::create(b, loc, allowed, cond).getResult()
                      : cond;
  };
  if (causal)
    andWith(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle, j, qPos));
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
    andWith(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, dist,
                                  size));
    if (causal) {
      Value zero = arith::ConstantIndexOp::create(b, loc, 0);
      andWith(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, dist,
                                    zero));
    } else {
      Value negSize = arith::ConstantIndexOp::create(b, loc, -span.getSize());
      andWith(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt, dist,
                                    negSize));
    }
    break;
  }
  }
  return allowed;
}

} // namespace mlir::masformer

#endif // MASFORMER_LIB_DIALECT_MASFORMER_TRANSFORMS_SPANCODEGEN_H
