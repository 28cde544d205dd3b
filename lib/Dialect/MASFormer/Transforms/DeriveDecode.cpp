//===- DeriveDecode.cpp - A decode entry for a causal decoder ---*- C++ -*-===//
//
// @decode is @main with four changes (docs/generate.md):
//   - positions start at `past_length`: every position the model computes
//     from the sequence size (a Range over it, a slice of a position table
//     taken from 0) is shifted by it, and a position_ids input becomes
//     past_length + 0..new-1;
//   - each attention layer's keys and values live in cache buffers that
//     the entry updates in place: [batch, kv_heads, capacity, head_dim],
//     the kept positions at rows [start, start + rows) of each head; the
//     new keys and values are written after them and the attention reads
//     the run [start, start + rows + new) (no copy of the cache);
//   - masks are dropped: a mask is accepted only when, for unpadded input
//     (attention_mask all ones), it is zero on every pair the layer's
//     causality and model window keep (probed like the raise's causal
//     masks), so the span and causality compute the same thing without it;
//   - attention_mask disappears (generation runs unpadded sequences).
// A layer's span then aligns its queries to the end of its cached keys,
// which is exact as long as the runtime keeps, per layer, the keys the span
// can reach (kCacheSpanAttrName) with block-aligned starts.
//
//===----------------------------------------------------------------------===//

#include "masformer/Dialect/MASFormer/Transforms/DeriveDecode.h"
#include "AttentionMatchers.h"
#include "LastRows.h"
#include "masformer/Dialect/MASFormer/IR/MASFormerOps.h"
#include "masformer/Dialect/MASFormer/Transforms/Passes.h"
#include "masformer/Utils/IRBuilders.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;
using namespace mlir::masformer;

namespace {

constexpr StringLiteral kNameAttr = "onnx.name";
constexpr StringLiteral kDimsAttr = "onnx.dims";

StringRef argName(func::FuncOp f, unsigned i) {
  auto a = f.getArgAttrOfType<StringAttr>(i, kNameAttr);
  return a ? a.getValue() : StringRef();
}

/// The inputs of a causal LM that generation knows how to feed.
struct LMInputs {
  int ids = -1, mask = -1, positions = -1;
};

FailureOr<LMInputs> classifyInputs(func::FuncOp main, std::string &why) {
  LMInputs in;
  for (unsigned i = 0; i < main.getNumArguments(); ++i) {
    StringRef name = argName(main, i);
    auto tt = dyn_cast<RankedTensorType>(main.getArgument(i).getType());
    bool tokens = tt && tt.getRank() == 2 && isa<IntegerType>(tt.getElementType());
    int *slot = name == "input_ids"        ? &in.ids
                : name == "attention_mask" ? &in.mask
                : name == "position_ids"   ? &in.positions
                                           : nullptr;
    if (!slot || !tokens) {
      std::string shown = name.empty() ? "#" + std::to_string(i) : name.str();
      why = "input '" + shown +
            "': a decode entry takes input_ids, attention_mask and "
            "position_ids, each [batch, sequence] integers (a model "
            "exported with a KV cache has one of its own)";
      return failure();
    }
    *slot = i;
  }
  if (in.ids < 0) {
    why = "the model has no input 'input_ids'";
    return failure();
  }
  auto ids = cast<RankedTensorType>(main.getArgument(in.ids).getType());
  if (!ids.isDynamicDim(1)) {
    why = "input 'input_ids' has a fixed sequence length (" +
          std::to_string(ids.getDimSize(1)) +
          "): a decode entry needs it dynamic (compile without "
          "--input-shape for it)";
    return failure();
  }
  return in;
}

std::string layerName(AttentionOp op, unsigned index) {
  std::optional<uint64_t> l = op.getLayer();
  return "layer " + std::to_string(l ? *l : index);
}

/// Whether `mask` of `op` is zero on every pair that causality and the
/// model's own window keep, for unpadded input. `mask` belongs to a clone
/// of @main whose attention_mask was replaced by ones.
bool maskVanishes(Value mask, SpanAttr modelSpan) {
  return probeMask(mask, [&](ArrayRef<int64_t> shape,
                             llvm::function_ref<double(int64_t)> at) {
    int64_t r = shape.size();
    int64_t q = r >= 2 ? shape[r - 2] : 1, kv = r >= 1 ? shape[r - 1] : 1;
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    for (int64_t i = 0; i < n; ++i) {
      int64_t key = i % kv, row = (i / kv) % q;
      // A row broadcast over the queries (q == 1) or a column broadcast
      // over the keys (kv == 1) serves pairs that some query keeps: then
      // it must be zero.
      bool kept = true;
      if (q > 1 && kv > 1) {
        int64_t pos = row + kv - q;
        kept = key <= pos && modelSpan.allows(pos, key, /*causal=*/true);
      }
      if (kept && at(i) != 0.0)
        return false;
    }
    return true;
  });
}

/// Whether `v` is tensor.dim(src, d), through index casts.
bool isDimOf(Value v, Value src, int64_t d) {
  while (auto c = v.getDefiningOp<arith::IndexCastOp>())
    v = c.getIn();
  auto dim = v.getDefiningOp<tensor::DimOp>();
  if (!dim || dim.getSource() != src)
    return false;
  std::optional<int64_t> i = dim.getConstantIndex();
  return i && *i == d;
}

/// Whether `v` depends on no function argument (weights and sizes of
/// constants only).
bool isInputIndependent(Value v) {
  SmallVector<Value> work = {v};
  llvm::DenseSet<Value> seen;
  while (!work.empty()) {
    Value x = work.pop_back_val();
    if (!seen.insert(x).second)
      continue;
    if (isa<BlockArgument>(x))
      return false;
    Operation *op = x.getDefiningOp();
    llvm::append_range(work, op->getOperands());
    // Values the op's regions capture from above.
    op->walk([&](Operation *inner) {
      if (inner != op)
        for (Value o : inner->getOperands())
          if (!op->isAncestor(o.getParentBlock()->getParentOp()))
            work.push_back(o);
    });
    if (seen.size() > 4096)
      return false;
  }
  return true;
}

/// The sizes of the loops of `g` that its (permutation-mapped) output
/// reads from a tensor.empty: loop d -> the size value, or null.
SmallVector<Value> loopSizes(linalg::GenericOp g) {
  SmallVector<Value> sizes(g.getNumLoops());
  AffineMap m = g.getIndexingMapsArray().back();
  auto empty = g.getDpsInits()[0].getDefiningOp<tensor::EmptyOp>();
  if (!m.isPermutation() || !empty)
    return sizes;
  SmallVector<OpFoldResult> mixed = empty.getMixedSizes();
  for (unsigned r = 0; r < m.getNumResults(); ++r)
    if (auto v = dyn_cast<Value>(mixed[r]))
      sizes[m.getDimPosition(r)] = v;
  return sizes;
}

/// A generic that computes its elements from their indices only (no
/// tensor operands, no reads): a Range, an iota, a position grid.
bool isIndexGenerator(linalg::GenericOp g) {
  if (g.getNumDpsInputs() != 0 || g.getNumDpsInits() != 1)
    return false;
  WalkResult w = g.getRegion().walk([](Operation *op) {
    return isa<tensor::ExtractOp>(op) ? WalkResult::interrupt()
                                      : WalkResult::advance();
  });
  return !w.wasInterrupted();
}

/// The smallest leading dimension of a constant table that a generic reads
/// with `positions` (an embedding of positions): the positions it has.
std::optional<int64_t> positionTableRows(Value positions) {
  std::optional<int64_t> rows;
  SmallVector<Value> work = {positions};
  llvm::DenseSet<Value> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (!seen.insert(v).second || seen.size() > 64)
      continue;
    for (Operation *user : v.getUsers()) {
      if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp, tensor::CastOp>(
              user)) {
        work.push_back(user->getResult(0));
        continue;
      }
      auto g = dyn_cast<linalg::GenericOp>(user);
      if (!g)
        continue;
      g.getRegion().walk([&](tensor::ExtractOp e) {
        auto t = dyn_cast<RankedTensorType>(e.getTensor().getType());
        if (t && t.getRank() >= 1 && !t.isDynamicDim(0) &&
            matchPattern(e.getTensor(), m_Constant()))
          rows = std::min(rows.value_or(t.getDimSize(0)), t.getDimSize(0));
      });
    }
  }
  return rows;
}

/// The span of keys a layer's cache keeps: the op's span, or for per-head
/// spans one that covers every head's.
SpanAttr cacheSpan(AttentionOp op) {
  MLIRContext *ctx = op.getContext();
  if (!op.hasHeadSpans())
    return op.getSpan();
  std::optional<SpanAttr> merged;
  for (Attribute a : op.getHeadSpansAttr()) {
    auto s = cast<SpanAttr>(a);
    if (!merged) {
      merged = s;
      continue;
    }
    if (merged->getKind() != s.getKind() ||
        (s.getKind() == SpanKind::Block && s.getSize() != merged->getSize()))
      return SpanAttr::get(ctx, SpanKind::Full);
    if (s.isFull())
      continue;
    merged = SpanAttr::get(ctx, s.getKind(),
                           std::max(s.getSize(), merged->getSize()),
                           std::max(s.getSink(), merged->getSink()));
  }
  return merged ? *merged : SpanAttr::get(ctx, SpanKind::Full);
}

/// A copy of `dims` (an onnx.dims array) with `from` renamed `to`.
ArrayAttr renameDim(ArrayAttr dims, StringRef from, StringRef to) {
  if (!dims)
    return dims;
  SmallVector<Attribute> out;
  for (Attribute a : dims) {
    auto s = dyn_cast<StringAttr>(a);
    out.push_back(s && s.getValue() == from ? StringAttr::get(a.getContext(), to)
                                            : a);
  }
  return ArrayAttr::get(dims.getContext(), out);
}

} // namespace

LogicalResult
mlir::masformer::deriveDecodeEntry(ModuleOp module, std::string &why,
                                   int64_t bf16CacheHeadDimMultiple) {
  auto main = module.lookupSymbol<func::FuncOp>("main");
  if (!main || main.isExternal()) {
    why = "the module has no @main";
    return failure();
  }
  if (module.lookupSymbol(kDecodeFuncName)) {
    why = "the module already has a @decode";
    return failure();
  }
  FailureOr<LMInputs> in = classifyInputs(main, why);
  if (failed(in))
    return failure();
  if (auto coupled = main->getAttrOfType<StringAttr>(kCrossPositionAttrName)) {
    why = coupled.str();
    return failure();
  }
  SmallVector<AttentionOp> mainOps;
  main.walk([&](AttentionOp op) { mainOps.push_back(op); });
  if (mainOps.empty()) {
    why = "the model has no attention layer";
    return failure();
  }
  for (auto [i, op] : llvm::enumerate(mainOps)) {
    if (!op.getCausal()) {
      why = layerName(op, i) +
            " is not causal: only a causal decoder generates";
      return failure();
    }
    if (op.getQueryType().getDimSize(2) != op.getKeyType().getDimSize(2) ||
        op.getQueryType().isDynamicDim(2) != op.getKeyType().isDynamicDim(2)) {
      why = layerName(op, i) + " has other keys than its queries";
      return failure();
    }
    if (op.getRowOffset()) {
      why = layerName(op, i) +
            " starts its batch rows at positions of their own (a model "
            "with its own KV cache)";
      return failure();
    }
  }

  // The masks, on a scratch copy of @main whose attention_mask is ones.
  {
    IRMapping map;
    auto scratch = cast<func::FuncOp>(main->clone(map));
    llvm::scope_exit eraseScratch([&] { scratch.erase(); });
    if (in->mask >= 0) {
      Block &entry = scratch.getBody().front();
      OpBuilder b(&entry, entry.begin());
      Location loc = scratch.getLoc();
      BlockArgument ids = scratch.getArgument(in->ids);
      BlockArgument mask = scratch.getArgument(in->mask);
      auto mt = cast<RankedTensorType>(mask.getType());
      SmallVector<Value> dyn;
      for (int64_t d = 0; d < 2; ++d)
        if (mt.isDynamicDim(d))
          dyn.push_back(tensor::DimOp::create(b, loc, ids, d));
      Value init = tensor::EmptyOp::create(b, loc, mt.getShape(),
                                           mt.getElementType(), dyn);
      Value one = arith::ConstantOp::create(
          b, loc, b.getIntegerAttr(mt.getElementType(), 1));
      Value ones = linalg::FillOp::create(b, loc, one, init).getResult(0);
      mask.replaceAllUsesWith(ones);
    }
    for (auto [i, op] : llvm::enumerate(mainOps)) {
      if (!op.getMask())
        continue;
      Value m = map.lookup(op.getMask());
      if (!maskVanishes(m, getModelSpan(op))) {
        why = layerName(op, i) +
              "'s mask is more than causal (or the model's window) masking "
              "of unpadded input (a position bias such as ALiBi?): a decode "
              "entry cannot drop it";
        return failure();
      }
    }
  }

  // @decode.
  OpBuilder mb(module.getContext());
  mb.setInsertionPointAfter(main);
  auto decode = cast<func::FuncOp>(mb.clone(*main));
  decode.setName(kDecodeFuncName);
  auto fail = [&](std::string message) {
    why = std::move(message);
    decode.erase();
    return failure();
  };
  MLIRContext *ctx = module.getContext();
  Location loc = decode.getLoc();
  auto i64 = IntegerType::get(ctx, 64);
  auto idsDims = decode.getArgAttrOfType<ArrayAttr>(in->ids, kDimsAttr);
  StringRef seqName = "sequence", batchName = "batch";
  if (idsDims && idsDims.size() == 2) {
    if (auto s = dyn_cast<StringAttr>(idsDims[0]))
      batchName = s.getValue();
    if (auto s = dyn_cast<StringAttr>(idsDims[1]))
      seqName = s.getValue();
  }
  std::string seqNameStr = seqName.str(), batchNameStr = batchName.str();

  // past_length, after input_ids.
  unsigned pastArg = decode.getNumArguments();
  if (failed(decode.insertArgument(
          pastArg, RankedTensorType::get({}, i64),
          DictionaryAttr::get(
              ctx, {NamedAttribute(StringAttr::get(ctx, kNameAttr),
                                   StringAttr::get(ctx, "past_length")),
                    NamedAttribute(StringAttr::get(ctx, kDimsAttr),
                                   ArrayAttr::get(ctx, {}))}),
          loc)))
    return fail("internal error: cannot add past_length");
  Block &entry = decode.getBody().front();
  OpBuilder b(&entry, entry.begin());
  BlockArgument ids = decode.getArgument(in->ids);
  Value past = arith::IndexCastOp::create(
      b, loc, b.getIndexType(),
      tensor::ExtractOp::create(b, loc, decode.getArgument(pastArg),
                                ValueRange{}));
  Value batch = tensor::DimOp::create(b, loc, ids, 0);
  Value newCount = tensor::DimOp::create(b, loc, ids, 1);
  auto isSeq = [&](Value v) {
    if (!v)
      return false;
    if (isDimOf(v, ids, 1))
      return true;
    for (int a : {in->mask, in->positions})
      if (a >= 0 && isDimOf(v, decode.getArgument(a), 1))
        return true;
    return false;
  };

  // Positions: every index generator over the sequence, and every slice
  // of an input-independent table from position 0 over the sequence.
  unsigned shifted = 0;
  std::optional<int64_t> maxLength;
  auto noteRows = [&](std::optional<int64_t> rows) {
    if (rows)
      maxLength = std::min(maxLength.value_or(*rows), *rows);
  };
  SmallVector<linalg::GenericOp> generators;
  decode.walk([&](linalg::GenericOp g) {
    if (isIndexGenerator(g))
      generators.push_back(g);
  });
  for (linalg::GenericOp g : generators) {
    SmallVector<Value> sizes = loopSizes(g);
    bool any = false;
    g.getRegion().walk([&](linalg::IndexOp idx) {
      if (idx.getDim() >= sizes.size() || !isSeq(sizes[idx.getDim()]))
        return;
      OpBuilder ib(idx);
      ib.setInsertionPointAfter(idx);
      auto add = arith::AddIOp::create(ib, idx.getLoc(), idx, past);
      idx.getResult().replaceAllUsesExcept(add, add);
      any = true;
    });
    if (any) {
      ++shifted;
      noteRows(positionTableRows(g.getResult(0)));
    }
  }
  SmallVector<tensor::ExtractSliceOp> slices;
  decode.walk([&](tensor::ExtractSliceOp s) { slices.push_back(s); });
  for (tensor::ExtractSliceOp s : slices) {
    SmallVector<OpFoldResult> offsets = s.getMixedOffsets();
    SmallVector<OpFoldResult> sizes = s.getMixedSizes();
    bool changed = false;
    for (size_t d = 0; d < sizes.size(); ++d) {
      auto size = dyn_cast<Value>(sizes[d]);
      if (!isSeq(size) || !isConstantIntValue(offsets[d], 0))
        continue;
      if (!isInputIndependent(s.getSource()))
        break;
      offsets[d] = past;
      changed = true;
      auto st = s.getSourceType();
      if (!st.isDynamicDim(d))
        noteRows(st.getDimSize(d));
    }
    if (!changed)
      continue;
    OpBuilder sb(s);
    auto ns = tensor::ExtractSliceOp::create(sb, s.getLoc(), s.getType(),
                                             s.getSource(), offsets, sizes,
                                             s.getMixedStrides());
    s.replaceAllUsesWith(ns.getResult());
    s.erase();
    ++shifted;
  }

  // position_ids: past_length + 0..new-1 for every sequence.
  if (in->positions >= 0) {
    BlockArgument pos = decode.getArgument(in->positions);
    auto pt = cast<RankedTensorType>(pos.getType());
    SmallVector<Value> dyn;
    if (pt.isDynamicDim(0))
      dyn.push_back(batch);
    if (pt.isDynamicDim(1))
      dyn.push_back(newCount);
    Value init = tensor::EmptyOp::create(b, loc, pt.getShape(),
                                         pt.getElementType(), dyn);
    AffineMap id = b.getMultiDimIdentityMap(2);
    Value grid =
        linalg::GenericOp::create(
            b, loc, pt, ValueRange{}, ValueRange{init}, ArrayRef<AffineMap>{id},
            SmallVector<utils::IteratorType>(2, utils::IteratorType::parallel),
            [&](OpBuilder &nb, Location nl, ValueRange) {
              Value j = linalg::IndexOp::create(nb, nl, 1);
              Value p = arith::AddIOp::create(nb, nl, j, past);
              linalg::YieldOp::create(
                  nb, nl,
                  arith::IndexCastOp::create(nb, nl, pt.getElementType(), p)
                      .getResult());
            })
            .getResult(0);
    pos.replaceAllUsesWith(grid);
    ++shifted;
  }

  // attention_mask: ones (every mask it fed is dropped below).
  Value maskOnes;
  if (in->mask >= 0) {
    BlockArgument mask = decode.getArgument(in->mask);
    auto mt = cast<RankedTensorType>(mask.getType());
    SmallVector<Value> dyn;
    if (mt.isDynamicDim(0))
      dyn.push_back(batch);
    if (mt.isDynamicDim(1))
      dyn.push_back(newCount);
    Value init = tensor::EmptyOp::create(b, loc, mt.getShape(),
                                         mt.getElementType(), dyn);
    Value one = arith::ConstantOp::create(
        b, loc, b.getIntegerAttr(mt.getElementType(), 1));
    maskOnes = linalg::FillOp::create(b, loc, one, init).getResult(0);
    mask.replaceAllUsesWith(maskOnes);
  }

  // Keys and values: each layer's cache buffers, updated in place. A cache
  // argument is [batch, kv_heads, capacity, head_dim]; of each head's rows,
  // [start, start + rows) hold the kept positions (past.L.start and
  // past.L.rows). The new keys are written after them, and the attention
  // reads the run [start, start + rows + new): nothing of the cache is
  // copied, and the runtime finds the new keys already in its buffer.
  SmallVector<AttentionOp> ops;
  decode.walk([&](AttentionOp op) { ops.push_back(op); });
  auto ret = cast<func::ReturnOp>(decode.getBody().back().getTerminator());
  SmallVector<Value> results(ret.getOperands());
  SmallVector<DictionaryAttr> resultAttrs;
  for (unsigned r = 0; r < decode.getNumResults(); ++r) {
    NamedAttrList attrs(decode.getResultAttrDict(r));
    if (auto dims = attrs.get(kDimsAttr))
      attrs.set(kDimsAttr,
                renameDim(cast<ArrayAttr>(dims), seqNameStr, "new"));
    resultAttrs.push_back(attrs.getDictionary(ctx));
  }
  auto named = [&](StringRef name, ArrayAttr dims) {
    return SmallVector<NamedAttribute>{
        NamedAttribute(StringAttr::get(ctx, kNameAttr),
                       StringAttr::get(ctx, name)),
        NamedAttribute(StringAttr::get(ctx, kDimsAttr), dims)};
  };
  for (auto [l, op] : llvm::enumerate(ops)) {
    op.getMaskMutable().clear();
    std::string slot = "past." + std::to_string(l);
    auto kt = cast<RankedTensorType>(op.getKey().getType());
    auto vt = cast<RankedTensorType>(op.getValue().getType());
    if (kt.isDynamicDim(1) || kt.isDynamicDim(3) || vt.isDynamicDim(1) ||
        vt.isDynamicDim(3))
      return fail(layerName(op, l) +
                  " has a dynamic number of key/value heads or head size: a "
                  "cache needs them fixed");
    // The kept run: past.L.start and past.L.rows, scalars as past_length.
    SmallVector<Value> scalars;
    for (StringRef what : {".start", ".rows"}) {
      unsigned argIndex = decode.getNumArguments();
      if (failed(decode.insertArgument(
              argIndex, RankedTensorType::get({}, i64),
              DictionaryAttr::get(
                  ctx, named(slot + what.str(), ArrayAttr::get(ctx, {}))),
              loc)))
        return fail("internal error: cannot add a cache argument");
      scalars.push_back(arith::IndexCastOp::create(
          b, loc, b.getIndexType(),
          tensor::ExtractOp::create(b, loc, decode.getArgument(argIndex),
                                    ValueRange{})));
    }
    Value start = scalars[0], rows = scalars[1];
    // A bf16 cache where the attention will take bf16 keys and values.
    bool bf16Cache = bf16CacheHeadDimMultiple > 0 &&
                     takesBF16Operands(op, bf16CacheHeadDimMultiple);
    SpanAttr keep = cacheSpan(op);
    OpBuilder ob(op);
    Location ol = op.getLoc();
    AffineExpr s0, s1;
    bindSymbols(ctx, s0, s1);
    // The first row after the kept ones.
    OpFoldResult end =
        affine::makeComposedFoldedAffineApply(ob, ol, s0 + s1, {start, rows});
    for (int which = 0; which < 2; ++which) {
      Value kv = which == 0 ? op.getKey() : op.getValue();
      auto t = cast<RankedTensorType>(kv.getType());
      SmallVector<int64_t> cacheShape = {t.getDimSize(0), t.getDimSize(1),
                                         ShapedType::kDynamic, t.getDimSize(3)};
      Type element =
          bf16Cache ? Type(BFloat16Type::get(ctx)) : t.getElementType();
      auto cacheType = RankedTensorType::get(cacheShape, element);
      std::string name = slot + (which == 0 ? ".key" : ".value");
      SmallVector<NamedAttribute> argAttrs =
          named(name, ArrayAttr::get(ctx, {StringAttr::get(ctx, batchNameStr),
                                           StringAttr::get(ctx, ""),
                                           StringAttr::get(ctx, slot),
                                           StringAttr::get(ctx, "")}));
      argAttrs.push_back(
          NamedAttribute(StringAttr::get(ctx, kCacheSpanAttrName), keep));
      argAttrs.push_back(NamedAttribute(StringAttr::get(ctx, kInPlaceAttrName),
                                        UnitAttr::get(ctx)));
      unsigned argIndex = decode.getNumArguments();
      if (failed(decode.insertArgument(argIndex, cacheType,
                                       DictionaryAttr::get(ctx, argAttrs), ol)))
        return fail("internal error: cannot add a cache argument");
      Value cache = decode.getArgument(argIndex);
      auto dimOr = [&](Value v, int64_t d) -> OpFoldResult {
        auto vt = cast<RankedTensorType>(v.getType());
        if (!vt.isDynamicDim(d))
          return ob.getIndexAttr(vt.getDimSize(d));
        return tensor::DimOp::create(ob, ol, v, d).getResult();
      };
      OpFoldResult newLen = dimOr(kv, 2);
      OpFoldResult total = affine::makeComposedFoldedAffineApply(
          ob, ol, s0 + s1, {rows, newLen});
      SmallVector<OpFoldResult> ones(4, ob.getIndexAttr(1));
      OpFoldResult zero = ob.getIndexAttr(0);
      Value fresh = kv;
      if (bf16Cache)
        fresh = arith::TruncFOp::create(ob, ol, t.clone(element), kv);
      Value written = tensor::InsertSliceOp::create(
          ob, ol, fresh, cache, {zero, zero, end, zero},
          {dimOr(kv, 0), dimOr(kv, 1), newLen, dimOr(kv, 3)}, ones);
      Value run = tensor::ExtractSliceOp::create(
          ob, ol, written, {zero, zero, start, zero},
          {dimOr(kv, 0), dimOr(kv, 1), total, dimOr(kv, 3)}, ones);
      if (bf16Cache)
        run = arith::ExtFOp::create(
            ob, ol,
            cast<RankedTensorType>(run.getType()).clone(t.getElementType()),
            run);
      if (which == 0)
        op.getKeyMutable().assign(run);
      else
        op.getValueMutable().assign(run);
    }
  }
  ret->setOperands(results);
  SmallVector<Type> resultTypes;
  for (Value v : results)
    resultTypes.push_back(v.getType());
  decode.setFunctionType(
      FunctionType::get(ctx, decode.getArgumentTypes(), resultTypes));
  decode.setAllResultAttrs(resultAttrs);
  decode.setArgAttr(in->ids, kDimsAttr,
                    ArrayAttr::get(ctx, {StringAttr::get(ctx, batchNameStr),
                                         StringAttr::get(ctx, "new")}));

  // What the dropped masks computed goes away; then attention_mask must
  // have no other reader.
  Operation *keep = maskOnes ? maskOnes.getDefiningOp() : nullptr;
  auto eraseDead = [&] {
    for (bool erased = true; erased;) {
      erased = false;
      SmallVector<Operation *> dead;
      decode.walk([&](Operation *op) {
        if (op != keep && op != decode && isOpTriviallyDead(op))
          dead.push_back(op);
      });
      for (Operation *op : llvm::reverse(dead))
        if (op->use_empty()) {
          op->erase();
          erased = true;
        }
    }
  };
  eraseDead();
  if (maskOnes && !maskOnes.use_empty()) {
    Operation *user = *maskOnes.getUsers().begin();
    std::string at;
    llvm::raw_string_ostream os(at);
    os << user->getName() << " at " << user->getLoc();
    return fail("input 'attention_mask' is read by more than the attention "
                "masks (" +
                at + "): a decode entry cannot replace it");
  }
  if (keep) {
    keep->erase();
    keep = nullptr;
    eraseDead();
  }
  llvm::BitVector erase(decode.getNumArguments());
  for (int a : {in->mask, in->positions})
    if (a >= 0)
      erase.set(a);
  if (failed(decode.eraseArguments(erase)))
    return fail("internal error: cannot remove the mask inputs");
  if (!shifted)
    return fail("the model computes no positions from the sequence (no "
                "Range over it, no position table sliced by it, no "
                "position_ids input): a decode entry cannot place new tokens");
  // logits_rows: each per-position output holds only the last
  // logits_rows of the new positions (clamped to [1, new]), which the
  // slices carry up to the last op that reads every row: a prefill that
  // wants only the next token's logits skips the head's work on the others.
  SmallVector<std::pair<unsigned, int64_t>> perPosition;
  for (unsigned r = 0; r < decode.getNumResults(); ++r) {
    auto dims = decode.getResultAttrOfType<ArrayAttr>(r, kDimsAttr);
    auto rt = dyn_cast<RankedTensorType>(decode.getResultTypes()[r]);
    if (!dims || !rt || static_cast<int64_t>(dims.size()) != rt.getRank())
      continue;
    for (auto [d, a] : llvm::enumerate(dims))
      if (auto n = dyn_cast<StringAttr>(a); n && n.getValue() == "new")
        perPosition.push_back({r, static_cast<int64_t>(d)});
  }
  if (!perPosition.empty()) {
    unsigned rowsArg = decode.getNumArguments();
    if (failed(decode.insertArgument(
            rowsArg, RankedTensorType::get({}, i64),
            DictionaryAttr::get(
                ctx, named(kLogitsRowsName, ArrayAttr::get(ctx, {}))),
            loc)))
      return fail("internal error: cannot add logits_rows");
    OpBuilder rb(ret);
    Value asked = arith::IndexCastOp::create(
        rb, loc, rb.getIndexType(),
        tensor::ExtractOp::create(rb, loc, decode.getArgument(rowsArg),
                                  ValueRange{}));
    AffineExpr s0, s1;
    bindSymbols(ctx, s0, s1);
    auto indexMap = [&](AffineExpr e) { return AffineMap::get(0, 2, e, ctx); };
    for (auto [r, d] : perPosition) {
      Value out = ret.getOperand(r);
      auto rt = cast<RankedTensorType>(out.getType());
      SmallVector<OpFoldResult> offsets(rt.getRank(), rb.getIndexAttr(0));
      SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(rb, loc, out);
      SmallVector<OpFoldResult> ones(rt.getRank(), rb.getIndexAttr(1));
      // rows = min(max(asked, 1), new); from = new - rows.
      OpFoldResult n = sizes[d];
      Value nv = getValueOrCreateConstantIndexOp(rb, loc, n);
      Value one = arith::ConstantIndexOp::create(rb, loc, 1);
      Value rows = arith::MinSIOp::create(
          rb, loc, arith::MaxSIOp::create(rb, loc, asked, one), nv);
      offsets[d] = affine::makeComposedFoldedAffineApply(
          rb, loc, indexMap(s0 - s1), {n, OpFoldResult(rows)});
      sizes[d] = rows;
      auto slice =
          tensor::ExtractSliceOp::create(rb, loc, out, offsets, sizes, ones);
      slice->setAttr(kRowsSliceAttr, rb.getUnitAttr());
      ret->setOperand(r, slice.getResult());
    }
    SmallVector<Type> types(ret.getOperandTypes());
    decode.setFunctionType(
        FunctionType::get(ctx, decode.getArgumentTypes(), types));
    computeOnlySlices(decode);
    eraseDead();
  }
  // The runtime generates from f32 logits (the output named "logits", else
  // the first): a half-precision model's are widened, exactly, here.
  unsigned logitsResult = 0;
  for (unsigned r = 0; r < decode.getNumResults(); ++r)
    if (auto n = decode.getResultAttrOfType<StringAttr>(r, kNameAttr);
        n && n.getValue() == "logits")
      logitsResult = r;
  if (decode.getNumResults() > 0) {
    auto rt = dyn_cast<RankedTensorType>(decode.getResultTypes()[logitsResult]);
    if (rt && isa<FloatType>(rt.getElementType()) &&
        rt.getElementType().getIntOrFloatBitWidth() < 32) {
      OpBuilder rb(ret);
      Value wide = extendElements(rb, loc, ret.getOperand(logitsResult),
                                  rb.getF32Type());
      ret->setOperand(logitsResult, wide);
      SmallVector<Type> types(ret.getOperandTypes());
      decode.setFunctionType(
          FunctionType::get(ctx, decode.getArgumentTypes(), types));
    }
  }
  if (maxLength)
    decode->setAttr(kMaxLengthAttrName,
                    IntegerAttr::get(i64, static_cast<int64_t>(*maxLength)));
  decode->setAttr("masformer.decode_layers",
                  IntegerAttr::get(i64, static_cast<int64_t>(ops.size())));
  return success();
}

namespace mlir::masformer {
#define GEN_PASS_DEF_DERIVEDECODE
#include "masformer/Dialect/MASFormer/Transforms/Passes.h.inc"
} // namespace mlir::masformer

namespace {
struct DeriveDecode final : masformer::impl::DeriveDecodeBase<DeriveDecode> {
  using Base::Base;
  void runOnOperation() override {
    std::string why;
    if (failed(
            deriveDecodeEntry(getOperation(), why, bf16CacheHeadDimMultiple))) {
      getOperation().emitError() << "no decode entry: " << why;
      signalPassFailure();
    }
  }
};
} // namespace
