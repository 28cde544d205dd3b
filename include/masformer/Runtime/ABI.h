/*===- ABI.h - The interface between a compiled model and the runtime -----===*
 *
 * Written once, read by the compiler (lib/Target), the runtime
 * (lib/Runtime) and the Python module: the symbols a compiled library
 * exports, the version of their contract, the signature's keywords and the
 * element types that cross it. Plain C, no includes beyond <stddef.h> and
 * <stdint.h>, so that anything that loads a compiled model can use it.
 *
 * A compiled library exports:
 *   MF_ABI_SYM_VERSION      int32_t, equal to MF_ABI_VERSION;
 *   MF_ABI_SYM_SIGNATURE    text: a MF_ABI_SIGNATURE_MAGIC "\t<version>"
 *                           line, "target\t<cpu|cuda>", for cuda
 *                           "chip\t<sm_XY>", then one
 *                           "input|output\t<name>\t<dtype>\t<dims>" line per
 *                           tensor (dims: sizes or "?key", comma-separated);
 *   MF_ABI_SYM_RUN          void(void **inputs, void *results);
 *   MF_ABI_SYM_FREE         void(void *), frees a result buffer;
 *   MF_ABI_SYM_RELEASE      void(void), empties the library's caches;
 *   MF_ABI_SYM_WEIGHTS      text, the weights' manifest (below);
 *   MF_ABI_SYM_WEIGHT_TABLE void *[n], one slot per weight of the manifest,
 *                           in its order: the runtime maps the weights'
 *                           files read-only and writes each weight's
 *                           address into its slot before anything runs.
 * and, for generation (docs/generate.md), optionally:
 *   MF_ABI_SYM_DECODE_SIGNATURE text: the decode entry's signature, in the
 *                           format above, then per cache input (in input
 *                           order) "cache\t<input index>\t<full|block|
 *                           window>\t<size>\t<sinks>" (the keys the
 *                           runtime must keep), and "max_length\t<n>"
 *                           when the model has a position table; or
 *                           MF_ABI_DECODE_UNAVAILABLE "\t<why>" when the
 *                           library has no decode entry;
 *   MF_ABI_SYM_DECODE_RUN   void(void **inputs, void *results), as
 *                           MF_ABI_SYM_RUN for the decode entry. Its
 *                           cache inputs "past.<L>.key" and ".value"
 *                           ([batch, kv_heads, capacity, head_dim]) are the
 *                           runtime's buffers, written in place: with the
 *                           scalars "past.<L>.start" and "past.<L>.rows",
 *                           rows [start, start + rows) of each head hold
 *                           the kept positions; the entry writes the new
 *                           tokens' keys and values at the rows after them
 *                           (start + rows + new <= capacity) and attends to
 *                           [start, start + rows + new).
 *
 * The manifest: a MF_ABI_WEIGHTS_MAGIC "\t<format>\t<build id>" line (the
 * build id in hex), then one line per file, in index order,
 *   "file\t<model|own>\t<name>\t<path>\t<bytes>"
 * ("model": a model's external data file, used as it is; "own": the weights
 * file masformer-compile wrote beside the library, which starts with a
 * MF_ABI_WEIGHTS_HEADER_BYTES header: MF_ABI_WEIGHTS_FILE_MAGIC, the format
 * and the build id as little-endian uint32 and uint64, then its size as
 * uint64), then one line per weight, in slot order,
 *   "weight\t<file index>\t<offset>\t<bytes>\t<fingerprint in hex>"
 * (mf_abi_weight_fingerprint of its bytes). Names and paths are
 * percent-encoded like the signature's names; <name> is the file's name,
 * looked for beside the library when <path> does not hold it (for "own"
 * files, first). The build id is mf_abi_fnv1a of every line after the
 * first, each with its newline.
 *
 *===----------------------------------------------------------------------===*/

#ifndef MASFORMER_RUNTIME_ABI_H
#define MASFORMER_RUNTIME_ABI_H

#include <stddef.h>
#include <stdint.h>

/* Raised whenever a symbol's meaning or the signature's format changes. */
#define MF_ABI_VERSION 4

/* The symbols as identifiers (for C that defines them: Allocator.c) and as
 * strings (for dlsym and the compiler). */
#define MF_ABI_STR_(x) #x
#define MF_ABI_STR(x) MF_ABI_STR_(x)
#define MF_ABI_ID_VERSION masformer_abi_version
#define MF_ABI_ID_SIGNATURE masformer_signature
#define MF_ABI_ID_RUN masformer_run
#define MF_ABI_ID_FREE masformer_free
#define MF_ABI_ID_RELEASE masformer_release_memory
#define MF_ABI_SYM_VERSION MF_ABI_STR(MF_ABI_ID_VERSION)
#define MF_ABI_SYM_SIGNATURE MF_ABI_STR(MF_ABI_ID_SIGNATURE)
#define MF_ABI_SYM_RUN MF_ABI_STR(MF_ABI_ID_RUN)
#define MF_ABI_SYM_FREE MF_ABI_STR(MF_ABI_ID_FREE)
#define MF_ABI_SYM_RELEASE MF_ABI_STR(MF_ABI_ID_RELEASE)
#define MF_ABI_SYM_WEIGHTS "masformer_weights"
#define MF_ABI_SYM_WEIGHT_TABLE "masformer_weight_table"
#define MF_ABI_SYM_DECODE_SIGNATURE "masformer_decode_signature"
#define MF_ABI_SYM_DECODE_RUN "masformer_decode_run"
#define MF_ABI_DECODE_UNAVAILABLE "unavailable"

/* The weights' manifest and the library's own weights file. */
#define MF_ABI_WEIGHTS_MAGIC "masformer-weights"
#define MF_ABI_WEIGHTS_FORMAT 1
#define MF_ABI_WEIGHTS_FILE_MAGIC "MFWEIGHT"
#define MF_ABI_WEIGHTS_HEADER_BYTES 64
/* Every weight in an own file starts at a multiple of this. */
#define MF_ABI_WEIGHTS_ALIGN 64

/* 64-bit FNV-1a of `n` bytes, continuing from `h` (start with
 * MF_ABI_FNV_START). */
#define MF_ABI_FNV_START 0xcbf29ce484222325ULL
static inline uint64_t mf_abi_fnv1a(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = (const unsigned char *)data;
  for (size_t i = 0; i < n; ++i)
    h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}

/* A weight's fingerprint: its size and the 64 bytes at its start, middle
 * and end, so that checking every weight of a model reads a few pages. */
static inline uint64_t mf_abi_weight_fingerprint(const void *data,
                                                 uint64_t size) {
  const unsigned char *p = (const unsigned char *)data;
  uint64_t h = mf_abi_fnv1a(MF_ABI_FNV_START, &size, sizeof(size));
  uint64_t n = size < 64 ? size : 64;
  h = mf_abi_fnv1a(h, p, (size_t)n);
  h = mf_abi_fnv1a(h, p + (size - n) / 2, (size_t)n);
  return mf_abi_fnv1a(h, p + size - n, (size_t)n);
}

/* The GPU library's weights on the device, uploaded by MF_ABI_SYM_RUN and
 * freed when the library is unloaded. */
#define MF_ABI_ID_DEVICE_CONSTANTS masformer_device_constants
#define MF_ABI_ID_NUM_DEVICE_CONSTANTS masformer_num_device_constants
#define MF_ABI_SYM_DEVICE_CONSTANTS MF_ABI_STR(MF_ABI_ID_DEVICE_CONSTANTS)
#define MF_ABI_SYM_NUM_DEVICE_CONSTANTS                                        \
  MF_ABI_STR(MF_ABI_ID_NUM_DEVICE_CONSTANTS)

#define MF_ABI_SIGNATURE_MAGIC "masformer-model"

/* The element types that cross the interface, in mf_dtype order
 * (Runtime.h): their names in the signature and their sizes in bytes. */
#define MF_ABI_NUM_DTYPES 10
static const struct {
  const char *name;
  size_t size;
} mf_abi_dtypes[MF_ABI_NUM_DTYPES] = {
    {"f32", 4}, {"f16", 2}, {"bf16", 2}, {"f64", 8}, {"i64", 8},
    {"i32", 4}, {"i16", 2}, {"i8", 1},   {"u8", 1},  {"bool", 1},
};

#endif /* MASFORMER_RUNTIME_ABI_H */
