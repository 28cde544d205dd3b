/*===- Runtime.h - Load and run a compiled masformer model ---------*- C -*-===*
 *
 * The C API of the masformer runtime: load a library that masformer-compile
 * made, list its inputs and outputs, bind inputs, run, read outputs.
 *
 *   mf_model *m = mf_model_load("model.so");
 *   if (!m) { fprintf(stderr, "%s\n", mf_last_error()); return 1; }
 *   int64_t shape[2] = {1, 128};
 *   if (mf_model_set_input(m, "input_ids", MF_I64, shape, 2, ids) ||
 *       mf_model_run(m)) { fprintf(stderr, "%s\n", mf_last_error()); ... }
 *   mf_tensor out;
 *   mf_model_output(m, 0, &out);   // out.data, out.shape, out.rank
 *   mf_model_free(m);
 *
 * Every call that can fail returns 0 on success and non-zero on failure,
 * and then mf_last_error() (per thread) says why, naming the input, the
 * dimension or the file. A model handle runs one call at a time; load one
 * handle per thread to run in parallel (the library is shared).
 *
 * The runtime depends only on the C library and libdl; a library compiled
 * for the CPU depends on libomp, one compiled for the GPU on
 * libMASFormerCudaRuntime and the NVIDIA driver (see docs/compile.md). A GPU
 * library loads without a GPU; running it then fails with the driver's
 * reason.
 *
 *===----------------------------------------------------------------------===*/

#ifndef MASFORMER_RUNTIME_RUNTIME_H
#define MASFORMER_RUNTIME_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types. */
typedef enum mf_dtype {
  MF_F32 = 0,
  MF_F16 = 1,
  MF_BF16 = 2,
  MF_F64 = 3,
  MF_I64 = 4,
  MF_I32 = 5,
  MF_I16 = 6,
  MF_I8 = 7,
  MF_U8 = 8,
  MF_BOOL = 9,
} mf_dtype;

/* "f32", "f16", "bf16", "f64", "i64", "i32", "i16", "i8", "u8", "bool". */
const char *mf_dtype_name(mf_dtype dtype);
/* Bytes per element. */
size_t mf_dtype_size(mf_dtype dtype);

typedef struct mf_model mf_model;

/* An input or output as the model declares it. dims[i] is -1 where the
 * dimension is dynamic; dim_names[i] is then the name of its size (inputs
 * with the same name must agree), or "" when it has none. */
typedef struct mf_tensor_info {
  const char *name;
  mf_dtype dtype;
  int64_t rank;
  const int64_t *dims;
  const char *const *dim_names;
} mf_tensor_info;

/* A tensor's data: row-major, contiguous. */
typedef struct mf_tensor {
  mf_dtype dtype;
  int64_t rank;
  const int64_t *shape;
  void *data;
  size_t size_bytes;
} mf_tensor;

/* The last error of this thread ("" when none). */
const char *mf_last_error(void);

/* Loads a compiled model and maps its weights; NULL on failure. */
mf_model *mf_model_load(const char *path);
void mf_model_free(mf_model *model);

/* The files the model's weights are mapped from, read-only (none when the
 * weights are inside the library): the model's own external data file
 * and/or the weights file masformer-compile wrote beside the library. */
size_t mf_model_num_weight_files(const mf_model *model);
/* 0 on success: the path the file was opened from and its size. */
int mf_model_weight_file(const mf_model *model, size_t index, const char **path,
                         uint64_t *bytes);

/* "cpu" or "cuda". */
const char *mf_model_target(const mf_model *model);
size_t mf_model_num_inputs(const mf_model *model);
size_t mf_model_num_outputs(const mf_model *model);
/* 0 on success; info points into the model and lives as long as it. */
int mf_model_input_info(const mf_model *model, size_t index,
                        mf_tensor_info *info);
int mf_model_output_info(const mf_model *model, size_t index,
                         mf_tensor_info *info);
/* The index of the input or output called `name`, or -1. */
int64_t mf_model_input_index(const mf_model *model, const char *name);
int64_t mf_model_output_index(const mf_model *model, const char *name);

/* Binds an input by name. The type and the static dimensions are checked
 * here; `data` is not copied and must stay valid and unchanged while it
 * is bound (runs use it until it is bound again or cleared). */
int mf_model_set_input(mf_model *model, const char *name, mf_dtype dtype,
                       const int64_t *shape, int64_t rank, const void *data);

/* Unbinds every input (a binding otherwise lasts until the input is bound
 * again: its data must stay valid that long). */
void mf_model_clear_inputs(mf_model *model);

/* Runs the model on the bound inputs (all must be bound, and dimensions
 * with the same name must agree). The previous outputs are freed. */
int mf_model_run(mf_model *model);

/* An output of the last run; its memory belongs to the model and lives
 * until the next mf_model_run or mf_model_free. */
int mf_model_output(const mf_model *model, size_t index, mf_tensor *out);

/* Generation (docs/generate.md). A library compiled from a causal decoder
 * has a decode entry next to the whole-sequence model: a session runs it
 * with a KV cache that the runtime owns and bounds per layer by the
 * layer's span (full layers keep every position; a `window W` layer its
 * last W - 1 and its sinks; a `block B` layer the current block, and with
 * sinks the first block too).
 *
 *   mf_session *s = mf_session_create(model);   // NULL: mf_last_error()
 *   mf_session_prefill(s, prompt, batch, length);
 *   mf_tensor logits;                           // [batch, length, vocab]
 *   mf_session_logits(s, &logits);
 *   mf_session_step(s, next, batch, 1);         // one token per sequence
 *   ...
 *   mf_session_free(s);
 *
 * The sequences of a batch have the same length (unpadded). Errors name
 * the problem: a prompt past the model's maximum length, a step before
 * the prefill, a batch other than the prefill's. */
typedef struct mf_session mf_session;

/* A session on `model`'s library (which must outlive it); NULL when the
 * library has no decode entry (mf_last_error() says why). */
mf_session *mf_session_create(const mf_model *model);
void mf_session_free(mf_session *session);

/* Empties the cache and runs `batch` sequences of `length` token ids. */
int mf_session_prefill(mf_session *session, const int64_t *ids, int64_t batch,
                       int64_t length);
/* The same, with the logits of only the last `logits_rows` positions
 * ([batch, logits_rows, vocab], 1 <= logits_rows <= length): what
 * generation needs (1), without the LM head's work on the other rows. */
int mf_session_prefill_rows(mf_session *session, const int64_t *ids,
                            int64_t batch, int64_t length, int64_t logits_rows);
/* Runs `count` new token ids per sequence after the cached ones. */
int mf_session_step(mf_session *session, const int64_t *ids, int64_t batch,
                    int64_t count);
/* The logits of the last prefill or step, [batch, count, vocab]; valid
 * until the next call on the session. */
int mf_session_logits(const mf_session *session, mf_tensor *out);
/* Empties the cache. */
void mf_session_reset(mf_session *session);
/* Positions per sequence so far (prompt and steps). */
int64_t mf_session_length(const mf_session *session);
/* Bytes of the keys and values kept now (the positions the layers' spans
 * can still reach), and at most since the session was created; the
 * buffers that hold them have room for up to half as many positions
 * again. */
uint64_t mf_session_cache_bytes(const mf_session *session);
uint64_t mf_session_peak_cache_bytes(const mf_session *session);
/* The most positions the model takes (its position table), or -1. */
int64_t mf_session_max_length(const mf_session *session);
/* The cache of layer `layer` (0-based): how many positions it keeps now. */
int64_t mf_session_cached_positions(const mf_session *session, int64_t layer);
int64_t mf_session_num_layers(const mf_session *session);

/* Greedy generation: prefills `prompt` ([batch, length]) and writes the
 * `max_new` tokens of highest logit after it to `out_ids` ([batch,
 * max_new]); with `out_logits` (may be NULL) also the logits each token was
 * chosen from ([batch, max_new, vocab], f32). */
int mf_session_generate(mf_session *session, const int64_t *prompt,
                        int64_t batch, int64_t length, int64_t max_new,
                        int64_t *out_ids, float *out_logits);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MASFORMER_RUNTIME_RUNTIME_H */
