//===- SpanReport.h - Per-layer attention cost ------------------*- C++ -*-===//
//
// The cost of each attention layer's span at a sequence length: what
// --masformer-span-report prints, for library users (the Python package).
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_DIALECT_MASFORMER_ANALYSIS_SPANREPORT_H
#define MASFORMER_DIALECT_MASFORMER_ANALYSIS_SPANREPORT_H

#include "masformer/Dialect/MASFormer/Analysis/SpanCost.h"

#include "mlir/IR/BuiltinOps.h"

namespace mlir::masformer {

/// The longest sequence a span report counts pairs for (4M tokens): the
/// count takes time linear in it.
constexpr int64_t kMaxReportSeqLen = int64_t(1) << 22;

/// The report of every masformer.attention in `module`, in layer order.
/// Errors (no layers, layer indices missing or repeated, dynamic heads or
/// head_dim, seqLen <= 0 or above kMaxReportSeqLen) are emitted on the
/// module.
FailureOr<SpanReport> computeSpanReport(ModuleOp module, int64_t seqLen);

/// The report as the table that --masformer-span-report prints.
void printSpanReport(const SpanReport &report, llvm::raw_ostream &os);

} // namespace mlir::masformer

#endif // MASFORMER_DIALECT_MASFORMER_ANALYSIS_SPANREPORT_H
