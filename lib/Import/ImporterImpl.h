//===- ImporterImpl.h - Private ONNX importer state -------------*- C++ -*-===//
//
// The importer's implementation class, shared by the per-op handler files
// (ElementwiseOps.cpp, TensorOps.cpp, ContractionOps.cpp). A handler imports
// the current node: it reads inputs and attributes through this class and
// sets each output either to an MLIR value or, when every input is known on
// the host, to a HostTensor (shape subgraphs fold away this way).
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_LIB_IMPORT_IMPORTERIMPL_H
#define MASFORMER_LIB_IMPORT_IMPORTERIMPL_H

#include "HostTensor.h"
#include "masformer/Dialect/MASFormer/IR/MASFormerOps.h"
#include "masformer/Import/ONNXImporter.h"
#include "masformer/Utils/MappedFiles.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <onnx/onnx_pb.h>

#include <memory>
#include <optional>

namespace mlir::masformer {

class ONNXImporterImpl;
using NodeHandler = LogicalResult (*)(ONNXImporterImpl &);

/// Ops whose results the importer computes on the host when every input is
/// known there and the result is small.
constexpr int64_t kMaxHostElements = 1 << 22;
/// The same for the 8-bit integer weights of quantized ops.
constexpr int64_t kMaxHostInt8Elements = 1 << 12;

class ONNXImporterImpl {
public:
  ONNXImporterImpl(MLIRContext *ctx, const ONNXImportOptions &options,
                   StringRef baseDir, StringRef sourceName);

  FailureOr<OwningOpRef<ModuleOp>> run(const onnx::ModelProto &model);

  //===--- Used by handlers ----------------------------------------------===//

  OpBuilder builder;
  Location loc;
  const onnx::NodeProto *node = nullptr;
  /// The default-domain opset the model imports.
  int64_t opset = 0;

  MLIRContext *getContext() { return builder.getContext(); }
  unsigned numInputs() const { return node->input_size(); }
  unsigned numOutputs() const { return node->output_size(); }
  /// Whether optional input `i` is present.
  bool hasInput(unsigned i) const {
    return i < static_cast<unsigned>(node->input_size()) &&
           !node->input(i).empty();
  }
  bool hasOutput(unsigned i) const {
    return i < static_cast<unsigned>(node->output_size()) &&
           !node->output(i).empty();
  }
  RankedTensorType inputType(unsigned i);
  /// The dimensions of input i as expressions over the dimension symbols
  /// (constants where static).
  SmallVector<AffineExpr> inputDims(unsigned i);
  /// The input's value on the host, or null.
  const HostTensor *hostInput(unsigned i);
  /// Whether every present input is known on the host.
  bool allInputsOnHost();
  /// The input as an MLIR value (materializing constants).
  Value input(unsigned i);
  /// An input that must be known on the host (an axes list, a shape, ...);
  /// emits an error naming the input otherwise.
  /// `allowSymbolic`: the caller handles elements computed from dynamic
  /// dimensions (HostTensor::syms); otherwise those are an error too.
  /// `integer`: the op takes only integers there (a shape, axes, indices),
  /// so a float tensor is an error naming the input.
  FailureOr<const HostTensor *> requireHostInput(unsigned i, StringRef what,
                                                 bool allowSymbolic = false,
                                                 bool integer = true);
  /// requireHostInput for an input that must hold exactly one value (a
  /// scalar or a one-element tensor, as Range's bounds and Trilu's k).
  FailureOr<const HostTensor *> requireHostScalar(unsigned i, StringRef what,
                                                  bool allowSymbolic = false,
                                                  bool integer = true);

  /// The whole value of input `i`, which must be a constant (an
  /// initializer, a Constant node's tensor, or folded on the host): an
  /// error naming the input otherwise. Weights are read from the model each
  /// time (the caller holds the copy only while it uses it).
  FailureOr<HostTensor> constantInput(unsigned i, StringRef what);
  /// Whether input `i` is a constant (an initializer, a Constant node's
  /// tensor, or folded on the host), which constantInput and constantBytes
  /// read.
  bool isConstantInput(unsigned i);
  /// The bytes of input `i`, a constant tensor of uint8 (packed weights, one
  /// byte per element instead of a HostTensor's eight).
  FailureOr<std::vector<uint8_t>> constantBytes(unsigned i, StringRef what);
  /// A weight the importer computes (dequantized, repacked): `fill` writes
  /// the bytes of `type` (row-major, 64-byte aligned); they count against
  /// the import's memory budget, checked before they are allocated. The
  /// result is an arith.constant placed with the model's weights.
  FailureOr<Value>
  weightConstant(StringRef name, RankedTensorType type,
                 llvm::function_ref<void(MutableArrayRef<char>)> fill);

  /// Sets output i to `v`, whose dimensions are `dims` (derived from `v`'s
  /// type when empty: static sizes, and a fresh symbol bound to tensor.dim
  /// for each dynamic one).
  void setOutput(unsigned i, Value v, ArrayRef<AffineExpr> dims = {});

  /// uint8 and int8 are both i8 here: whether input i holds uint8 (an
  /// initializer, Constant or graph input of that type, an op's uint8
  /// result, or either moved by Reshape, Transpose, Gather, ...).
  bool inputIsUnsigned(unsigned i);
  /// Marks output i (set already) as holding uint8.
  void setOutputUnsigned(unsigned i);
  /// An f32 value exactly equal to integer output i (set already), which a
  /// Cast to float takes instead of converting: MatMulInteger's product,
  /// computed in f32 and converted to int32, is cast back by the next node.
  void setOutputExactFloat(unsigned i, Value f);
  /// Input i's exact f32 value, if its producer set one.
  Value inputExactFloat(unsigned i);

  /// Values a handler derives from the graph's tensors, under a key it
  /// names, so that nodes sharing the tensors share the value (the three
  /// MatMulIntegers of Q, K and V read one quantized X: one X as uint8, or
  /// less its zero point in f32, which the raise then sees as the
  /// projections' one source).
  llvm::StringMap<Value> derivedValues;

  /// Records, once, why the model's positions depend on each other outside
  /// its attention (kCrossPositionAttrName on @main), naming the node.
  void noteCrossPosition(StringRef why) {
    if (crossPosition.empty())
      crossPosition = why.str();
  }

  /// How a tensor of the graph was computed, for handlers that recognize
  /// the structure of an input (ScatterND's indices built from sizes): the
  /// node that produced `name` (null for inputs and initializers), its host
  /// value, and its dimensions (null / empty when `name` is not imported
  /// yet).
  const onnx::NodeProto *producerOf(StringRef name) const {
    auto it = producers.find(name);
    return it == producers.end() ? nullptr : it->second;
  }
  const HostTensor *hostValueOf(StringRef name) const {
    auto it = values.find(name);
    return it == values.end() || !it->second.host ? nullptr : &*it->second.host;
  }
  SmallVector<AffineExpr> dimsOf(StringRef name) {
    auto it = values.find(name);
    if (it == values.end())
      return {};
    return it->second.dims.empty() ? staticDims(it->second.type)
                                   : it->second.dims;
  }

  //===--- Dynamic dimensions ----------------------------------------------===//
  //
  // A dynamic dimension of a graph input is a symbol (one per dim_param
  // name, so that "batch" of two inputs is one symbol); the dimensions of
  // every value, and the integers of shape subgraphs, are affine expressions
  // over those symbols. Equal expressions are equal sizes, and each
  // expression is materialized once as an index value.

  AffineExpr cst(int64_t v) { return getAffineConstantExpr(v, getContext()); }
  /// `e` for messages, with the symbols' dim_param names.
  std::string dimString(AffineExpr e);
  /// `dims` for messages: "[batch, sequence, 768]".
  std::string dimsString(ArrayRef<AffineExpr> dims);
  /// The index value of `e` (cached).
  Value dimValue(AffineExpr e);
  /// The static shape of `dims` (kDynamic where not constant).
  static SmallVector<int64_t> staticShape(ArrayRef<AffineExpr> dims);
  RankedTensorType typeFor(ArrayRef<AffineExpr> dims, Type elemType) {
    return RankedTensorType::get(staticShape(dims), elemType);
  }
  /// The index values of the non-constant `dims`, in order (the dynamic
  /// sizes of tensor.empty and friends).
  SmallVector<Value> dynamicSizes(ArrayRef<AffineExpr> dims);
  Value emptyTensor(ArrayRef<AffineExpr> dims, Type elemType);
  /// Numpy broadcasting of two dimension lists; fails when two sizes are
  /// different constants, or different expressions that are not 1 (the
  /// importer cannot know whether they match).
  static FailureOr<SmallVector<AffineExpr>>
  broadcastDims(ArrayRef<AffineExpr> a, ArrayRef<AffineExpr> b);
  /// Why broadcastDims(a, b) fails, for an error message: the first
  /// dimension whose sizes differ, or the size of the result.
  std::string broadcastProblem(ArrayRef<AffineExpr> a, ArrayRef<AffineExpr> b);
  /// Dims of `type`, constants only (static types).
  SmallVector<AffineExpr> staticDims(RankedTensorType type);
  /// Whether the constant ones of `dims` have a negative size or too many
  /// elements together (isBadShape of the known part).
  static bool isBadDims(ArrayRef<AffineExpr> dims);
  /// Whether any of `dims` is not a constant.
  static bool isDynamic(ArrayRef<AffineExpr> dims) {
    return llvm::any_of(dims, [](AffineExpr e) { return !isa<AffineConstantExpr>(e); });
  }
  void setHostOutput(unsigned i, HostTensor t);
  /// A large constant (a Constant node's tensor): imported like a weight.
  LogicalResult setTensorOutput(unsigned i, const onnx::TensorProto &tensor);

  /// An error located at the current node, prefixed with its name and type.
  InFlightDiagnostic error();

  std::optional<int64_t> attrInt(StringRef name);
  int64_t attrInt(StringRef name, int64_t dflt) {
    return attrInt(name).value_or(dflt);
  }
  std::optional<float> attrFloat(StringRef name);
  float attrFloat(StringRef name, float dflt) {
    return attrFloat(name).value_or(dflt);
  }
  std::optional<SmallVector<int64_t>> attrInts(StringRef name);
  std::optional<std::string> attrString(StringRef name);
  const onnx::TensorProto *attrTensor(StringRef name);
  /// Fails (with an error naming it) if the node has an attribute outside
  /// `known`: an attribute we would silently ignore is a wrong result.
  LogicalResult checkAttributes(ArrayRef<StringRef> known);
  /// Fails (naming the node) when the node's input or output count is not
  /// one its op takes.
  LogicalResult checkArity();

  /// ONNX TensorProto element type to MLIR; null if unsupported.
  Type convertElementType(int32_t onnxType);
  /// Reads a TensorProto (raw, typed or external data) into a HostTensor.
  FailureOr<HostTensor> readHostTensor(const onnx::TensorProto &tensor);

  /// Asks for the import to start again with `e`, a dynamic dimension of
  /// the graph's inputs, fixed to `size` (an op needs it static, and the
  /// runtime then checks it); false if `e` is no such dimension. The handler
  /// then fails without an error of its own.
  bool requestStaticDim(AffineExpr e, int64_t size);
  /// The request made, if any: the dimension's key and its size.
  std::optional<std::pair<std::string, int64_t>> staticDimRequest;

  /// Normalizes a possibly negative axis for `rank`; error if out of range.
  FailureOr<int64_t> normalizeAxis(int64_t axis, int64_t rank);

private:
  struct Entry {
    Value value;
    RankedTensorType type;
    /// The dimensions (expressions over the symbols) of a value with a
    /// dynamic dimension; empty for static types.
    SmallVector<AffineExpr> dims;
    std::optional<HostTensor> host;
    /// A weight not yet materialized (kept as a proto reference).
    const onnx::TensorProto *initializer = nullptr;
    /// uint8 elements (the type is i8 either way).
    bool isUnsigned = false;
    /// setOutputExactFloat's value.
    Value exactFloat;
  };

  Entry *lookup(unsigned i);
  /// After the current node's handler: ops that move elements without
  /// changing them (Reshape, Transpose, Gather, Slice, ...) keep uint8.
  void propagateUnsigned();
  Value materialize(Entry &entry, StringRef name);
  /// An arith.constant of `attr` at the top of the function, after the
  /// constants placed before it (weights in first-use order).
  Value placeConstant(StringRef name, TypedAttr attr);
  /// Where an initializer's external data lies (checked to stay inside the
  /// model's directory and the file).
  struct ExternalRef {
    std::string path;
    int64_t offset, length;
  };
  FailureOr<ExternalRef> resolveExternal(const onnx::TensorProto &tensor);
  LogicalResult readExternal(const ExternalRef &ref, char *dest);
  /// The bytes of `ref` as a blob: a view of the mapped file when they are
  /// aligned to `elementSize`, otherwise a copy.
  FailureOr<AsmResourceBlob>
  externalBlob(const ExternalRef &ref, StringRef tensor, int64_t elementSize);
  /// Raw bytes of the model as a blob: a view when the model is shared
  /// (options.owner) and they are aligned to `elementSize`, else a copy.
  AsmResourceBlob inlineBlob(ArrayRef<char> bytes, int64_t elementSize);
  /// The external data files mapped so far, by path.
  llvm::StringMap<std::shared_ptr<MappedFile>> mappedFiles;
  /// Counts `bytes` more of tensor data the import holds in memory; fails,
  /// naming `tensor`, once the total would pass memoryBudget()
  /// (docs/SECURITY.md), so that a model declaring more weights than the
  /// process may hold fails before it allocates them.
  LogicalResult reserveMemory(StringRef tensor, int64_t bytes);
  uint64_t heldBytes = 0;
  std::optional<MemoryBudget> budget;
  LogicalResult addInitializer(const onnx::TensorProto &tensor,
                               StringRef name);
  LogicalResult addGraphInput(const onnx::ValueInfoProto &info,
                              SmallVectorImpl<Type> &argTypes,
                              SmallVectorImpl<std::string> &argNames);
  Location nodeLoc(const onnx::NodeProto &node);

  /// A new symbol whose value is `v` (index).
  AffineExpr newSymbol(Value v);

  const ONNXImportOptions &options;
  Block *entryBlock = nullptr;
  /// Symbols of dynamic graph-input dimensions: by dim_param name, and where
  /// each one is read (argument name, dimension) until the function exists.
  llvm::StringMap<unsigned> symbolByName;
  /// Names of the symbols, for messages ("batch", "sequence", "d2 of x").
  SmallVector<std::string> symbolNames;
  /// Their keys: the dim_param, or "?<input>.<dim>" for an unnamed one.
  SmallVector<std::string> symbolKeys;
  SmallVector<std::pair<std::string, unsigned>> symbolSources;
  /// The index value of each symbol, and of each expression built so far.
  SmallVector<Value> symbolValues;
  DenseMap<AffineExpr, Value> exprValues;
  Operation *lastConstant = nullptr;
  std::string baseDir;
  std::string sourceName;
  llvm::StringMap<Entry> values;
  llvm::StringMap<const onnx::NodeProto *> producers;
  std::string crossPosition;
  /// The inputs of the graph's quantized ops (their 8-bit weights stay in
  /// the model until read: kMaxHostInt8Elements).
  llvm::StringSet<> quantizedWeights;
  llvm::StringMap<NodeHandler> handlers;
};

void registerElementwiseHandlers(llvm::StringMap<NodeHandler> &handlers);
void registerTensorHandlers(llvm::StringMap<NodeHandler> &handlers);
void registerIndexingHandlers(llvm::StringMap<NodeHandler> &handlers);
void registerContractionHandlers(llvm::StringMap<NodeHandler> &handlers);
void registerSearchHandlers(llvm::StringMap<NodeHandler> &handlers);
/// onnxruntime's contrib ops that its transformer optimizer writes
/// (com.microsoft), keyed "com.microsoft.<op>", and its
/// SimplifiedLayerNormalization (default domain).
void registerContribHandlers(llvm::StringMap<NodeHandler> &handlers);
/// Quantized models: weights stored quantized (com.microsoft.MatMulNBits,
/// GatherBlockQuantized) and ONNX's int8 ops (DequantizeLinear,
/// QuantizeLinear, DynamicQuantizeLinear, MatMulInteger).
void registerQuantizedHandlers(llvm::StringMap<NodeHandler> &handlers);

//===--- Helpers shared by the handler files ------------------------------===//

/// A linalg.generic over `outType` whose inputs broadcast (numpy rules) to
/// its shape; `body` gets the scalar inputs and returns the scalar result.
/// `dynSizes` are the sizes of outType's dynamic dimensions, in order.
Value buildBroadcastGeneric(
    OpBuilder &b, Location loc, ValueRange inputs, RankedTensorType outType,
    llvm::function_ref<Value(OpBuilder &, Location, ValueRange)> body,
    ValueRange dynSizes = {});

/// A tensor.empty of `type` (dynamic sizes `dynSizes`) filled with `value`
/// (float or integer).
Value buildFilled(OpBuilder &b, Location loc, RankedTensorType type,
                  double value, ValueRange dynSizes = {});

/// Reshape between static shapes: expand/collapse where possible, else
/// tensor.reshape with a constant shape.
Value buildReshape(OpBuilder &b, Location loc, Value input,
                   RankedTensorType resultType);

/// A product of sizes: a constant times non-constant factors (kept sorted,
/// so that equal products compare equal whatever their order).
struct SizeProduct {
  int64_t coef = 1;
  SmallVector<AffineExpr> factors;

  void multiply(AffineExpr e) {
    if (auto c = dyn_cast<AffineConstantExpr>(e)) {
      coef *= c.getValue();
      return;
    }
    if (e.getKind() == AffineExprKind::Mul) {
      auto bin = cast<AffineBinaryOpExpr>(e);
      multiply(bin.getLHS());
      multiply(bin.getRHS());
      return;
    }
    factors.push_back(e);
    llvm::sort(factors, [](AffineExpr a, AffineExpr b) {
      return a.getAsOpaquePointer() < b.getAsOpaquePointer();
    });
  }
  static SizeProduct of(ArrayRef<AffineExpr> dims) {
    SizeProduct p;
    for (AffineExpr e : dims)
      p.multiply(e);
    return p;
  }
  bool operator==(const SizeProduct &o) const {
    return coef == o.coef && factors == o.factors;
  }
  /// this / o as an expression, when o's factors divide this exactly.
  std::optional<AffineExpr> divide(const SizeProduct &o,
                                   MLIRContext *ctx) const {
    if (o.coef == 0 || coef % o.coef)
      return std::nullopt;
    SmallVector<AffineExpr> rest(factors);
    for (AffineExpr f : o.factors) {
      auto it = llvm::find(rest, f);
      if (it == rest.end())
        return std::nullopt;
      rest.erase(it);
    }
    AffineExpr r = getAffineConstantExpr(coef / o.coef, ctx);
    for (AffineExpr f : rest)
      r = r * f;
    return r;
  }
};

/// `input` (dimensions `in`) reshaped to `out`: collapse_shape or
/// expand_shape where the dimensions group, tensor.reshape otherwise.
Value buildReshapeDims(ONNXImporterImpl &im, Value input,
                       ArrayRef<AffineExpr> in, ArrayRef<AffineExpr> out);

/// Bytes per element of raw_data for a supported ONNX element type.
int64_t rawElementSize(int32_t onnxType);

/// An ONNX element type for messages: "INT4 (22)", or the number alone
/// for one no standard names.
std::string onnxTypeName(int32_t onnxType);

/// An index size as a value for use inside a region: `e` materialized once,
/// at the importer's insertion point.
Value sizeValue(ONNXImporterImpl &im, AffineExpr e);

/// The row-major coordinates of position `linear` in a tensor of `sizes`
/// (index values).
SmallVector<Value> delinearize(OpBuilder &b, Location loc, Value linear,
                               ArrayRef<Value> sizes);

/// The matrix product of `a` and `b` (dimensions `ad`, `bd`) as ONNX
/// MatMul (numpy's matmul) computes it; `outDims` gets the result's
/// dimensions. Errors name the current node.
FailureOr<Value> buildMatMul(ONNXImporterImpl &im, Value a,
                             SmallVector<AffineExpr> ad, Value b,
                             SmallVector<AffineExpr> bd,
                             SmallVector<AffineExpr> &outDims);

/// `x` (dimensions `dims`) normalized over its dimensions from `axis` on
/// (static): LayerNormalization's (x - mean) / sqrt(var + eps), or with
/// `rms` RMSNorm's x / sqrt(mean(x^2) + eps); then times the node's input
/// `scaleInput` and plus its input `biasInput` (-1: none), which must
/// broadcast to x.
FailureOr<Value> buildNormalization(ONNXImporterImpl &im, Value x,
                                    ArrayRef<AffineExpr> dims, int64_t axis,
                                    double eps, bool rms, int scaleInput,
                                    int biasInput);

/// [B, S, H*D] -> [B, H, S, D] (`dims` are x's).
Value splitHeads(ONNXImporterImpl &im, Value x, ArrayRef<AffineExpr> dims,
                 int64_t heads);

/// [B, H, S, Dv] -> [B, S, H*Dv]; `qDims` are the 3-D queries' dimensions
/// (B and S are taken from them).
Value mergeHeads(ONNXImporterImpl &im, Value y, ArrayRef<AffineExpr> qDims);

/// A masformer.attention on [B, H, S, D] operands (span `full` unless
/// given; `rowOffset`, if given, each batch row's position offset); the
/// op's verifier's complaint, if any, is an error naming the current node.
FailureOr<Value> createAttention(ONNXImporterImpl &im, Value q, Value k,
                                 Value v, Value mask, bool causal,
                                 std::optional<float> scale, SpanAttr span = {},
                                 std::optional<float> softcap = {},
                                 Value rowOffset = {});

/// An index value normalized as ONNX's indexing ops define it (negative
/// counts from `size`) and clamped to [0, size - 1], so that an index out of
/// range never reads out of bounds.
Value normalizedIndex(OpBuilder &b, Location loc, Value index, Value size);

/// ONNX Gather at run time: data[pre, indices[ind...], post] along `axis`
/// (dimensions dDims[:axis] + iDims + dDims[axis + 1:]); negative indices
/// count from the end and indices out of range are clamped.
Value buildGather(ONNXImporterImpl &im, Value data, ArrayRef<AffineExpr> dDims,
                  Value indices, ArrayRef<AffineExpr> iDims, int64_t axis);

/// Converts a scalar between element types as ONNX Cast does; an i8 `v` is
/// uint8 with `fromUnsigned`, an i8 result uint8 with `toUnsigned`.
Value castScalar(OpBuilder &b, Location loc, Value v, Type to,
                 bool fromUnsigned = false, bool toUnsigned = false);

} // namespace mlir::masformer

#endif // MASFORMER_LIB_IMPORT_IMPORTERIMPL_H
