//===- LayerExport.h - One attention layer back into ONNX -------*- C++ -*-===//
//
// Private to lib/Export: the node emitter and the per-layer exporter shared
// by ONNXExporter.cpp (finding the layer, the driver), BlockedLayer.cpp
// (blocked and windowed MatMul/Softmax layers) and AttentionNode.cpp
// (opset-23 Attention nodes).
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_LIB_EXPORT_LAYEREXPORT_H
#define MASFORMER_LIB_EXPORT_LAYEREXPORT_H

#include "masformer/Dialect/MASFormer/IR/MASFormerOps.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <onnx/onnx_pb.h>

#include <limits>
#include <string>
#include <vector>

namespace mlir::masformer::detail {

/// ONNX element type of an MLIR float type (0 if unsupported).
inline int32_t onnxFloatType(Type t) {
  if (t.isF32())
    return onnx::TensorProto::FLOAT;
  if (t.isF16())
    return onnx::TensorProto::FLOAT16;
  if (t.isBF16())
    return onnx::TensorProto::BFLOAT16;
  if (t.isF64())
    return onnx::TensorProto::DOUBLE;
  return 0;
}

/// Builds new nodes with unique names under a per-layer prefix.
class Emitter {
public:
  explicit Emitter(std::string prefix) : prefix(std::move(prefix)) {}

  const std::string &prefixOf() const { return prefix; }

  std::vector<onnx::NodeProto> nodes;

  std::string node(StringRef op, ArrayRef<std::string> inputs,
                   llvm::function_ref<void(onnx::NodeProto &)> attrs = {}) {
    onnx::NodeProto n;
    std::string name = prefix + op.str() + "_" + std::to_string(counter++);
    n.set_name(name);
    n.set_op_type(op.str());
    for (const std::string &in : inputs)
      n.add_input(in);
    n.add_output(name);
    if (attrs)
      attrs(n);
    nodes.push_back(std::move(n));
    return name;
  }

  std::string constI64(ArrayRef<int64_t> values, bool scalar = false) {
    return node("Constant", {}, [&](onnx::NodeProto &n) {
      onnx::AttributeProto *a = n.add_attribute();
      a->set_name("value");
      a->set_type(onnx::AttributeProto::TENSOR);
      onnx::TensorProto *t = a->mutable_t();
      t->set_data_type(onnx::TensorProto::INT64);
      if (!scalar)
        t->add_dims(values.size());
      for (int64_t v : values)
        t->add_int64_data(v);
    });
  }

  /// A scalar of ONNX float type `elemType`.
  std::string constFloat(double v, int32_t elemType) {
    return node("Constant", {}, [&](onnx::NodeProto &n) {
      onnx::AttributeProto *a = n.add_attribute();
      a->set_name("value");
      a->set_type(onnx::AttributeProto::TENSOR);
      onnx::TensorProto *t = a->mutable_t();
      t->set_data_type(elemType);
      if (elemType == onnx::TensorProto::FLOAT) {
        t->add_float_data(static_cast<float>(v));
      } else if (elemType == onnx::TensorProto::DOUBLE) {
        t->add_double_data(v);
      } else {
        APFloat f(v);
        bool lost;
        f.convert(elemType == onnx::TensorProto::FLOAT16 ? APFloat::IEEEhalf()
                                                         : APFloat::BFloat(),
                  APFloat::rmNearestTiesToEven, &lost);
        uint16_t bits = f.bitcastToAPInt().getZExtValue();
        t->set_raw_data(std::string(reinterpret_cast<char *>(&bits), 2));
      }
    });
  }

  static void intAttr(onnx::NodeProto &n, StringRef name, int64_t v) {
    onnx::AttributeProto *a = n.add_attribute();
    a->set_name(name.str());
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void intsAttr(onnx::NodeProto &n, StringRef name,
                       ArrayRef<int64_t> v) {
    onnx::AttributeProto *a = n.add_attribute();
    a->set_name(name.str());
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v)
      a->add_ints(x);
  }

private:
  std::string prefix;
  int counter = 0;
};

/// Lookups into the original graph, built once for all layers.
struct GraphIndex {
  explicit GraphIndex(const onnx::GraphProto &graph) {
    for (int i = 0, e = graph.node_size(); i < e; ++i) {
      byName[graph.node(i).name()] = i;
      for (const std::string &in : graph.node(i).input())
        consumers[in].push_back(i);
      for (const std::string &out : graph.node(i).output())
        producers.try_emplace(out, i);
    }
    for (const onnx::ValueInfoProto &o : graph.output())
      graphOutputs.insert(o.name());
  }
  /// The index of the node an imported location names (-1 if none): by
  /// the node's name, or for an unnamed node by its first output, which
  /// the importer names it by.
  int find(StringRef name, const onnx::GraphProto &graph) const {
    if (auto it = byName.find(name); it != byName.end())
      return it->second;
    auto it = producers.find(name);
    if (it == producers.end() || !graph.node(it->second).name().empty() ||
        graph.node(it->second).output(0) != name)
      return -1;
    return it->second;
  }
  /// Node index by node name.
  llvm::StringMap<int> byName;
  /// Indices of the nodes reading each tensor.
  llvm::StringMap<llvm::SmallVector<int>> consumers;
  /// Index of the node computing each tensor.
  llvm::StringMap<int> producers;
  llvm::StringSet<> graphOutputs;
};

/// One layer's nodes in the original graph.
struct LayerNodes {
  int qk = -1, softmax = -1, pv = -1;
  /// Q*K^T as onnxruntime's FusedMatMul (its graph optimizer's MatMul with a
  /// Transpose and a scaling folded in): whether its second input is K
  /// (transB), and its alpha.
  bool qkTransB = false;
  float qkAlpha = 1.0f;
  /// Nodes between Q*K^T and Softmax, in order, with the index of the input
  /// that carries the scores.
  SmallVector<std::pair<int, int>> chain;
  /// Nodes between Softmax and P*V: casts, a Reshape merging the heads into
  /// the batch, the IsNaN and Where of a NaN guard.
  SmallVector<int> post;
  /// Shape nodes that read Q*K^T or the chain (DistilBERT expands its mask
  /// to the scores' shape): the blocked layer has no such tensor, so each
  /// is replaced by the same shape computed from Q and K^T.
  SmallVector<int> shapeReaders;
};

/// Whether `span` covers every sequence an ONNX runtime could run (a block
/// or window of 2^31 keys or more): such a span removes no pair, and its
/// blocked form would carry sizes that onnxruntime's shape inference
/// rejects, so the export keeps the layer (or head group) dense.
inline bool coversAnySequence(SpanAttr span) {
  return span.isFull() || span.getSize() >= (int64_t(1) << 31);
}

class LayerExporter {
public:
  LayerExporter(AttentionOp op, onnx::GraphProto &graph,
                const GraphIndex &index,
                const llvm::StringMap<RankedTensorType> &types)
      : op(op), graph(graph), index(index), types(types),
        emit("masformer/layer" + std::to_string(op.getLayer().value_or(0)) +
             "/") {}

  /// Computes the replacement nodes; `removed` gets the indices of the
  /// original nodes they replace and `anchor` the index they go at;
  /// `elsewhere` gets replacements that go at other indices (each at the
  /// index of the node it replaces).
  LogicalResult
  run(SmallVectorImpl<int> &removed, int &anchor,
      std::vector<onnx::NodeProto> &added,
      std::vector<std::pair<int, std::vector<onnx::NodeProto>>> &elsewhere);

private:
  /// The span as a mask added to the Softmax's input, the layer's nodes
  /// kept (a layer with fewer queries than keys: a KV cache): replaces the
  /// Softmax.
  LogicalResult emitDenseSpanMask();
  /// Replaces the layer's Shape readers (LayerNodes::shapeReaders) by the
  /// scores' shape computed from the Q*K^T MatMul's operands.
  LogicalResult replaceShapeReaders(
      SmallVectorImpl<int> &removed,
      std::vector<std::pair<int, std::vector<onnx::NodeProto>>> &elsewhere);
  InFlightDiagnostic error() {
    return op.emitError() << "cannot export layer "
                          << op.getLayer().value_or(-1) << " to ONNX: ";
  }
  LogicalResult findNodes();
  FailureOr<RankedTensorType> typeOf(const std::string &name);
  /// The index of the node that computes `name`, or -1 (an input or an
  /// initializer).
  int producerOf(const std::string &name) const;
  /// The nodes (IsNaN, Where) of a Where(IsNaN(p), 0, p) guard on `p`
  /// (torch's SDPA export, after the Softmax), when p's only consumers are
  /// those two.
  std::optional<std::pair<int, int>> nanGuard(const std::string &p) const;
  /// Whether `name` is zero everywhere: an all-zero initializer or Constant,
  /// a ConstantOfShape of 0, or a product with such a tensor (baddbmm's
  /// beta * zeros).
  bool isZeroTensor(const std::string &name, int depth = 4) const;
  /// Whether chain node `index` leaves the scores as they are, for the
  /// blocked layout: the Reshape of GPT-NeoX's [B*H, S, S] scores to
  /// [B, H, S, S], or the addition of zeros.
  bool isNeutralInChain(int index, int scoresInput) const;
  /// The layer's Q [B, H, S, D] and K^T [B, H, D, S]: Q*K^T's operands, or
  /// for heads flattened into the batch (GPT-NeoX: [B*H, S, D] reshaped
  /// from Q and K), the tensors they were reshaped from (K^T transposed
  /// anew).
  FailureOr<std::pair<std::string, std::string>> scoreInputs();
  std::optional<std::pair<std::string, std::string>> scoreIn;
  /// An operand of the score chain as rank 4 ([B, H, q, k] broadcast),
  /// with its heads gathered for a per-head group; scalars as they are.
  struct ScoreOperand {
    std::string name;
    SmallVector<int64_t, 4> dims;
    bool scalar = false, q = false, k = false;
  };
  FailureOr<ScoreOperand> scoreOperand(const std::string &name);
  /// The operand `name` cut into the blocked layout [.., .., nb, qb, kb]
  /// (kb = 2W for a causal window: the previous block, then the own block;
  /// 3W for a two-sided one: then the next block too).
  FailureOr<std::string> blockOperand(const std::string &name);
  /// x[.., nb, ...] -> the same with block i holding block i-1 (block 0 gets
  /// padding), along `axis`.
  std::string previousBlock(const std::string &x, int64_t axis, int64_t rank);
  /// x[.., nb, ...] -> the same with block i holding block i+1 (the last
  /// block gets padding), along `axis`.
  std::string nextBlock(const std::string &x, int64_t axis, int64_t rank);
  /// The key region of each query block along `axis`: the block itself, or
  /// for a window the previous block before it (and the next after it when
  /// two-sided).
  std::string keyRegion(const std::string &x, int64_t axis, int64_t rank);
  /// Sets block, windowed, twoSided and sinks from `span`.
  void setSpan(SpanAttr span);
  /// Q, K^T and V in the blocked layout.
  struct BlockedInputs {
    std::string q, kt, v;
  };
  /// The constants both score masks are built from.
  struct MaskConstants {
    std::string axis0, zero, ninf;
  };
  /// Sets `pad` and `nb` from `seq1` and `b1`, the block size as [1] int64.
  void emitBlockCount(const std::string &b1);
  /// Emits `copy` (a copy of an original node, inputs already rewired) under
  /// a fresh name and output, which it returns.
  std::string emitCopy(onnx::NodeProto copy);
  /// Q [B, H, S, D] and V as [B, H, nb, b, D], K^T [B, H, D, S] as
  /// [B, H, nb, D, b]; a window puts the previous block before each block
  /// of K^T and V (and the next block after it when two-sided).
  BlockedInputs blockInputs(const std::string &q, const std::string &kt,
                            const std::string &v, int64_t d, int64_t dv);
  /// The operand `name` in the layout of the sink scores [.., .., nb, qb,
  /// K]: the first K keys, queries cut into blocks.
  FailureOr<std::string> sinkOperand(const std::string &name);
  /// Which scores the chain is re-applied to: blocked, the sink columns,
  /// or dense (a per-head group with full attention).
  enum class ChainLayout { Blocked, Sinks, Dense };
  /// The layer's scale / mask / cast chain re-applied to `scores`.
  FailureOr<std::string> applyScoreChain(
      std::string scores, ChainLayout layout = ChainLayout::Blocked);
  /// -inf for the sink columns of each query block that lie inside the
  /// block's own key region (counted there) : [nb, 1, K] to add.
  std::string sinkColumnMask(const std::string &sinkCount,
                             const MaskConstants &c);
  /// `scores` with -inf for padded keys and, when causal, above each
  /// block's diagonal.
  std::string maskBlockScores(const std::string &scores,
                              const std::string &padded,
                              const MaskConstants &c);
  /// `scores` with -inf for keys outside the sequence or the window.
  std::string maskWindowScores(const std::string &scores,
                               const MaskConstants &c);
  /// The ONNX float type of the scores the Softmax reads.
  FailureOr<int32_t> scoreElementType();
  /// The export's own mask on the scores, blocked or windowed.
  FailureOr<std::string> maskScores(const std::string &scores);
  /// The [B, H, S, D] tensor a [B * H, S, D] one was reshaped from (heads
  /// flattened into the batch), or "".
  std::string unflattenedHeads(const std::string &x);
  /// A rank-3 operand of scores with flattened heads ([B * H or 1, ., .])
  /// as the [B or 1, H or 1, ., .] operand of the 4-D scores; others as
  /// they are.
  FailureOr<std::string> unflattenOperand(const std::string &name);
  /// The layer's Casts between Softmax and P*V re-applied to `probs`.
  std::string applyPostCasts(std::string probs);
  LogicalResult emitBlocked();
  /// The blocked layer on Q, K^T, V (of the whole layer or a per-head
  /// group): its output [B, H, S, dv].
  FailureOr<std::string> emitBlockedCore(const std::string &q,
                                         const std::string &kt,
                                         const std::string &v);
  /// Per-head spans: one group of query heads per distinct span, each
  /// gathered, blocked (or dense when full), and put back in head order.
  LogicalResult emitPerHeadBlocked();
  /// A layer imported from an opset-23 Attention node: the same node on
  /// blocks folded into the batch.
  LogicalResult emitBlockedAttentionNode(int index);
  /// A layer imported from onnxruntime's com.microsoft Attention or
  /// MultiHeadAttention node: the same node on blocks folded into the
  /// batch, its key mask cut into blocks (padded keys masked).
  LogicalResult emitBlockedContribNode(int index);
  /// A layer imported from onnxruntime's GroupQueryAttention node (with its
  /// KV cache): the same node, a window span as its local_window_size,
  /// other spans as an attention_bias of the pairs they keep.
  LogicalResult emitGroupQueryAttentionNode(int index);
  /// The ONNX float element type of tensor `name`; an error naming its
  /// type when it is not a float type.
  FailureOr<int32_t> floatTypeOf(const std::string &name);
  /// The pairs the op's span keeps (per-head spans included), as a bool
  /// tensor broadcast from `qpos` [.., 1, S, 1] and `kpos` [1, 1, 1, T]
  /// (int64 positions): [.., 1, S, T], or [.., Hq, S, T] with per-head
  /// spans (each query head its key/value head's rule). Windows are
  /// one-sided for a causal op (the node's causal rule does the rest) and
  /// two-sided otherwise; sinks are the keys at 0 <= kpos < K.
  FailureOr<std::string> emitSpanKeep(const std::string &qpos,
                                      const std::string &kpos);
  /// A layer imported from an attention node (opset-23 Attention or
  /// onnxruntime's Attention or MultiHeadAttention) whose span the blocked
  /// form does not take (windows, sinks, per-head spans): the same node,
  /// the span as -inf in its additive mask (`maskInput`: attn_mask of
  /// Attention, attention_bias of the contrib ops), every pair computed.
  LogicalResult emitSpanBiasNode(int index, bool contrib);

  AttentionOp op;
  onnx::GraphProto &graph;
  const GraphIndex &index;
  const llvm::StringMap<RankedTensorType> &types;
  Emitter emit;
  LayerNodes layer;
  int64_t seq = 0, block = 0;
  /// Window W: blocks of W, each query block attending its own and the
  /// previous key block ([.., nb, W, 2W] scores), and the next one too when
  /// the layer is not causal (`twoSided`: [.., nb, W, 3W]).
  bool windowed = false, twoSided = false;
  /// Attention sinks: the first `sinks` keys, scored for every query block
  /// next to its own key region ([.., nb, b, K] more scores).
  int64_t sinks = 0;
  /// Per-head groups: the group's query heads (an int64 constant) and the
  /// layer's number of query heads.
  std::string headIndex;
  int64_t qHeads = 0;
  /// Types of tensors this exporter made (a group's gathered Q, K^T, V).
  llvm::StringMap<RankedTensorType> localTypes;
  /// The 4-D form of each rank-3 chain operand (unflattenOperand).
  llvm::StringMap<std::string> unflattened;
  // Run-time sizes of the blocked layout.
  std::string seq1, pad, nb;
};


} // namespace mlir::masformer::detail

#endif // MASFORMER_LIB_EXPORT_LAYEREXPORT_H
