//===- MASFormerOps.h - masformer operations --------------------*- C++ -*-===//
//
// The masformer op classes.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_DIALECT_MASFORMER_IR_MASFORMEROPS_H
#define MASFORMER_DIALECT_MASFORMER_IR_MASFORMEROPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "masformer/Dialect/MASFormer/IR/MASFormerAttrs.h"
#include "masformer/Dialect/MASFormer/IR/MASFormerDialect.h"

#define GET_OP_CLASSES
#include "masformer/Dialect/MASFormer/IR/MASFormerOps.h.inc"

#endif // MASFORMER_DIALECT_MASFORMER_IR_MASFORMEROPS_H
