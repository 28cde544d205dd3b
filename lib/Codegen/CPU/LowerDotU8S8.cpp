//===- LowerDotU8S8.cpp - masformer.dot_u8s8 as vpdpbusd --------*- C++ -*-===//
//
// The 8-bit product kernels' step, a pure op until bufferization is done,
// as the LLVM intrinsic of AVX512-VNNI's vpdpbusd.
//
//===----------------------------------------------------------------------===//

#include "masformer/Codegen/CPU/Passes.h"
#include "masformer/Dialect/MASFormer/IR/MASFormerOps.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::masformer {
#define GEN_PASS_DEF_LOWERDOTU8S8
#include "masformer/Codegen/CPU/Passes.h.inc"
} // namespace mlir::masformer

using namespace mlir;
using namespace mlir::masformer;

namespace {

struct LowerDotU8S8Pass final
    : masformer::impl::LowerDotU8S8Base<LowerDotU8S8Pass> {
  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    StringAttr name = rewriter.getStringAttr("llvm.x86.avx512.vpdpbusd.512");
    getOperation()->walk([&](DotU8S8Op op) {
      rewriter.setInsertionPoint(op);
      // (acc, a: the uint8 operand, b: the int8 one), as the intrinsic.
      rewriter.replaceOpWithNewOp<LLVM::CallIntrinsicOp>(
          op, op.getType(), name,
          ValueRange{op.getAcc(), op.getA(), op.getB()});
    });
  }
};

} // namespace
