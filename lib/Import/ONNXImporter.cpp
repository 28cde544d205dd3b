//===- ONNXImporter.cpp - ONNX models into MLIR -----------------*- C++ -*-===//
//
// The driver: reads the ModelProto, creates @main with one argument per
// graph input, imports initializers lazily (weights as dense_resource blobs
// when first used), runs one handler per node in graph order and returns the
// graph outputs.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

#include "masformer/Dialect/MASFormer/IR/MASFormerDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cstdio>
#include <cstring>

using namespace mlir;
using namespace mlir::masformer;

ONNXImporterImpl::ONNXImporterImpl(MLIRContext *ctx,
                                   const ONNXImportOptions &options,
                                   StringRef baseDir, StringRef sourceName)
    : builder(ctx), loc(UnknownLoc::get(ctx)), options(options),
      baseDir(baseDir.str()), sourceName(sourceName.str()) {
  registerElementwiseHandlers(handlers);
  registerTensorHandlers(handlers);
  registerIndexingHandlers(handlers);
  registerContractionHandlers(handlers);
  registerSearchHandlers(handlers);
  registerContribHandlers(handlers);
  registerQuantizedHandlers(handlers);
}

/// The key of `n`'s handler: its op type in the default domain,
/// "<domain>.<op type>" in another one (com.microsoft.Attention is not
/// ONNX's Attention).
static std::string opKey(const onnx::NodeProto &n) {
  if (n.domain().empty() || n.domain() == "ai.onnx")
    return n.op_type();
  return n.domain() + "." + n.op_type();
}

//===----------------------------------------------------------------------===//
// Diagnostics and attributes
//===----------------------------------------------------------------------===//

InFlightDiagnostic ONNXImporterImpl::error() {
  InFlightDiagnostic diag = emitError(loc);
  if (node)
    diag << "node '" << node->name() << "' (" << opKey(*node) << "): ";
  return diag;
}

static const onnx::AttributeProto *findAttr(const onnx::NodeProto &node,
                                            StringRef name) {
  for (const onnx::AttributeProto &a : node.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

std::optional<int64_t> ONNXImporterImpl::attrInt(StringRef name) {
  if (const onnx::AttributeProto *a = findAttr(*node, name))
    return a->i();
  return std::nullopt;
}

std::optional<float> ONNXImporterImpl::attrFloat(StringRef name) {
  if (const onnx::AttributeProto *a = findAttr(*node, name))
    return a->f();
  return std::nullopt;
}

std::optional<SmallVector<int64_t>>
ONNXImporterImpl::attrInts(StringRef name) {
  if (const onnx::AttributeProto *a = findAttr(*node, name))
    return SmallVector<int64_t>(a->ints().begin(), a->ints().end());
  return std::nullopt;
}

std::optional<std::string> ONNXImporterImpl::attrString(StringRef name) {
  if (const onnx::AttributeProto *a = findAttr(*node, name))
    return a->s();
  return std::nullopt;
}

const onnx::TensorProto *ONNXImporterImpl::attrTensor(StringRef name) {
  if (const onnx::AttributeProto *a = findAttr(*node, name))
    return a->has_t() ? &a->t() : nullptr;
  return nullptr;
}

LogicalResult ONNXImporterImpl::checkArity() {
  // Inputs (min, max; required ones may not be empty) and outputs (max) of
  // every supported op, so that handlers can index them freely. A variadic
  // op (Concat, Einsum) has no optional input: every one it lists is
  // required.
  struct Arity {
    int minIn, maxIn, maxOut;
    bool variadic = false;
  };
  static const llvm::StringMap<Arity> kArity = [] {
    llvm::StringMap<Arity> m;
    for (StringRef op : {"Add", "Sub", "Mul", "Div", "Mod", "Pow", "Max", "Min",
                         "And", "Or", "Equal", "Less", "LessOrEqual", "Greater",
                         "GreaterOrEqual", "MatMul"})
      m[op] = {2, 2, 1};
    for (StringRef op : {"Sqrt",     "Exp",
                         "Log",      "Erf",
                         "Tanh",     "Cos",
                         "Sin",      "Abs",
                         "Neg",      "Floor",
                         "Ceil",     "Round",
                         "Sign",     "Reciprocal",
                         "Sigmoid",  "Relu",
                         "Not",      "Cast",
                         "Identity", "Shape",
                         "IsNaN",    "IsInf",
                         "Flatten",  "Transpose",
                         "Softmax",  "ConstantOfShape"})
      m[op] = {1, 1, 1};
    m["Where"] = {3, 3, 1};
    m["Clip"] = {1, 3, 1};
    m["Constant"] = {0, 0, 1};
    m["Range"] = {3, 3, 1};
    m["Reshape"] = {2, 2, 1};
    m["Squeeze"] = {1, 2, 1};
    m["Unsqueeze"] = {1, 2, 1};
    m["Slice"] = {3, 5, 1};
    m["Split"] = {1, 2, 1 << 16};
    m["Concat"] = {1, 1 << 16, 1, /*variadic=*/true};
    m["Gather"] = {2, 2, 1};
    m["GatherElements"] = {2, 2, 1};
    m["GatherND"] = {2, 2, 1};
    m["Tile"] = {2, 2, 1};
    m["CumSum"] = {2, 2, 1};
    m["Conv"] = {2, 3, 1};
    m["Expand"] = {2, 2, 1};
    m["Trilu"] = {1, 2, 1};
    m["ScatterND"] = {3, 3, 1};
    m["NonZero"] = {1, 1, 1};
    m["TopK"] = {2, 2, 2};
    m["OneHot"] = {3, 3, 1};
    m["ScatterElements"] = {3, 3, 1};
    m["Gemm"] = {2, 3, 1};
    m["Einsum"] = {1, 1 << 16, 1, /*variadic=*/true};
    for (StringRef op :
         {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd",
          "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp"})
      m[op] = {1, 2, 1};
    for (StringRef op : {"ArgMax", "ArgMin"})
      m[op] = {1, 1, 1};
    m["LayerNormalization"] = {2, 3, 3};
    m["Attention"] = {3, 7, 4};
    m["Gelu"] = {1, 1, 1};
    m["SimplifiedLayerNormalization"] = {2, 2, 2};
    const std::string ms = "com.microsoft.";
    m[ms + "SkipLayerNormalization"] = {3, 5, 4};
    m[ms + "SkipSimplifiedLayerNormalization"] = {3, 4, 4};
    m[ms + "FastGelu"] = {1, 2, 1};
    m[ms + "BiasGelu"] = {2, 2, 1};
    m[ms + "Gelu"] = {1, 1, 1};
    m[ms + "QuickGelu"] = {1, 1, 1};
    m[ms + "EmbedLayerNormalization"] = {1, 9, 3};
    m[ms + "Attention"] = {2, 7, 2};
    m[ms + "MultiHeadAttention"] = {1, 10, 4};
    m[ms + "GroupQueryAttention"] = {1, 12, 4};
    m["DequantizeLinear"] = {2, 3, 1};
    m["QuantizeLinear"] = {2, 3, 1};
    m["DynamicQuantizeLinear"] = {1, 1, 3};
    m["MatMulInteger"] = {2, 4, 1};
    m[ms + "MatMulNBits"] = {3, 6, 1};
    m[ms + "DynamicQuantizeMatMul"] = {3, 5, 1};
    m[ms + "MatMulIntegerToFloat"] = {4, 7, 1};
    m[ms + "FusedMatMul"] = {2, 2, 1};
    m[ms + "GatherBlockQuantized"] = {3, 4, 1};
    return m;
  }();
  auto it = kArity.find(opKey(*node));
  if (it == kArity.end())
    return success();
  const Arity &a = it->second;
  int n = node->input_size();
  if (n < a.minIn || n > a.maxIn)
    return error() << "expects " << a.minIn
                   << (a.minIn == a.maxIn ? "" : " to ")
                   << (a.minIn == a.maxIn ? "" : std::to_string(a.maxIn))
                   << " inputs, got " << n;
  for (int i = 0, e = a.variadic ? n : a.minIn; i < e; ++i)
    if (node->input(i).empty())
      return error() << "required input " << i << " is missing";
  if (node->output_size() < 1 || node->output_size() > a.maxOut ||
      node->output(0).empty())
    return error() << "has " << node->output_size()
                   << " outputs; expects 1 to " << a.maxOut
                   << " with the first one named";
  return success();
}

LogicalResult ONNXImporterImpl::checkAttributes(ArrayRef<StringRef> known) {
  for (const onnx::AttributeProto &a : node->attribute())
    if (!llvm::is_contained(known, StringRef(a.name())))
      return error() << "unsupported attribute '" << a.name() << "'";
  return success();
}

bool ONNXImporterImpl::requestStaticDim(AffineExpr e, int64_t size) {
  auto sym = dyn_cast<AffineSymbolExpr>(e);
  if (!sym || sym.getPosition() >= symbolKeys.size() || size < 0 ||
      options.dimSizes.count(symbolKeys[sym.getPosition()]))
    return false;
  staticDimRequest = {symbolKeys[sym.getPosition()], size};
  return true;
}

FailureOr<int64_t> ONNXImporterImpl::normalizeAxis(int64_t axis,
                                                   int64_t rank) {
  if (axis < -rank || axis >= rank)
    return error() << "axis " << axis << " is out of range for rank " << rank;
  return axis < 0 ? axis + rank : axis;
}

LogicalResult ONNXImporterImpl::addInitializer(const onnx::TensorProto &t,
                                               StringRef name) {
  Entry entry;
  Type elemType = convertElementType(t.data_type());
  if (!elemType)
    return emitError(loc) << "initializer '" << t.name()
                          << "' has unsupported element type "
                          << onnxTypeName(t.data_type());
  SmallVector<int64_t> shape(t.dims().begin(), t.dims().end());
  if (isBadShape(shape))
    return emitError(loc) << "initializer '" << t.name()
                          << "' has a negative dimension or too many "
                             "elements";
  entry.type = RankedTensorType::get(shape, elemType);
  entry.isUnsigned = t.data_type() == onnx::TensorProto::UINT8;
  int64_t n = entry.type.getNumElements();
  // Integers, booleans and tiny float tensors take part in folding; weights
  // stay in the proto until an op uses them. The 8-bit weights of the
  // quantized ops (int8, packed int4) are not sizes or indices: on the host
  // each element would take 8 bytes. (Other 8-bit tensors, a uint8 causal
  // mask among them, still fold.)
  int64_t hostLimit = elemType.isInteger(8) && quantizedWeights.contains(name)
                          ? kMaxHostInt8Elements
                          : kMaxHostElements;
  bool host = (elemType.isIntOrIndex() && n <= hostLimit) ||
              n <= options.inlineConstantLimit;
  if (host) {
    FailureOr<HostTensor> ht = readHostTensor(t);
    if (failed(ht))
      return failure();
    entry.host = std::move(*ht);
  } else {
    entry.initializer = &t;
  }
  values[name] = std::move(entry);
  return success();
}

LogicalResult
ONNXImporterImpl::setTensorOutput(unsigned i, const onnx::TensorProto &t) {
  if (!hasOutput(i))
    return success();
  return addInitializer(t, node->output(i));
}

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

ONNXImporterImpl::Entry *ONNXImporterImpl::lookup(unsigned i) {
  if (!hasInput(i))
    return nullptr;
  auto it = values.find(node->input(i));
  return it == values.end() ? nullptr : &it->second;
}

RankedTensorType ONNXImporterImpl::inputType(unsigned i) {
  Entry *e = lookup(i);
  return e ? e->type : RankedTensorType();
}

SmallVector<AffineExpr> ONNXImporterImpl::inputDims(unsigned i) {
  Entry *e = lookup(i);
  assert(e && "input checked by the driver");
  if (!e->dims.empty())
    return e->dims;
  return staticDims(e->type);
}

SmallVector<AffineExpr> ONNXImporterImpl::staticDims(RankedTensorType type) {
  SmallVector<AffineExpr> dims;
  for (int64_t d : type.getShape())
    dims.push_back(cst(d));
  return dims;
}

SmallVector<int64_t>
ONNXImporterImpl::staticShape(ArrayRef<AffineExpr> dims) {
  SmallVector<int64_t> shape;
  for (AffineExpr e : dims) {
    auto c = dyn_cast<AffineConstantExpr>(e);
    shape.push_back(c ? c.getValue() : ShapedType::kDynamic);
  }
  return shape;
}

std::string ONNXImporterImpl::dimString(AffineExpr e) {
  std::string text;
  llvm::raw_string_ostream os(text);
  e.print(os);
  // s10 before s1.
  for (int64_t k = static_cast<int64_t>(symbolNames.size()) - 1; k >= 0;
       --k) {
    std::string sym = "s" + std::to_string(k);
    size_t pos;
    while ((pos = text.find(sym)) != std::string::npos)
      text.replace(pos, sym.size(), symbolNames[k]);
  }
  return text;
}

std::string ONNXImporterImpl::dimsString(ArrayRef<AffineExpr> dims) {
  std::string text = "[";
  for (auto [i, e] : llvm::enumerate(dims))
    text += (i ? ", " : "") + dimString(e);
  return text + "]";
}

AffineExpr ONNXImporterImpl::newSymbol(Value v) {
  symbolNames.push_back("size of a computed value");
  symbolKeys.push_back("?");
  symbolValues.push_back(v);
  return getAffineSymbolExpr(symbolValues.size() - 1, getContext());
}

Value ONNXImporterImpl::dimValue(AffineExpr e) {
  if (Value v = exprValues.lookup(e))
    return v;
  Location l = builder.getUnknownLoc();
  Value result;
  if (auto c = dyn_cast<AffineConstantExpr>(e)) {
    result = arith::ConstantIndexOp::create(builder, l, c.getValue());
  } else if (auto sym = dyn_cast<AffineSymbolExpr>(e)) {
    result = symbolValues[sym.getPosition()];
  } else {
    auto bin = cast<AffineBinaryOpExpr>(e);
    Value x = dimValue(bin.getLHS()), y = dimValue(bin.getRHS());
    switch (e.getKind()) {
    case AffineExprKind::Add:
      result = arith::AddIOp::create(builder, l, x, y);
      break;
    case AffineExprKind::Mul:
      result = arith::MulIOp::create(builder, l, x, y);
      break;
    case AffineExprKind::FloorDiv:
      result = arith::FloorDivSIOp::create(builder, l, x, y);
      break;
    case AffineExprKind::CeilDiv:
      result = arith::CeilDivSIOp::create(builder, l, x, y);
      break;
    default:
      result = arith::RemSIOp::create(builder, l, x, y);
      break;
    }
  }
  exprValues[e] = result;
  return result;
}

bool ONNXImporterImpl::isBadDims(ArrayRef<AffineExpr> dims) {
  SmallVector<int64_t> known;
  for (int64_t d : staticShape(dims))
    if (ShapedType::isStatic(d))
      known.push_back(d);
  return isBadShape(known);
}

SmallVector<Value> ONNXImporterImpl::dynamicSizes(ArrayRef<AffineExpr> dims) {
  SmallVector<Value> sizes;
  for (AffineExpr e : dims)
    if (!isa<AffineConstantExpr>(e))
      sizes.push_back(dimValue(e));
  return sizes;
}

Value ONNXImporterImpl::emptyTensor(ArrayRef<AffineExpr> dims, Type et) {
  return tensor::EmptyOp::create(builder, loc, typeFor(dims, et),
                                 dynamicSizes(dims));
}

FailureOr<SmallVector<AffineExpr>>
ONNXImporterImpl::broadcastDims(ArrayRef<AffineExpr> a,
                                ArrayRef<AffineExpr> b) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<AffineExpr> out(rank);
  MLIRContext *ctx = a.empty() ? (b.empty() ? nullptr : b[0].getContext())
                               : a[0].getContext();
  for (size_t i = 0; i < rank; ++i) {
    AffineExpr one = getAffineConstantExpr(1, ctx);
    AffineExpr da = i < rank - a.size() ? one : a[i - (rank - a.size())];
    AffineExpr db = i < rank - b.size() ? one : b[i - (rank - b.size())];
    if (da == db || db == one) {
      out[i] = da;
    } else if (da == one) {
      out[i] = db;
    } else {
      return failure();
    }
  }
  if (isBadDims(out))
    return failure();
  return out;
}

std::string ONNXImporterImpl::broadcastProblem(ArrayRef<AffineExpr> a,
                                               ArrayRef<AffineExpr> b) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<AffineExpr> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    AffineExpr one = cst(1);
    AffineExpr da = i < rank - a.size() ? one : a[i - (rank - a.size())];
    AffineExpr db = i < rank - b.size() ? one : b[i - (rank - b.size())];
    out[i] = da == one ? db : da;
    if (da == db || da == one || db == one)
      continue;
    std::string why = "dimension " + std::to_string(i) + " of the result is " +
                      dimString(da) + " in one and " + dimString(db) +
                      " in the other";
    if (!isa<AffineConstantExpr>(da) || !isa<AffineConstantExpr>(db))
      why += " (differently named dynamic sizes are not known to match: "
             "fix them with --input-shape)";
    return why;
  }
  return "the result " + dimsString(out) +
         " has more than 2^40 elements, the importer's limit";
}

const HostTensor *ONNXImporterImpl::hostInput(unsigned i) {
  Entry *e = lookup(i);
  return e && e->host ? &*e->host : nullptr;
}

bool ONNXImporterImpl::allInputsOnHost() {
  for (unsigned i = 0, e = numInputs(); i < e; ++i)
    if (hasInput(i) && !hostInput(i))
      return false;
  return true;
}

FailureOr<const HostTensor *>
ONNXImporterImpl::requireHostInput(unsigned i, StringRef what,
                                   bool allowSymbolic, bool integer) {
  const HostTensor *t = hostInput(i);
  if (t && integer && t->isFloat())
    return error() << what << " (input " << i << ", '" << node->input(i)
                   << "') must be an integer tensor, not " << t->elemType,
           failure();
  if (t && (allowSymbolic || !t->isSymbolic()))
    return t;
  return error() << what << " (input " << i << ", '"
                 << (hasInput(i) ? node->input(i) : std::string())
                 << "') must be a constant or computable from static "
                    "shapes"
                 << (t ? "; it depends on dynamic dimensions here (fix them "
                         "with --input-shape)"
                       : ""),
         failure();
}

FailureOr<const HostTensor *>
ONNXImporterImpl::requireHostScalar(unsigned i, StringRef what,
                                    bool allowSymbolic, bool integer) {
  FailureOr<const HostTensor *> t =
      requireHostInput(i, what, allowSymbolic, integer);
  if (failed(t))
    return failure();
  if ((*t)->numElements() != 1)
    return error() << what << " (input " << i << ", '" << node->input(i)
                   << "') must hold one value, got " << (*t)->getType(),
           failure();
  return t;
}

Value ONNXImporterImpl::input(unsigned i) {
  Entry *e = lookup(i);
  assert(e && "input checked by the driver");
  return materialize(*e, node->input(i));
}

Value ONNXImporterImpl::materialize(Entry &entry, StringRef name) {
  if (entry.value)
    return entry.value;
  if (entry.host && entry.host->isSymbolic()) {
    // Computed from dynamic dimensions: built where it is needed, from the
    // index values of its elements.
    const HostTensor &h = *entry.host;
    SmallVector<Value> elems;
    for (int64_t k = 0, e = h.numElements(); k < e; ++k)
      elems.push_back(arith::IndexCastOp::create(
          builder, loc, h.elemType, dimValue(h.syms[k])));
    entry.value = tensor::FromElementsOp::create(builder, loc, entry.type,
                                                 elems);
    return entry.value;
  }
  TypedAttr attr;
  if (entry.host) {
    attr = entry.host->toAttr();
  } else {
    const onnx::TensorProto &t = *entry.initializer;
    if (!t.has_raw_data() &&
        t.data_location() != onnx::TensorProto::EXTERNAL) {
      // Typed fields: decode on the host and re-encode.
      FailureOr<HostTensor> ht = readHostTensor(t);
      if (failed(ht))
        return {};
      attr = ht->toAttr();
    } else {
      // Weights are blobs, never printed inline: the IR stays small and the
      // bytes stay exactly those of the model. External data is mapped, not
      // read: a model costs its weights once in memory, and a compiled
      // library can refer to the model's own data file (MappedFiles.h).
      int64_t expected =
          entry.type.getNumElements() * rawElementSize(t.data_type());
      AsmResourceBlob blob;
      if (t.data_location() == onnx::TensorProto::EXTERNAL) {
        FailureOr<ExternalRef> ref = resolveExternal(t);
        if (failed(ref))
          return {};
        if (ref->length != expected) {
          emitError(loc) << "initializer '" << name << "' holds "
                         << ref->length << " bytes, expected " << expected;
          return {};
        }
        if (failed(reserveMemory(name, expected)))
          return {};
        FailureOr<AsmResourceBlob> mapped =
            externalBlob(*ref, name, rawElementSize(t.data_type()));
        if (failed(mapped))
          return {};
        blob = std::move(*mapped);
      } else {
        const std::string &bytes = t.raw_data();
        if (static_cast<int64_t>(bytes.size()) != expected) {
          emitError(loc) << "initializer '" << name << "' holds "
                         << bytes.size() << " bytes, expected " << expected;
          return {};
        }
        if (failed(reserveMemory(name, expected)))
          return {};
        blob = inlineBlob(ArrayRef<char>(bytes.data(), bytes.size()),
                          rawElementSize(t.data_type()));
      }
      attr = DenseResourceElementsAttr::get(entry.type, name, std::move(blob));
    }
  }
  entry.value = placeConstant(name, attr);
  return entry.value;
}

Value ONNXImporterImpl::placeConstant(StringRef name, TypedAttr attr) {
  // Constants go to the top of the function, in first-use order.
  OpBuilder::InsertionGuard guard(builder);
  if (lastConstant)
    builder.setInsertionPointAfter(lastConstant);
  else
    builder.setInsertionPointToStart(entryBlock);
  auto cst = arith::ConstantOp::create(
      builder, NameLoc::get(builder.getStringAttr(name)), attr);
  lastConstant = cst;
  return cst.getResult();
}

FailureOr<Value> ONNXImporterImpl::weightConstant(
    StringRef name, RankedTensorType type,
    llvm::function_ref<void(MutableArrayRef<char>)> fill) {
  int64_t bytes = type.getNumElements() *
                  llvm::divideCeil(type.getElementTypeBitWidth(), 8);
  if (failed(reserveMemory(name, bytes)))
    return failure();
  AsmResourceBlob blob = HeapAsmResourceBlob::allocate(bytes, /*align=*/64);
  fill(blob.getMutableData());
  return placeConstant(
      name, DenseResourceElementsAttr::get(type, name, std::move(blob)));
}

bool ONNXImporterImpl::isConstantInput(unsigned i) {
  Entry *e = lookup(i);
  return e && (e->initializer || (e->host && !e->host->isSymbolic()));
}

FailureOr<HostTensor> ONNXImporterImpl::constantInput(unsigned i,
                                                      StringRef what) {
  Entry *e = lookup(i);
  if (e && e->host && !e->host->isSymbolic())
    return *e->host;
  if (!e || !e->initializer)
    return error() << what << " (input " << i << ", '"
                   << (hasInput(i) ? node->input(i) : std::string())
                   << "') must be a constant (an initializer)",
           failure();
  // Read for the caller, which drops it: the budget is checked, not held.
  uint64_t held = heldBytes;
  FailureOr<HostTensor> t = readHostTensor(*e->initializer);
  heldBytes = held;
  return t;
}

FailureOr<std::vector<uint8_t>>
ONNXImporterImpl::constantBytes(unsigned i, StringRef what) {
  Entry *e = lookup(i);
  // (uint8 and int8 are both i8 here; either one's bytes are the bits.)
  if (e && !e->type.getElementType().isInteger(8))
    return error() << what << " (input " << i << ", '" << node->input(i)
                   << "') must be a tensor of uint8, not " << e->type,
           failure();
  // A reshape of a constant has the constant's bytes in the same order:
  // onnxruntime-genai's tied embedding table is the LM head's packed
  // weights through a Reshape, which stays a run-time op when large.
  std::string name = hasInput(i) ? node->input(i) : std::string();
  for (int hops = 0; e && !e->host && !e->initializer && hops < 4; ++hops) {
    const onnx::NodeProto *p = producerOf(name);
    if (!p || p->input_size() < 1 ||
        !llvm::is_contained({StringRef("Reshape"), StringRef("Flatten"),
                             StringRef("Squeeze"), StringRef("Unsqueeze")},
                            p->op_type()))
      break;
    auto it = values.find(p->input(0));
    if (it == values.end() || !e->type.hasStaticShape() ||
        !it->second.type.hasStaticShape() ||
        it->second.type.getNumElements() != e->type.getNumElements())
      break;
    name = p->input(0);
    e = &it->second;
  }
  if (!e || (!e->initializer && (!e->host || e->host->isSymbolic())))
    return error() << what << " (input " << i << ", '" << node->input(i)
                   << "') must be a constant (an initializer)",
           failure();
  std::vector<uint8_t> bytes;
  int64_t n = e->type.getNumElements();
  if (e->host) {
    bytes.resize(n);
    for (int64_t k = 0; k < n; ++k)
      bytes[k] = static_cast<uint8_t>(e->host->getInt(k));
    return bytes;
  }
  const onnx::TensorProto &t = *e->initializer;
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    FailureOr<ExternalRef> ref = resolveExternal(t);
    if (failed(ref))
      return failure();
    if (ref->length != n)
      return error() << "initializer '" << name << "' holds " << ref->length
                     << " bytes, expected " << n,
             failure();
    // Read for the caller, which drops it: the budget is checked, not held.
    if (failed(reserveMemory(name, n)))
      return failure();
    heldBytes -= n;
    bytes.resize(n);
    if (failed(readExternal(*ref, reinterpret_cast<char *>(bytes.data()))))
      return error() << "initializer '" << name
                     << "': cannot read external data '" << ref->path << "'",
             failure();
    return bytes;
  }
  if (!t.has_raw_data()) {
    // Typed int32_data fields.
    uint64_t held = heldBytes;
    FailureOr<HostTensor> h = readHostTensor(t);
    heldBytes = held;
    if (failed(h))
      return failure();
    bytes.resize(n);
    for (int64_t k = 0; k < n; ++k)
      bytes[k] = static_cast<uint8_t>(h->getInt(k));
    return bytes;
  }
  const std::string &raw = t.raw_data();
  if (static_cast<int64_t>(raw.size()) != n)
    return error() << "initializer '" << name << "' holds " << raw.size()
                   << " bytes, expected " << n,
           failure();
  bytes.assign(raw.begin(), raw.end());
  return bytes;
}

void ONNXImporterImpl::setOutput(unsigned i, Value v,
                                 ArrayRef<AffineExpr> dims) {
  if (!hasOutput(i))
    return;
  Entry entry;
  entry.value = v;
  entry.type = cast<RankedTensorType>(v.getType());
  if (!dims.empty()) {
    assert(dims.size() == static_cast<size_t>(entry.type.getRank()) &&
           "one expression per dimension");
    for (AffineExpr d : dims)
      entry.dims.push_back(simplifySizeExpr(d));
  } else if (!entry.type.hasStaticShape()) {
    for (int64_t d = 0; d < entry.type.getRank(); ++d)
      entry.dims.push_back(
          entry.type.isDynamicDim(d)
              ? newSymbol(tensor::DimOp::create(builder, loc, v, d))
              : cst(entry.type.getDimSize(d)));
  }
  if (!isDynamic(entry.dims))
    entry.dims.clear();
  values[node->output(i)] = std::move(entry);
}

void ONNXImporterImpl::propagateUnsigned() {
  // The input whose elements each op's outputs hold.
  static const llvm::StringMap<int> kDataInput = [] {
    llvm::StringMap<int> m;
    for (StringRef op :
         {"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose",
          "Gather", "GatherElements", "GatherND", "Slice", "Expand", "Tile",
          "Split", "Concat"})
      m[op] = 0;
    m["Where"] = 1;
    return m;
  }();
  auto it = kDataInput.find(opKey(*node));
  if (it == kDataInput.end() || !inputIsUnsigned(it->second))
    return;
  for (int i = 0; i < node->output_size(); ++i) {
    auto out = values.find(node->output(i));
    if (out != values.end() && out->second.type.getElementType().isInteger(8))
      out->second.isUnsigned = true;
  }
}

bool ONNXImporterImpl::inputIsUnsigned(unsigned i) {
  Entry *e = lookup(i);
  return e && e->isUnsigned;
}

void ONNXImporterImpl::setOutputUnsigned(unsigned i) {
  if (hasOutput(i))
    values[node->output(i)].isUnsigned = true;
}

void ONNXImporterImpl::setOutputExactFloat(unsigned i, Value f) {
  if (hasOutput(i))
    values[node->output(i)].exactFloat = f;
}

Value ONNXImporterImpl::inputExactFloat(unsigned i) {
  Entry *e = lookup(i);
  return e ? e->exactFloat : Value();
}

void ONNXImporterImpl::setHostOutput(unsigned i, HostTensor t) {
  if (!hasOutput(i))
    return;
  // Sizes that turned out constant (a static dimension picked out of a
  // Shape) are plain integers again.
  if (t.isSymbolic() && llvm::all_of(t.syms, [](AffineExpr e) {
        return isa<AffineConstantExpr>(e);
      }))
    t.syms.clear();
  Entry entry;
  entry.type = t.getType();
  entry.host = std::move(t);
  values[node->output(i)] = std::move(entry);
}

//===----------------------------------------------------------------------===//
// The graph
//===----------------------------------------------------------------------===//

Location ONNXImporterImpl::nodeLoc(const onnx::NodeProto &n) {
  std::string name = n.name();
  if (name.empty())
    name = n.output_size() ? n.output(0) : n.op_type();
  return NameLoc::get(builder.getStringAttr(name),
                      FileLineColLoc::get(getContext(), sourceName, 0, 0));
}

LogicalResult
ONNXImporterImpl::addGraphInput(const onnx::ValueInfoProto &info,
                                SmallVectorImpl<Type> &argTypes,
                                SmallVectorImpl<std::string> &argNames) {
  const std::string &name = info.name();
  if (!info.type().has_tensor_type())
    return emitError(loc) << "graph input '" << name
                          << "' is not a tensor";
  const onnx::TypeProto::Tensor &tt = info.type().tensor_type();
  Type elemType = convertElementType(tt.elem_type());
  if (!elemType)
    return emitError(loc) << "graph input '" << name
                          << "' has unsupported element type "
                          << onnxTypeName(tt.elem_type());
  SmallVector<int64_t> shape;
  SmallVector<std::string> symbolic;
  bool hasShape = tt.has_shape();
  if (hasShape) {
    for (const onnx::TensorShapeProto::Dimension &d : tt.shape().dim()) {
      if (d.has_dim_value() && d.dim_value() >= 0) {
        shape.push_back(d.dim_value());
        symbolic.push_back("");
      } else {
        shape.push_back(ShapedType::kDynamic);
        symbolic.push_back(d.has_dim_param() ? d.dim_param() : "?");
      }
    }
  }
  auto it = options.inputShapes.find(name);
  if (it != options.inputShapes.end()) {
    ArrayRef<int64_t> want = it->second;
    if (hasShape && want.size() != shape.size())
      return emitError(loc) << "--input-shape " << name << ": the input has "
                            << shape.size() << " dimensions, got "
                            << want.size();
    for (size_t d = 0; hasShape && d < shape.size(); ++d)
      if (ShapedType::isStatic(shape[d]) && shape[d] != want[d])
        return emitError(loc) << "--input-shape " << name << ": dimension "
                              << d << " is fixed to " << shape[d]
                              << " by the model, got " << want[d];
    shape.assign(want.begin(), want.end());
    hasShape = true;
  }
  if (!hasShape)
    return emitError(loc) << "graph input '" << name
                          << "' has no shape; give one with --input-shape "
                          << name << "=<d0>x<d1>...";
  // Sizes given for dynamic dimensions by their key.
  for (size_t d = 0; d < shape.size(); ++d) {
    if (ShapedType::isStatic(shape[d]) || symbolic.size() <= d)
      continue;
    std::string key =
        symbolic[d] == "?" ? "?" + name + "." + std::to_string(d) : symbolic[d];
    if (auto size = options.dimSizes.find(key); size != options.dimSizes.end())
      shape[d] = size->second;
  }
  // Dynamic dimensions stay dynamic: one symbol per dim_param name (an
  // unnamed one gets its own).
  Entry entry;
  SmallVector<int64_t> staticPart;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (ShapedType::isStatic(shape[d])) {
      entry.dims.push_back(cst(shape[d]));
      staticPart.push_back(shape[d]);
      continue;
    }
    std::string key = symbolic[d] == "?"
                          ? "?" + name + "." + std::to_string(d)
                          : symbolic[d];
    auto [it, inserted] =
        symbolByName.try_emplace(key, symbolSources.size());
    if (inserted) {
      symbolSources.push_back({name, static_cast<unsigned>(d)});
      symbolKeys.push_back(key);
      symbolNames.push_back(symbolic[d] == "?"
                                ? "dim " + std::to_string(d) + " of " + name
                                : symbolic[d]);
    }
    entry.dims.push_back(getAffineSymbolExpr(it->second, getContext()));
  }
  if (isBadShape(staticPart))
    return emitError(loc) << "graph input '" << name
                          << "' has a negative dimension or too many "
                             "elements";
  if (!isDynamic(entry.dims))
    entry.dims.clear();
  entry.type = RankedTensorType::get(shape, elemType);
  entry.isUnsigned = tt.elem_type() == onnx::TensorProto::UINT8;
  argTypes.push_back(entry.type);
  argNames.push_back(name);
  values[name] = std::move(entry);
  return success();
}

FailureOr<OwningOpRef<ModuleOp>>
ONNXImporterImpl::run(const onnx::ModelProto &model) {
  MLIRContext *ctx = getContext();
  loc = FileLineColLoc::get(ctx, sourceName, 0, 0);
  for (const onnx::OperatorSetIdProto &o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx")
      opset = o.version();
  if (opset == 0)
    return emitError(loc) << "model imports no default-domain opset",
           failure();
  const onnx::GraphProto &graph = model.graph();

  // Every unsupported node at once, so that a user sees the whole gap.
  SmallVector<std::string> unsupported;
  for (const onnx::NodeProto &n : graph.node())
    if (!handlers.count(opKey(n)))
      unsupported.push_back("'" + n.name() + "' (" + opKey(n) + ")");
  if (!unsupported.empty()) {
    InFlightDiagnostic diag = emitError(loc);
    diag << unsupported.size() << " unsupported ONNX node"
         << (unsupported.size() > 1 ? "s" : "") << ": ";
    llvm::interleaveComma(unsupported, diag);
    return failure();
  }

  // The tensors the quantized ops read their packed or 8-bit weights from.
  static const llvm::StringSet<> kQuantizedOps = {
      "com.microsoft.MatMulNBits",
      "com.microsoft.GatherBlockQuantized",
      "com.microsoft.DynamicQuantizeMatMul",
      "com.microsoft.MatMulIntegerToFloat",
      "MatMulInteger",
      "DequantizeLinear"};
  for (const onnx::NodeProto &n : graph.node())
    if (kQuantizedOps.contains(opKey(n)))
      for (const std::string &in : n.input())
        quantizedWeights.insert(in);
  for (const onnx::TensorProto &t : graph.initializer()) {
    // Two initializers of one name: which one a runtime uses is not
    // defined (the last wins in some, the first in others).
    if (values.count(t.name()))
      return emitError(loc) << "initializer '" << t.name()
                            << "' is defined more than once";
    if (failed(addInitializer(t, t.name())))
      return failure();
  }
  SmallVector<Type> argTypes;
  SmallVector<std::string> argNames;
  for (const onnx::ValueInfoProto &in : graph.input())
    if (!values.count(in.name()) &&
        failed(addGraphInput(in, argTypes, argNames)))
      return failure();
  // An --input-shape for no input of the model is a typo, not a no-op.
  for (const auto &kv : options.inputShapes)
    if (!llvm::is_contained(argNames, kv.getKey())) {
      InFlightDiagnostic diag = emitError(loc);
      diag << "--input-shape " << kv.getKey()
           << ": the model has no input of that name (its inputs: ";
      llvm::interleaveComma(argNames, diag);
      diag << ")";
      return failure();
    }

  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  builder.setInsertionPointToEnd(module->getBody());
  auto func = func::FuncOp::create(builder, loc, options.functionName,
                                   builder.getFunctionType(argTypes, {}));
  entryBlock = func.addEntryBlock();
  for (auto [i, name] : llvm::enumerate(argNames)) {
    BlockArgument arg = entryBlock->getArgument(i);
    arg.setLoc(NameLoc::get(builder.getStringAttr(name)));
    func.setArgAttr(i, "onnx.name", builder.getStringAttr(name));
    // uint8 and int8 are both i8: the runtime's signature tells them apart.
    if (values[name].isUnsigned)
      func.setArgAttr(i, "onnx.unsigned", builder.getUnitAttr());
    values[name].value = arg;
  }
  // Which dimensions are the same size, for runtimes that check their
  // inputs (on dynamic types only): "" for a static dimension, the symbol's key for a dynamic one
  // (its dim_param, or "?<input>.<dim>" for an unnamed one).
  auto dimsAttr = [&](ArrayRef<AffineExpr> dims, RankedTensorType type) {
    SmallVector<Attribute> names;
    for (int64_t d = 0; d < type.getRank(); ++d) {
      std::string key;
      if (type.isDynamicDim(d)) {
        key = "?";
        if (d < static_cast<int64_t>(dims.size()))
          if (auto s = dyn_cast<AffineSymbolExpr>(dims[d]))
            key = symbolKeys[s.getPosition()];
      }
      names.push_back(builder.getStringAttr(key));
    }
    return builder.getArrayAttr(names);
  };
  for (auto [i, name] : llvm::enumerate(argNames)) {
    auto type = cast<RankedTensorType>(argTypes[i]);
    if (!type.hasStaticShape())
      func.setArgAttr(i, "onnx.dims", dimsAttr(values[name].dims, type));
  }
  builder.setInsertionPointToEnd(entryBlock);
  // The sizes of the dynamic input dimensions, read once.
  for (auto [argName, dim] : symbolSources) {
    Value arg = values[argName].value;
    symbolValues.push_back(
        tensor::DimOp::create(builder, arg.getLoc(), arg, dim));
  }

  for (const onnx::NodeProto &n : graph.node())
    for (const std::string &out : n.output())
      if (!out.empty())
        producers.try_emplace(out, &n);
  for (const onnx::NodeProto &n : graph.node()) {
    node = &n;
    loc = nodeLoc(n);
    if (failed(checkArity()))
      return failure();
    for (int i = 0; i < n.output_size(); ++i)
      if (!n.output(i).empty() && values.count(n.output(i)))
        return error() << "output '" << n.output(i)
                       << "' is already produced by an earlier node, an "
                          "initializer or a graph input",
               failure();
    for (int i = 0; i < n.input_size(); ++i)
      if (!n.input(i).empty() && !values.count(n.input(i)))
        return error() << "input '" << n.input(i)
                       << "' is not produced by any earlier node, "
                          "initializer or graph input",
               failure();
    // Weights are read here, so that a bad initializer (external data that
    // cannot be read) fails before a handler needs its value.
    for (int i = 0; i < n.input_size(); ++i) {
      if (n.input(i).empty())
        continue;
      Entry &e = values[n.input(i)];
      if (e.initializer && !e.value && !materialize(e, n.input(i)))
        return failure();
    }
    if (failed(handlers.lookup(opKey(n))(*this)))
      return failure();
    propagateUnsigned();
    for (int i = 0; i < n.output_size(); ++i)
      if (!n.output(i).empty() && !values.count(n.output(i)))
        return error() << "output " << i << " ('" << n.output(i)
                       << "') is not supported",
               failure();
  }
  node = nullptr;
  loc = FileLineColLoc::get(ctx, sourceName, 0, 0);

  if (graph.output_size() == 0)
    return emitError(loc) << "the graph has no outputs: nothing to compute",
           failure();
  SmallVector<Value> results;
  SmallVector<Type> resultTypes;
  for (const onnx::ValueInfoProto &out : graph.output()) {
    auto it = values.find(out.name());
    if (it == values.end())
      return emitError(loc) << "graph output '" << out.name()
                            << "' is not produced by any node",
             failure();
    Value v = materialize(it->second, out.name());
    if (!v)
      return failure();
    results.push_back(v);
    resultTypes.push_back(v.getType());
  }
  func::ReturnOp::create(builder, loc, results);
  if (options.valueTypes)
    for (const auto &kv : values)
      (*options.valueTypes)[kv.getKey()] = kv.getValue().type;
  func.setFunctionType(builder.getFunctionType(argTypes, resultTypes));
  if (!crossPosition.empty())
    func->setAttr(kCrossPositionAttrName, builder.getStringAttr(crossPosition));
  for (auto [i, out] : llvm::enumerate(graph.output())) {
    func.setResultAttr(i, "onnx.name", builder.getStringAttr(out.name()));
    if (values[out.name()].isUnsigned)
      func.setResultAttr(i, "onnx.unsigned", builder.getUnitAttr());
    auto type = cast<RankedTensorType>(resultTypes[i]);
    if (!type.hasStaticShape())
      func.setResultAttr(i, "onnx.dims",
                         dimsAttr(values[out.name()].dims, type));
  }
  return module;
}

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

std::string mlir::masformer::parseInputShapeOption(StringRef spec,
                                                   ONNXImportOptions &opts) {
  auto [name, dims] = spec.rsplit('=');
  if (name.empty() || dims.empty() || !spec.contains('='))
    return ("--input-shape '" + spec +
            "': expected <input name>=<d0>x<d1>..., e.g. input_ids=1x2048")
        .str();
  SmallVector<StringRef> parts;
  dims.split(parts, 'x');
  SmallVector<int64_t> shape;
  for (StringRef p : parts) {
    int64_t d;
    if (p.getAsInteger(10, d) || d <= 0)
      return ("--input-shape '" + spec + "': dimension '" + p +
              "' is not a positive integer")
          .str();
    shape.push_back(d);
  }
  opts.inputShapes[name] = shape;
  return "";
}

FailureOr<OwningOpRef<ModuleOp>> mlir::masformer::importONNXModel(
    const onnx::ModelProto &model, StringRef baseDir, StringRef sourceName,
    MLIRContext *context, const ONNXImportOptions &options) {
  DialectRegistry registry;
  registerONNXImportDialects(registry);
  context->appendDialectRegistry(registry);
  context->loadAllAvailableDialects();
  // An op may fix the size of a dynamic input dimension (requestStaticDim):
  // then the import starts again with it, once per such dimension.
  ONNXImportOptions opts = options;
  FailureOr<OwningOpRef<ModuleOp>> module = failure();
  while (true) {
    ONNXImporterImpl importer(context, opts, baseDir, sourceName);
    module = importer.run(model);
    if (succeeded(module))
      break;
    if (!importer.staticDimRequest)
      return failure();
    opts.dimSizes[importer.staticDimRequest->first] =
        importer.staticDimRequest->second;
  }
  // Every check the importer makes names the node; should one be missing,
  // the IR it built is still refused (never printed or passed on invalid),
  // with the verifier's reason.
  std::string problem;
  LogicalResult verified = success();
  {
    ScopedDiagnosticHandler capture(context, [&](Diagnostic &d) {
      if (!problem.empty())
        return success();
      problem = d.str();
      // The ONNX node the op was built for, where its location names it.
      Location loc = d.getLocation();
      if (auto fused = dyn_cast<FusedLoc>(loc))
        loc = fused.getLocations().front();
      if (auto name = dyn_cast<NameLoc>(loc))
        problem = "node '" + name.getName().str() + "': " + problem;
      return success();
    });
    verified = mlir::verify(**module);
  }
  if (failed(verified))
    return emitError(FileLineColLoc::get(context, sourceName, 0, 0))
               << "internal error: the imported model does not verify ("
               << problem << "); please report it with the model",
           failure();
  return module;
}

FailureOr<std::unique_ptr<onnx::ModelProto>>
mlir::masformer::readONNXModel(StringRef path, MLIRContext *context) {
  Location fileLoc = FileLineColLoc::get(context, path, 0, 0);
  // Only a regular file (through links): a FIFO would block and a device
  // such as /dev/zero read until memory runs out.
  llvm::sys::fs::file_status st;
  if (!llvm::sys::fs::status(path, st) && llvm::sys::fs::exists(st) &&
      !llvm::sys::fs::is_regular_file(st))
    return emitError(fileLoc)
               << "cannot read '" << path << "': not a regular file",
           failure();
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return emitError(fileLoc) << "cannot read '" << path
                              << "': " << buffer.getError().message(),
           failure();
  auto model = std::make_unique<onnx::ModelProto>();
  StringRef data = (*buffer)->getBuffer();
  if (data.size() > static_cast<size_t>(INT_MAX))
    return emitError(fileLoc) << "'" << path << "' is " << data.size()
                              << " bytes, over protobuf's 2 GB limit; save "
                                 "the model with its weights as external "
                                 "data",
           failure();
  if (!model->ParseFromArray(data.data(), static_cast<int>(data.size())))
    return emitError(fileLoc) << "'" << path
                              << "' is not a valid ONNX model (protobuf "
                                 "parsing failed)",
           failure();
  return model;
}

FailureOr<OwningOpRef<ModuleOp>>
mlir::masformer::importONNXFile(StringRef path, MLIRContext *context,
                                const ONNXImportOptions &options) {
  FailureOr<std::unique_ptr<onnx::ModelProto>> model =
      readONNXModel(path, context);
  if (failed(model))
    return failure();
  return importONNXModel(**model, modelDirectory(path), path, context,
                         options);
}

std::string mlir::masformer::modelDirectory(StringRef modelPath) {
  SmallString<256> dir(modelPath);
  llvm::sys::path::remove_filename(dir);
  return dir.empty() ? std::string(".") : std::string(dir);
}

void mlir::masformer::registerONNXImportDialects(DialectRegistry &registry) {
  registry.insert<arith::ArithDialect, func::FuncDialect, linalg::LinalgDialect,
                  math::MathDialect, scf::SCFDialect, tensor::TensorDialect,
                  MASFormerDialect>();
}
