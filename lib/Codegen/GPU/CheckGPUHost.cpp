//===- CheckGPUHost.cpp - Host code the GPU pipeline can run ----*- C++ -*-===//
//
// After the GPU kernels have replaced attention and the matrix products, the
// host code must only move data and launch: its tensors live in device
// memory, so any computation left on them (a linalg op, an element-wise op
// on tensors, a slice) would read device memory on the host. This check
// turns that into an error naming the op, instead of a binary that faults.
//
//===----------------------------------------------------------------------===//

#include "masformer/Dialect/MASFormer/IR/MASFormerOps.h"
#include "masformer/Codegen/GPU/Passes.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace mlir::masformer {
#define GEN_PASS_DEF_CHECKGPUHOST
#include "masformer/Codegen/GPU/Passes.h.inc"
} // namespace mlir::masformer

using namespace mlir;
using namespace mlir::masformer;

namespace {

/// Ops that only describe or move tensors and buffers, or compute scalars.
bool isAllowedOnHost(Operation *op) {
  if (isa<func::FuncOp, func::ReturnOp, func::CallOp, ModuleOp>(op))
    return true;
  // (A tensor.empty only gives a shape: it becomes memory only for an op
  // that writes it, and that op is reported.)
  if (isa<bufferization::ToBufferOp, bufferization::ToTensorOp,
          tensor::EmptyOp, tensor::DimOp, tensor::CollapseShapeOp, tensor::ExpandShapeOp,
          tensor::CastOp, memref::DimOp, memref::CastOp,
          memref::CollapseShapeOp, memref::ExpandShapeOp>(op))
    return true;
  Dialect *d = op->getDialect();
  if (d && isa<gpu::GPUDialect>(d))
    return true;
  // Scalar arithmetic and control flow (shapes, grid sizes).
  if (d && isa<arith::ArithDialect, scf::SCFDialect>(d))
    return llvm::none_of(op->getResultTypes(), [](Type t) {
      return isa<ShapedType>(t);
    });
  return false;
}

struct CheckGPUHostPass final
    : masformer::impl::CheckGPUHostBase<CheckGPUHostPass> {
  void runOnOperation() override {
    // The first such op: one error, not one per op.
    WalkResult r = getOperation().walk<WalkOrder::PreOrder>(
        [&](Operation *op) {
          if (isa<gpu::GPUModuleOp>(op))
            return WalkResult::skip();
          if (isAllowedOnHost(op))
            return WalkResult::advance();
          op->emitError() << "'" << op->getName()
                          << "' has no GPU lowering yet: the GPU pipeline "
                             "runs attention and matrix products, and this "
                             "op would read device memory on the host";
          return WalkResult::interrupt();
        });
    if (r.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
