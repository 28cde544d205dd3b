//===- SplitHeadSpans.cpp - One op per run of heads -------------*- C++ -*-===//
//
// --masformer-split-head-spans: per-head spans as one masformer.attention per
// run of consecutive key/value heads with the same span.
//
//===----------------------------------------------------------------------===//

#include "masformer/Dialect/MASFormer/Transforms/Passes.h"
#include "masformer/Dialect/MASFormer/Utils/HeadSpans.h"

namespace mlir::masformer {
#define GEN_PASS_DEF_SPLITHEADSPANS
#include "masformer/Dialect/MASFormer/Transforms/Passes.h.inc"
} // namespace mlir::masformer

using namespace mlir;
using namespace mlir::masformer;

namespace {
struct SplitHeadSpansPass final
    : masformer::impl::SplitHeadSpansBase<SplitHeadSpansPass> {
  void runOnOperation() override {
    if (failed(splitAllHeadSpans(getOperation())))
      signalPassFailure();
  }
};
} // namespace
