//===- ONNXExporter.cpp - Rewritten spans back into ONNX --------*- C++ -*-===//
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
// - window W, causal: the same with blocks of W that also see the previous
//   block; otherwise an added window mask before the softmax.
// - layers imported from opset-23 Attention nodes: see AttentionNode.cpp.
//
// This file finds the layers and applies the replacements; BlockedLayer.cpp
// and AttentionNode.cpp build them.
//
//===----------------------------------------------------------------------===//

#include "masformer/Export/ONNXExporter.h"
#include "masformer/Utils/OutputFile.h"

#include "LayerExport.h"
#include "masformer/Dialect/MASFormer/IR/MASFormerOps.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/FileSystem.h"

#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace mlir;
using namespace mlir::masformer;
using namespace mlir::masformer::detail;


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
  auto find = [&](const std::string &name) { return index.find(name, graph); };
  layer.qk = find(names[0]);
  layer.softmax = find(names[1]);
  layer.pv = find(names[2]);
  if (layer.qk < 0 || layer.softmax < 0 || layer.pv < 0)
    return error() << "nodes '" << names[0] << "', '" << names[1] << "', '"
                   << names[2] << "' are not all in the model";
  // The products: MatMul, or onnxruntime's FusedMatMul with transB and
  // alpha on Q*K^T (P*V's with neither).
  for (auto [idx, what] :
       {std::make_pair(layer.qk, "Q*K^T"), std::make_pair(layer.pv, "P*V")}) {
    const onnx::NodeProto &n = graph.node(idx);
    if (n.op_type() == "MatMul" &&
        (n.domain().empty() || n.domain() == "ai.onnx"))
      continue;
    bool fused = n.op_type() == "FusedMatMul" && n.domain() == "com.microsoft";
    float alpha = 1.0f;
    bool transB = false, other = false;
    for (const onnx::AttributeProto &a : n.attribute()) {
      if (a.name() == "alpha")
        alpha = a.f();
      else if (a.name() == "transB")
        transB = a.i() != 0;
      else if (a.i() != 0)
        other = true; // transA, transBatchA, transBatchB
    }
    bool isQK = idx == layer.qk;
    if (!fused || other || (!isQK && (transB || alpha != 1.0f)))
      return error() << what << " node '" << n.name() << "' ("
                     << (n.domain().empty() ? "" : n.domain() + ".")
                     << n.op_type()
                     << ") is not a MatMul the export can rewrite (a MatMul, "
                        "or a FusedMatMul with only transB and alpha on "
                        "Q*K^T)";
    if (isQK) {
      layer.qkTransB = transB;
      layer.qkAlpha = alpha;
    }
  }
  // The one consumer of `t`, or -1; with `shapes`, Shape nodes do not
  // count (they are recorded).
  auto next = [&](const std::string &t, bool shapes = false) -> int {
    auto it = index.consumers.find(t);
    if (it == index.consumers.end() || index.graphOutputs.contains(t))
      return -1;
    int found = -1;
    for (int c : it->second) {
      if (shapes && graph.node(c).op_type() == "Shape") {
        layer.shapeReaders.push_back(c);
        continue;
      }
      if (found >= 0)
        return -1;
      found = c;
    }
    return found;
  };
  std::string cur = graph.node(layer.qk).output(0);
  while (cur != graph.node(layer.softmax).input(0)) {
    int n = next(cur, /*shapes=*/true);
    static constexpr StringLiteral kChainOps[] = {
        "Mul", "Div", "Add", "Where", "Cast", "Reshape", "Tanh", "Max"};
    if (n < 0 || !llvm::is_contained(kChainOps, graph.node(n).op_type()) ||
        layer.chain.size() > 16)
      return error() << "the nodes between '" << names[0] << "' and '"
                     << names[1]
                     << "' are not a chain of Mul, Div, Add, "
                        "Where, Cast, Reshape, Tanh and Max";
    const onnx::NodeProto &node = graph.node(n);
    int k = -1;
    for (int i = 0; i < node.input_size(); ++i)
      if (node.input(i) == cur)
        k = i;
    layer.chain.push_back({n, k});
    if (node.op_type() == "Reshape" && (k != 0 || !isNeutralInChain(n, k)))
      return error() << "Reshape '" << node.name()
                     << "' between Q*K^T and the Softmax does not only split "
                        "the heads out of the batch or merge them into it";
    cur = node.output(0);
  }
  cur = graph.node(layer.softmax).output(0);
  while (cur != graph.node(layer.pv).input(0)) {
    // torch's SDPA export: Where(IsNaN(p), 0, p), zeros for the rows whose
    // every key is masked; the blocked softmax gets the same guard.
    if (std::optional<std::pair<int, int>> guard = nanGuard(cur)) {
      layer.post.append({guard->first, guard->second});
      cur = graph.node(guard->second).output(0);
      continue;
    }
    int n = next(cur);
    if (n < 0 || layer.post.size() > 4 ||
        (graph.node(n).op_type() != "Cast" &&
         !(graph.node(n).op_type() == "Reshape" && isNeutralInChain(n, 0))))
      return error() << "the nodes between '" << names[1] << "' and '"
                     << names[2]
                     << "' are not casts (and a Reshape that merges the "
                        "heads into the batch, and a Where(IsNaN(p), 0, p) "
                        "guard)";
    layer.post.push_back(n);
    cur = graph.node(n).output(0);
  }
  return success();
}

std::optional<std::pair<int, int>>
LayerExporter::nanGuard(const std::string &p) const {
  auto it = index.consumers.find(p);
  if (it == index.consumers.end() || it->second.size() != 2 ||
      index.graphOutputs.contains(p))
    return std::nullopt;
  int isNaN = -1, where = -1;
  for (int c : it->second) {
    const onnx::NodeProto &n = graph.node(c);
    if (n.op_type() == "IsNaN" && n.input_size() == 1)
      isNaN = c;
    else if (n.op_type() == "Where" && n.input_size() == 3 && n.input(2) == p &&
             n.input(0) != p && n.input(1) != p)
      where = c;
  }
  if (isNaN < 0 || where < 0)
    return std::nullopt;
  const std::string &flag = graph.node(isNaN).output(0);
  auto flagUsers = index.consumers.find(flag);
  if (graph.node(where).input(0) != flag ||
      flagUsers == index.consumers.end() || flagUsers->second.size() != 1 ||
      index.graphOutputs.contains(flag) ||
      !isZeroTensor(graph.node(where).input(1)))
    return std::nullopt;
  return std::make_pair(isNaN, where);
}

int LayerExporter::producerOf(const std::string &name) const {
  auto it = index.producers.find(name);
  return it == index.producers.end() ? -1 : it->second;
}

/// Whether every element of `t` is zero.
static bool isAllZero(const onnx::TensorProto &t) {
  if (t.has_raw_data())
    return llvm::all_of(t.raw_data(), [](char c) { return c == 0; });
  return llvm::all_of(t.float_data(), [](float f) { return f == 0.0f; }) &&
         llvm::all_of(t.int64_data(), [](int64_t v) { return v == 0; }) &&
         llvm::all_of(t.int32_data(), [](int32_t v) { return v == 0; }) &&
         llvm::all_of(t.double_data(), [](double v) { return v == 0.0; });
}

bool LayerExporter::isZeroTensor(const std::string &name, int depth) const {
  if (depth == 0)
    return false;
  for (const onnx::TensorProto &t : graph.initializer())
    if (t.name() == name)
      return t.data_location() != onnx::TensorProto::EXTERNAL && isAllZero(t);
  int p = producerOf(name);
  if (p < 0)
    return false;
  const onnx::NodeProto &n = graph.node(p);
  if (n.op_type() == "ConstantOfShape" || n.op_type() == "Constant") {
    for (const onnx::AttributeProto &a : n.attribute())
      if (a.name() == "value")
        return a.has_t() && isAllZero(a.t());
    return n.op_type() == "ConstantOfShape"; // the default value is 0
  }
  if (n.op_type() == "Mul")
    return llvm::any_of(n.input(), [&](const std::string &in) {
      return isZeroTensor(in, depth - 1);
    });
  if (n.op_type() == "Cast" || n.op_type() == "Expand" ||
      n.op_type() == "Reshape")
    return isZeroTensor(n.input(0), depth - 1);
  return false;
}

/// Whether `flat` ([B*H, S, T]) is `full` ([B, H, S, T]) with its heads
/// flattened into the batch; a dynamic batch or length matches a dynamic
/// one (the raise checked the reshape in the IR).
static bool flattensHeads(ArrayRef<int64_t> full, ArrayRef<int64_t> flat) {
  auto same = [](int64_t x, int64_t y) {
    return x == y || ShapedType::isDynamic(x) || ShapedType::isDynamic(y);
  };
  if (full.size() != 4 || flat.size() != 3 || ShapedType::isDynamic(full[1]))
    return false;
  bool batch = ShapedType::isDynamic(full[0]) ? ShapedType::isDynamic(flat[0])
                                              : flat[0] == full[0] * full[1];
  return batch && same(flat[1], full[2]) && same(flat[2], full[3]);
}

bool LayerExporter::isNeutralInChain(int index, int scoresInput) const {
  const onnx::NodeProto &n = graph.node(index);
  if (n.op_type() == "Add")
    return isZeroTensor(n.input(1 - scoresInput));
  if (n.op_type() != "Reshape" || scoresInput != 0)
    return false;
  // [B*H, S, T] -> [B, H, S, T], or back.
  auto in = types.find(n.input(0)), out = types.find(n.output(0));
  if (in == types.end() || out == types.end())
    return false;
  ArrayRef<int64_t> a = in->second.getShape(), b = out->second.getShape();
  return (a.size() == 3 && b.size() == 4 && flattensHeads(b, a)) ||
         (a.size() == 4 && b.size() == 3 && flattensHeads(a, b));
}

std::string LayerExporter::unflattenedHeads(const std::string &x) {
  int p = producerOf(x);
  if (p < 0 || graph.node(p).op_type() != "Reshape")
    return "";
  const std::string &src = graph.node(p).input(0);
  auto t = types.find(src), f = types.find(x);
  if (t == types.end() || f == types.end() || t->second.getRank() != 4)
    return "";
  return flattensHeads(t->second.getShape(), f->second.getShape()) ? src : "";
}

FailureOr<std::string>
LayerExporter::unflattenOperand(const std::string &name) {
  FailureOr<RankedTensorType> ty = typeOf(name);
  if (failed(ty))
    return failure();
  if (ty->getRank() != 3)
    return name;
  // Once per operand, whichever layout of the chain asks first.
  if (auto it = unflattened.find(name); it != unflattened.end())
    return it->second;
  int64_t heads = op.getQueryType().getDimSize(1);
  ArrayRef<int64_t> d = ty->getShape();
  std::string out;
  SmallVector<int64_t> shape;
  if (d[0] == 1) {
    out = emit.node("Unsqueeze", {name, emit.constI64({0})});
    shape = {1, 1, d[1], d[2]};
  } else if (ShapedType::isDynamic(d[0]) || d[0] % heads == 0) {
    std::string sizes = emit.node(
        "Concat",
        {emit.constI64({-1, heads}),
         emit.node("Slice", {emit.node("Shape", {name}), emit.constI64({1}),
                             emit.constI64({3}), emit.constI64({0})})},
        [](onnx::NodeProto &n) { Emitter::intAttr(n, "axis", 0); });
    out = emit.node("Reshape", {name, sizes});
    shape = {ShapedType::isDynamic(d[0]) ? ShapedType::kDynamic : d[0] / heads,
             heads, d[1], d[2]};
  } else {
    return error() << "operand '" << name << "' of type " << *ty
                   << " of scores with flattened heads does not have " << heads
                   << " heads per batch",
           failure();
  }
  localTypes[out] = RankedTensorType::get(shape, ty->getElementType());
  unflattened[name] = out;
  return out;
}

FailureOr<std::pair<std::string, std::string>> LayerExporter::scoreInputs() {
  if (scoreIn)
    return *scoreIn;
  const onnx::NodeProto &qk = graph.node(layer.qk);
  std::string q = qk.input(0), kt = qk.input(1);
  FailureOr<RankedTensorType> qTy = typeOf(q);
  if (failed(qTy))
    return failure();
  // FusedMatMul: alpha Q op(B), as (alpha Q) K^T.
  if (layer.qkTransB || layer.qkAlpha != 1.0f) {
    if (qTy->getRank() != 4)
      return error() << "a FusedMatMul Q*K^T with transB or alpha is "
                        "rewritten on 4-D operands only",
             failure();
    if (layer.qkTransB) {
      FailureOr<RankedTensorType> kTy = typeOf(kt);
      if (failed(kTy))
        return failure();
      std::string k = kt;
      kt = emit.node("Transpose", {k}, [](onnx::NodeProto &n) {
        Emitter::intsAttr(n, "perm", {0, 1, 3, 2});
      });
      ArrayRef<int64_t> ks = kTy->getShape();
      localTypes[kt] = RankedTensorType::get({ks[0], ks[1], ks[3], ks[2]},
                                             kTy->getElementType());
    }
    if (layer.qkAlpha != 1.0f) {
      FailureOr<int32_t> et = floatTypeOf(q);
      if (failed(et))
        return failure();
      std::string scaled =
          emit.node("Mul", {q, emit.constFloat(layer.qkAlpha, *et)});
      localTypes[scaled] = *qTy;
      q = scaled;
    }
    return *(scoreIn = std::make_pair(q, kt));
  }
  if (qTy->getRank() != 3)
    return *(scoreIn = std::make_pair(q, kt));
  // Heads flattened into the batch: Q = Reshape(Q4), K^T = Transpose(
  // Reshape(K4), [0, 2, 1]).
  std::string q4 = unflattenedHeads(q), k4;
  int t = producerOf(kt);
  if (t >= 0 && graph.node(t).op_type() == "Transpose") {
    const onnx::NodeProto &tr = graph.node(t);
    for (const onnx::AttributeProto &a : tr.attribute())
      if (a.name() == "perm" &&
          SmallVector<int64_t>(a.ints().begin(), a.ints().end()) ==
              SmallVector<int64_t>{0, 2, 1})
        k4 = unflattenedHeads(tr.input(0));
  }
  if (q4.empty() || k4.empty())
    return error() << "Q*K^T of rank 3 is not the product of Q and K "
                      "reshaped from [batch, heads, seq, head_dim]",
           failure();
  std::string kt4 = emit.node("Transpose", {k4}, [](onnx::NodeProto &n) {
    Emitter::intsAttr(n, "perm", {0, 1, 3, 2});
  });
  RankedTensorType kTy = types.lookup(k4);
  ArrayRef<int64_t> ks = kTy.getShape();
  localTypes[kt4] =
      RankedTensorType::get({ks[0], ks[1], ks[3], ks[2]}, kTy.getElementType());
  return *(scoreIn = std::make_pair(q4, kt4));
}

FailureOr<RankedTensorType> LayerExporter::typeOf(const std::string &name) {
  if (auto local = localTypes.find(name); local != localTypes.end())
    return local->second;
  auto it = types.find(name);
  if (it == types.end())
    return error() << "no static type is known for tensor '" << name << "'",
           failure();
  return it->second;
}

FailureOr<int32_t> LayerExporter::floatTypeOf(const std::string &name) {
  FailureOr<RankedTensorType> t = typeOf(name);
  if (failed(t))
    return failure();
  if (int32_t et = onnxFloatType(t->getElementType()))
    return et;
  return error() << "unsupported element type " << t->getElementType(),
         failure();
}

LogicalResult LayerExporter::run(
    SmallVectorImpl<int> &removed, int &anchor,
    std::vector<onnx::NodeProto> &added,
    std::vector<std::pair<int, std::vector<onnx::NodeProto>>> &elsewhere) {
  // A layer imported from an attention node (opset-23 Attention,
  // onnxruntime's com.microsoft Attention or MultiHeadAttention) is that
  // node.
  if (auto name = dyn_cast<NameLoc>(op.getLoc())) {
    int i = index.find(name.getName(), graph);
    const onnx::NodeProto *node = i < 0 ? nullptr : &graph.node(i);
    bool contrib = node && node->domain() == "com.microsoft" &&
                   (node->op_type() == "Attention" ||
                    node->op_type() == "MultiHeadAttention");
    if (node && node->domain() == "com.microsoft" &&
        node->op_type() == "GroupQueryAttention") {
      if (failed(emitGroupQueryAttentionNode(i)))
        return failure();
      removed.push_back(i);
      anchor = i;
      added = std::move(emit.nodes);
      return success();
    }
    bool standard = node && !contrib && node->op_type() == "Attention" &&
                    (node->domain().empty() || node->domain() == "ai.onnx");
    if (contrib || standard) {
      // Blocks fold into the batch (the node computes only them); windows,
      // sinks and per-head spans are the node's additive mask.
      if (op.hasHeadSpans() || op.getSpan().getKind() != SpanKind::Block ||
          op.getSpan().getSink() > 0) {
        if (failed(emitSpanBiasNode(i, contrib)))
          return failure();
      } else {
        block = op.getSpan().getSize();
        if (failed(contrib ? emitBlockedContribNode(i)
                           : emitBlockedAttentionNode(i)))
          return failure();
      }
      removed.push_back(i);
      anchor = i;
      added = std::move(emit.nodes);
      return success();
    }
  }
  if (failed(findNodes()))
    return failure();
  // A decoder exported with a KV cache attends its new queries to the
  // cache and the new keys: fewer queries than keys, which the blocked form
  // cannot take. Its nodes stay, and the span is a mask on the scores.
  if (auto cat = op.getKey().getDefiningOp<tensor::ConcatOp>();
      cat && cat.getDim() == 2) {
    if (op.hasHeadSpans())
      return error() << "per-head spans of a layer with a KV cache (keys "
                        "concatenated to a cache) are not supported yet";
    if (failed(emitDenseSpanMask()))
      return failure();
    removed.push_back(layer.softmax);
    anchor = layer.softmax;
    added = std::move(emit.nodes);
    return success();
  }
  SpanAttr span = op.getSpan();
  FailureOr<std::pair<std::string, std::string>> qk = scoreInputs();
  if (failed(qk))
    return failure();
  FailureOr<RankedTensorType> qTy = typeOf(qk->first);
  if (failed(qTy))
    return failure();
  seq = qTy->getDimSize(2);
  // Blocks, or windows as blocks of W that also see the previous block
  // (and the next one when not causal), with their sinks. Per-head spans:
  // grouped by span, each group blocked (or left dense when full).
  if (op.hasHeadSpans()) {
    if (failed(emitPerHeadBlocked()))
      return failure();
  } else {
    setSpan(span);
    if (failed(emitBlocked()))
      return failure();
  }
  // The whole attention core is replaced: Q*K^T, its chain, Softmax, the
  // casts after it and P*V.
  removed.push_back(layer.qk);
  for (auto [idx, k] : layer.chain)
    removed.push_back(idx);
  removed.push_back(layer.softmax);
  llvm::append_range(removed, layer.post);
  removed.push_back(layer.pv);
  anchor = layer.pv;
  added = std::move(emit.nodes);
  return replaceShapeReaders(removed, elsewhere);
}

LogicalResult LayerExporter::emitDenseSpanMask() {
  const onnx::NodeProto &softmax = graph.node(layer.softmax);
  const std::string &x = softmax.input(0);
  FailureOr<int32_t> et = scoreElementType();
  if (failed(et))
    return failure();
  SpanAttr span = op.getSpan();
  auto i64s = [&](ArrayRef<int64_t> v) { return emit.constI64(v); };
  auto scalar = [&](int64_t v) { return emit.constI64({v}, true); };
  // Queries i and keys j of the [.., S, T] scores; query i sits at position
  // i + T - S (queries aligned to the end of the keys).
  std::string shape = emit.node("Shape", {x});
  auto dim = [&](int64_t from, int64_t to) {
    return emit.node("Squeeze", {emit.node("Slice", {shape, i64s({from}),
                                                     i64s({to}), i64s({0})}),
                                 i64s({0})});
  };
  std::string s = dim(-2, -1), t = dim(-1, std::numeric_limits<int64_t>::max());
  std::string zero = scalar(0), one = scalar(1);
  std::string pos = emit.node(
      "Unsqueeze", {emit.node("Add", {emit.node("Range", {zero, s, one}),
                                      emit.node("Sub", {t, s})}),
                    i64s({1})});
  std::string key =
      emit.node("Unsqueeze", {emit.node("Range", {zero, t, one}), i64s({0})});
  std::string allowed;
  int64_t size = span.getSize();
  if (span.getKind() == SpanKind::Block) {
    allowed = emit.node("Equal", {emit.node("Div", {pos, scalar(size)}),
                                  emit.node("Div", {key, scalar(size)})});
  } else {
    std::string d = emit.node("Sub", {pos, key});
    allowed = op.getCausal()
                  ? emit.node("And", {emit.node("GreaterOrEqual", {d, zero}),
                                      emit.node("Less", {d, scalar(size)})})
                  : emit.node("Less", {emit.node("Abs", {d}), scalar(size)});
  }
  if (span.getSink() > 0)
    allowed = emit.node(
        "Or", {allowed, emit.node("Less", {key, scalar(span.getSink())})});
  if (op.getCausal())
    allowed = emit.node("And", {allowed, emit.node("LessOrEqual", {key, pos})});
  std::string mask = emit.node(
      "Where",
      {allowed, emit.constFloat(0.0, *et),
       emit.constFloat(-std::numeric_limits<double>::infinity(), *et)});
  onnx::NodeProto copy = softmax;
  copy.set_input(0, emit.node("Add", {x, mask}));
  std::string out = softmax.output(0);
  emitCopy(std::move(copy));
  emit.nodes.back().set_output(0, out);
  return success();
}

LogicalResult LayerExporter::replaceShapeReaders(
    SmallVectorImpl<int> &removed,
    std::vector<std::pair<int, std::vector<onnx::NodeProto>>> &elsewhere) {
  const onnx::NodeProto &qk = graph.node(layer.qk);
  FailureOr<RankedTensorType> scoresTy = typeOf(qk.output(0));
  FailureOr<RankedTensorType> aTy = typeOf(qk.input(0));
  FailureOr<RankedTensorType> bTy = typeOf(qk.input(1));
  if (failed(scoresTy) || failed(aTy) || failed(bTy))
    return failure();
  for (int idx : layer.shapeReaders) {
    const onnx::NodeProto &shape = graph.node(idx);
    FailureOr<RankedTensorType> readTy = typeOf(shape.input(0));
    if (failed(readTy))
      return failure();
    if (readTy->getShape() != scoresTy->getShape() ||
        aTy->getRank() != scoresTy->getRank() ||
        bTy->getRank() != scoresTy->getRank() || shape.attribute_size() > 0)
      return error() << "Shape node '" << shape.name()
                     << "' reads the scores in a form the export cannot "
                        "compute without them",
             failure();
    // [batch dims broadcast, A's rows, B's columns] of the MatMul A * B.
    Emitter e(emit.prefixOf() + "shape_" + std::to_string(idx) + "/");
    int64_t r = scoresTy->getRank();
    auto part = [&](const std::string &of, int64_t from, int64_t to) {
      return e.node("Slice", {e.node("Shape", {of}), e.constI64({from}),
                              e.constI64({to}), e.constI64({0})});
    };
    // (FusedMatMul with transB: B's columns are its rows.)
    int64_t bCol = layer.qkTransB ? r - 2 : r - 1;
    std::string batch = e.node(
        "Max", {part(qk.input(0), 0, r - 2), part(qk.input(1), 0, r - 2)});
    e.node("Concat",
           {batch, part(qk.input(0), r - 2, r - 1),
            part(qk.input(1), bCol, bCol + 1)},
           [](onnx::NodeProto &n) { Emitter::intAttr(n, "axis", 0); });
    e.nodes.back().set_output(0, shape.output(0));
    removed.push_back(idx);
    elsewhere.emplace_back(idx, std::move(e.nodes));
  }
  return success();
}

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
  const GraphIndex index(graph);
  // Replacements are computed against the original node indices, then
  // applied in one pass.
  llvm::DenseMap<int, std::vector<onnx::NodeProto>> insertAt;
  llvm::DenseSet<int> removed;
  bool failedAny = false;
  module.walk([&](AttentionOp op) {
    // Unchanged layers keep their nodes: a full one, or one whose span is
    // the window its model's mask already enforces.
    if (!op.hasSparseSpan() ||
        (!op.hasHeadSpans() && op.getSpan() == getModelSpan(op)))
      return;
    std::optional<ArrayAttr> heads = op.getHeadSpans();
    if (heads ? llvm::all_of(*heads,
                             [](Attribute a) {
                               return coversAnySequence(cast<SpanAttr>(a));
                             })
              : coversAnySequence(op.getSpan()))
      return;
    if (opset < 13) {
      op.emitError() << "ONNX export of spans needs opset >= 13, the model "
                        "has "
                     << opset;
      failedAny = true;
      return;
    }
    LayerExporter layer(op, graph, index, *options.valueTypes);
    SmallVector<int> gone;
    int anchor = -1;
    std::vector<onnx::NodeProto> added;
    std::vector<std::pair<int, std::vector<onnx::NodeProto>>> elsewhere;
    if (failed(layer.run(gone, anchor, added, elsewhere))) {
      failedAny = true;
      return;
    }
    removed.insert(gone.begin(), gone.end());
    auto &slot = insertAt[anchor];
    for (onnx::NodeProto &n : added)
      slot.push_back(std::move(n));
    for (auto &[at, nodes] : elsewhere)
      for (onnx::NodeProto &n : nodes)
        insertAt[at].push_back(std::move(n));
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
  return writeOutputAtomically(path, UnknownLoc::get(context),
                               [&](llvm::raw_ostream &os) {
                                 os << bytes;
                                 return success();
                               });
}
