//===- MASFormerOps.h - masformer operations --------------------*- C++ -*-===//
//
// The masformer op classes.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_DIALECT_MASFORMER_IR_MASFORMEROPS_H
#define MASFORMER_DIALECT_MASFORMER_IR_MASFORMEROPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "masformer/Dialect/MASFormer/IR/MASFormerAttrs.h"
#include "masformer/Dialect/MASFormer/IR/MASFormerDialect.h"

#define GET_OP_CLASSES
#include "masformer/Dialect/MASFormer/IR/MASFormerOps.h.inc"

namespace mlir::masformer {

/// The discardable attribute in which --masformer-raise-attention records
/// the span a model enforces itself (a sliding window built into its mask,
/// which stays the op's mask): --masformer-rewrite-spans gives it back to
/// the layers it keeps whole, and the ONNX export leaves a layer with that
/// span as the model wrote it.
constexpr llvm::StringLiteral kModelSpanAttrName = "masformer.model_span";

/// The discardable unit attribute with which --masformer-raise-attention
/// marks cross-attention (an encoder-decoder's decoder reading the
/// encoder's states): its keys and values are positions of another sequence
/// than its queries, so block and window spans, which pair query and key
/// positions, do not apply. The dialect's verifier holds such a layer to a
/// full span without head_spans and without the causal flag;
/// --masformer-rewrite-spans leaves it full.
constexpr llvm::StringLiteral kCrossAttentionAttrName =
    "masformer.cross_attention";

/// On a function: a string, why the function's positions depend on each
/// other outside its attention layers (the importer names the node: a
/// DynamicQuantizeLinear's one scale over every position), so that a decode
/// step, which computes only the new positions, would compute something
/// else than the whole sequence. --masformer-derive-decode refuses it with
/// this reason.
constexpr llvm::StringLiteral kCrossPositionAttrName =
    "masformer.cross_position";

/// On a function argument: the function writes this buffer in place, and
/// its caller relies on it (a decode entry's cache buffers, which the
/// entry writes the new keys and values into). --masformer-prepare-entry
/// leaves such an argument writable, and --masformer-check-in-place fails
/// when bufferization copied it instead.
constexpr llvm::StringLiteral kInPlaceAttrName = "masformer.in_place";

/// Whether --masformer-mixed-precision with `headDimMultiple` runs `op` on
/// bf16 operands: f32, with a static head dimension that is a multiple of
/// max(16, headDimMultiple) (the bf16 kernels step through it by 16, AMX's
/// tiles by 32). --masformer-derive-decode gives those layers bf16 caches.
bool takesBF16Operands(AttentionOp op, int64_t headDimMultiple);

/// The span `op` has in the model it was raised from: the recorded model
/// span, or full.
SpanAttr getModelSpan(AttentionOp op);

/// Whether `op` is marked as cross-attention (kCrossAttentionAttrName).
bool isCrossAttention(AttentionOp op);

} // namespace mlir::masformer

#endif // MASFORMER_DIALECT_MASFORMER_IR_MASFORMEROPS_H
