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
/// The scalar input of @decode that says how many of the new positions, the
/// last ones, its per-position outputs hold (clamped to [1, new]): a
/// prefill asks for 1 (the next token's logits), a step for all of them.
constexpr llvm::StringLiteral kLogitsRowsName = "logits_rows";

/// Adds @decode to `module` (which must hold @main, raised, with its final
/// spans). On failure nothing is changed and `why` says which input, layer
/// or op prevents it.
/// With `bf16CacheHeadDimMultiple` > 0, a layer whose attention will run
/// on bf16 operands (f32, with a static head dimension that is a multiple
/// of max(16, it): --masformer-mixed-precision's rule) keeps its cache in
/// bf16: its new keys and values are rounded as they are written, and the
/// attention reads the bf16 run extended (which the mixed precision then
/// reads unextended).
LogicalResult deriveDecodeEntry(ModuleOp module, std::string &why,
                                int64_t bf16CacheHeadDimMultiple = 0);

} // namespace mlir::masformer

#endif // MASFORMER_DIALECT_MASFORMER_TRANSFORMS_DERIVEDECODE_H
