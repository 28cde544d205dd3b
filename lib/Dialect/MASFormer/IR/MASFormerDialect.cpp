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
