//===- Session.cpp - Generation with a runtime-owned KV cache ---*- C++ -*-===//
//
// A session runs a library's decode entry (lib/Dialect/MASFormer/
// Transforms/DeriveDecode.cpp): input_ids [batch, new], past_length, and
// per layer the cached keys and values [cached, batch, kv_heads,
// head_dim]; it returns the logits and the new keys and values
// [new, batch, kv_heads, head_dim], of which the session keeps (one copy:
// the layout is sequence-major) what the layer's span can still reach
// (docs/generate.md):
//   full          every position;
//   window W, K   the K sinks and the last W - 1 positions;
//   block B       the current block, from the multiple of B at or below
//                 the length;
//   block B, K    the same, and the blocks holding the K sinks, whole
//                 (the first block when K <= B), while the current block is
//                 a later one: with whole blocks, block boundaries among the
//                 kept keys stay multiples of B, which the span's rule
//                 needs.
// Each layer's kept positions are [0, head) and [tail, length): the op sees
// them as one run of keys with its queries aligned to the end, which
// computes what the whole sequence does for every span above.
//
//===----------------------------------------------------------------------===//

#include "Internal.h"
#include "masformer/Runtime/Runtime.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

using namespace masformer::runtime::detail;

namespace {

struct LayerCache {
  size_t keyInput = 0, valueInput = 0;
  size_t keyOutput = 0, valueOutput = 0;
  std::string kind;
  int64_t size = 0, sink = 0;
  /// kv_heads and head_dim (from the signature, or the first new keys when
  /// dynamic), and the bytes of one position (batch x kv_heads x head_dim
  /// elements).
  int64_t heads = 0, dim = 0;
  size_t rowBytes = 0;
  std::vector<char> keys, values;
  /// Kept positions: [0, head) and [tail, length).
  int64_t head = 0, tail = 0;
  int64_t rows() const {
    return rowBytes ? static_cast<int64_t>(keys.size() / rowBytes) : 0;
  }
};

} // namespace

struct mf_session {
  mf_model *decode = nullptr;
  std::vector<LayerCache> layers;
  size_t logitsOutput = 0;
  int64_t batch = 0, length = 0, maxLength = -1;
  uint64_t peak = 0;
  bool ran = false;
  ~mf_session() { mf_model_free(decode); }

  uint64_t cacheBytes() const {
    uint64_t n = 0;
    for (const LayerCache &l : layers)
      n += l.keys.size() + l.values.size();
    return n;
  }
  void reset() {
    for (LayerCache &l : layers) {
      l.keys.clear();
      l.values.clear();
      l.head = l.tail = 0;
    }
    length = batch = 0;
    ran = false;
  }
  int run(const int64_t *ids, int64_t batchSize, int64_t count);
};

namespace {

/// Which positions a layer keeps once the sequence has `length`: [0, head)
/// and [tail, length).
void keptPositions(const LayerCache &l, int64_t length, int64_t &head,
                   int64_t &tail) {
  head = tail = 0;
  if (l.kind == "window") {
    int64_t recent = l.size - 1;
    if (length - recent > l.sink) {
      head = l.sink;
      tail = length - recent;
    }
  } else if (l.kind == "block") {
    // The sinks in whole blocks (the first, or more when there are more
    // sinks than a block holds), then the current block.
    int64_t start = length / l.size * l.size;
    int64_t sinkBlocks = (l.sink + l.size - 1) / l.size * l.size;
    if (start >= sinkBlocks)
      head = sinkBlocks, tail = start;
  }
}

/// Appends the `count` new positions whose keys and values are `k` and `v`
/// (`length` positions were cached before) and keeps only what the layer
/// needs afterwards, [0, head) and [tail, length + count) with tail >= head:
/// the kept old rows of the tail move down, then the kept new rows are
/// copied in, so nothing the span cannot reach is ever stored. The head's
/// old rows are where they were (sinks and the first block stay first).
void append(LayerCache &l, int64_t length, int64_t count, const char *k,
            const char *v) {
  int64_t end = length + count, head, tail;
  keptPositions(l, end, head, tail);
  // Row of cached position p in the current layout.
  auto rowOf = [&](int64_t p) { return p < l.head ? p : l.head + p - l.tail; };
  auto rowBytes = [&](int64_t rows) { return rows * l.rowBytes; };
  int64_t oldRows = length - tail;
  int64_t newHead = std::max<int64_t>(0, std::min(head, end) - length);
  int64_t newFrom = std::max(tail, length);
  for (auto [buf, src] : {std::pair(&l.keys, k), std::pair(&l.values, v)}) {
    if (oldRows > 0)
      std::memmove(buf->data() + rowBytes(head),
                   buf->data() + rowBytes(rowOf(tail)), rowBytes(oldRows));
    buf->resize(rowBytes(head + end - tail));
    if (newHead > 0)
      std::memcpy(buf->data() + rowBytes(length), src, rowBytes(newHead));
    std::memcpy(buf->data() + rowBytes(head + newFrom - tail),
                src + rowBytes(newFrom - length), rowBytes(end - newFrom));
  }
  l.head = head;
  l.tail = tail;
}

} // namespace

int mf_session::run(const int64_t *ids, int64_t batchSize, int64_t count) {
  if (!ids && batchSize * count > 0)
    return fail("no token ids");
  if (batchSize <= 0 || count <= 0)
    return fail("a prefill or step needs at least one sequence and one "
                "token, got batch " +
                std::to_string(batchSize) + " x " + std::to_string(count));
  if (maxLength >= 0 && length + count > maxLength)
    return fail("'" + modelPath(decode) + "' takes at most " +
                std::to_string(maxLength) + " positions (its position " +
                "table), but this call would make " +
                std::to_string(length) + " + " + std::to_string(count));
  int64_t idsShape[2] = {batchSize, count};
  if (mf_model_set_input(decode, "input_ids", MF_I64, idsShape, 2, ids))
    return 1;
  if (mf_model_set_input(decode, "past_length", MF_I64, nullptr, 0, &length))
    return 1;
  for (LayerCache &l : layers) {
    mf_tensor_info info;
    mf_model_input_info(decode, l.keyInput, &info);
    int64_t shape[4] = {l.rows(), batchSize, l.heads, l.dim};
    if (mf_model_set_input(decode, info.name, info.dtype, shape, 4,
                           l.keys.data()))
      return 1;
    mf_model_input_info(decode, l.valueInput, &info);
    if (mf_model_set_input(decode, info.name, info.dtype, shape, 4,
                           l.values.data()))
      return 1;
  }
  if (mf_model_run(decode))
    return 1;
  ran = true;
  for (LayerCache &l : layers) {
    mf_tensor k, v;
    if (mf_model_output(decode, l.keyOutput, &k) ||
        mf_model_output(decode, l.valueOutput, &v))
      return 1;
    size_t row = k.size_bytes / static_cast<size_t>(count);
    if (k.rank != 4 || k.shape[0] != count || v.size_bytes != k.size_bytes ||
        (l.rowBytes && l.rows() && row != l.rowBytes))
      return fail("'" + modelPath(decode) +
                  "' returned new keys of an unexpected shape");
    l.rowBytes = row;
    l.heads = k.shape[2];
    l.dim = k.shape[3];
    append(l, length, count, static_cast<const char *>(k.data),
           static_cast<const char *>(v.data));
  }
  batch = batchSize;
  length += count;
  peak = std::max(peak, cacheBytes());
  return 0;
}

extern "C" {

mf_session *mf_session_create(const mf_model *model) {
  if (!model) {
    fail("mf_session_create: no model");
    return nullptr;
  }
  mf_model *decode = loadDecodeEntry(modelPath(model).c_str());
  if (!decode)
    return nullptr;
  auto *s = new mf_session;
  s->decode = decode;
  s->maxLength = decodeMaxLength(decode);
  auto bad = [&](const std::string &why) -> mf_session * {
    fail("'" + modelPath(model) + "' has a malformed decode entry: " + why);
    delete s;
    return nullptr;
  };
  int64_t ids = mf_model_input_index(decode, "input_ids");
  int64_t past = mf_model_input_index(decode, "past_length");
  int64_t logits = mf_model_output_index(decode, "logits");
  if (ids < 0 || past < 0)
    return bad("no input_ids or past_length input");
  s->logitsOutput = logits < 0 ? 0 : logits;
  mf_tensor_info info;
  if (mf_model_output_info(decode, s->logitsOutput, &info) ||
      info.dtype != MF_F32 || info.rank != 3)
    return bad("its first output is not f32 logits [batch, new, vocab]");
  for (const CacheDecl &c : decodeCaches(decode)) {
    mf_tensor_info in;
    if (mf_model_input_info(decode, c.input, &in) || in.rank != 4)
      return bad("cache input " + std::to_string(c.input));
    std::string name = in.name;
    // past.L.key / past.L.value, and new.L.key / new.L.value.
    if (name.size() < 5 || name.compare(0, 5, "past.") != 0 ||
        name.size() < 4 || name.compare(name.size() - 4, 4, ".key") != 0)
      continue;
    std::string stem = name.substr(5, name.size() - 9);
    LayerCache l;
    l.keyInput = c.input;
    l.heads = std::max<int64_t>(in.dims[2], 0);
    l.dim = std::max<int64_t>(in.dims[3], 0);
    l.kind = c.kind;
    l.size = c.size;
    l.sink = c.sink;
    int64_t vi = mf_model_input_index(decode, ("past." + stem + ".value").c_str());
    int64_t ko = mf_model_output_index(decode, ("new." + stem + ".key").c_str());
    int64_t vo =
        mf_model_output_index(decode, ("new." + stem + ".value").c_str());
    if (vi < 0 || ko < 0 || vo < 0)
      return bad("layer " + stem + " has no value cache or no new keys");
    l.valueInput = vi;
    l.keyOutput = ko;
    l.valueOutput = vo;
    s->layers.push_back(std::move(l));
  }
  if (s->layers.empty())
    return bad("no cache inputs");
  return s;
}

void mf_session_free(mf_session *session) { delete session; }

int mf_session_prefill(mf_session *session, const int64_t *ids, int64_t batch,
                       int64_t length) {
  if (!session)
    return fail("no session");
  session->reset();
  return session->run(ids, batch, length);
}

int mf_session_step(mf_session *session, const int64_t *ids, int64_t batch,
                    int64_t count) {
  if (!session)
    return fail("no session");
  if (session->length == 0)
    return fail("a step needs a prefill first (the cache is empty)");
  if (batch != session->batch)
    return fail("a step of " + std::to_string(batch) +
                " sequences, but the prefill had " +
                std::to_string(session->batch));
  return session->run(ids, batch, count);
}

int mf_session_logits(const mf_session *session, mf_tensor *out) {
  if (!session)
    return fail("no session");
  if (!session->ran)
    return fail("no logits yet: prefill first");
  return mf_model_output(session->decode, session->logitsOutput, out);
}

void mf_session_reset(mf_session *session) {
  if (session)
    session->reset();
}

int64_t mf_session_length(const mf_session *session) {
  return session ? session->length : 0;
}

uint64_t mf_session_cache_bytes(const mf_session *session) {
  return session ? session->cacheBytes() : 0;
}

uint64_t mf_session_peak_cache_bytes(const mf_session *session) {
  return session ? session->peak : 0;
}

int64_t mf_session_max_length(const mf_session *session) {
  return session ? session->maxLength : -1;
}

int64_t mf_session_num_layers(const mf_session *session) {
  return session ? static_cast<int64_t>(session->layers.size()) : 0;
}

int64_t mf_session_cached_positions(const mf_session *session, int64_t layer) {
  if (!session || layer < 0 ||
      layer >= static_cast<int64_t>(session->layers.size()))
    return -1;
  return session->layers[layer].rows();
}

int mf_session_generate(mf_session *session, const int64_t *prompt,
                        int64_t batch, int64_t length, int64_t max_new,
                        int64_t *out_ids, float *out_logits) {
  if (!session)
    return fail("no session");
  if (max_new < 0)
    return fail("max_new must be >= 0, got " + std::to_string(max_new));
  if (max_new > 0 && !out_ids)
    return fail("no buffer for the generated ids");
  int64_t needed = length + (max_new > 0 ? max_new - 1 : 0);
  if (session->maxLength >= 0 && needed > session->maxLength)
    return fail("a prompt of " + std::to_string(length) + " tokens and " +
                std::to_string(max_new) + " new ones need " +
                std::to_string(needed) + " positions, but '" +
                modelPath(session->decode) + "' takes at most " +
                std::to_string(session->maxLength) + " (its position table)");
  if (mf_session_prefill(session, prompt, batch, length))
    return 1;
  std::vector<int64_t> next(static_cast<size_t>(batch));
  for (int64_t t = 0; t < max_new; ++t) {
    mf_tensor logits;
    if (mf_session_logits(session, &logits))
      return 1;
    int64_t count = logits.shape[1], vocab = logits.shape[2];
    const float *all = static_cast<const float *>(logits.data);
    for (int64_t b = 0; b < batch; ++b) {
      const float *row = all + (b * count + count - 1) * vocab;
      next[b] = std::max_element(row, row + vocab) - row;
      out_ids[b * max_new + t] = next[b];
      if (out_logits)
        std::memcpy(out_logits + (b * max_new + t) * vocab, row,
                    sizeof(float) * vocab);
    }
    if (t + 1 < max_new && mf_session_step(session, next.data(), batch, 1))
      return 1;
  }
  return 0;
}

} // extern "C"
