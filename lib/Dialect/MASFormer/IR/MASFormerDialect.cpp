//===- MASFormerDialect.cpp - masformer dialect -----------------*- C++ -*-===//
//
// Dialect registration.
//
//===----------------------------------------------------------------------===//

#include "masformer/Dialect/MASFormer/IR/MASFormerDialect.h"
#include "masformer/Dialect/MASFormer/IR/MASFormerAttrs.h"
#include "masformer/Dialect/MASFormer/IR/MASFormerOps.h"

using namespace mlir;
using namespace mlir::masformer;

#include "masformer/Dialect/MASFormer/IR/MASFormerOpsDialect.cpp.inc"

void MASFormerDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "masformer/Dialect/MASFormer/IR/MASFormerOps.cpp.inc"
      >();
  registerAttributes();
}

LogicalResult MASFormerDialect::verifyOperationAttribute(Operation *op,
                                                         NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == kModelSpanAttrName) {
    if (!isa<AttentionOp>(op))
      return op->emitOpError()
             << "'" << name << "' is only valid on masformer.attention";
    if (!isa<SpanAttr>(attr.getValue()))
      return op->emitOpError() << "'" << name << "' must be a span";
    return success();
  }
  if (name == kCrossAttentionAttrName) {
    auto attention = dyn_cast<AttentionOp>(op);
    if (!attention)
      return op->emitOpError()
             << "'" << name << "' is only valid on masformer.attention";
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitOpError() << "'" << name << "' must be a unit attribute";
    // Block and window spans pair query position i with key positions
    // near it; a cross-attention's keys are positions of another sequence.
    if (!attention.getSpan().isFull() || attention.getHeadSpans())
      return op->emitOpError()
             << "is cross-attention ('" << name
             << "'): its keys come from another sequence than its queries, "
                "so it takes the full span only, not "
             << (attention.getHeadSpans()
                     ? StringRef("head_spans")
                     : StringRef("a block or window span"));
    if (attention.getCausal())
      return op->emitOpError()
             << "is cross-attention ('" << name << "') and cannot be causal";
    return success();
  }
  // The dialect's other discardable attributes are checked by the passes
  // that read them.
  return success();
}
