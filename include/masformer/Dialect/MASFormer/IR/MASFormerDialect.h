//===- MASFormerDialect.h - masformer dialect -------------------*- C++ -*-===//
//
// The masformer dialect class.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_DIALECT_MASFORMER_IR_MASFORMERDIALECT_H
#define MASFORMER_DIALECT_MASFORMER_IR_MASFORMERDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Dialect.h"

#include "masformer/Dialect/MASFormer/IR/MASFormerOpsDialect.h.inc"

#endif // MASFORMER_DIALECT_MASFORMER_IR_MASFORMERDIALECT_H
