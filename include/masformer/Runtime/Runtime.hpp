//===- Runtime.hpp - C++ wrapper of the masformer runtime ------------*- C++ -*-===//
//
// The C API of Runtime.h with RAII and exceptions:
//
//   masformer::runtime::Model model("model.so");
//   model.setInput("input_ids", MF_I64, {1, 128}, ids.data());
//   model.run();
//   mf_tensor logits = model.output(0);
//
// Every failure throws masformer::runtime::Error with the runtime's message.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_RUNTIME_RUNTIME_HPP
#define MASFORMER_RUNTIME_RUNTIME_HPP

#include "masformer/Runtime/Runtime.h"

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace masformer::runtime {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline void check(int rc) {
  if (rc != 0)
    throw Error(mf_last_error());
}

/// A declared input or output.
struct TensorInfo {
  std::string name;
  mf_dtype dtype;
  /// -1 where dynamic.
  std::vector<int64_t> dims;
  /// The name of each dynamic dimension's size ("" when it has none).
  std::vector<std::string> dimNames;
};

/// A file the weights are mapped from.
struct WeightFile {
  std::string path;
  uint64_t bytes;
};

class Model {
public:
  explicit Model(const std::string &path) : model(mf_model_load(path.c_str())) {
    if (!model)
      throw Error(mf_last_error());
  }
  Model(Model &&other) noexcept : model(std::exchange(other.model, nullptr)) {}
  Model &operator=(Model &&other) noexcept {
    std::swap(model, other.model);
    return *this;
  }
  Model(const Model &) = delete;
  Model &operator=(const Model &) = delete;
  ~Model() { mf_model_free(model); }

  std::string target() const { return mf_model_target(model); }

  /// The files the weights are mapped from (none when they are inside the
  /// library).
  std::vector<WeightFile> weightFiles() const {
    std::vector<WeightFile> files;
    for (size_t i = 0, e = mf_model_num_weight_files(model); i < e; ++i) {
      const char *path;
      uint64_t bytes;
      check(mf_model_weight_file(model, i, &path, &bytes));
      files.push_back({path, bytes});
    }
    return files;
  }

  std::vector<TensorInfo> inputs() const {
    return infos(mf_model_num_inputs(model), mf_model_input_info);
  }
  std::vector<TensorInfo> outputs() const {
    return infos(mf_model_num_outputs(model), mf_model_output_info);
  }

  /// `data` must stay valid while it is bound (until bound again or
  /// clearInputs()).
  void setInput(const std::string &name, mf_dtype dtype,
                const std::vector<int64_t> &shape, const void *data) {
    check(mf_model_set_input(model, name.c_str(), dtype, shape.data(),
                             static_cast<int64_t>(shape.size()), data));
  }

  void clearInputs() { mf_model_clear_inputs(model); }

  void run() { check(mf_model_run(model)); }

  /// Valid until the next run() or the model's destruction.
  mf_tensor output(size_t index) const {
    mf_tensor t;
    check(mf_model_output(model, index, &t));
    return t;
  }
  mf_tensor output(const std::string &name) const {
    int64_t i = mf_model_output_index(model, name.c_str());
    if (i < 0)
      throw Error("the model has no output '" + name + "'");
    return output(static_cast<size_t>(i));
  }

  mf_model *get() const { return model; }

private:
  using InfoFn = int (*)(const mf_model *, size_t, mf_tensor_info *);
  std::vector<TensorInfo> infos(size_t n, InfoFn fn) const {
    std::vector<TensorInfo> list;
    for (size_t i = 0; i < n; ++i) {
      mf_tensor_info info;
      check(fn(model, i, &info));
      TensorInfo t{info.name, info.dtype, {}, {}};
      for (int64_t d = 0; d < info.rank; ++d) {
        t.dims.push_back(info.dims[d]);
        t.dimNames.push_back(info.dim_names[d]);
      }
      list.push_back(std::move(t));
    }
    return list;
  }

  mf_model *model;
};

/// Generation on a Model's library (docs/generate.md): the KV cache lives
/// in the session, each layer's bounded by its span.
///
///   masformer::runtime::Session gen(model);
///   std::vector<int64_t> ids = gen.generate(prompt, /*batch=*/1, 64);
class Session {
public:
  /// Throws when the library has no decode entry (the message says why).
  /// `model` must outlive the session.
  explicit Session(const Model &model)
      : session(mf_session_create(model.get())) {
    if (!session)
      throw Error(mf_last_error());
  }
  Session(Session &&other) noexcept
      : session(std::exchange(other.session, nullptr)) {}
  Session &operator=(Session &&other) noexcept {
    std::swap(session, other.session);
    return *this;
  }
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;
  ~Session() { mf_session_free(session); }

  /// Empties the cache and runs `batch` sequences of ids.size() / batch
  /// tokens; returns their logits (valid until the next call).
  mf_tensor prefill(const std::vector<int64_t> &ids, int64_t batch) {
    check(mf_session_prefill(session, ids.data(), batch,
                             tokensPerSequence(ids, batch)));
    return logits();
  }
  /// The same, returning the logits of only the last `logitsRows` tokens
  /// (1: the next token's), without the LM head's work on the others.
  mf_tensor prefill(const std::vector<int64_t> &ids, int64_t batch,
                    int64_t logitsRows) {
    check(mf_session_prefill_rows(session, ids.data(), batch,
                                  tokensPerSequence(ids, batch), logitsRows));
    return logits();
  }
  /// Runs new tokens (ids.size() / batch per sequence) after the cache.
  mf_tensor step(const std::vector<int64_t> &ids, int64_t batch) {
    check(mf_session_step(session, ids.data(), batch,
                          tokensPerSequence(ids, batch)));
    return logits();
  }
  mf_tensor logits() const {
    mf_tensor t;
    check(mf_session_logits(session, &t));
    return t;
  }
  /// Greedy: the `maxNew` generated ids, [batch, maxNew] row-major.
  std::vector<int64_t> generate(const std::vector<int64_t> &prompt,
                                int64_t batch, int64_t maxNew) {
    std::vector<int64_t> out(
        static_cast<size_t>(batch > 0 && maxNew > 0 ? batch * maxNew : 0));
    check(mf_session_generate(session, prompt.data(), batch,
                              tokensPerSequence(prompt, batch), maxNew,
                              out.data(), nullptr));
    return out;
  }
  void reset() { mf_session_reset(session); }
  int64_t length() const { return mf_session_length(session); }
  uint64_t cacheBytes() const { return mf_session_cache_bytes(session); }
  uint64_t peakCacheBytes() const {
    return mf_session_peak_cache_bytes(session);
  }
  /// The most positions the model takes, or -1.
  int64_t maxLength() const { return mf_session_max_length(session); }
  /// Positions each layer's cache keeps now.
  std::vector<int64_t> cachedPositions() const {
    std::vector<int64_t> out;
    for (int64_t l = 0, e = mf_session_num_layers(session); l < e; ++l)
      out.push_back(mf_session_cached_positions(session, l));
    return out;
  }
  mf_session *get() const { return session; }

private:
  static int64_t tokensPerSequence(const std::vector<int64_t> &ids,
                                   int64_t batch) {
    if (batch <= 0 || ids.size() % static_cast<size_t>(batch))
      throw Error(std::to_string(ids.size()) + " token ids are not " +
                  std::to_string(batch) + " sequences of one length");
    return static_cast<int64_t>(ids.size()) / batch;
  }

  mf_session *session;
};

} // namespace masformer::runtime

#endif // MASFORMER_RUNTIME_RUNTIME_HPP
