//===- AttentionNode.cpp - Opset-23 Attention nodes in blocks ---*- C++ -*-===//
//
// A layer imported from an opset-23 Attention node, with a block span: the
// node on blocks folded into the batch (causal), or blocked MatMul/Softmax
// with padded keys masked (not causal).
//
//===----------------------------------------------------------------------===//

#include "LayerExport.h"

#include <cmath>

using namespace mlir;
using namespace mlir::masformer;
using namespace mlir::masformer::detail;

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
  std::string b1 = emit.constI64({block});
  std::string axis0 = emit.constI64({0});
  std::string shapeQ = emit.node("Shape", {att.input(0)});
  seq1 = emit.node("Gather", {shapeQ, emit.constI64({seqAxis})},
                   [](onnx::NodeProto &n) { Emitter::intAttr(n, "axis", 0); });
  std::string batch = emit.node("Gather", {shapeQ, emit.constI64({0})},
                                [](onnx::NodeProto &n) {
                                  Emitter::intAttr(n, "axis", 0);
                                });
  pad = emit.node("Mod",
                  {emit.node("Sub", {b1, emit.node("Mod", {seq1, b1})}), b1});
  nb = emit.node("Div", {emit.node("Add", {seq1, pad}), b1});
  SmallVector<int64_t> zeros(2 * rank - 1 - (rank - 1 - seqAxis), 0);
  SmallVector<std::string> padParts = {emit.constI64(zeros), pad};
  if (rank - 1 - seqAxis > 0)
    padParts.push_back(
        emit.constI64(SmallVector<int64_t>(rank - 1 - seqAxis, 0)));
  std::string pads = emit.node("Concat", padParts, [](onnx::NodeProto &n) {
    Emitter::intAttr(n, "axis", 0);
  });
  // Blocks go into the batch: [B, S, E] -> [B*nb, b, E];
  // [B, H, S, D] -> [B, H, nb, b, D] -> [B, nb, H, b, D] -> [B*nb, H, b, D].
  auto toBlocks = [&](const std::string &x, RankedTensorType t) {
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
  };
  std::string qb = toBlocks(att.input(0), *qTy);
  std::string kb = toBlocks(att.input(1), *kTy);
  std::string vb = toBlocks(att.input(2), *vTy);
  std::string out;
  if (causal) {
    // Square blocks: the node's own causal triangle is the right one inside
    // each block and keeps padded keys away from real queries.
    onnx::NodeProto copy = att;
    out = emit.node("Attention", {});
    onnx::NodeProto &placed = emit.nodes.back();
    std::string name = placed.name();
    copy.clear_input();
    for (const std::string &in : {qb, kb, vb})
      copy.add_input(in);
    copy.clear_output();
    copy.add_output(out);
    copy.set_name(name);
    placed = copy;
  } else {
    // Padded keys need a mask, and onnxruntime's Attention kernel mishandles
    // per-batch masks for some shapes: spell the blocks out in MatMul and
    // Softmax on [B*nb, Hkv, G, b, b] scores.
    int32_t et = onnxFloatType(qTy->getElementType());
    if (!et)
      return error() << "unsupported element type " << qTy->getElementType();
    int64_t hq = 0, hkv = 0, d = 0, dv = 0;
    for (const onnx::AttributeProto &a : att.attribute()) {
      if (a.name() == "q_num_heads")
        hq = a.i();
      if (a.name() == "kv_num_heads")
        hkv = a.i();
      if (a.name() == "softcap" && a.f() != 0.0f)
        return error() << "softcap is not supported";
    }
    if (rank == 4) {
      hq = qTy->getDimSize(1);
      hkv = kTy->getDimSize(1);
      d = qTy->getDimSize(3);
      dv = vTy->getDimSize(3);
    } else {
      d = qTy->getDimSize(2) / hq;
      dv = vTy->getDimSize(2) / hkv;
    }
    float scale = AttentionOp::getDefaultScale(d);
    for (const onnx::AttributeProto &a : att.attribute())
      if (a.name() == "scale")
        scale = a.f();
    int64_t g = hq / hkv;
    // [N, Hq, b, D] (4-D) or [N, b, Hq*D] (3-D) -> [N, Hkv, G, b, D].
    auto heads = [&](const std::string &x, int64_t h, int64_t dim,
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
    };
    std::string q5 = heads(qb, hq, d, g);
    std::string k5 = heads(kb, hkv, d, 1);
    std::string v5 = heads(vb, hkv, dv, 1);
    std::string kt5 = emit.node("Transpose", {k5}, [](onnx::NodeProto &n) {
      Emitter::intsAttr(n, "perm", {0, 1, 2, 4, 3});
    });
    std::string sc = emit.node(
        "Mul", {emit.node("MatMul", {q5, kt5}), emit.constFloat(scale, et)});
    std::string padded = emit.node("Add", {seq1, pad});
    std::string positions = emit.node(
        "Range", {emit.constI64({0}, true),
                  emit.node("Squeeze", {padded, axis0}),
                  emit.constI64({1}, true)});
    std::string keyMask = emit.node(
        "Where", {emit.node("Less", {positions, seq1}),
                  emit.constFloat(0.0, et),
                  emit.constFloat(-std::numeric_limits<double>::infinity(),
                                  et)});
    // [S'] -> [1, nb, 1, 1, 1, b] -> [B, nb, ...] -> [B*nb, 1, 1, 1, b].
    std::string shape6 = emit.node(
        "Concat", {emit.constI64({1}), nb, emit.constI64({1, 1, 1, block})},
        [](onnx::NodeProto &n) { Emitter::intAttr(n, "axis", 0); });
    keyMask = emit.node("Reshape", {keyMask, shape6});
    std::string target = emit.node(
        "Concat", {batch, nb, emit.constI64({1, 1, 1, block})},
        [](onnx::NodeProto &n) { Emitter::intAttr(n, "axis", 0); });
    keyMask = emit.node("Expand", {keyMask, target});
    keyMask = emit.node("Reshape",
                        {keyMask, emit.constI64({-1, 1, 1, 1, block})});
    std::string p = emit.node("Softmax", {emit.node("Add", {sc, keyMask})},
                              [](onnx::NodeProto &n) {
                                Emitter::intAttr(n, "axis", -1);
                              });
    std::string o = emit.node("MatMul", {p, v5});
    // [N, Hkv, G, b, Dv] -> the node's own layout.
    o = emit.node("Reshape", {o, emit.constI64({0, hq, block, dv})});
    if (rank == 3) {
      o = emit.node("Transpose", {o}, [](onnx::NodeProto &n) {
        Emitter::intsAttr(n, "perm", {0, 2, 1, 3});
      });
      o = emit.node("Reshape", {o, emit.constI64({0, 0, hq * dv})});
    }
    out = o;
  }
  std::string y;
  if (rank == 3) {
    int64_t e = qTy->getDimSize(2);
    std::string back = emit.node("Concat", {batch, emit.constI64({-1, e})},
                                 [](onnx::NodeProto &n) {
                                   Emitter::intAttr(n, "axis", 0);
                                 });
    y = emit.node("Reshape", {out, back});
  } else {
    int64_t h = qTy->getDimSize(1), d = qTy->getDimSize(3);
    std::string back = emit.node(
        "Concat", {batch, emit.constI64({-1, h, block, d})},
        [](onnx::NodeProto &n) { Emitter::intAttr(n, "axis", 0); });
    y = emit.node("Reshape", {out, back});
    y = emit.node("Transpose", {y}, [](onnx::NodeProto &n) {
      Emitter::intsAttr(n, "perm", {0, 2, 1, 3, 4});
    });
    y = emit.node("Reshape", {y, emit.constI64({0, 0, -1, d})});
  }
  emit.node("Slice", {y, emit.constI64({0}), seq1, emit.constI64({seqAxis})});
  emit.nodes.back().set_output(0, att.output(0));
  return success();
}
