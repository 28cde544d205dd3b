//===- BlockedLayer.cpp - Block and window spans as blocked ONN -*- C++ -*-===//
//
// A MatMul/Softmax attention layer with a block or window span as padded,
// blocked standard ONNX ops (a window of W: blocks of W that also see the
// previous block, and the next one when the layer is not causal), the
// layer's own scale / mask / cast chain re-applied on blocked operands.
//
//===----------------------------------------------------------------------===//

#include "LayerExport.h"

#include <cmath>

using namespace mlir;
using namespace mlir::masformer;
using namespace mlir::masformer::detail;

std::string LayerExporter::previousBlock(const std::string &x, int64_t axis,
                                         int64_t rank) {
  SmallVector<int64_t> pads(2 * rank, 0);
  pads[axis] = 1;
  std::string shifted = emit.node("Pad", {x, emit.constI64(pads)});
  return emit.node("Slice", {shifted, emit.constI64({0}), nb,
                             emit.constI64({axis})});
}

std::string LayerExporter::nextBlock(const std::string &x, int64_t axis,
                                     int64_t rank) {
  SmallVector<int64_t> pads(2 * rank, 0);
  pads[rank + axis] = 1;
  std::string shifted = emit.node("Pad", {x, emit.constI64(pads)});
  return emit.node("Slice",
                   {shifted, emit.constI64({1}),
                    emit.constI64({std::numeric_limits<int64_t>::max()}),
                    emit.constI64({axis})});
}

std::string LayerExporter::keyRegion(const std::string &x, int64_t axis,
                                     int64_t rank) {
  if (!windowed)
    return x;
  SmallVector<std::string> parts = {previousBlock(x, 2, rank), x};
  if (twoSided)
    parts.push_back(nextBlock(x, 2, rank));
  return emit.node("Concat", parts, [&](onnx::NodeProto &n) {
    Emitter::intAttr(n, "axis", axis);
  });
}

void LayerExporter::setSpan(SpanAttr span) {
  block = span.getSize();
  windowed = span.getKind() == SpanKind::Window;
  twoSided = windowed && !op.getCausal();
  sinks = span.getSink();
}

FailureOr<LayerExporter::ScoreOperand>
LayerExporter::scoreOperand(const std::string &name) {
  FailureOr<RankedTensorType> ty = typeOf(name);
  if (failed(ty))
    return failure();
  ArrayRef<int64_t> shape = ty->getShape();
  if (shape.size() > 4)
    return error() << "mask operand '" << name << "' has rank "
                   << shape.size(),
           failure();
  ScoreOperand o;
  o.dims.assign(4 - shape.size(), 1);
  llvm::append_range(o.dims, shape);
  o.name = name;
  if (llvm::all_of(o.dims, [](int64_t x) { return x == 1; }) &&
      shape.size() <= 1) {
    o.scalar = true; // A scalar broadcasts to any layout.
    return o;
  }
  auto isSeq = [&](int64_t x) { return x == seq && seq != 1; };
  ArrayRef<int64_t> d = o.dims;
  if ((d[2] != 1 && !isSeq(d[2])) || (d[3] != 1 && !isSeq(d[3])))
    return error() << "mask operand '" << name << "' of type " << *ty
                   << " does not broadcast along the sequence",
           failure();
  o.q = isSeq(d[2]);
  o.k = isSeq(d[3]);
  // Leading unit dims by Unsqueeze, never by a static Reshape: the sizes
  // that equal the sequence here change with it at run time.
  if (shape.size() < 4) {
    SmallVector<int64_t> axes;
    for (int64_t i = 0, e = 4 - shape.size(); i < e; ++i)
      axes.push_back(i);
    o.name = emit.node("Unsqueeze", {o.name, emit.constI64(axes)});
  }
  // Per-head groups: the group's heads of an operand with a heads axis.
  if (!headIndex.empty() && d[1] != 1) {
    if (d[1] != qHeads)
      return error() << "mask operand '" << name << "' of type " << *ty
                     << " has " << d[1] << " heads, expected 1 or "
                     << qHeads,
             failure();
    o.name = emit.node("Gather", {o.name, headIndex},
                       [](onnx::NodeProto &n) {
                         Emitter::intAttr(n, "axis", 1);
                       });
  }
  return o;
}

FailureOr<std::string> LayerExporter::blockOperand(const std::string &name) {
  FailureOr<ScoreOperand> op = scoreOperand(name);
  if (failed(op))
    return failure();
  if (op->scalar)
    return op->name;
  std::string m = op->name;
  bool q = op->q, k = op->k;
  if (!q && !k)
    return emit.node("Unsqueeze", {m, emit.constI64({2})});
  std::string zero = q && k ? std::string() : emit.constI64({0});
  std::string pads = emit.node(
      "Concat",
      {emit.constI64({0, 0, 0, 0, 0, 0}), q ? pad : zero, k ? pad : zero},
      [](onnx::NodeProto &n) { Emitter::intAttr(n, "axis", 0); });
  m = emit.node("Pad", {m, pads});
  if (!q) {
    std::string cur =
        emit.node("Reshape", {m, emit.constI64({0, 0, -1, 1, block})});
    return keyRegion(cur, 4, 5);
  }
  if (!k)
    return emit.node("Reshape", {m, emit.constI64({0, 0, -1, block, 1})});
  // Both: the diagonal blocks of the [S', S'] plane.
  std::string lead = emit.node(
      "Slice", {emit.node("Shape", {m}), emit.constI64({0}),
                emit.constI64({2})});
  std::string b1 = emit.constI64({block});
  std::string six = emit.node("Concat", {lead, nb, b1, nb, b1},
                              [](onnx::NodeProto &n) {
                                Emitter::intAttr(n, "axis", 0);
                              });
  m = emit.node("Reshape", {m, six});
  m = emit.node("Transpose", {m}, [](onnx::NodeProto &n) {
    Emitter::intsAttr(n, "perm", {0, 1, 2, 4, 3, 5});
  });
  std::string nbnb = emit.node("Mul", {nb, nb});
  std::string five = emit.node("Concat", {lead, nbnb, b1, b1},
                               [](onnx::NodeProto &n) {
                                 Emitter::intAttr(n, "axis", 0);
                               });
  m = emit.node("Reshape", {m, five});
  std::string axis0 = emit.constI64({0});
  std::string nbnbS = emit.node("Squeeze", {nbnb, axis0});
  std::string step = emit.node(
      "Squeeze", {emit.node("Add", {nb, emit.constI64({1})}), axis0});
  std::string diag = emit.node(
      "Range", {emit.constI64({0}, /*scalar=*/true), nbnbS, step});
  std::string own = emit.node("Gather", {m, diag}, [](onnx::NodeProto &n) {
    Emitter::intAttr(n, "axis", 2);
  });
  if (!windowed)
    return own;
  // The block left of the diagonal (row i, column i-1); block 0 has none
  // and reads block (0, 0), which the window mask discards.
  std::string sub = emit.node(
      "Max", {emit.node("Sub", {diag, emit.constI64({1}, true)}),
              emit.constI64({0}, true)});
  std::string prev = emit.node("Gather", {m, sub}, [](onnx::NodeProto &n) {
    Emitter::intAttr(n, "axis", 2);
  });
  SmallVector<std::string> parts = {prev, own};
  if (twoSided) {
    // The block right of the diagonal (row i, column i+1); the last block
    // has none and reads its own, which the window mask discards.
    std::string nextIdx =
        emit.node("Min", {emit.node("Add", {diag, emit.constI64({1}, true)}),
                          emit.node("Sub", {nbnbS, emit.constI64({1}, true)})});
    parts.push_back(emit.node("Gather", {m, nextIdx}, [](onnx::NodeProto &n) {
      Emitter::intAttr(n, "axis", 2);
    }));
  }
  return emit.node("Concat", parts,
                   [](onnx::NodeProto &n) { Emitter::intAttr(n, "axis", 4); });
}

FailureOr<std::string> LayerExporter::sinkOperand(const std::string &name) {
  FailureOr<ScoreOperand> op = scoreOperand(name);
  if (failed(op))
    return failure();
  if (op->scalar)
    return op->name;
  std::string m = op->name;
  // The first keys: [.., q, K].
  if (op->k)
    m = emit.node("Slice", {m, emit.constI64({0}), emit.constI64({sinks}),
                            emit.constI64({3})});
  if (!op->q)
    return emit.node("Unsqueeze", {m, emit.constI64({2})});
  // Queries into blocks: pad, then [.., nb, b, K].
  std::string pads = emit.node(
      "Concat", {emit.constI64({0, 0, 0, 0, 0, 0}), pad, emit.constI64({0})},
      [](onnx::NodeProto &n) { Emitter::intAttr(n, "axis", 0); });
  m = emit.node("Pad", {m, pads});
  std::string shape5 =
      emit.node("Concat", {emit.constI64({0, 0}), nb,
                           emit.constI64({block, -1})},
                [](onnx::NodeProto &n) { Emitter::intAttr(n, "axis", 0); });
  return emit.node("Reshape", {m, shape5});
}

std::string LayerExporter::sinkColumnMask(const std::string &sinkCount,
                                          const MaskConstants &c) {
  // Query block k's own key region starts at k*B (blocks) or (k-1)*W
  // (windows) and is B, 2W or 3W (two-sided windows) long; sinks inside it
  // are scored in the region itself (the span's rule or'ed with "is a
  // sink"). Before it, every sink is allowed: it is before every query of
  // the block, so causality holds. After it, only a layer that is not
  // causal allows them (a causal query never sees them).
  std::string one = emit.constI64({1}, true);
  std::string blocks = emit.node(
      "Range", {emit.constI64({0}, true), emit.node("Squeeze", {nb, c.axis0}),
                one});
  std::string start =
      emit.node("Mul", {windowed ? emit.node("Sub", {blocks, one}) : blocks,
                        emit.constI64({block}, true)});
  std::string cols = emit.node(
      "Range", {emit.constI64({0}, true),
                emit.node("Squeeze", {sinkCount, c.axis0}), one});
  std::string col = emit.node("Unsqueeze", {cols, c.axis0});
  std::string outside = emit.node(
      "Less", {col, emit.node("Unsqueeze", {start, emit.constI64({1})})});
  if (!op.getCausal()) {
    // Not causal: sinks after the region are allowed too.
    std::string end = emit.node(
        "Mul",
        {emit.node("Add", {blocks, twoSided ? emit.constI64({2}, true) : one}),
         emit.constI64({block}, true)});
    outside = emit.node(
        "Or", {outside,
               emit.node("GreaterOrEqual",
                         {col, emit.node("Unsqueeze",
                                         {end, emit.constI64({1})})})});
  }
  std::string m = emit.node("Where", {outside, c.zero, c.ninf});
  return emit.node("Unsqueeze", {m, emit.constI64({1})});
}

void LayerExporter::emitBlockCount(const std::string &b1) {
  pad = emit.node("Mod",
                  {emit.node("Sub", {b1, emit.node("Mod", {seq1, b1})}), b1});
  nb = emit.node("Div", {emit.node("Add", {seq1, pad}), b1});
}

std::string LayerExporter::emitCopy(onnx::NodeProto copy) {
  std::string out = emit.node(copy.op_type(), {}, {});
  onnx::NodeProto &placed = emit.nodes.back();
  std::string name = placed.name();
  placed = std::move(copy);
  placed.set_name(name);
  placed.clear_output();
  placed.add_output(out);
  return out;
}

LayerExporter::BlockedInputs
LayerExporter::blockInputs(const std::string &q, const std::string &kt,
                           const std::string &v, int64_t d, int64_t dv) {
  auto padsFor = [&](ArrayRef<int64_t> beginsAndFixedEnds, bool padLast) {
    SmallVector<std::string> parts = {emit.constI64(beginsAndFixedEnds)};
    parts.push_back(pad);
    if (!padLast)
      parts.push_back(emit.constI64({0}));
    return emit.node("Concat", parts, [](onnx::NodeProto &n) {
      Emitter::intAttr(n, "axis", 0);
    });
  };
  // [B, H, S, D] -> [B, H, nb, b, D].
  std::string seqPads = padsFor({0, 0, 0, 0, 0, 0}, false);
  std::string qb = emit.node("Reshape", {emit.node("Pad", {q, seqPads}),
                                         emit.constI64({0, 0, -1, block, d})});
  std::string vb = emit.node("Reshape", {emit.node("Pad", {v, seqPads}),
                                         emit.constI64({0, 0, -1, block, dv})});
  // [B, H, D, S] -> [B, H, D, nb, b] -> [B, H, nb, D, b].
  std::string ktb = emit.node(
      "Reshape", {emit.node("Pad", {kt, padsFor({0, 0, 0, 0, 0, 0, 0}, true)}),
                  emit.constI64({0, 0, d, -1, block})});
  ktb = emit.node("Transpose", {ktb}, [](onnx::NodeProto &n) {
    Emitter::intsAttr(n, "perm", {0, 1, 3, 2, 4});
  });
  return {qb, keyRegion(ktb, 4, 5), keyRegion(vb, 3, 5)};
}

FailureOr<std::string> LayerExporter::applyScoreChain(std::string scores,
                                                      ChainLayout layout) {
  // Whether the original scores have their heads flattened into the batch
  // at this point of the chain (their operands too, then).
  FailureOr<RankedTensorType> qkTy = typeOf(graph.node(layer.qk).output(0));
  if (failed(qkTy))
    return failure();
  bool flat = qkTy->getRank() == 3;
  for (auto [idx, k] : layer.chain) {
    // The heads' Reshape and baddbmm's zeros leave blocked scores as they
    // are.
    if (isNeutralInChain(idx, k)) {
      if (graph.node(idx).op_type() == "Reshape")
        flat = !flat;
      continue;
    }
    const onnx::NodeProto &orig = graph.node(idx);
    onnx::NodeProto copy = orig;
    for (int i = 0; i < copy.input_size(); ++i) {
      if (i == k) {
        copy.set_input(i, scores);
        continue;
      }
      FailureOr<std::string> operand = orig.input(i);
      if (flat)
        operand = unflattenOperand(*operand);
      if (failed(operand))
        return failure();
      FailureOr<std::string> blocked;
      if (layout == ChainLayout::Sinks) {
        blocked = sinkOperand(*operand);
      } else if (layout == ChainLayout::Blocked) {
        blocked = blockOperand(*operand);
      } else {
        FailureOr<ScoreOperand> dense = scoreOperand(*operand);
        if (succeeded(dense))
          blocked = dense->name;
      }
      if (failed(blocked))
        return failure();
      copy.set_input(i, *blocked);
    }
    scores = emitCopy(std::move(copy));
  }
  return scores;
}

std::string LayerExporter::maskBlockScores(const std::string &scores,
                                           const std::string &padded,
                                           const MaskConstants &c) {
  std::string positions =
      emit.node("Range", {emit.constI64({0}, true),
                          emit.node("Squeeze", {padded, c.axis0}),
                          emit.constI64({1}, true)});
  std::string real = emit.node("Less", {positions, seq1});
  std::string keyMask = emit.node("Where", {real, c.zero, c.ninf});
  keyMask = emit.node("Reshape", {keyMask, emit.constI64({-1, 1, block})});
  std::string masked = emit.node("Add", {scores, keyMask});
  if (!op.getCausal())
    return masked;
  // The op's causal flag, exactly: -inf above the diagonal of each (square)
  // block, also where the model's own mask only adds float-min there.
  std::string one = emit.constI64({1}, true);
  std::string idx = emit.node(
      "Range", {emit.constI64({0}, true), emit.constI64({block}, true), one});
  std::string above =
      emit.node("Greater", {emit.node("Unsqueeze", {idx, c.axis0}),
                            emit.node("Unsqueeze", {idx, emit.constI64({1})})});
  return emit.node("Add",
                   {masked, emit.node("Where", {above, c.ninf, c.zero})});
}

std::string LayerExporter::maskWindowScores(const std::string &scores,
                                            const MaskConstants &c) {
  // Key j of query block k sits at (k - 1) * W + j: it must exist
  // (0 <= pos < S) and lie in the window: W + i - j in [0, W) when causal,
  // in (-W, W) when two-sided (j < 3W).
  std::string one = emit.constI64({1}, true);
  std::string blocks =
      emit.node("Range", {emit.constI64({0}, true),
                          emit.node("Squeeze", {nb, c.axis0}), one});
  std::string cols = emit.node(
      "Range", {emit.constI64({0}, true),
                emit.constI64({(twoSided ? 3 : 2) * block}, true), one});
  std::string keyPos = emit.node(
      "Add",
      {emit.node("Mul",
                 {emit.node("Sub", {emit.node("Unsqueeze",
                                              {blocks, emit.constI64({1})}),
                                    one}),
                  emit.constI64({block}, true)}),
       emit.node("Unsqueeze", {cols, c.axis0})});
  std::string exists = emit.node(
      "And", {emit.node("GreaterOrEqual", {keyPos, emit.constI64({0}, true)}),
              emit.node("Less", {keyPos, seq1})});
  std::string keyMask = emit.node("Where", {exists, c.zero, c.ninf});
  keyMask = emit.node("Unsqueeze", {keyMask, emit.constI64({1})});
  std::string rows = emit.node(
      "Range", {emit.constI64({0}, true), emit.constI64({block}, true), one});
  std::string dist = emit.node(
      "Sub",
      {emit.node("Add", {emit.node("Unsqueeze", {rows, emit.constI64({1})}),
                         emit.constI64({block}, true)}),
       emit.node("Unsqueeze", {cols, c.axis0})});
  std::string causalOk =
      emit.node(twoSided ? "Greater" : "GreaterOrEqual",
                {dist, emit.constI64({twoSided ? -block : 0}, true)});
  std::string inWindow = emit.node(
      "And", {causalOk, emit.node("Less", {dist, emit.constI64({block}, true)})});
  if (sinks > 0) {
    // Sinks inside the region ([nb, b, 2W or 3W]): allowed before the
    // query, or anywhere when two-sided.
    std::string isSink = emit.node(
        "Less", {emit.node("Unsqueeze", {keyPos, emit.constI64({1})}),
                 emit.constI64({sinks}, true)});
    if (!twoSided)
      isSink = emit.node("And", {isSink, causalOk});
    inWindow = emit.node("Or", {inWindow, isSink});
  }
  std::string windowMask = emit.node("Where", {inWindow, c.zero, c.ninf});
  return emit.node("Add", {emit.node("Add", {scores, keyMask}), windowMask});
}

FailureOr<int32_t> LayerExporter::scoreElementType() {
  FailureOr<RankedTensorType> sTy = typeOf(graph.node(layer.softmax).input(0));
  if (failed(sTy))
    return failure();
  if (int32_t et = onnxFloatType(sTy->getElementType()))
    return et;
  return error() << "unsupported score type " << sTy->getElementType(),
         failure();
}

FailureOr<std::string> LayerExporter::maskScores(const std::string &scores) {
  FailureOr<int32_t> scoreType = scoreElementType();
  if (failed(scoreType))
    return failure();
  int32_t et = *scoreType;
  // Emitted for both forms though only the blocked one reads it: dropping
  // it would renumber every node after it.
  std::string padded = emit.node("Add", {seq1, pad});
  MaskConstants c;
  c.axis0 = emit.constI64({0});
  c.zero = emit.constFloat(0.0, et);
  c.ninf = emit.constFloat(-std::numeric_limits<double>::infinity(), et);
  if (!windowed)
    return maskBlockScores(scores, padded, c);
  return maskWindowScores(scores, c);
}

std::string LayerExporter::applyPostCasts(std::string probs) {
  std::string isNaN;
  for (int idx : layer.post) {
    const onnx::NodeProto &node = graph.node(idx);
    // The Reshape that flattens the heads: blocked probabilities keep them.
    if (node.op_type() == "Reshape")
      continue;
    onnx::NodeProto copy = node;
    if (node.op_type() == "IsNaN") {
      // The NaN guard, Where(IsNaN(p), 0, p), on the blocked probabilities.
      copy.set_input(0, probs);
      isNaN = emitCopy(std::move(copy));
      continue;
    }
    if (node.op_type() == "Where") {
      copy.set_input(0, isNaN);
      copy.set_input(2, probs);
    } else {
      copy.set_input(0, probs);
    }
    probs = emitCopy(std::move(copy));
  }
  return probs;
}

FailureOr<std::string> LayerExporter::emitBlockedCore(const std::string &q,
                                                      const std::string &kt,
                                                      const std::string &v) {
  FailureOr<RankedTensorType> qTy = typeOf(q), ktTy = typeOf(kt),
                              vTy = typeOf(v);
  if (failed(qTy) || failed(ktTy) || failed(vTy))
    return failure();
  if (qTy->getRank() != 4 || ktTy->getRank() != 4 || vTy->getRank() != 4)
    return error() << "Q, K^T and V must be rank 4", failure();
  if (qTy->getDimSize(2) != ktTy->getDimSize(3))
    return error() << "block spans need as many queries as keys", failure();
  int64_t d = qTy->getDimSize(3), dv = vTy->getDimSize(3);

  // pad = (B - S % B) % B; nb = (S + pad) / B, all [1] int64 at run time.
  std::string b1 = emit.constI64({block});
  seq1 = emit.node("Gather", {emit.node("Shape", {q}), emit.constI64({2})},
                   [](onnx::NodeProto &n) { Emitter::intAttr(n, "axis", 0); });
  emitBlockCount(b1);
  BlockedInputs in = blockInputs(q, kt, v, d, dv);
  // The layer's own scale / mask / cast chain, on blocked operands.
  FailureOr<std::string> scores =
      applyScoreChain(emit.node("MatMul", {in.q, in.kt}));
  if (failed(scores))
    return failure();
  scores = maskScores(*scores);
  if (failed(scores))
    return failure();
  std::string probs, ob;
  if (sinks == 0) {
    probs = emit.node("Softmax", {*scores}, [](onnx::NodeProto &n) {
      Emitter::intAttr(n, "axis", -1);
    });
    probs = applyPostCasts(probs);
    ob = emit.node("MatMul", {probs, in.v});
  } else {
    // Sinks: every query block also scores the first K keys ([.., nb, b,
    // K], the chain applied to them too), one softmax over both.
    std::string ktSink = emit.node(
        "Unsqueeze",
        {emit.node("Slice", {kt, emit.constI64({0}), emit.constI64({sinks}),
                             emit.constI64({3})}),
         emit.constI64({2})});
    std::string vSink = emit.node(
        "Unsqueeze",
        {emit.node("Slice", {v, emit.constI64({0}), emit.constI64({sinks}),
                             emit.constI64({2})}),
         emit.constI64({2})});
    FailureOr<std::string> sinkScores = applyScoreChain(
        emit.node("MatMul", {in.q, ktSink}), ChainLayout::Sinks);
    if (failed(sinkScores))
      return failure();
    FailureOr<RankedTensorType> sTy =
        typeOf(graph.node(layer.softmax).input(0));
    if (failed(sTy))
      return failure();
    MaskConstants c;
    c.axis0 = emit.constI64({0});
    int32_t et = onnxFloatType(sTy->getElementType());
    c.zero = emit.constFloat(0.0, et);
    c.ninf = emit.constFloat(-std::numeric_limits<double>::infinity(), et);
    // Fewer keys than sinks: as many sink columns as keys.
    std::string count = emit.node(
        "Gather", {emit.node("Shape", {ktSink}), emit.constI64({4})},
        [](onnx::NodeProto &n) { Emitter::intAttr(n, "axis", 0); });
    std::string masked =
        emit.node("Add", {*sinkScores, sinkColumnMask(count, c)});
    std::string all = emit.node("Concat", {masked, *scores},
                                [](onnx::NodeProto &n) {
                                  Emitter::intAttr(n, "axis", -1);
                                });
    probs = emit.node("Softmax", {all}, [](onnx::NodeProto &n) {
      Emitter::intAttr(n, "axis", -1);
    });
    probs = applyPostCasts(probs);
    std::string end = emit.constI64({std::numeric_limits<int64_t>::max()});
    std::string pSink = emit.node(
        "Slice", {probs, emit.constI64({0}), count, emit.constI64({4})});
    std::string pRegion =
        emit.node("Slice", {probs, count, end, emit.constI64({4})});
    ob = emit.node("Add", {emit.node("MatMul", {pSink, vSink}),
                           emit.node("MatMul", {pRegion, in.v})});
  }
  std::string o = emit.node("Reshape", {ob, emit.constI64({0, 0, -1, dv})});
  // Back to the sequence length.
  return emit.node("Slice", {o, emit.constI64({0}), seq1, emit.constI64({2})});
}

LogicalResult LayerExporter::emitBlocked() {
  FailureOr<std::pair<std::string, std::string>> qk = scoreInputs();
  const onnx::NodeProto &pv = graph.node(layer.pv);
  FailureOr<RankedTensorType> vTy = typeOf(pv.input(1));
  if (failed(qk) || failed(vTy))
    return failure();
  // P*V with the heads flattened into the batch (OPT, BLOOM): V from its
  // 4-D source, and the blocked output flattened back.
  std::string v = pv.input(1);
  bool flat = vTy->getRank() == 3;
  if (flat && (v = unflattenedHeads(v)).empty())
    return error() << "P*V of rank 3 does not read V reshaped from [batch, "
                      "heads, seq, head_dim]";
  FailureOr<std::string> out = emitBlockedCore(qk->first, qk->second, v);
  if (failed(out))
    return failure();
  if (flat) {
    std::string sizes = emit.node(
        "Concat",
        {emit.constI64({-1}),
         emit.node("Slice", {emit.node("Shape", {*out}), emit.constI64({2}),
                             emit.constI64({4}), emit.constI64({0})})},
        [](onnx::NodeProto &n) { Emitter::intAttr(n, "axis", 0); });
    emit.node("Reshape", {*out, sizes});
  }
  // Under the original output's name.
  emit.nodes.back().set_output(0, pv.output(0));
  return success();
}

LogicalResult LayerExporter::emitPerHeadBlocked() {
  FailureOr<std::pair<std::string, std::string>> qk = scoreInputs();
  if (failed(qk))
    return failure();
  const onnx::NodeProto &pv = graph.node(layer.pv);
  std::string q = qk->first, kt = qk->second, v = pv.input(1);
  FailureOr<RankedTensorType> qTy = typeOf(q), ktTy = typeOf(kt),
                              vTy = typeOf(v);
  if (failed(qTy) || failed(ktTy) || failed(vTy))
    return failure();
  if (qTy->getRank() != 4 || ktTy->getRank() != 4 || vTy->getRank() != 4)
    return error() << "Q, K^T and V must be rank 4";
  qHeads = op.getQueryType().getDimSize(1);
  std::optional<int64_t> group = op.getStaticGroupSize();
  if (!group || qTy->getDimSize(1) != qHeads)
    return error() << "per-head spans need Q shaped [batch, " << qHeads
                   << " heads, seq, head_dim], got " << *qTy;
  for (RankedTensorType t : {*ktTy, *vTy})
    if (t.getDimSize(1) != qHeads && t.getDimSize(1) != 1)
      return error() << "per-head spans need K^T and V with " << qHeads
                     << " heads (or 1), got " << t;
  // One group per distinct span, in order of first appearance: its query
  // heads gathered, attended with that span, put back in head order.
  ArrayAttr heads = *op.getHeadSpans();
  SmallVector<std::pair<SpanAttr, SmallVector<int64_t>>> groups;
  for (int64_t h = 0; h < qHeads; ++h) {
    auto span = cast<SpanAttr>(heads[h / *group]);
    auto *it = llvm::find_if(groups, [&](auto &g) { return g.first == span; });
    if (it == groups.end()) {
      groups.push_back({span, {}});
      it = std::prev(groups.end());
    }
    it->second.push_back(h);
  }
  seq = qTy->getDimSize(2);
  SmallVector<std::string> outs;
  SmallVector<int64_t> order;
  for (auto &group : groups) {
    // (Named, not bound: the lambdas below capture them.)
    SpanAttr span = group.first;
    const SmallVector<int64_t> &members = group.second;
    headIndex = emit.constI64(members);
    auto gather = [&](const std::string &x, RankedTensorType t) {
      if (t.getDimSize(1) == 1)
        return x;
      std::string g = emit.node("Gather", {x, headIndex},
                                [](onnx::NodeProto &n) {
                                  Emitter::intAttr(n, "axis", 1);
                                });
      SmallVector<int64_t> shape(t.getShape());
      shape[1] = members.size();
      localTypes[g] = t.clone(shape);
      return g;
    };
    std::string qg = gather(q, *qTy), ktg = gather(kt, *ktTy),
                vg = gather(v, *vTy);
    FailureOr<std::string> out;
    if (coversAnySequence(span)) {
      // Every pair of these heads: the layer as it was, on the group.
      FailureOr<std::string> scores =
          applyScoreChain(emit.node("MatMul", {qg, ktg}), ChainLayout::Dense);
      if (failed(scores))
        return failure();
      std::string probs = emit.node("Softmax", {*scores},
                                    [](onnx::NodeProto &n) {
                                      Emitter::intAttr(n, "axis", -1);
                                    });
      out = emit.node("MatMul", {applyPostCasts(probs), vg});
    } else {
      setSpan(span);
      out = emitBlockedCore(qg, ktg, vg);
    }
    if (failed(out))
      return failure();
    outs.push_back(*out);
    llvm::append_range(order, members);
  }
  headIndex.clear();
  // Back to head order: position of each head among the groups' outputs.
  SmallVector<int64_t> inverse(qHeads);
  for (auto [pos, h] : llvm::enumerate(order))
    inverse[h] = pos;
  std::string all = emit.node("Concat", outs, [](onnx::NodeProto &n) {
    Emitter::intAttr(n, "axis", 1);
  });
  emit.node("Gather", {all, emit.constI64(inverse)}, [](onnx::NodeProto &n) {
    Emitter::intAttr(n, "axis", 1);
  });
  emit.nodes.back().set_output(0, pv.output(0));
  return success();
}
