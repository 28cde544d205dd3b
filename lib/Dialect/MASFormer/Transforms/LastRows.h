//===- LastRows.h - Ops computed on the rows a slice takes ------*- C++ -*-===//
//
// Private to the masformer transforms: used by --masformer-derive-decode to
// compute a decode entry's last ops on the rows of logits it is asked for
// (docs/generate.md).
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_LIB_DIALECT_MASFORMER_TRANSFORMS_LASTROWS_H
#define MASFORMER_LIB_DIALECT_MASFORMER_TRANSFORMS_LASTROWS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::masformer {

/// Marks the slices that computeOnlySlices moves up.
constexpr llvm::StringLiteral kRowsSliceAttr = "masformer.rows_slice";

/// Computes each slice marked kRowsSliceAttr from the same part of its
/// producer's operands, up the chain of ops that read no other part of
/// theirs: linalg ops (by their tiling interface, which computes exactly
/// the slice), reshapes that keep the slice one slice, attentions (their
/// last query rows, which keep their positions: queries align to the end
/// of the keys), and chains of row-by-row ops over rows flattened to
/// [batch * sequence]. A producer is sliced only when every reader of its
/// result takes that same slice, so no op is computed twice. The marks are
/// removed at the end; ops left dead are the caller's to erase.
void computeOnlySlices(func::FuncOp f);

} // namespace mlir::masformer

#endif // MASFORMER_LIB_DIALECT_MASFORMER_TRANSFORMS_LASTROWS_H
