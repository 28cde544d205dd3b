//===- MasformerModule.cpp - The masformer Python extension --- -*- C++ -*-===//
//
// masformer._masformer: the rewrite and compile API
// (include/masformer/API/Facade.h) and the runtime of compiled models
// (include/masformer/Runtime/Runtime.h) for the pure-Python package in
// python/masformer. Errors raise masformer._masformer.Error with the
// compiler's or the runtime's message.
//
//===----------------------------------------------------------------------===//

#include "masformer/API/Facade.h"
#include "masformer/Runtime/Runtime.h"

#include "llvm/Support/ErrorHandling.h"

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <stdexcept>

#if defined(__GLIBC__) && defined(__x86_64__)
#include <link.h>
#define MASFORMER_ALLOCATE_TLS 1
// The x86-64 ELF TLS ABI's resolver, which compilers call for every access
// to a dynamic thread-local variable; glibc's ld.so exports it.
extern "C" void *__tls_get_addr(void *);
#endif

namespace nb = nanobind;
using namespace mlir::masformer;

namespace {

/// Gives the calling thread the thread-local storage of every loaded library.
///
/// A library loaded with dlopen (this module, libMLIR, libLLVM, libstdc++,
/// protobuf) gets its thread-local block from malloc on a thread's first use
/// of one of its thread-local variables, and glibc aborts the process ("cannot
/// allocate memory for thread-local data: ABORT") when that malloc fails. A
/// call that runs out of memory reaches such first uses on its error path
/// (throwing, printing the diagnostic), so each binding that enters the
/// compiler or the runtime first allocates them all, while memory is left;
/// after the first call on a thread this costs one walk over the loaded
/// libraries.
void allocateThreadLocalStorage() {
#ifdef MASFORMER_ALLOCATE_TLS
  dl_iterate_phdr(
      [](dl_phdr_info *info, size_t, void *) {
        if (info->dlpi_tls_modid == 0)
          return 0;
        struct {
          unsigned long module, offset;
        } index{static_cast<unsigned long>(info->dlpi_tls_modid), 0};
        (void)__tls_get_addr(&index);
        return 0;
      },
      nullptr);
#endif
}

nb::dict toDict(const SpanReport &r) {
  nb::list layers;
  for (const LayerCost &c : r.layers) {
    nb::dict d;
    d["layer"] = c.layer;
    d["span"] = c.span;
    d["span_size"] = c.spanSize;
    d["sink"] = c.sink;
    d["causal"] = c.causal;
    d["cross"] = c.cross;
    d["heads"] = c.heads;
    d["kv_heads"] = c.kvHeads;
    d["head_dim"] = c.headDim;
    nb::list heads;
    for (const SpanSpec &h : c.headSpans) {
      nb::dict hd;
      hd["span"] = h.span;
      hd["size"] = h.spanSize;
      hd["sink"] = h.sink;
      heads.append(hd);
    }
    d["head_spans"] = heads;
    nb::list nodes;
    for (const std::string &n : c.nodes)
      nodes.append(n);
    d["nodes"] = nodes;
    d["flops"] = c.flops;
    d["full_flops"] = c.fullFlops;
    layers.append(d);
  }
  nb::dict d;
  d["seq_len"] = r.seqLen;
  d["layers"] = layers;
  d["total_flops"] = r.totalFlops;
  d["full_flops"] = r.fullFlops;
  return d;
}

nb::dict resultDict(const api::RewriteResult &result) {
  if (!result.ok)
    throw std::runtime_error(result.error);
  nb::dict d = toDict(result.report);
  d["warnings"] = result.warnings;
  if (!result.timing.empty())
    d["timing"] = result.timing;
  return d;
}

using Shapes = std::vector<std::pair<std::string, std::vector<int64_t>>>;

/// The runtime's element type of a numpy array; throws for others.
mf_dtype toMF(const nb::dlpack::dtype &t, const std::string &name) {
  using C = nb::dlpack::dtype_code;
  auto code = static_cast<C>(t.code);
  if (t.lanes == 1) {
    if (code == C::Float && t.bits == 32)
      return MF_F32;
    if (code == C::Float && t.bits == 16)
      return MF_F16;
    if (code == C::Float && t.bits == 64)
      return MF_F64;
    if (code == C::Int && t.bits == 64)
      return MF_I64;
    if (code == C::Int && t.bits == 32)
      return MF_I32;
    if (code == C::Int && t.bits == 16)
      return MF_I16;
    if (code == C::Int && t.bits == 8)
      return MF_I8;
    if (code == C::UInt && t.bits == 8)
      return MF_U8;
    if (code == C::Bool)
      return MF_BOOL;
  }
  throw std::invalid_argument("input '" + name +
                              "': arrays of this element type cannot be "
                              "passed to a compiled model");
}

nb::dlpack::dtype fromMF(mf_dtype t) {
  using C = nb::dlpack::dtype_code;
  auto make = [](C code, uint8_t bits) {
    nb::dlpack::dtype d;
    d.code = static_cast<uint8_t>(code);
    d.bits = bits;
    d.lanes = 1;
    return d;
  };
  switch (t) {
  case MF_F32:
  case MF_BF16: // returned as float32: numpy has no bfloat16
    return make(C::Float, 32);
  case MF_F16:
    return make(C::Float, 16);
  case MF_F64:
    return make(C::Float, 64);
  case MF_I64:
    return make(C::Int, 64);
  case MF_I32:
    return make(C::Int, 32);
  case MF_I16:
    return make(C::Int, 16);
  case MF_I8:
    return make(C::Int, 8);
  case MF_U8:
    return make(C::UInt, 8);
  case MF_BOOL:
    return make(C::Bool, 8);
  }
  return make(C::Float, 32);
}

/// The numpy name of the array type that carries `t` across (bf16 as
/// float32), derived from its DLPack code and width.
std::string numpyName(nb::dlpack::dtype t) {
  using C = nb::dlpack::dtype_code;
  switch (static_cast<C>(t.code)) {
  case C::Bool:
    return "bool";
  case C::Float:
    return "float" + std::to_string(t.bits);
  case C::UInt:
    return "uint" + std::to_string(t.bits);
  default:
    return "int" + std::to_string(t.bits);
  }
}

/// A loaded compiled model (the runtime's C API).
class Session {
public:
  explicit Session(const std::string &path) : model(load(path)) {}
  ~Session() {
    mf_session_free(generation);
    mf_model_free(model);
  }
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;

  std::string target() const { return mf_model_target(model); }

  /// (path, bytes) of each file the weights are mapped from.
  nb::list weightFiles() const {
    nb::list list;
    for (size_t i = 0, e = mf_model_num_weight_files(model); i < e; ++i) {
      const char *path;
      uint64_t bytes;
      if (mf_model_weight_file(model, i, &path, &bytes))
        throw std::runtime_error(mf_last_error());
      list.append(nb::make_tuple(nb::str(path), bytes));
    }
    return list;
  }

  nb::list infos(bool outputs) const {
    nb::list list;
    size_t n = outputs ? mf_model_num_outputs(model)
                       : mf_model_num_inputs(model);
    for (size_t i = 0; i < n; ++i) {
      mf_tensor_info info;
      int rc = outputs ? mf_model_output_info(model, i, &info)
                       : mf_model_input_info(model, i, &info);
      if (rc)
        throw std::runtime_error(mf_last_error());
      nb::list shape;
      for (int64_t d = 0; d < info.rank; ++d) {
        if (info.dims[d] >= 0)
          shape.append(info.dims[d]);
        else if (info.dim_names[d][0])
          shape.append(nb::str(info.dim_names[d]));
        else
          shape.append(nb::none());
      }
      nb::dict d;
      d["name"] = info.name;
      d["dtype"] = mf_dtype_name(info.dtype);
      d["numpy_dtype"] = numpyName(fromMF(info.dtype));
      d["shape"] = shape;
      list.append(d);
    }
    return list;
  }

  /// Runs on `feeds` (C-contiguous arrays by name); returns the outputs as
  /// new arrays, by name.
  nb::dict run(const std::vector<std::pair<
                   std::string, nb::ndarray<nb::ro, nb::c_contig,
                                            nb::device::cpu>>> &feeds) {
    mf_model_clear_inputs(model);
    for (const auto &[name, arr] : feeds) {
      std::vector<int64_t> shape(arr.ndim());
      for (size_t d = 0; d < arr.ndim(); ++d)
        shape[d] = static_cast<int64_t>(arr.shape(d));
      if (mf_model_set_input(model, name.c_str(), toMF(arr.dtype(), name),
                             shape.data(), static_cast<int64_t>(shape.size()),
                             arr.data()))
        throw std::runtime_error(mf_last_error());
    }
    int rc;
    {
      nb::gil_scoped_release release;
      allocateThreadLocalStorage();
      rc = mf_model_run(model);
    }
    mf_model_clear_inputs(model);
    if (rc)
      throw std::runtime_error(mf_last_error());
    nb::dict out;
    for (size_t i = 0; i < mf_model_num_outputs(model); ++i) {
      mf_tensor_info info;
      mf_tensor t;
      if (mf_model_output_info(model, i, &info) ||
          mf_model_output(model, i, &t))
        throw std::runtime_error(mf_last_error());
      size_t elements = 1;
      for (int64_t d = 0; d < t.rank; ++d)
        elements *= static_cast<size_t>(t.shape[d]);
      size_t bytes = t.dtype == MF_BF16 ? elements * 4 : t.size_bytes;
      void *copy = std::malloc(bytes ? bytes : 1);
      if (!copy)
        throw std::bad_alloc();
      if (t.dtype == MF_BF16) {
        auto *src = static_cast<const uint16_t *>(t.data);
        auto *dst = static_cast<uint32_t *>(copy);
        for (size_t e = 0; e < elements; ++e)
          dst[e] = static_cast<uint32_t>(src[e]) << 16;
      } else {
        std::memcpy(copy, t.data, bytes);
      }
      nb::capsule owner(copy, [](void *p) noexcept { std::free(p); });
      std::vector<size_t> shape(t.shape, t.shape + t.rank);
      out[info.name] = nb::ndarray<nb::numpy>(copy, shape.size(),
                                              shape.data(), owner, nullptr,
                                              fromMF(t.dtype))
                           .cast();
    }
    return out;
  }

  // Generation (docs/generate.md): the session is opened on first use.
  mf_session *gen() {
    if (!generation && !(generation = mf_session_create(model)))
      throw std::runtime_error(mf_last_error());
    return generation;
  }

  /// Prefill (`step` false) or step on [batch, count] int64 ids; returns
  /// the logits [batch, count, vocab], of a prefill with `rows` > 0 only
  /// those of the last `rows` tokens.
  nb::object
  advance(nb::ndarray<const int64_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>
              ids,
          bool step, int64_t rows = 0) {
    mf_session *s = gen();
    int rc;
    {
      nb::gil_scoped_release release;
      allocateThreadLocalStorage();
      rc = step ? mf_session_step(s, ids.data(), ids.shape(0), ids.shape(1))
           : rows > 0
               ? mf_session_prefill_rows(s, ids.data(), ids.shape(0),
                                         ids.shape(1), rows)
               : mf_session_prefill(s, ids.data(), ids.shape(0), ids.shape(1));
    }
    if (rc)
      throw std::runtime_error(mf_last_error());
    mf_tensor t;
    if (mf_session_logits(s, &t))
      throw std::runtime_error(mf_last_error());
    return copyF32(static_cast<const float *>(t.data),
                   {static_cast<size_t>(t.shape[0]),
                    static_cast<size_t>(t.shape[1]),
                    static_cast<size_t>(t.shape[2])});
  }

  /// Greedy: (generated ids [batch, max_new], logits [batch, max_new,
  /// vocab] or None).
  nb::tuple generate(
      nb::ndarray<const int64_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>
          prompt,
      int64_t maxNew, bool wantLogits) {
    mf_session *s = gen();
    if (maxNew < 0)
      throw std::invalid_argument("max_new_tokens must be >= 0");
    size_t batch = prompt.shape(0);
    mf_tensor_info info;
    if (mf_model_output_info(model, 0, &info))
      throw std::runtime_error(mf_last_error());
    int64_t vocab = info.rank == 3 ? info.dims[2] : -1;
    if (wantLogits && vocab < 0)
      throw std::runtime_error("the model's vocabulary size is dynamic: "
                               "generate without logits");
    std::vector<int64_t> ids(batch * maxNew);
    std::vector<float> logits(wantLogits ? batch * maxNew * vocab : 0);
    int rc;
    {
      nb::gil_scoped_release release;
      allocateThreadLocalStorage();
      rc =
          mf_session_generate(s, prompt.data(), batch, prompt.shape(1), maxNew,
                              ids.data(), wantLogits ? logits.data() : nullptr);
    }
    if (rc)
      throw std::runtime_error(mf_last_error());
    auto *idCopy = static_cast<int64_t *>(
        std::malloc(std::max<size_t>(ids.size(), 1) * sizeof(int64_t)));
    if (!idCopy)
      throw std::bad_alloc();
    std::memcpy(idCopy, ids.data(), ids.size() * sizeof(int64_t));
    nb::capsule owner(idCopy, [](void *p) noexcept { std::free(p); });
    size_t shape[2] = {batch, static_cast<size_t>(maxNew)};
    nb::object idArray =
        nb::ndarray<nb::numpy, int64_t>(idCopy, 2, shape, owner).cast();
    nb::object logitArray = nb::none();
    if (wantLogits)
      logitArray = copyF32(logits.data(), {batch, static_cast<size_t>(maxNew),
                                           static_cast<size_t>(vocab)});
    return nb::make_tuple(idArray, logitArray);
  }

  void reset() {
    if (generation)
      mf_session_reset(generation);
  }
  int64_t length() { return mf_session_length(gen()); }
  uint64_t cacheBytes() { return mf_session_cache_bytes(gen()); }
  uint64_t peakCacheBytes() { return mf_session_peak_cache_bytes(gen()); }
  int64_t maxLength() { return mf_session_max_length(gen()); }
  std::vector<int64_t> cachedPositions() {
    mf_session *s = gen();
    std::vector<int64_t> out;
    for (int64_t l = 0; l < mf_session_num_layers(s); ++l)
      out.push_back(mf_session_cached_positions(s, l));
    return out;
  }

private:
  static mf_model *load(const std::string &path) {
    allocateThreadLocalStorage();
    mf_model *model = mf_model_load(path.c_str());
    if (!model)
      throw std::runtime_error(mf_last_error());
    return model;
  }

  static nb::object copyF32(const float *data, std::vector<size_t> shape) {
    size_t n = 1;
    for (size_t d : shape)
      n *= d;
    auto *copy = static_cast<float *>(std::malloc(std::max<size_t>(n, 1) * 4));
    if (!copy)
      throw std::bad_alloc();
    std::memcpy(copy, data, n * 4);
    nb::capsule owner(copy, [](void *p) noexcept { std::free(p); });
    return nb::ndarray<nb::numpy, float>(copy, shape.size(), shape.data(),
                                         owner)
        .cast();
  }

  mf_model *model;
  mf_session *generation = nullptr;
};

} // namespace

NB_MODULE(_masformer, m) {
  m.doc() = "masformer compiler bindings (use the masformer package)";
  static nb::exception<std::runtime_error> error(m, "Error",
                                                 PyExc_RuntimeError);
  // LLVM reports a failed allocation by aborting the process unless a
  // handler takes over: here it becomes std::bad_alloc, which unwinds to
  // the binding (the compiler's state of that call is dropped with it)
  // instead of killing the interpreter.
  allocateThreadLocalStorage();
  llvm::install_bad_alloc_error_handler(
      [](void *, const char *reason, bool) { throw std::bad_alloc(); });
  // Running out of memory is one more way a model fails: masformer.Error,
  // as every other failure, not Python's MemoryError.
  nb::register_exception_translator(
      [](const std::exception_ptr &p, void *payload) {
        try {
          std::rethrow_exception(p);
        } catch (const std::bad_alloc &e) {
          PyErr_Format(static_cast<PyObject *>(payload), "out of memory (%s)",
                       e.what());
        }
      },
      error.ptr());
  m.def(
      "rewrite",
      [](const std::string &src, const std::string &dst,
         const std::string &spans, int64_t seqLen,
         const std::vector<std::pair<std::string, std::vector<int64_t>>>
             &inputShapes) {
        api::RewriteRequest request{src, dst, spans, seqLen, inputShapes};
        api::RewriteResult result;
        {
          // The compiler does not touch Python objects.
          nb::gil_scoped_release release;
          allocateThreadLocalStorage();
          result = api::rewrite(request);
        }
        return resultDict(result);
      },
      nb::arg("src"), nb::arg("dst"), nb::arg("spans"), nb::arg("seq_len"),
      nb::arg("input_shapes"),
      "Imports the ONNX model `src`, raises its attention layers, applies "
      "the --masformer-rewrite-spans options `spans` and writes the patched "
      "model to `dst` (empty: no output); returns the span report as a "
      "dict.");
  m.def(
      "compile",
      [](const std::string &src, const std::string &dst,
         const std::string &target, const std::string &chip,
         const std::string &precision, const std::string &cpu,
         const std::string &spans, int64_t seqLen, const Shapes &inputShapes,
         bool embedWeights, bool emulateAMX, bool timing, unsigned jobs,
         std::optional<std::string> cacheDir) {
        api::CompileRequest request;
        request.timing = timing;
        request.jobs = jobs;
        request.cacheDir = std::move(cacheDir);
        request.embedWeights = embedWeights;
        request.emulateAMX = emulateAMX;
        request.src = src;
        request.dst = dst;
        request.target = target;
        request.chip = chip;
        request.precision = precision;
        request.cpu = cpu;
        request.spans = spans;
        request.seqLen = seqLen;
        request.inputShapes = inputShapes;
        api::RewriteResult result;
        {
          nb::gil_scoped_release release;
          allocateThreadLocalStorage();
          result = api::compile(request);
        }
        return resultDict(result);
      },
      nb::arg("src"), nb::arg("dst"), nb::arg("target"), nb::arg("chip"),
      nb::arg("precision"), nb::arg("cpu"), nb::arg("spans"),
      nb::arg("seq_len"), nb::arg("input_shapes"),
      nb::arg("embed_weights") = false, nb::arg("emulate_amx") = false,
      nb::arg("timing") = false, nb::arg("jobs") = 0,
      nb::arg("cache_dir") = nb::none(),
      "Compiles the ONNX model `src` (with the rewrite `spans`) into the "
      "shared library `dst` (and its weights file); returns the span report "
      "as a dict (with `timing`: the time of each step, as JSON, under "
      "\"timing\").");
  nb::class_<Session>(m, "Session")
      .def(nb::init<const std::string &>(), nb::arg("path"))
      .def_prop_ro("target", &Session::target)
      .def("inputs", [](const Session &s) { return s.infos(false); })
      .def("outputs", [](const Session &s) { return s.infos(true); })
      .def("weight_files", &Session::weightFiles)
      .def("run", &Session::run, nb::arg("feeds"))
      .def("prefill", [](Session &s,
                         nb::ndarray<const int64_t, nb::ndim<2>, nb::c_contig,
                                     nb::device::cpu>
                             ids,
                         int64_t rows) { return s.advance(ids, false, rows); })
      .def("step", [](Session &s, nb::ndarray<const int64_t, nb::ndim<2>,
                                              nb::c_contig, nb::device::cpu>
                                      ids) { return s.advance(ids, true); })
      .def("generate", &Session::generate)
      .def("reset", &Session::reset)
      .def("length", &Session::length)
      .def("cache_bytes", &Session::cacheBytes)
      .def("peak_cache_bytes", &Session::peakCacheBytes)
      .def("max_length", &Session::maxLength)
      .def("cached_positions", &Session::cachedPositions);
}
