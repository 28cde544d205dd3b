//===- AttentionNode.cpp - Opset-23 Attention nodes in blocks ---*- C++ -*-===//
//
// A layer imported from an opset-23 Attention node, with a block span: the
// node on blocks folded into the batch (causal), or blocked MatMul/Softmax
// with padded keys masked (not causal).
//
//===----------------------------------------------------------------------===//

#include "LayerExport.h"

#include <cmath>
#include <optional>

using namespace mlir;
using namespace mlir::masformer;
using namespace mlir::masformer::detail;

namespace {

/// Head counts, head sizes and softmax scale of an Attention node.
struct NodeHeads {
  int64_t hq = 0, hkv = 0, d = 0, dv = 0;
  float scale = 0.0f;
};

/// The heads of `att`, from its attributes (3-D) or its operands' shapes
/// (4-D); std::nullopt if it has a softcap, which the MatMul/Softmax form
/// does not apply.
std::optional<NodeHeads> readHeads(const onnx::NodeProto &att, int64_t rank,
                                   RankedTensorType qTy, RankedTensorType kTy,
                                   RankedTensorType vTy) {
  NodeHeads h;
  for (const onnx::AttributeProto &a : att.attribute()) {
    if (a.name() == "q_num_heads")
      h.hq = a.i();
    if (a.name() == "kv_num_heads")
      h.hkv = a.i();
    if (a.name() == "softcap" && a.f() != 0.0f)
      return std::nullopt;
  }
  if (rank == 4) {
    h.hq = qTy.getDimSize(1);
    h.hkv = kTy.getDimSize(1);
    h.d = qTy.getDimSize(3);
    h.dv = vTy.getDimSize(3);
  } else {
    h.d = qTy.getDimSize(2) / h.hq;
    h.dv = vTy.getDimSize(2) / h.hkv;
  }
  h.scale = AttentionOp::getDefaultScale(h.d);
  for (const onnx::AttributeProto &a : att.attribute())
    if (a.name() == "scale")
      h.scale = a.f();
  return h;
}

/// The blocked form of one Attention node: the sequence padded to whole
/// blocks, the blocks folded into the batch, and back. `seq1`, `pad` and
/// `nb` are the exporter's run-time sizes, `batch` the node's batch size,
/// all [1] int64.
struct NodeBlocks {
  Emitter &emit;
  int64_t block, rank, seqAxis;
  std::string seq1, pad, nb, batch, axis0;
  /// The Pad amounts that extend the sequence axis by `pad`; emitPads sets
  /// them.
  std::string pads = {};

  void emitPads() {
    int64_t after = rank - 1 - seqAxis;
    SmallVector<int64_t> zeros(2 * rank - 1 - after, 0);
    SmallVector<std::string> parts = {emit.constI64(zeros), pad};
    if (after > 0)
      parts.push_back(emit.constI64(SmallVector<int64_t>(after, 0)));
    pads = emit.node("Concat", parts, [](onnx::NodeProto &n) {
      Emitter::intAttr(n, "axis", 0);
    });
  }

  /// Blocks go into the batch: [B, S, E] -> [B*nb, b, E];
  /// [B, H, S, D] -> [B, H, nb, b, D] -> [B, nb, H, b, D] -> [B*nb, H, b, D].
  std::string toBlocks(const std::string &x, RankedTensorType t) {
    std::string p = emit.node("Pad", {x, pads});
    if (rank == 3)
      return emit.node("Reshape",
                       {p, emit.constI64({-1, block, t.getDimSize(2)})});
    int64_t h = t.getDimSize(1), d = t.getDimSize(3);
    p = emit.node("Reshape", {p, emit.constI64({0, 0, -1, block, d})});
    p = emit.node("Transpose", {p}, [](onnx::NodeProto &n) {
      Emitter::intsAttr(n, "perm", {0, 2, 1, 3, 4});
    });
    return emit.node("Reshape", {p, emit.constI64({-1, h, block, d})});
  }

  /// [N, H, b, D] (4-D) or [N, b, H*D] (3-D) -> [N, H/G, G, b, D]: the query
  /// heads of one key/value head side by side, so that K and V broadcast.
  std::string splitHeads(const std::string &x, int64_t h, int64_t dim,
                         int64_t groups) {
    std::string r = x;
    if (rank == 3) {
      r = emit.node("Reshape", {r, emit.constI64({0, 0, h, dim})});
      r = emit.node("Transpose", {r}, [](onnx::NodeProto &n) {
        Emitter::intsAttr(n, "perm", {0, 2, 1, 3});
      });
    }
    return emit.node("Reshape",
                     {r, emit.constI64({0, h / groups, groups, block, dim})});
  }

  /// 0 for real keys and -inf for padded ones, as [B*nb, 1, 1, 1, b].
  std::string paddedKeyMask(int32_t et) {
    std::string padded = emit.node("Add", {seq1, pad});
    std::string positions =
        emit.node("Range", {emit.constI64({0}, true),
                            emit.node("Squeeze", {padded, axis0}),
                            emit.constI64({1}, true)});
    std::string keyMask = emit.node(
        "Where",
        {emit.node("Less", {positions, seq1}), emit.constFloat(0.0, et),
         emit.constFloat(-std::numeric_limits<double>::infinity(), et)});
    // [S'] -> [1, nb, 1, 1, 1, b] -> [B, nb, ...] -> [B*nb, 1, 1, 1, b].
    std::string shape6 = emit.node(
        "Concat", {emit.constI64({1}), nb, emit.constI64({1, 1, 1, block})},
        [](onnx::NodeProto &n) { Emitter::intAttr(n, "axis", 0); });
    keyMask = emit.node("Reshape", {keyMask, shape6});
    std::string target =
        emit.node("Concat", {batch, nb, emit.constI64({1, 1, 1, block})},
                  [](onnx::NodeProto &n) { Emitter::intAttr(n, "axis", 0); });
    keyMask = emit.node("Expand", {keyMask, target});
    return emit.node("Reshape", {keyMask, emit.constI64({-1, 1, 1, 1, block})});
  }

  /// The node on blocked `qb`, `kb`, `vb` spelled out in MatMul and Softmax
  /// on [B*nb, Hkv, G, b, b] scores, padded keys masked; in the node's own
  /// blocked layout.
  std::string matMulSoftmax(const std::string &qb, const std::string &kb,
                            const std::string &vb, const NodeHeads &h,
                            int32_t et) {
    int64_t g = h.hq / h.hkv;
    std::string q5 = splitHeads(qb, h.hq, h.d, g);
    std::string k5 = splitHeads(kb, h.hkv, h.d, 1);
    std::string v5 = splitHeads(vb, h.hkv, h.dv, 1);
    std::string kt5 = emit.node("Transpose", {k5}, [](onnx::NodeProto &n) {
      Emitter::intsAttr(n, "perm", {0, 1, 2, 4, 3});
    });
    std::string sc = emit.node(
        "Mul", {emit.node("MatMul", {q5, kt5}), emit.constFloat(h.scale, et)});
    std::string keyMask = paddedKeyMask(et);
    std::string p =
        emit.node("Softmax", {emit.node("Add", {sc, keyMask})},
                  [](onnx::NodeProto &n) { Emitter::intAttr(n, "axis", -1); });
    std::string o = emit.node("MatMul", {p, v5});
    // [N, Hkv, G, b, Dv] -> the node's own layout.
    o = emit.node("Reshape", {o, emit.constI64({0, h.hq, block, h.dv})});
    if (rank == 3) {
      o = emit.node("Transpose", {o}, [](onnx::NodeProto &n) {
        Emitter::intsAttr(n, "perm", {0, 2, 1, 3});
      });
      o = emit.node("Reshape", {o, emit.constI64({0, 0, h.hq * h.dv})});
    }
    return o;
  }

  /// The blocked output back to the padded sequence: the inverse of
  /// toBlocks for a result shaped like Q.
  std::string fromBlocks(const std::string &out, RankedTensorType qTy) {
    if (rank == 3) {
      int64_t e = qTy.getDimSize(2);
      std::string back =
          emit.node("Concat", {batch, emit.constI64({-1, e})},
                    [](onnx::NodeProto &n) { Emitter::intAttr(n, "axis", 0); });
      return emit.node("Reshape", {out, back});
    }
    int64_t h = qTy.getDimSize(1), d = qTy.getDimSize(3);
    std::string back =
        emit.node("Concat", {batch, emit.constI64({-1, h, block, d})},
                  [](onnx::NodeProto &n) { Emitter::intAttr(n, "axis", 0); });
    std::string y = emit.node("Reshape", {out, back});
    y = emit.node("Transpose", {y}, [](onnx::NodeProto &n) {
      Emitter::intsAttr(n, "perm", {0, 2, 1, 3, 4});
    });
    return emit.node("Reshape", {y, emit.constI64({0, 0, -1, d})});
  }
};

} // namespace

LogicalResult LayerExporter::emitBlockedAttentionNode(int index) {
  const onnx::NodeProto &att = graph.node(index);
  if (att.input_size() > 3 && !att.input(3).empty())
    return error() << "an Attention node with an attn_mask is not supported "
                      "yet";
  for (int i = 4; i < att.input_size(); ++i)
    if (!att.input(i).empty())
      return error() << "an Attention node with past key/value inputs is "
                        "not supported";
  bool causal = false;
  for (const onnx::AttributeProto &a : att.attribute())
    if (a.name() == "is_causal")
      causal = a.i();
  FailureOr<RankedTensorType> qTy = typeOf(att.input(0)),
                              kTy = typeOf(att.input(1)),
                              vTy = typeOf(att.input(2));
  if (failed(qTy) || failed(kTy) || failed(vTy))
    return failure();
  int64_t rank = qTy->getRank();
  int64_t seqAxis = rank == 4 ? 2 : 1;
  if (qTy->getDimSize(seqAxis) != kTy->getDimSize(seqAxis))
    return error() << "block spans need as many queries as keys";
  // Not causal: MatMul and Softmax (below); what they need is checked
  // before anything is emitted.
  int32_t et = 0;
  std::optional<NodeHeads> heads;
  if (!causal) {
    et = onnxFloatType(qTy->getElementType());
    if (!et)
      return error() << "unsupported element type " << qTy->getElementType();
    heads = readHeads(att, rank, *qTy, *kTy, *vTy);
    if (!heads)
      return error() << "softcap is not supported";
  }

  std::string b1 = emit.constI64({block});
  std::string axis0 = emit.constI64({0});
  std::string shapeQ = emit.node("Shape", {att.input(0)});
  seq1 = emit.node("Gather", {shapeQ, emit.constI64({seqAxis})},
                   [](onnx::NodeProto &n) { Emitter::intAttr(n, "axis", 0); });
  std::string batch =
      emit.node("Gather", {shapeQ, emit.constI64({0})},
                [](onnx::NodeProto &n) { Emitter::intAttr(n, "axis", 0); });
  emitBlockCount(b1);
  NodeBlocks blocks{emit, block, rank, seqAxis, seq1, pad, nb, batch, axis0};
  blocks.emitPads();
  std::string qb = blocks.toBlocks(att.input(0), *qTy);
  std::string kb = blocks.toBlocks(att.input(1), *kTy);
  std::string vb = blocks.toBlocks(att.input(2), *vTy);
  std::string out;
  if (causal) {
    // Square blocks: the node's own causal triangle is the right one inside
    // each block and keeps padded keys away from real queries.
    onnx::NodeProto copy = att;
    copy.clear_input();
    for (const std::string &in : {qb, kb, vb})
      copy.add_input(in);
    out = emitCopy(std::move(copy));
  } else {
    // Padded keys need a mask, and onnxruntime's Attention kernel
    // mishandles per-batch masks for some shapes.
    out = blocks.matMulSoftmax(qb, kb, vb, *heads, et);
  }
  std::string y = blocks.fromBlocks(out, *qTy);
  emit.node("Slice", {y, emit.constI64({0}), seq1, emit.constI64({seqAxis})});
  emit.nodes.back().set_output(0, att.output(0));
  return success();
}

LogicalResult LayerExporter::emitBlockedContribNode(int index) {
  const onnx::NodeProto &att = graph.node(index);
  bool packed = att.op_type() == "Attention";
  // The 3-D inputs cut into blocks, and where the key mask is.
  SmallVector<int> blocked =
      packed ? SmallVector<int>{0} : SmallVector<int>{0, 1, 2};
  int maskInput = packed ? 3 : 4;
  auto has = [&](int i) {
    return i < att.input_size() && !att.input(i).empty();
  };
  if (has(5))
    return error() << "attention_bias of " << att.op_type()
                   << " nodes is not supported by the blocked export yet";
  bool causal = false;
  for (const onnx::AttributeProto &a : att.attribute())
    if (a.name() == "unidirectional")
      causal = a.i() != 0;
  FailureOr<RankedTensorType> outTy = typeOf(att.output(0));
  if (failed(outTy))
    return failure();
  std::optional<RankedTensorType> maskTy;
  if (has(maskInput)) {
    FailureOr<RankedTensorType> t = typeOf(att.input(maskInput));
    if (failed(t))
      return failure();
    if (t->getRank() == 3)
      return error() << "a 3-D mask of " << att.op_type()
                     << " nodes is not supported by the blocked export yet";
    maskTy = *t;
  }

  std::string b1 = emit.constI64({block});
  std::string shapeQ = emit.node("Shape", {att.input(0)});
  auto gather = [&](const std::string &shape, int64_t at) {
    return emit.node(
        "Gather", {shape, emit.constI64({at})},
        [](onnx::NodeProto &n) { Emitter::intAttr(n, "axis", 0); });
  };
  seq1 = gather(shapeQ, 1);
  std::string batch = gather(shapeQ, 0);
  emitBlockCount(b1);
  auto concat = [&](ArrayRef<std::string> parts) {
    return emit.node("Concat", parts, [](onnx::NodeProto &n) {
      Emitter::intAttr(n, "axis", 0);
    });
  };
  // Pad the sequence (axis 1 of a rank-`rank` tensor) to whole blocks.
  auto padSequence = [&](const std::string &x, int64_t rank) {
    SmallVector<std::string> parts = {
        emit.constI64(SmallVector<int64_t>(rank + 1, 0)), pad};
    if (rank > 2)
      parts.push_back(emit.constI64(SmallVector<int64_t>(rank - 2, 0)));
    return emit.node("Pad", {x, concat(parts)});
  };
  onnx::NodeProto copy = att;
  for (int i : blocked) {
    FailureOr<RankedTensorType> t = typeOf(att.input(i));
    if (failed(t))
      return failure();
    if (t->getRank() != 3 || t->isDynamicDim(2))
      return error() << "input " << i << " of the " << att.op_type()
                     << " node must be [batch, sequence, hidden] with a "
                        "static hidden size, got "
                     << *t;
    copy.set_input(
        i,
        emit.node("Reshape", {padSequence(att.input(i), 3),
                              emit.constI64({-1, block, t->getDimSize(2)})}));
  }
  // The node's key mask, cut into blocks (a 1-D one as the raw mask it
  // stands for).
  std::string padded = emit.node("Add", {seq1, pad});
  auto positions = [&]() {
    // [1, S'] int64
    std::string r =
        emit.node("Range", {emit.constI64({0}, true),
                            emit.node("Squeeze", {padded, emit.constI64({0})}),
                            emit.constI64({1}, true)});
    return emit.node("Unsqueeze", {r, emit.constI64({0})});
  };
  auto asInt32 = [&](const std::string &x) {
    return emit.node("Cast", {x}, [](onnx::NodeProto &n) {
      Emitter::intAttr(n, "to", onnx::TensorProto::INT32);
    });
  };
  std::string raw;
  if (maskTy && maskTy->getRank() == 2) {
    raw = padSequence(att.input(maskInput), 2);
  } else if (maskTy) {
    // 1-D: the keys before each row's end (and from its start, [2B]).
    std::string mask =
        emit.node("Cast", {att.input(maskInput)}, [](onnx::NodeProto &n) {
          Emitter::intAttr(n, "to", onnx::TensorProto::INT64);
        });
    std::string ends = emit.node("Slice", {mask, emit.constI64({0}), batch});
    std::string keep =
        emit.node("Less", {positions(),
                           emit.node("Unsqueeze", {ends, emit.constI64({1})})});
    // A [2B] mask holds each row's first key after the ends; a [B] one
    // has none there, and the zeros appended stand for them.
    std::string starts = emit.node(
        "Slice",
        {emit.node(
             "Concat",
             {emit.node("Slice",
                        {mask, batch,
                         emit.constI64({std::numeric_limits<int64_t>::max()})}),
              emit.node("Mul", {ends, emit.constI64({0})})},
             [](onnx::NodeProto &n) { Emitter::intAttr(n, "axis", 0); }),
         emit.constI64({0}), batch});
    keep = emit.node(
        "And",
        {keep,
         emit.node("GreaterOrEqual",
                   {positions(),
                    emit.node("Unsqueeze", {starts, emit.constI64({1})})})});
    raw = asInt32(keep);
  }
  if (!raw.empty()) {
    while (copy.input_size() <= maskInput)
      copy.add_input("");
    copy.set_input(maskInput,
                   emit.node("Reshape", {raw, emit.constI64({-1, block})}));
  }
  // The keys padded to a whole block are not keys: -inf in an
  // attention_bias, so that a row whose keys the mask hides altogether
  // (which onnxruntime gives mask_filter_value, not -inf) still attends
  // to none of them. A causal layer without a mask never sees them.
  if (has(maskInput) || !causal) {
    int32_t et = onnxFloatType(outTy->getElementType());
    if (!et)
      return error() << "unsupported element type " << outTy->getElementType();
    std::string keyBias = emit.node(
        "Where",
        {emit.node("Less", {positions(), seq1}), emit.constFloat(0.0, et),
         emit.constFloat(-std::numeric_limits<double>::infinity(), et)});
    // [1, S'] -> [1, nb, 1, 1, b] -> [B, nb, 1, b, b] -> [B*nb, 1, b, b]
    keyBias =
        emit.node("Reshape", {keyBias, concat({emit.constI64({1}), nb,
                                               emit.constI64({1, 1, block})})});
    keyBias = emit.node(
        "Expand",
        {keyBias, concat({batch, nb, emit.constI64({1, block, block})})});
    while (copy.input_size() <= 5)
      copy.add_input("");
    copy.set_input(
        5,
        emit.node("Reshape", {keyBias, emit.constI64({-1, 1, block, block})}));
  }
  std::string out = emitCopy(std::move(copy));
  std::string back = emit.node(
      "Reshape",
      {out, concat({batch, emit.constI64({-1, outTy->getDimSize(2)})})});
  emit.node("Slice", {back, emit.constI64({0}), seq1, emit.constI64({1})});
  emit.nodes.back().set_output(0, att.output(0));
  return success();
}

LogicalResult LayerExporter::emitGroupQueryAttentionNode(int index) {
  const onnx::NodeProto &att = graph.node(index);
  SpanAttr span = op.getSpan(), model = getModelSpan(op);
  onnx::NodeProto copy = att;
  auto setWindow = [&](int64_t w) {
    for (onnx::AttributeProto &a : *copy.mutable_attribute())
      if (a.name() == "local_window_size") {
        a.set_i(w);
        return;
      }
    Emitter::intAttr(copy, "local_window_size", w);
  };
  if (!op.hasHeadSpans() && span.getKind() == SpanKind::Window &&
      span.getSink() == 0) {
    // The node's own sliding window: local_window_size W keeps the keys
    // with 0 <= i - j < W, as onnxruntime 1.24 and later define it
    // (within the model's window, if it has one).
    int64_t w = span.getSize();
    if (model.getKind() == SpanKind::Window)
      w = std::min(w, model.getSize());
    setWindow(w);
  } else {
    // The span as an attention_bias [B, 1, S, T] ([B, Hq, S, T] with
    // per-head spans): the queries of row b at positions
    // seqlens_k[b] + 1 - S + i, the keys at j (onnxruntime's layout), -inf
    // where the span hides the pair. The node's causal triangle and its own
    // window stay.
    if (att.input_size() < 7 || att.input(5).empty() || att.input(6).empty())
      return error() << "the GroupQueryAttention node has no seqlens_k or "
                        "total_sequence_length";
    FailureOr<int32_t> et = floatTypeOf(att.output(0));
    if (failed(et))
      return failure();
    auto toI64 = [&](const std::string &x) {
      return emit.node("Cast", {x}, [](onnx::NodeProto &n) {
        Emitter::intAttr(n, "to", onnx::TensorProto::INT64);
      });
    };
    auto range = [&](const std::string &n) {
      return emit.node("Range",
                       {emit.constI64({0}, true), n, emit.constI64({1}, true)});
    };
    std::string s = emit.node(
        "Gather",
        {emit.node("Shape", {att.input(0)}), emit.constI64({1}, true)},
        [](onnx::NodeProto &n) { Emitter::intAttr(n, "axis", 0); });
    // [B, 1, 1, 1] + [1, 1, S, 1]
    std::string first = emit.node(
        "Sub",
        {emit.node("Add", {toI64(att.input(5)), emit.constI64({1})}), s});
    first = emit.node("Reshape", {first, emit.constI64({-1, 1, 1, 1})});
    std::string qpos = emit.node(
        "Add", {first, emit.node("Reshape",
                                 {range(s), emit.constI64({1, 1, -1, 1})})});
    std::string total =
        emit.node("Reshape", {toI64(att.input(6)), emit.constI64({})});
    std::string kpos =
        emit.node("Reshape", {range(total), emit.constI64({1, 1, 1, -1})});
    FailureOr<std::string> keep = emitSpanKeep(qpos, kpos);
    if (failed(keep))
      return failure();
    std::string bias = emit.node(
        "Where",
        {*keep, emit.constFloat(0.0, *et),
         emit.constFloat(-std::numeric_limits<double>::infinity(), *et)});
    while (copy.input_size() <= 10)
      copy.add_input("");
    if (!copy.input(10).empty())
      bias = emit.node("Add", {copy.input(10), bias});
    copy.set_input(10, bias);
  }
  emit.nodes.push_back(std::move(copy));
  return success();
}

FailureOr<std::string> LayerExporter::emitSpanKeep(const std::string &qpos,
                                                   const std::string &kpos) {
  bool causal = op.getCausal();
  std::string dist = emit.node("Sub", {qpos, kpos});
  auto inWindow = [&](const std::string &size) {
    std::string keep = emit.node("Less", {dist, size});
    if (!causal)
      keep = emit.node(
          "And", {keep, emit.node("Less", {emit.node("Neg", {dist}), size})});
    return keep;
  };
  auto inBlock = [&](const std::string &size) {
    return emit.node("Equal", {emit.node("Div", {qpos, size}),
                               emit.node("Div", {kpos, size})});
  };
  // 0 <= kpos < sink (kpos is never negative here).
  auto isSink = [&](const std::string &sink) {
    return emit.node("Less", {kpos, sink});
  };
  if (!op.hasHeadSpans()) {
    SpanAttr span = op.getSpan();
    if (span.isFull())
      return emit.node(
          "GreaterOrEqual",
          {dist, emit.constI64({std::numeric_limits<int64_t>::min()})});
    std::string size = emit.constI64({span.getSize()});
    std::string keep =
        span.getKind() == SpanKind::Block ? inBlock(size) : inWindow(size);
    if (span.getSink() > 0)
      keep = emit.node("Or", {keep, isSink(emit.constI64({span.getSink()}))});
    return keep;
  }
  // Per-head spans: each query head's span (its key/value head's) as
  // [1, Hq, 1, 1] constants, the rule of every kind computed and the
  // head's chosen.
  std::optional<int64_t> group = op.getStaticGroupSize();
  int64_t qHeads = op.getQueryType().getDimSize(1);
  if (!group || ShapedType::isDynamic(qHeads))
    return error() << "per-head spans need static numbers of heads", failure();
  SmallVector<int64_t> kinds, sizes, sinks;
  for (int64_t h = 0; h < qHeads; ++h) {
    SpanAttr hs = op.getKVHeadSpan(h / *group);
    kinds.push_back(static_cast<int64_t>(hs.getKind()));
    sizes.push_back(hs.isFull() ? 1 : hs.getSize());
    sinks.push_back(hs.getSink());
  }
  auto perHead = [&](ArrayRef<int64_t> values) {
    return emit.node("Reshape",
                     {emit.constI64(values), emit.constI64({1, -1, 1, 1})});
  };
  std::string kind = perHead(kinds), size = perHead(sizes);
  auto isKind = [&](SpanKind k) {
    return emit.node("Equal",
                     {kind, emit.constI64({static_cast<int64_t>(k)}, true)});
  };
  std::string keep = emit.node(
      "Or",
      {emit.node("Or",
                 {isKind(SpanKind::Full),
                  emit.node("And", {isKind(SpanKind::Block), inBlock(size)})}),
       emit.node("And", {isKind(SpanKind::Window), inWindow(size)})});
  return emit.node("Or", {keep, isSink(perHead(sinks))});
}

LogicalResult LayerExporter::emitSpanBiasNode(int index, bool contrib) {
  const onnx::NodeProto &att = graph.node(index);
  auto has = [&](int i) {
    return i < att.input_size() && !att.input(i).empty();
  };
  FailureOr<int32_t> et = floatTypeOf(att.output(0));
  if (failed(et))
    return failure();
  // The queries' and keys' lengths, from the inputs' shapes (no past: the
  // import refuses it): the sequence axis of a 3-D input is 1, of a 4-D
  // one 2; packed keys (contrib Attention, MultiHeadAttention without a
  // key input) are the queries'.
  auto length = [&](int input) -> FailureOr<std::string> {
    FailureOr<RankedTensorType> t = typeOf(att.input(input));
    if (failed(t))
      return failure();
    if (t->getRank() != 3 && t->getRank() != 4)
      return error() << "input " << input << " of the " << att.op_type()
                     << " node must have rank 3 or 4, got " << *t,
             failure();
    return emit.node(
        "Gather",
        {emit.node("Shape", {att.input(input)}),
         emit.constI64({t->getRank() == 3 ? 1 : 2}, true)},
        [](onnx::NodeProto &n) { Emitter::intAttr(n, "axis", 0); });
  };
  FailureOr<std::string> s = length(0);
  if (failed(s))
    return failure();
  FailureOr<std::string> t = s;
  bool packedKeys = att.op_type() == "Attention" ? contrib : !has(1);
  if (!packedKeys) {
    t = length(1);
    if (failed(t))
      return failure();
  }
  auto range = [&](const std::string &n) {
    return emit.node("Range",
                     {emit.constI64({0}, true), n, emit.constI64({1}, true)});
  };
  // Queries at the end of the keys: i + T - S; keys at j.
  std::string qpos = emit.node(
      "Reshape", {emit.node("Add", {range(*s), emit.node("Sub", {*t, *s})}),
                  emit.constI64({1, 1, -1, 1})});
  std::string kpos =
      emit.node("Reshape", {range(*t), emit.constI64({1, 1, 1, -1})});
  FailureOr<std::string> keep = emitSpanKeep(qpos, kpos);
  if (failed(keep))
    return failure();
  onnx::NodeProto copy = att;
  int maskInput = contrib ? 5 : 3;
  while (copy.input_size() <= maskInput)
    copy.add_input("");
  std::string mask;
  if (has(maskInput)) {
    FailureOr<RankedTensorType> mt = typeOf(att.input(maskInput));
    if (failed(mt))
      return failure();
    // A bool attn_mask (opset-23 Attention) keeps what both keep.
    if (mt->getElementType().isInteger(1)) {
      copy.set_input(maskInput,
                     emit.node("And", {att.input(maskInput), *keep}));
      emit.nodes.push_back(std::move(copy));
      return success();
    }
    mask = att.input(maskInput);
  }
  std::string bias = emit.node(
      "Where",
      {*keep, emit.constFloat(0.0, *et),
       emit.constFloat(-std::numeric_limits<double>::infinity(), *et)});
  if (!mask.empty())
    bias = emit.node("Add", {mask, bias});
  copy.set_input(maskInput, bias);
  emit.nodes.push_back(std::move(copy));
  return success();
}
