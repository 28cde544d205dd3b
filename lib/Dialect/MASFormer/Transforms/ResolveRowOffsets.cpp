//===- ResolveRowOffsets.cpp - Per-row positions for the kernels -*- C++
//-*-===//
//
// --masformer-resolve-row-offsets: masformer.attention with a row_offset
// (each batch row's positions start at its own key) as ops without one,
// which the tiled kernels take (Utils/RowOffsets.h).
//
//===----------------------------------------------------------------------===//

#include "masformer/Dialect/MASFormer/Transforms/Passes.h"
#include "masformer/Dialect/MASFormer/Utils/RowOffsets.h"

namespace mlir::masformer {
#define GEN_PASS_DEF_RESOLVEROWOFFSETS
#include "masformer/Dialect/MASFormer/Transforms/Passes.h.inc"
} // namespace mlir::masformer

using namespace mlir;
using namespace mlir::masformer;

namespace {
struct ResolveRowOffsetsPass final
    : masformer::impl::ResolveRowOffsetsBase<ResolveRowOffsetsPass> {
  void runOnOperation() override { resolveAllRowOffsets(getOperation()); }
};
} // namespace
