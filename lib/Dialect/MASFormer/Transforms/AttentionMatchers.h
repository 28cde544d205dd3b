//===- AttentionMatchers.h - Matchers on imported attention -----*- C++ -*-===//
//
// Private to the masformer transforms: recognizers for the ops the ONNX
// importer produces around attention (elementwise generics, batch matmuls,
// scalar constants, key/value head repetition, causal masks), used by
// --masformer-raise-attention.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_LIB_DIALECT_MASFORMER_TRANSFORMS_ATTENTIONMATCHERS_H
#define MASFORMER_LIB_DIALECT_MASFORMER_TRANSFORMS_ATTENTIONMATCHERS_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <optional>

namespace mlir::masformer {

/// Scores at or below this are "masked out" in an additive mask: exporters
/// use -inf, float-min or -10000.
constexpr double kMaskedThreshold = -1e4;

/// A linalg.generic applying one scalar op per element.
struct Elementwise {
  linalg::GenericOp op;
  Operation *payload;
  /// The generic's inputs feeding the payload, in payload operand order.
  SmallVector<Value> operands;
  /// Whether each of `operands` is read with an identity map (same shape as
  /// the result).
  SmallVector<bool> isIdentity;
};
std::optional<Elementwise> matchElementwise(Value v);

/// The elements of a constant tensor `v` as a dense attribute: an inline
/// one, or a dense_resource blob (raw-data initializers import as blobs;
/// a mask or scale stored that way must read as a constant too) of at most
/// 2^22 elements, in a type whose bytes the blob holds as MLIR lays them
/// out (ints and floats; bools one byte each, as ONNX stores them).
bool matchConstantElements(Value v, DenseElementsAttr &out);

/// The value of a splat or one-element float constant.
std::optional<double> getScalarConstant(Value v);

/// Looks through float casts (extf / truncf generics).
Value peelCast(Value v);

/// Folds Mul/Div by scalar constants on `v` into `scale`.
Value peelScale(Value v, double &scale);

/// out[b,h,i,j] = sum_k lhs[b,h,i,k] * rhs[b,h,k,j] with a zero init.
struct BatchMatmul {
  linalg::GenericOp op;
  Value lhs, rhs;
};
std::optional<BatchMatmul> matchBatchMatmul(Value v);

/// Q K^T with the heads flattened into the batch (GPT-NeoX's baddbmm):
/// [B*H, S, D] x [B*H, D, T] from Q and K collapsed from [B, H, S, D], with
/// `heads` heads. Returns Q and a new transpose of K as a 4-D product's
/// operands (built next to the product).
std::optional<BatchMatmul> matchFlatHeadsMatmul(Value v, int64_t heads);

/// [B*H, S, T] scores expanded to [B, H, S, T]: the flat source, or null.
Value peelExpandedHeads(Value v);

/// Whether `v` is a [B, H, S, T] tensor collapsed to [B * H, S, T].
bool collapsesHeads(Value v);

/// P V with the heads flattened into the batch (OPT, BLOOM):
/// [B*H, S, T] x [B*H, T, D] -> [B*H, S, D], with V collapsed from
/// [B, H, T, D] with `heads` heads. Returns P and that 4-D V.
std::optional<BatchMatmul> matchFlatPV(Value v, int64_t heads);

/// Whether `v` is zero everywhere (a splat-zero constant or a fill of 0).
bool isZeroTensor(Value v);

/// Peels unsqueeze(2) -> expand -> reshape of key/value heads (grouped-query
/// attention): the tensor with kv_heads heads, or `v` itself.
Value peelRepeatKV(Value v);

/// Whether `v` comes from the Q K^T contraction through elementwise ops.
bool reachesScores(Value v, int depth = 12);

/// Whether the constant `attr` of shape [..., q, kv] keeps exactly the
/// causal (bottom-right aligned) triangle; `kept(i)` says whether element i
/// is kept (nullopt: neither kept nor masked).
bool isCausalPattern(DenseElementsAttr attr,
                     llvm::function_ref<std::optional<bool>(int64_t)> kept);

/// Which pairs of a [..., q, kv] mask a rule requires masked: `pos` is the
/// query's position among the keys (queries aligned to the end of the
/// keys), `key` the key's. `reach`: the rule names no pair closer than this
/// (a window's W), so a probe must evaluate sequences longer than it; at
/// shorter ones the rule would hold for want of pairs.
struct PairRule {
  llvm::function_ref<bool(int64_t pos, int64_t key)> masks;
  int64_t reach = 0;
  bool operator()(int64_t pos, int64_t key) const { return masks(pos, key); }
};

/// Whether every element of `v` whose pair `mustMask` names is masked
/// (<= kMaskedThreshold) whatever the model's inputs are: the mask is
/// evaluated where it depends on sizes only (probeMask), read where it is
/// a constant, and followed through reshapes, slices, broadcasts, casts,
/// minimums and selects (a select whose condition depends on sizes only
/// needs only the branch that condition picks on those pairs).
bool isMaskedWhere(Value v, PairRule mustMask, int depth = 16);

/// Whether every element of `v` above the causal diagonal is masked
/// whatever the model's inputs are (isMaskedWhere with key > pos).
bool isUpperMasked(Value v);

/// The smallest window W, among those the computation of `mask` can
/// express (its integer constants c and c + 1), such that the mask masks
/// every pair with pos - key >= W whatever the model's inputs are: a
/// sliding window built into the mask (Mistral, Gemma 2). nullopt when
/// there is none.
std::optional<int64_t> findMaskWindow(Value mask);

/// The integer-valued constants of magnitude at most 2^20 that the
/// computation of `mask` uses (positions, lengths, windows), and the band
/// widths of its constant masks of rank >= 2 (a window folded into a
/// constant), sorted, each once.
SmallVector<int64_t> positionConstants(Value mask);

/// For a mask computed from dynamic sizes only (no input data): evaluates
/// it at two sets of small probe sizes and once with sequence sizes beyond
/// every position constant it uses and beyond `minSeq` (MaskProbe.cpp), and
/// returns whether `check(shape, element)` holds for all of them. False
/// when the mask has a static shape, depends on the model's inputs, uses
/// ops the evaluator does not know, or is too large to evaluate at the
/// large sizes.
bool probeMask(Value mask,
               llvm::function_ref<bool(ArrayRef<int64_t> shape,
                                       llvm::function_ref<double(int64_t)> at)>
                   check,
               int64_t minSeq = 0);

/// Whether the element function `kept(i)` over `shape` [..., q, kv] keeps
/// exactly the causal (bottom-right aligned) triangle.
bool isCausalShape(ArrayRef<int64_t> shape,
                   llvm::function_ref<std::optional<bool>(int64_t)> kept);

} // namespace mlir::masformer

#endif // MASFORMER_LIB_DIALECT_MASFORMER_TRANSFORMS_ATTENTIONMATCHERS_H
