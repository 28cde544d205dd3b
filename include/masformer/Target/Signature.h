//===- Signature.h - The signature a compiled model carries -----*- C++ -*-===//
//
// The text that tells the runtime what @main takes and returns (names,
// element types, static sizes and symbolic ones), in the format of
// include/masformer/Runtime/ABI.h.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_TARGET_SIGNATURE_H
#define MASFORMER_TARGET_SIGNATURE_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <string>

namespace mlir::masformer {

/// A name or path as the signature and the weights' manifest write it:
/// percent-encoded where it holds a separator ('%', tab, newline, comma or
/// another control character).
std::string escapeSignatureName(StringRef s);

/// The signature of `main` (on tensors, as imported) for `target` ("cpu" or
/// "cuda", with `chip` for cuda). Fails with an error naming the input or
/// output whose element type cannot cross the runtime's interface.
FailureOr<std::string> buildRuntimeSignature(func::FuncOp main,
                                             StringRef target, StringRef chip);

} // namespace mlir::masformer

#endif // MASFORMER_TARGET_SIGNATURE_H
