//===- DeriveDecode.h - A decode entry for a causal decoder -----*- C++ -*-===//
//
// From a causal decoder's whole-sequence @main (input_ids [batch, sequence]
// in, per-position outputs out), the function @decode that computes the
// same outputs for `new` tokens that follow `past_length` positions whose
// keys and values it reads from cache buffers, into which it writes the new
// tokens' keys and values (docs/generate.md). One library then serves
// prefill (past_length 0, empty caches) and every decode step.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_DIALECT_MASFORMER_TRANSFORMS_DERIVEDECODE_H
#define MASFORMER_DIALECT_MASFORMER_TRANSFORMS_DERIVEDECODE_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include <string>

namespace mlir::masformer {

/// The name of the derived function.
constexpr llvm::StringLiteral kDecodeFuncName = "decode";
/// On each cache argument of @decode: the span whose keys the cache must
/// keep (#masformer.span: full, block B, window W, each with sinks).
constexpr llvm::StringLiteral kCacheSpanAttrName = "masformer.cache_span";
/// On @decode, when the model reads positions from a table: its rows, the
/// most positions the model can take.
constexpr llvm::StringLiteral kMaxLengthAttrName = "masformer.max_length";

/// Adds @decode to `module` (which must hold @main, raised, with its final
/// spans). On failure nothing is changed and `why` says which input, layer
/// or op prevents it.
LogicalResult deriveDecodeEntry(ModuleOp module, std::string &why);

} // namespace mlir::masformer

#endif // MASFORMER_DIALECT_MASFORMER_TRANSFORMS_DERIVEDECODE_H
