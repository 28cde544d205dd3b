//===- ONNXExporter.cpp - Rewritten spans back into ONNX ---------*- C++ -*-===//
//
// For each masformer.attention whose span is not full, finds the layer's
// nodes in the original graph (Q*K^T MatMul, the chain of scale/mask/cast
// nodes, Softmax, casts, P*V MatMul) by the names in the op's location and
// replaces them:
//
// - block B: Q, K^T and V are padded to a multiple of B and reshaped into
//   blocks; scores are [batch, heads, blocks, B, B], so only the pairs inside
//   each block are computed. The layer's own chain (scale, causal Where,
//   padding Add, casts) is re-applied to the blocked scores with its mask
//   operands cut into the same diagonal blocks, padded keys are masked, and
//   the output is reshaped back and sliced to the sequence length. All sizes
//   are computed at run time, so the model keeps its dynamic axes.
// - window W: an added window mask before the softmax (no work skipped).
//
//===----------------------------------------------------------------------===//

#include "masformer/Export/ONNXExporter.h"
#include "masformer/Dialect/MASFormer/IR/MASFormerOps.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/ToolOutputFile.h"

#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace mlir;
using namespace mlir::masformer;

namespace {

/// ONNX element type of an MLIR float type (0 if unsupported).
int32_t onnxFloatType(Type t) {
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

/// One layer's nodes in the original graph.
struct LayerNodes {
  int qk = -1, softmax = -1, pv = -1;
  /// Nodes between Q*K^T and Softmax, in order, with the index of the input
  /// that carries the scores.
  SmallVector<std::pair<int, int>> chain;
  /// Cast nodes between Softmax and P*V.
  SmallVector<int> post;
};

class LayerExporter {
public:
  LayerExporter(AttentionOp op, onnx::GraphProto &graph,
                const llvm::StringMap<RankedTensorType> &types)
      : op(op), graph(graph), types(types),
        emit("masformer/layer" + std::to_string(op.getLayer().value_or(0)) +
             "/") {}

  /// Computes the replacement nodes; `removed` gets the indices of the
  /// original nodes they replace and `anchor` the index they go at.
  LogicalResult run(SmallVectorImpl<int> &removed, int &anchor,
                    std::vector<onnx::NodeProto> &added);

private:
  InFlightDiagnostic error() {
    return op.emitError() << "cannot export layer "
                          << op.getLayer().value_or(-1) << " to ONNX: ";
  }
  LogicalResult findNodes();
  FailureOr<RankedTensorType> typeOf(const std::string &name);
  /// The operand `name` cut into the blocked layout [.., .., nb, qb, kb]
  /// (kb = 2B when windowed: the previous block, then the own block).
  FailureOr<std::string> blockOperand(const std::string &name);
  /// x[.., nb, ...] -> the same with block i holding block i-1 (block 0 gets
  /// padding), along `axis`.
  std::string previousBlock(const std::string &x, int64_t axis, int64_t rank);
  LogicalResult emitBlocked();
  LogicalResult emitWindowMask();
  /// A layer imported from an opset-23 Attention node: the same node on
  /// blocks folded into the batch.
  LogicalResult emitBlockedAttentionNode(int index);

  AttentionOp op;
  onnx::GraphProto &graph;
  const llvm::StringMap<RankedTensorType> &types;
  Emitter emit;
  LayerNodes layer;
  int64_t seq = 0, block = 0;
  /// Causal window W: blocks of W, each query block attending its own and
  /// the previous key block ([.., nb, W, 2W] scores).
  bool windowed = false;
  int32_t scoreType = 0;
  // Run-time sizes of the blocked layout.
  std::string seq1, pad, nb;
};

LogicalResult LayerExporter::findNodes() {
  // The raise pass fused the locations of Q*K^T, Softmax and P*V.
  auto fused = dyn_cast<FusedLoc>(op.getLoc());
  SmallVector<std::string> names;
  if (fused)
    for (Location l : fused.getLocations())
      if (auto n = dyn_cast<NameLoc>(l))
        names.push_back(n.getName().str());
  if (names.size() != 3)
    return error() << "its location does not name the Q*K^T, Softmax and "
                      "P*V nodes (was it raised by "
                      "--masformer-raise-attention from an ONNX import?)";
  for (int i = 0, e = graph.node_size(); i < e; ++i) {
    const std::string &n = graph.node(i).name();
    if (n == names[0])
      layer.qk = i;
    else if (n == names[1])
      layer.softmax = i;
    else if (n == names[2])
      layer.pv = i;
  }
  if (layer.qk < 0 || layer.softmax < 0 || layer.pv < 0)
    return error() << "nodes '" << names[0] << "', '" << names[1] << "', '"
                   << names[2] << "' are not all in the model";
  llvm::StringMap<SmallVector<int>> consumers;
  for (int i = 0, e = graph.node_size(); i < e; ++i)
    for (const std::string &in : graph.node(i).input())
      consumers[in].push_back(i);
  llvm::StringSet<> graphOutputs;
  for (const onnx::ValueInfoProto &o : graph.output())
    graphOutputs.insert(o.name());
  auto next = [&](const std::string &t) -> int {
    auto it = consumers.find(t);
    if (it == consumers.end() || it->second.size() != 1 ||
        graphOutputs.contains(t))
      return -1;
    return it->second.front();
  };
  std::string cur = graph.node(layer.qk).output(0);
  while (cur != graph.node(layer.softmax).input(0)) {
    int n = next(cur);
    static constexpr StringLiteral kChainOps[] = {"Mul", "Div", "Add",
                                                  "Where", "Cast"};
    if (n < 0 || !llvm::is_contained(kChainOps, graph.node(n).op_type()) ||
        layer.chain.size() > 16)
      return error() << "the nodes between '" << names[0] << "' and '"
                     << names[1] << "' are not a chain of Mul, Div, Add, "
                                    "Where and Cast";
    const onnx::NodeProto &node = graph.node(n);
    int k = -1;
    for (int i = 0; i < node.input_size(); ++i)
      if (node.input(i) == cur)
        k = i;
    layer.chain.push_back({n, k});
    cur = node.output(0);
  }
  cur = graph.node(layer.softmax).output(0);
  while (cur != graph.node(layer.pv).input(0)) {
    int n = next(cur);
    if (n < 0 || graph.node(n).op_type() != "Cast" || layer.post.size() > 4)
      return error() << "the nodes between '" << names[1] << "' and '"
                     << names[2] << "' are not casts";
    layer.post.push_back(n);
    cur = graph.node(n).output(0);
  }
  return success();
}

FailureOr<RankedTensorType> LayerExporter::typeOf(const std::string &name) {
  auto it = types.find(name);
  if (it == types.end())
    return error() << "no static type is known for tensor '" << name << "'",
           failure();
  return it->second;
}

std::string LayerExporter::previousBlock(const std::string &x, int64_t axis,
                                         int64_t rank) {
  SmallVector<int64_t> pads(2 * rank, 0);
  pads[axis] = 1;
  std::string shifted = emit.node("Pad", {x, emit.constI64(pads)});
  return emit.node("Slice", {shifted, emit.constI64({0}), nb,
                             emit.constI64({axis})});
}

FailureOr<std::string> LayerExporter::blockOperand(const std::string &name) {
  FailureOr<RankedTensorType> ty = typeOf(name);
  if (failed(ty))
    return failure();
  ArrayRef<int64_t> shape = ty->getShape();
  if (shape.size() > 4)
    return error() << "mask operand '" << name << "' has rank "
                   << shape.size(),
           failure();
  SmallVector<int64_t> d(4 - shape.size(), 1);
  llvm::append_range(d, shape);
  bool allOnes = llvm::all_of(d, [](int64_t x) { return x == 1; });
  if (allOnes && shape.size() <= 1)
    return name; // A scalar broadcasts to any layout.
  auto isSeq = [&](int64_t x) { return x == seq && seq != 1; };
  if ((d[2] != 1 && !isSeq(d[2])) || (d[3] != 1 && !isSeq(d[3])))
    return error() << "mask operand '" << name << "' of type " << *ty
                   << " does not broadcast along the sequence",
           failure();
  // Leading unit dims by Unsqueeze, never by a static Reshape: the sizes
  // that equal the sequence here change with it at run time.
  std::string m = name;
  if (shape.size() < 4) {
    SmallVector<int64_t> axes;
    for (int64_t i = 0, e = 4 - shape.size(); i < e; ++i)
      axes.push_back(i);
    m = emit.node("Unsqueeze", {m, emit.constI64(axes)});
  }
  bool q = isSeq(d[2]), k = isSeq(d[3]);
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
    if (!windowed)
      return cur;
    return emit.node("Concat", {previousBlock(cur, 2, 5), cur},
                     [](onnx::NodeProto &n) { Emitter::intAttr(n, "axis", 4); });
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
  return emit.node("Concat", {prev, own}, [](onnx::NodeProto &n) {
    Emitter::intAttr(n, "axis", 4);
  });
}

LogicalResult LayerExporter::emitBlocked() {
  const onnx::NodeProto &qk = graph.node(layer.qk);
  const onnx::NodeProto &pv = graph.node(layer.pv);
  std::string q = qk.input(0), kt = qk.input(1), v = pv.input(1);
  FailureOr<RankedTensorType> qTy = typeOf(q), ktTy = typeOf(kt),
                              vTy = typeOf(v);
  if (failed(qTy) || failed(ktTy) || failed(vTy))
    return failure();
  if (qTy->getRank() != 4 || ktTy->getRank() != 4 || vTy->getRank() != 4)
    return error() << "Q, K^T and V must be rank 4";
  if (qTy->getDimSize(2) != ktTy->getDimSize(3))
    return error() << "block spans need as many queries as keys";
  int64_t d = qTy->getDimSize(3), dv = vTy->getDimSize(3);

  // pad = (B - S % B) % B; nb = (S + pad) / B, all [1] int64 at run time.
  std::string b1 = emit.constI64({block});
  seq1 = emit.node("Gather", {emit.node("Shape", {q}), emit.constI64({2})},
                   [](onnx::NodeProto &n) { Emitter::intAttr(n, "axis", 0); });
  pad = emit.node("Mod",
                  {emit.node("Sub", {b1, emit.node("Mod", {seq1, b1})}), b1});
  nb = emit.node("Div", {emit.node("Add", {seq1, pad}), b1});
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
  std::string qb = emit.node(
      "Reshape", {emit.node("Pad", {q, seqPads}),
                  emit.constI64({0, 0, -1, block, d})});
  std::string vb = emit.node(
      "Reshape", {emit.node("Pad", {v, seqPads}),
                  emit.constI64({0, 0, -1, block, dv})});
  // [B, H, D, S] -> [B, H, D, nb, b] -> [B, H, nb, D, b].
  std::string ktb = emit.node(
      "Reshape", {emit.node("Pad", {kt, padsFor({0, 0, 0, 0, 0, 0, 0}, true)}),
                  emit.constI64({0, 0, d, -1, block})});
  ktb = emit.node("Transpose", {ktb}, [](onnx::NodeProto &n) {
    Emitter::intsAttr(n, "perm", {0, 1, 3, 2, 4});
  });
  if (windowed) {
    ktb = emit.node("Concat", {previousBlock(ktb, 2, 5), ktb},
                    [](onnx::NodeProto &n) { Emitter::intAttr(n, "axis", 4); });
    vb = emit.node("Concat", {previousBlock(vb, 2, 5), vb},
                   [](onnx::NodeProto &n) { Emitter::intAttr(n, "axis", 3); });
  }
  std::string scores = emit.node("MatMul", {qb, ktb});

  // The layer's own scale / mask / cast chain, on blocked operands.
  for (auto [idx, k] : layer.chain) {
    const onnx::NodeProto &orig = graph.node(idx);
    onnx::NodeProto copy = orig;
    for (int i = 0; i < copy.input_size(); ++i) {
      if (i == k) {
        copy.set_input(i, scores);
        continue;
      }
      FailureOr<std::string> blocked = blockOperand(orig.input(i));
      if (failed(blocked))
        return failure();
      copy.set_input(i, *blocked);
    }
    std::string out = emit.node(orig.op_type(), {}, {});
    onnx::NodeProto &placed = emit.nodes.back();
    std::string name = placed.name();
    placed = copy;
    placed.set_name(name);
    placed.clear_output();
    placed.add_output(out);
    scores = out;
  }
  // Keys past the sequence (the padding) get -inf: they must lose even
  // against keys the model masked with float-min (rows of padded tokens).
  FailureOr<RankedTensorType> sTy =
      typeOf(graph.node(layer.softmax).input(0));
  if (failed(sTy))
    return failure();
  int32_t et = onnxFloatType(sTy->getElementType());
  if (!et)
    return error() << "unsupported score type " << sTy->getElementType();
  std::string padded = emit.node("Add", {seq1, pad});
  std::string axis0 = emit.constI64({0});
  std::string zero = emit.constFloat(0.0, et);
  std::string ninf =
      emit.constFloat(-std::numeric_limits<double>::infinity(), et);
  if (!windowed) {
    std::string positions = emit.node(
        "Range", {emit.constI64({0}, true),
                  emit.node("Squeeze", {padded, axis0}),
                  emit.constI64({1}, true)});
    std::string real = emit.node("Less", {positions, seq1});
    std::string keyMask = emit.node("Where", {real, zero, ninf});
    keyMask = emit.node("Reshape", {keyMask, emit.constI64({-1, 1, block})});
    scores = emit.node("Add", {scores, keyMask});
    if (op.getCausal()) {
      // The op's causal flag, exactly: -inf above the diagonal of each
      // (square) block, also where the model's own mask only adds
      // float-min there.
      std::string one = emit.constI64({1}, true);
      std::string idx = emit.node(
          "Range", {emit.constI64({0}, true), emit.constI64({block}, true),
                    one});
      std::string above = emit.node(
          "Greater", {emit.node("Unsqueeze", {idx, axis0}),
                      emit.node("Unsqueeze", {idx, emit.constI64({1})})});
      scores = emit.node("Add",
                         {scores, emit.node("Where", {above, ninf, zero})});
    }
  } else {
    // Key j of query block k sits at (k - 1) * W + j: it must exist
    // (0 <= pos < S) and lie in the causal window, W + i - j in [0, W).
    std::string one = emit.constI64({1}, true);
    std::string blocks = emit.node(
        "Range", {emit.constI64({0}, true),
                  emit.node("Squeeze", {nb, axis0}), one});
    std::string cols = emit.node(
        "Range", {emit.constI64({0}, true), emit.constI64({2 * block}, true),
                  one});
    std::string keyPos = emit.node(
        "Add",
        {emit.node("Mul", {emit.node("Sub", {emit.node("Unsqueeze",
                                                       {blocks, emit.constI64({1})}),
                                             one}),
                           emit.constI64({block}, true)}),
         emit.node("Unsqueeze", {cols, axis0})});
    std::string exists = emit.node(
        "And", {emit.node("GreaterOrEqual", {keyPos, emit.constI64({0}, true)}),
                emit.node("Less", {keyPos, seq1})});
    std::string keyMask = emit.node("Where", {exists, zero, ninf});
    keyMask = emit.node("Unsqueeze", {keyMask, emit.constI64({1})});
    std::string rows = emit.node(
        "Range", {emit.constI64({0}, true), emit.constI64({block}, true), one});
    std::string dist = emit.node(
        "Sub", {emit.node("Add", {emit.node("Unsqueeze",
                                            {rows, emit.constI64({1})}),
                                  emit.constI64({block}, true)}),
                emit.node("Unsqueeze", {cols, axis0})});
    std::string inWindow = emit.node(
        "And", {emit.node("GreaterOrEqual", {dist, emit.constI64({0}, true)}),
                emit.node("Less", {dist, emit.constI64({block}, true)})});
    std::string windowMask = emit.node("Where", {inWindow, zero, ninf});
    scores = emit.node("Add", {emit.node("Add", {scores, keyMask}),
                               windowMask});
  }
  std::string probs = emit.node("Softmax", {scores}, [](onnx::NodeProto &n) {
    Emitter::intAttr(n, "axis", -1);
  });
  for (int idx : layer.post) {
    onnx::NodeProto copy = graph.node(idx);
    std::string out = emit.node("Cast", {probs});
    onnx::NodeProto &placed = emit.nodes.back();
    std::string name = placed.name();
    copy.set_input(0, probs);
    placed = copy;
    placed.set_name(name);
    placed.clear_output();
    placed.add_output(out);
    probs = out;
  }
  std::string ob = emit.node("MatMul", {probs, vb});
  std::string o = emit.node("Reshape", {ob, emit.constI64({0, 0, -1, dv})});
  // Back to the sequence length, under the original output's name.
  o = emit.node("Slice", {o, emit.constI64({0}), seq1, emit.constI64({2})});
  emit.nodes.back().set_output(0, pv.output(0));
  return success();
}

LogicalResult LayerExporter::emitWindowMask() {
  const onnx::NodeProto &sm = graph.node(layer.softmax);
  FailureOr<RankedTensorType> sTy = typeOf(sm.input(0));
  if (failed(sTy))
    return failure();
  int32_t et = onnxFloatType(sTy->getElementType());
  if (!et)
    return error() << "unsupported score type " << sTy->getElementType();
  // positions: query i at i + kv - q, key j; keep |d| < W or 0 <= d < W.
  std::string scores = sm.input(0);
  std::string shape = emit.node("Shape", {scores});
  std::string qn = emit.node("Gather", {shape, emit.constI64({2}, true)});
  std::string kn = emit.node("Gather", {shape, emit.constI64({3}, true)});
  std::string one = emit.constI64({1}, true), zero = emit.constI64({0}, true);
  std::string qi = emit.node(
      "Add", {emit.node("Range", {zero, qn, one}), emit.node("Sub", {kn, qn})});
  std::string kj = emit.node("Range", {zero, kn, one});
  std::string dist = emit.node(
      "Sub", {emit.node("Unsqueeze", {qi, emit.constI64({1})}),
              emit.node("Unsqueeze", {kj, emit.constI64({0})})});
  int64_t w = op.getSpan().getSize();
  std::string keep = emit.node("And", {
      emit.node("Less", {dist, emit.constI64({w}, true)}),
      emit.node("Greater", {dist, emit.constI64({op.getCausal() ? -1 : -w},
                                                true)})});
  std::string mask = emit.node(
      "Where", {keep, emit.constFloat(0.0, et),
                emit.constFloat(-std::numeric_limits<double>::infinity(), et)});
  std::string masked = emit.node("Add", {scores, mask});
  onnx::NodeProto copy = sm;
  copy.set_input(0, masked);
  emit.nodes.push_back(copy);
  return success();
}

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
    float scale = 1.0f / std::sqrt(static_cast<float>(d));
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

LogicalResult LayerExporter::run(SmallVectorImpl<int> &removed, int &anchor,
                                 std::vector<onnx::NodeProto> &added) {
  // A layer imported from an opset-23 Attention node is that node.
  if (auto name = dyn_cast<NameLoc>(op.getLoc())) {
    for (int i = 0, e = graph.node_size(); i < e; ++i) {
      if (graph.node(i).name() != name.getName().str() ||
          graph.node(i).op_type() != "Attention")
        continue;
      if (op.getSpan().getKind() != SpanKind::Block)
        return error() << "window spans of Attention nodes are not "
                          "supported yet";
      block = op.getSpan().getSize();
      if (failed(emitBlockedAttentionNode(i)))
        return failure();
      removed.push_back(i);
      anchor = i;
      added = std::move(emit.nodes);
      return success();
    }
  }
  if (failed(findNodes()))
    return failure();
  SpanAttr span = op.getSpan();
  FailureOr<RankedTensorType> qTy = typeOf(graph.node(layer.qk).input(0));
  if (failed(qTy))
    return failure();
  seq = qTy->getDimSize(2);
  block = span.getSize();
  // Blocks, or a causal window as blocks of W that also see the previous
  // block.
  if (span.getKind() == SpanKind::Block || op.getCausal()) {
    windowed = span.getKind() == SpanKind::Window;
    if (failed(emitBlocked()))
      return failure();
    removed.push_back(layer.qk);
    for (auto [idx, k] : layer.chain)
      removed.push_back(idx);
    removed.push_back(layer.softmax);
    llvm::append_range(removed, layer.post);
    removed.push_back(layer.pv);
    anchor = layer.pv;
  } else {
    op.emitWarning() << "layer " << op.getLayer().value_or(-1)
                     << ": a bidirectional window span is exported as an "
                        "added dense mask; onnxruntime still computes every "
                        "pair";
    if (failed(emitWindowMask()))
      return failure();
    removed.push_back(layer.softmax);
    anchor = layer.softmax;
  }
  added = std::move(emit.nodes);
  return success();
}

} // namespace

LogicalResult mlir::masformer::exportSpansToONNX(
    ModuleOp module, onnx::ModelProto &model,
    const ONNXExportOptions &options) {
  if (!options.valueTypes)
    return emitError(module.getLoc())
           << "ONNX export needs the tensor types of the import";
  int64_t opset = 0;
  for (const onnx::OperatorSetIdProto &o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx")
      opset = o.version();
  onnx::GraphProto &graph = *model.mutable_graph();
  // Replacements are computed against the original node indices, then
  // applied in one pass.
  llvm::DenseMap<int, std::vector<onnx::NodeProto>> insertAt;
  llvm::DenseSet<int> removed;
  bool failedAny = false;
  module.walk([&](AttentionOp op) {
    if (op.getSpan().isFull())
      return;
    if (opset < 13) {
      op.emitError() << "ONNX export of spans needs opset >= 13, the model "
                        "has "
                     << opset;
      failedAny = true;
      return;
    }
    LayerExporter layer(op, graph, *options.valueTypes);
    SmallVector<int> gone;
    int anchor = -1;
    std::vector<onnx::NodeProto> added;
    if (failed(layer.run(gone, anchor, added))) {
      failedAny = true;
      return;
    }
    removed.insert(gone.begin(), gone.end());
    auto &slot = insertAt[anchor];
    for (onnx::NodeProto &n : added)
      slot.push_back(std::move(n));
  });
  if (failedAny)
    return failure();
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  nodes.Swap(graph.mutable_node());
  for (int i = 0, e = nodes.size(); i < e; ++i) {
    auto it = insertAt.find(i);
    if (it != insertAt.end())
      for (onnx::NodeProto &n : it->second)
        *graph.add_node() = std::move(n);
    if (!removed.contains(i))
      *graph.add_node() = std::move(*nodes.Mutable(i));
  }
  return success();
}

LogicalResult mlir::masformer::writeONNXFile(const onnx::ModelProto &model,
                                             StringRef path,
                                             MLIRContext *context) {
  std::string bytes;
  if (!model.SerializeToString(&bytes))
    return emitError(UnknownLoc::get(context))
           << "cannot serialize the ONNX model (over 2 GB? use external "
              "data)";
  std::error_code ec;
  llvm::ToolOutputFile out(path, ec, llvm::sys::fs::OF_None);
  if (ec)
    return emitError(UnknownLoc::get(context))
           << "cannot write '" << path << "': " << ec.message();
  out.os() << bytes;
  out.os().flush();
  if (out.os().has_error())
    return emitError(UnknownLoc::get(context))
           << "cannot write '" << path << "'";
  out.keep();
  return success();
}
