//===- fuzz-onnx-model.cpp - Structure-aware fuzzing of models --*- C++ -*-===//
//
// A libFuzzer harness whose inputs are serialized ONNX models and whose
// mutator changes them as models, not as bytes: it rewires node inputs,
// changes op types, attributes, shapes, element types, initializer sizes and
// data, external-data fields and the opset, so that nearly every input it
// makes still parses and reaches the importer's checks instead of dying in
// the protobuf parser. Each input then runs through every entry point a
// model meets before code generation: the import (with dynamic shapes, or
// with static ones, chosen by the input's hash), the attention raise, the
// span rewrite (one of several option sets), the span report and the ONNX
// export. Whatever the model, each must return a result or an error, never
// crash, hang or read out of bounds (the harness is built with ASan and
// UBSan). External data resolves in a scratch folder holding one small
// regular file, a link out of it and a FIFO, so those checks run too.
//
//===----------------------------------------------------------------------===//

#include "masformer/Dialect/MASFormer/Analysis/SpanReport.h"
#include "masformer/Export/ONNXExporter.h"
#include "masformer/Frontend/ONNXFrontend.h"

#include "../FuzzShapes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/SmallVector.h"

#include <onnx/onnx_pb.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize);

namespace {

/// The scratch folder external data resolves in (made once per process).
std::string scratchDir;

void makeScratchDir() {
  char tmpl[] = "/tmp/masformer-fuzz-XXXXXX";
  if (!mkdtemp(tmpl))
    abort();
  scratchDir = tmpl;
  std::string data(4096, '\0');
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<char>(i * 37 + 11);
  FILE *f = fopen((scratchDir + "/weights.bin").c_str(), "wb");
  if (!f || fwrite(data.data(), 1, data.size(), f) != data.size())
    abort();
  fclose(f);
  (void)symlink("/etc/passwd", (scratchDir + "/outside.bin").c_str());
  (void)mkfifo((scratchDir + "/fifo.bin").c_str(), 0600);
  (void)mkdir((scratchDir + "/dir.bin").c_str(), 0700);
}

using Rng = std::minstd_rand;

int64_t pick(Rng &rng, int64_t n) {
  return n <= 0 ? 0 : static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
}

int64_t interestingInt(Rng &rng) {
  static const int64_t values[] = {
      0,
      1,
      -1,
      2,
      3,
      -2,
      4,
      7,
      8,
      16,
      64,
      255,
      1 << 16,
      int64_t(1) << 31,
      (int64_t(1) << 31) - 1,
      -(int64_t(1) << 31),
      int64_t(1) << 32,
      int64_t(1) << 40,
      int64_t(1) << 62,
      std::numeric_limits<int64_t>::max(),
      std::numeric_limits<int64_t>::max() - 1,
      std::numeric_limits<int64_t>::min(),
      std::numeric_limits<int64_t>::min() + 1,
  };
  if (rng() % 4 == 0)
    return static_cast<int64_t>(rng() % 70) - 5;
  return values[pick(rng, std::size(values))];
}

float interestingFloat(Rng &rng) {
  static const float values[] = {0.0f,
                                 -0.0f,
                                 1.0f,
                                 -1.0f,
                                 0.5f,
                                 1e-30f,
                                 1e30f,
                                 std::numeric_limits<float>::infinity(),
                                 -std::numeric_limits<float>::infinity(),
                                 std::numeric_limits<float>::quiet_NaN(),
                                 std::numeric_limits<float>::denorm_min(),
                                 std::numeric_limits<float>::max()};
  return values[pick(rng, std::size(values))];
}

const char *const kOpTypes[] = {"Abs",
                                "Add",
                                "And",
                                "Attention",
                                "Cast",
                                "Clip",
                                "Concat",
                                "Constant",
                                "ConstantOfShape",
                                "Cos",
                                "Div",
                                "Einsum",
                                "Equal",
                                "Erf",
                                "Exp",
                                "Expand",
                                "Flatten",
                                "Gather",
                                "Gemm",
                                "Greater",
                                "GreaterOrEqual",
                                "Identity",
                                "LayerNormalization",
                                "Less",
                                "LessOrEqual",
                                "Log",
                                "MatMul",
                                "Max",
                                "Min",
                                "Mul",
                                "Neg",
                                "Not",
                                "Or",
                                "Pow",
                                "Range",
                                "Reciprocal",
                                "ReduceMax",
                                "ReduceMean",
                                "ReduceSum",
                                "Relu",
                                "Reshape",
                                "ScatterND",
                                "Shape",
                                "Sigmoid",
                                "Sin",
                                "Slice",
                                "Softmax",
                                "Split",
                                "Sqrt",
                                "Squeeze",
                                "Sub",
                                "Tanh",
                                "Transpose",
                                "Trilu",
                                "Unsqueeze",
                                "Where",
                                "If",
                                "Loop",
                                "CumSum",
                                "Tile",
                                "Gelu",
                                "SimplifiedLayerNormalization"};

/// onnxruntime's contrib ops (domain com.microsoft) the importer takes.
const char *const kContribOpTypes[] = {"Attention",
                                       "MultiHeadAttention",
                                       "GroupQueryAttention",
                                       "SkipLayerNormalization",
                                       "SkipSimplifiedLayerNormalization",
                                       "EmbedLayerNormalization",
                                       "FastGelu",
                                       "BiasGelu",
                                       "QuickGelu",
                                       "MatMulNBits",
                                       "GatherBlockQuantized"};

const char *const kAttrNames[] = {"axis",
                                  "axes",
                                  "perm",
                                  "keepdims",
                                  "transA",
                                  "transB",
                                  "alpha",
                                  "beta",
                                  "to",
                                  "value",
                                  "upper",
                                  "split",
                                  "num_outputs",
                                  "epsilon",
                                  "stash_type",
                                  "equation",
                                  "is_causal",
                                  "q_num_heads",
                                  "kv_num_heads",
                                  "scale",
                                  "softcap",
                                  "allowzero",
                                  "noop_with_empty_axes",
                                  "mode",
                                  "num_heads",
                                  "unidirectional",
                                  "qkv_hidden_sizes",
                                  "mask_filter_value",
                                  "local_window_size",
                                  "do_rotary",
                                  "rotary_interleaved",
                                  "approximate",
                                  "K",
                                  "N",
                                  "bits",
                                  "block_size",
                                  "accuracy_level",
                                  "gather_axis",
                                  "quantize_axis"};

const char *const kLocations[] = {
    "weights.bin",   "outside.bin",        "fifo.bin",
    "dir.bin",       "missing.bin",        "../weights.bin",
    "/etc/passwd",   "weights.bin\0x",     "",
    "./weights.bin", "file://weights.bin", "C:\\weights.bin"};

const char *const kNumbers[] = {"0",
                                "4",
                                "16",
                                "0200",
                                "0x10",
                                "-4",
                                "4096",
                                "4097",
                                "",
                                " 8",
                                "8 ",
                                "+8",
                                "1e3",
                                "18446744073709551615",
                                "9223372036854775807",
                                "99999999999999999999999"};

/// Every value name the graph knows, for rewiring.
llvm::SmallVector<std::string> valueNames(const onnx::GraphProto &g) {
  llvm::SmallVector<std::string> names;
  for (const auto &v : g.input())
    names.push_back(v.name());
  for (const auto &t : g.initializer())
    names.push_back(t.name());
  for (const auto &n : g.node())
    for (const auto &o : n.output())
      names.push_back(o);
  names.push_back("");
  names.push_back("nosuch");
  return names;
}

void mutateTensorData(onnx::TensorProto &t, Rng &rng) {
  switch (pick(rng, 9)) {
  case 0: { // A dimension changed, added or removed.
    if (t.dims_size() && rng() % 3)
      t.set_dims(pick(rng, t.dims_size()), interestingInt(rng));
    else if (rng() % 2)
      t.add_dims(interestingInt(rng));
    else if (t.dims_size())
      t.mutable_dims()->RemoveLast();
    break;
  }
  case 1: // Another element type (the data stays as it was).
    t.set_data_type(static_cast<int32_t>(pick(rng, 25)));
    break;
  case 2: { // raw_data truncated, extended or its bytes mutated.
    std::string *raw = t.mutable_raw_data();
    size_t size = raw->size();
    if (rng() % 3 == 0) {
      raw->resize(pick(rng, static_cast<int64_t>(size) + 1));
    } else if (rng() % 2) {
      raw->resize(size + 1 + pick(rng, 64), '\x7f');
    } else if (size) {
      std::string bytes = *raw;
      bytes.resize(size * 2);
      size_t n = LLVMFuzzerMutate(reinterpret_cast<uint8_t *>(bytes.data()),
                                  size, bytes.size());
      bytes.resize(n);
      *raw = bytes;
    }
    break;
  }
  case 3: { // The data moved to the typed field (or a wrong one).
    std::string raw = t.raw_data();
    t.clear_raw_data();
    for (size_t i = 0; i + 4 <= raw.size() && i < 4096; i += 4) {
      float f;
      int32_t bits;
      memcpy(&f, raw.data() + i, 4);
      memcpy(&bits, raw.data() + i, 4);
      if (rng() % 2)
        t.add_float_data(f);
      else
        t.add_int64_data(bits);
    }
    if (rng() % 4 == 0)
      t.add_int32_data(static_cast<int32_t>(interestingInt(rng)));
    break;
  }
  case 4: { // External data with hostile or ordinary fields.
    t.clear_raw_data();
    t.set_data_location(onnx::TensorProto::EXTERNAL);
    t.clear_external_data();
    int fields = 1 + pick(rng, 3);
    for (int i = 0; i < fields; ++i) {
      auto *entry = t.add_external_data();
      switch (i == 0 ? 0 : pick(rng, 4)) {
      case 0:
        entry->set_key("location");
        entry->set_value(kLocations[pick(rng, std::size(kLocations))]);
        break;
      case 1:
        entry->set_key("offset");
        entry->set_value(kNumbers[pick(rng, std::size(kNumbers))]);
        break;
      case 2:
        entry->set_key("length");
        entry->set_value(kNumbers[pick(rng, std::size(kNumbers))]);
        break;
      default:
        entry->set_key(rng() % 2 ? "checksum" : "location");
        entry->set_value(kNumbers[pick(rng, std::size(kNumbers))]);
        break;
      }
    }
    break;
  }
  case 5: // A value of an interesting size in int64 data.
    t.add_int64_data(interestingInt(rng));
    break;
  case 6:
    t.add_float_data(interestingFloat(rng));
    break;
  case 7: // No data at all, whatever the shape says.
    t.clear_raw_data();
    t.clear_float_data();
    t.clear_int64_data();
    t.clear_int32_data();
    t.clear_double_data();
    break;
  default: // A huge declared shape without the data to match.
    t.clear_dims();
    for (int i = 0, e = 1 + pick(rng, 3); i < e; ++i)
      t.add_dims(int64_t(1) << (8 + pick(rng, 14)));
    break;
  }
}

void mutateAttribute(onnx::NodeProto &node, Rng &rng) {
  if (node.attribute_size() == 0 || rng() % 4 == 0) {
    auto *a = node.add_attribute();
    a->set_name(kAttrNames[pick(rng, std::size(kAttrNames))]);
    switch (pick(rng, 4)) {
    case 0:
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(interestingInt(rng));
      break;
    case 1:
      a->set_type(onnx::AttributeProto::INTS);
      for (int i = 0, e = pick(rng, 5); i < e; ++i)
        a->add_ints(interestingInt(rng));
      break;
    case 2:
      a->set_type(onnx::AttributeProto::FLOAT);
      a->set_f(interestingFloat(rng));
      break;
    default:
      a->set_type(onnx::AttributeProto::STRING);
      a->set_s(rng() % 2 ? "bij,bjk->bik" : "");
      break;
    }
    return;
  }
  int index = static_cast<int>(pick(rng, node.attribute_size()));
  auto *a = node.mutable_attribute(index);
  switch (pick(rng, 7)) {
  case 0:
    a->set_i(interestingInt(rng));
    break;
  case 1:
    if (a->ints_size() && rng() % 2)
      a->set_ints(pick(rng, a->ints_size()), interestingInt(rng));
    else if (rng() % 2)
      a->add_ints(interestingInt(rng));
    else
      a->clear_ints();
    break;
  case 2:
    a->set_f(interestingFloat(rng));
    break;
  case 3: // The declared type no longer matches the field that is set.
    a->set_type(
        static_cast<onnx::AttributeProto::AttributeType>(pick(rng, 14)));
    break;
  case 4:
    if (a->has_t())
      mutateTensorData(*a->mutable_t(), rng);
    else
      a->set_i(interestingInt(rng));
    break;
  case 5:
    node.mutable_attribute()->DeleteSubrange(index, 1);
    break;
  default: { // A second attribute of the same name.
    onnx::AttributeProto copy = *a;
    copy.set_i(interestingInt(rng));
    *node.add_attribute() = copy;
    break;
  }
  }
}

void mutateValueInfo(onnx::ValueInfoProto &v, Rng &rng) {
  auto *tt = v.mutable_type()->mutable_tensor_type();
  auto *shape = tt->mutable_shape();
  switch (pick(rng, 5)) {
  case 0:
    if (shape->dim_size()) {
      auto *d = shape->mutable_dim(pick(rng, shape->dim_size()));
      if (rng() % 3 == 0)
        d->set_dim_param(rng() % 2 ? "batch" : "sequence");
      else
        d->set_dim_value(interestingInt(rng));
    }
    break;
  case 1:
    shape->add_dim()->set_dim_value(interestingInt(rng));
    break;
  case 2:
    if (shape->dim_size())
      shape->mutable_dim()->RemoveLast();
    else
      tt->clear_shape();
    break;
  case 3:
    tt->set_elem_type(static_cast<int32_t>(pick(rng, 25)));
    break;
  default:
    v.clear_type();
    break;
  }
}

void mutateModel(onnx::ModelProto &model, Rng &rng) {
  onnx::GraphProto &g = *model.mutable_graph();
  int nodes = g.node_size();
  switch (pick(rng, 13)) {
  case 0:
  case 1: { // An input of a node now reads another value.
    if (!nodes)
      break;
    auto &node = *g.mutable_node(pick(rng, nodes));
    auto names = valueNames(g);
    const std::string &name = names[pick(rng, names.size())];
    if (node.input_size() && rng() % 4)
      node.set_input(pick(rng, node.input_size()), name);
    else if (rng() % 2)
      node.add_input(name);
    else if (node.input_size())
      node.mutable_input()->RemoveLast();
    break;
  }
  case 2: // Another op (a contrib op one time in four).
    if (nodes) {
      onnx::NodeProto *node = g.mutable_node(pick(rng, nodes));
      if (rng() % 4) {
        node->set_op_type(kOpTypes[pick(rng, std::size(kOpTypes))]);
        node->clear_domain();
      } else {
        node->set_op_type(
            kContribOpTypes[pick(rng, std::size(kContribOpTypes))]);
        node->set_domain("com.microsoft");
      }
    }
    break;
  case 3:
  case 4:
    if (nodes)
      mutateAttribute(*g.mutable_node(pick(rng, nodes)), rng);
    break;
  case 5: { // A node removed, duplicated, or two nodes swapped.
    if (!nodes)
      break;
    int i = pick(rng, nodes), j = pick(rng, nodes);
    switch (pick(rng, 3)) {
    case 0:
      g.mutable_node()->DeleteSubrange(i, 1);
      break;
    case 1:
      *g.add_node() = g.node(i);
      break;
    default:
      g.mutable_node()->SwapElements(i, j);
      break;
    }
    break;
  }
  case 6:
    if (g.input_size())
      mutateValueInfo(*g.mutable_input(pick(rng, g.input_size())), rng);
    break;
  case 7:
    if (g.output_size())
      mutateValueInfo(*g.mutable_output(pick(rng, g.output_size())), rng);
    break;
  case 8:
  case 9:
    if (g.initializer_size())
      mutateTensorData(*g.mutable_initializer(pick(rng, g.initializer_size())),
                       rng);
    break;
  case 10: { // An output removed, or a new one on an intermediate value.
    auto names = valueNames(g);
    if (g.output_size() && rng() % 2)
      g.mutable_output()->RemoveLast();
    else
      g.add_output()->set_name(names[pick(rng, names.size())]);
    break;
  }
  case 11: { // Another opset.
    static const int64_t versions[] = {1, 7, 11, 13, 14, 17, 18, 21, 23, 99};
    if (model.opset_import_size() == 0)
      model.add_opset_import();
    model.mutable_opset_import(0)->set_version(
        versions[pick(rng, std::size(versions))]);
    break;
  }
  default: { // An initializer shared by name, or a graph input dropped.
    if (g.initializer_size() && rng() % 2)
      *g.add_initializer() = g.initializer(pick(rng, g.initializer_size()));
    else if (g.input_size())
      g.mutable_input()->DeleteSubrange(pick(rng, g.input_size()), 1);
    break;
  }
  }
}

const char *const kSpanOptions[] = {
    "",
    "span=block:4 full-layers=0",
    "span=block:3 sink=2 num-full=1 policy=spread",
    "span=window:5 num-full=0",
    "span=window:2 sink=1 num-full=1 policy=top",
    "span=block:1 num-full=0",
};

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  makeScratchDir();
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size,
                                          size_t maxSize, unsigned seed) {
  onnx::ModelProto model;
  if (size > (1u << 24) || !model.ParseFromArray(data, static_cast<int>(size)))
    return LLVMFuzzerMutate(data, size, maxSize);
  Rng rng(seed);
  // Now and then a byte-level change too: it reaches the parser's corners.
  if (rng() % 16 == 0)
    return LLVMFuzzerMutate(data, size, maxSize);
  for (int i = 0, e = 1 + pick(rng, 3); i < e; ++i)
    mutateModel(model, rng);
  std::string out;
  if (!model.SerializeToString(&out) || out.size() > maxSize)
    return LLVMFuzzerMutate(data, size, maxSize);
  memcpy(data, out.data(), out.size());
  return out.size();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto model = std::make_unique<onnx::ModelProto>();
  if (size > (1u << 24) || !model->ParseFromArray(data, static_cast<int>(size)))
    return 0;
  // The run's choices come from the input, so that a crasher reproduces.
  uint64_t hash = llvm::hash_value(
      llvm::StringRef(reinterpret_cast<const char *>(data), size));
  mlir::DialectRegistry registry;
  mlir::masformer::registerONNXFrontendDialects(registry);
  mlir::MLIRContext context(registry);
  mlir::ScopedDiagnosticHandler quiet(
      &context, [](mlir::Diagnostic &) { return mlir::success(); });
  mlir::masformer::ONNXFrontendOptions options;
  options.strictRaise = false;
  options.spans = kSpanOptions[hash % std::size(kSpanOptions)];
  // Static shapes (every dynamic dimension of an input 2) or dynamic ones.
  if ((hash >> 8) % 2)
    mlir::masformer::fuzz::setStaticInputShapes(*model, options);
  mlir::FailureOr<mlir::masformer::ONNXFrontendResult> result =
      mlir::masformer::runONNXFrontend(std::move(model), scratchDir,
                                       "fuzz.onnx", options, &context);
  if (mlir::failed(result))
    return 0;
  (void)mlir::masformer::computeSpanReport(*result->module,
                                           (hash >> 16) % 2 ? 16 : 4097);
  mlir::masformer::ONNXExportOptions exportOptions;
  exportOptions.valueTypes = &result->valueTypes;
  if (mlir::succeeded(mlir::masformer::exportSpansToONNX(
          *result->module, *result->model, exportOptions))) {
    std::string bytes;
    (void)result->model->SerializeToString(&bytes);
  }
  return 0;
}
