//===- Session.cpp - Generation with a runtime-owned KV cache ---*- C++ -*-===//
//
// A session runs a library's decode entry (lib/Dialect/MASFormer/
// Transforms/DeriveDecode.cpp): input_ids [batch, new], past_length, and
// per layer its cache buffers [batch, kv_heads, capacity, head_dim] with
// the scalars past.L.start and past.L.rows: rows [start, start + rows) of
// each head hold the kept positions, and the entry writes the new tokens'
// keys and values in place after them. The session owns those buffers and
// keeps, per layer, what the layer's span can still reach (docs/generate.md):
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
// computes what the whole sequence does for every span above. Dropping
// positions moves no keys (the run's start moves forward) except the sinks,
// which move up to the kept tail; a buffer is compacted (the run moved to
// row 0) or grown by half only when a step's new rows would not fit.
//
//===----------------------------------------------------------------------===//

#include "Internal.h"
#include "masformer/Runtime/Runtime.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <new>
#include <string>
#include <vector>

using namespace masformer::runtime::detail;

namespace {

struct LayerCache {
  /// The decode entry's inputs past.L.key, .value, .start and .rows.
  std::string stem, keyName, valueName, startName, rowsName;
  std::string kind;
  int64_t size = 0, sink = 0;
  /// kv_heads and head_dim, from the signature; the bytes of one position
  /// of one head.
  int64_t heads = 0, dim = 0;
  mf_dtype dtype = MF_F32;
  size_t rowBytes = 0;
  /// [batch * heads][capacity] rows each.
  std::vector<char> keys, values;
  int64_t planes = 0, capacity = 0;
  /// The kept positions' rows in each plane: [start, start + rows).
  int64_t start = 0, rows = 0;
  /// Kept positions: [0, head) and [tail, length).
  int64_t head = 0, tail = 0;

  char *row(std::vector<char> &buf, int64_t plane, int64_t r) {
    return buf.data() + (static_cast<size_t>(plane) * capacity + r) * rowBytes;
  }
  /// Moves `n` rows of every plane of both buffers from row `from` to `to`.
  void move(int64_t from, int64_t to, int64_t n) {
    if (n <= 0 || from == to)
      return;
    for (std::vector<char> *buf : {&keys, &values})
      for (int64_t p = 0; p < planes; ++p)
        std::memmove(row(*buf, p, to), row(*buf, p, from), n * rowBytes);
  }
  /// Room for `count` rows after the kept ones: in place, else with the
  /// run moved to row 0 when that leaves a quarter of the need free (so
  /// that a window's buffer is compacted once every many steps), else in
  /// buffers half again as large as the need.
  /// False when the memory cannot be had (nothing changed then).
  bool reserve(int64_t count) {
    int64_t need = rows + count;
    if (start + need <= capacity)
      return true;
    if (need <= capacity && (capacity - need) * 4 >= need) {
      move(start, 0, rows);
      start = 0;
      return true;
    }
    int64_t grown = need + need / 2;
    size_t bytes = static_cast<size_t>(planes) * grown * rowBytes;
    if (bytes / rowBytes / grown != static_cast<size_t>(planes))
      return false;
    std::vector<char> biggerKeys, biggerValues;
    try {
      biggerKeys.resize(bytes);
      biggerValues.resize(bytes);
    } catch (const std::bad_alloc &) {
      return false;
    }
    for (auto [buf, bigger] :
         {std::pair(&keys, &biggerKeys), std::pair(&values, &biggerValues)}) {
      // (No kept rows: nothing to copy, and the old buffer may be none.)
      for (int64_t p = 0; rows > 0 && p < planes; ++p)
        std::memcpy(bigger->data() + static_cast<size_t>(p) * grown * rowBytes,
                    row(*buf, p, start), rows * rowBytes);
      buf->swap(*bigger);
    }
    capacity = grown;
    start = 0;
    return true;
  }
  void clear() {
    keys = {};
    values = {};
    planes = capacity = start = rows = head = tail = 0;
  }
};

} // namespace

struct mf_session {
  mf_model *decode = nullptr;
  std::vector<LayerCache> layers;
  size_t logitsOutput = 0;
  /// The decode entry's logits_rows input, or -1 (it then returns every
  /// new position's logits, and `kept` holds the last rows asked for).
  int64_t logitsRowsInput = -1;
  int64_t batch = 0, length = 0, maxLength = -1;
  /// Rows of logits the last run returned.
  int64_t logitsRows = 0;
  /// What mf_session_logits returns of them without logits_rows.
  mutable std::vector<float> kept;
  mutable std::array<int64_t, 3> keptShape{};
  uint64_t peak = 0;
  bool ran = false;
  ~mf_session() { mf_model_free(decode); }

  /// The kept positions' bytes (the buffers hold up to half again as many
  /// rows, and a batch's sequences all the same).
  uint64_t cacheBytes() const {
    uint64_t n = 0;
    for (const LayerCache &l : layers)
      n += 2 * static_cast<uint64_t>(l.planes) * l.rows * l.rowBytes;
    return n;
  }
  void reset() {
    for (LayerCache &l : layers)
      l.clear();
    length = batch = 0;
    ran = false;
  }
  /// Runs `count` new positions of `batchSize` sequences; the logits are
  /// those of the last `rows` of them.
  int run(const int64_t *ids, int64_t batchSize, int64_t count, int64_t rows);
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

/// After a run wrote `count` new positions after the kept rows (`length`
/// positions came before), keeps only what the layer needs afterwards,
/// [0, head) and [tail, length + count) with tail >= head: the run's start
/// moves to the first kept tail row, minus the sinks, which move up to it.
void keepReachable(LayerCache &l, int64_t length, int64_t count) {
  int64_t end = length + count, head, tail;
  keptPositions(l, end, head, tail);
  // Row (from the run's start) of kept or new position p >= tail.
  int64_t tailRow = l.head + tail - l.tail;
  int64_t newStart = l.start + tailRow - head;
  // Positions [0, head) are the run's first rows: the old sinks, or (before
  // anything was dropped) the first positions.
  l.move(l.start, newStart, head);
  l.start = newStart;
  l.rows = head + end - tail;
  l.head = head;
  l.tail = tail;
}

} // namespace

int mf_session::run(const int64_t *ids, int64_t batchSize, int64_t count,
                    int64_t rows) {
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
  if (logitsRowsInput >= 0 &&
      mf_model_set_input(decode, "logits_rows", MF_I64, nullptr, 0, &rows))
    return 1;
  for (LayerCache &l : layers) {
    if (length == 0)
      l.planes = batchSize * l.heads;
    if (!l.reserve(count))
      return fail("cannot allocate the cache of layer " + l.stem + " for " +
                  std::to_string(l.rows + count) + " positions of " +
                  std::to_string(batchSize) + " sequences");
    int64_t shape[4] = {batchSize, l.heads, l.capacity, l.dim};
    if (mf_model_set_input(decode, l.keyName.c_str(), l.dtype, shape, 4,
                           l.keys.data()) ||
        mf_model_set_input(decode, l.valueName.c_str(), l.dtype, shape, 4,
                           l.values.data()) ||
        mf_model_set_input(decode, l.startName.c_str(), MF_I64, nullptr, 0,
                           &l.start) ||
        mf_model_set_input(decode, l.rowsName.c_str(), MF_I64, nullptr, 0,
                           &l.rows))
      return 1;
  }
  if (mf_model_run(decode))
    return 1;
  ran = true;
  logitsRows = rows;
  for (LayerCache &l : layers)
    keepReachable(l, length, count);
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
  s->logitsRowsInput = mf_model_input_index(decode, "logits_rows");
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
    // past.L.key (with past.L.value, past.L.start and past.L.rows).
    if (name.size() < 9 || name.compare(0, 5, "past.") != 0 ||
        name.compare(name.size() - 4, 4, ".key") != 0)
      continue;
    LayerCache l;
    l.stem = name.substr(5, name.size() - 9);
    l.heads = in.dims[1];
    l.dim = in.dims[3];
    l.dtype = in.dtype;
    l.rowBytes = static_cast<size_t>(std::max<int64_t>(l.dim, 0)) *
                 mf_dtype_size(in.dtype);
    if (l.heads <= 0 || l.dim <= 0 || l.rowBytes == 0)
      return bad("layer " + l.stem +
                 "'s cache has no fixed number of heads and head size");
    l.kind = c.kind;
    l.size = c.size;
    l.sink = c.sink;
    l.keyName = name;
    l.valueName = "past." + l.stem + ".value";
    l.startName = "past." + l.stem + ".start";
    l.rowsName = "past." + l.stem + ".rows";
    for (const std::string *input : {&l.valueName, &l.startName, &l.rowsName})
      if (mf_model_input_index(decode, input->c_str()) < 0)
        return bad("layer " + l.stem + " has no input " + *input);
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
  return session->run(ids, batch, length, length);
}

int mf_session_prefill_rows(mf_session *session, const int64_t *ids,
                            int64_t batch, int64_t length,
                            int64_t logits_rows) {
  if (!session)
    return fail("no session");
  if (length > 0 && (logits_rows < 1 || logits_rows > length))
    return fail("logits_rows must be in [1, " + std::to_string(length) +
                "] (the prompt's length), got " + std::to_string(logits_rows));
  session->reset();
  return session->run(ids, batch, length, logits_rows);
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
  return session->run(ids, batch, count, count);
}

int mf_session_logits(const mf_session *session, mf_tensor *out) {
  if (!session)
    return fail("no session");
  if (!session->ran)
    return fail("no logits yet: prefill first");
  if (mf_model_output(session->decode, session->logitsOutput, out))
    return 1;
  // A decode entry without logits_rows returned every row: the last ones
  // asked for, copied.
  int64_t all = out->shape[1];
  if (all == session->logitsRows)
    return 0;
  if (all < session->logitsRows || out->dtype != MF_F32)
    return fail("the decode entry returned " + std::to_string(all) +
                " rows of logits, not the " +
                std::to_string(session->logitsRows) + " asked for");
  const mf_session *s = session;
  int64_t b = out->shape[0], rows = s->logitsRows, vocab = out->shape[2];
  s->kept.resize(static_cast<size_t>(b * rows * vocab));
  const float *from = static_cast<const float *>(out->data);
  for (int64_t i = 0; i < b; ++i)
    std::memcpy(s->kept.data() + i * rows * vocab,
                from + (i * all + all - rows) * vocab,
                sizeof(float) * rows * vocab);
  s->keptShape = {b, rows, vocab};
  out->shape = s->keptShape.data();
  out->data = s->kept.data();
  out->size_bytes = sizeof(float) * s->kept.size();
  return 0;
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
  return session->layers[layer].rows;
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
  // Only the last position's logits: the others' are not needed.
  if (mf_session_prefill_rows(session, prompt, batch, length, 1))
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
