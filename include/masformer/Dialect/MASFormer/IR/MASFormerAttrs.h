//===- MASFormerAttrs.h - masformer attributes ------------------*- C++ -*-===//
//
// The span attribute and its kind enum.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_DIALECT_MASFORMER_IR_MASFORMERATTRS_H
#define MASFORMER_DIALECT_MASFORMER_IR_MASFORMERATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectImplementation.h"

#include "masformer/Dialect/MASFormer/IR/MASFormerEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "masformer/Dialect/MASFormer/IR/MASFormerAttrs.h.inc"

#endif // MASFORMER_DIALECT_MASFORMER_IR_MASFORMERATTRS_H
