/*===- ABI.h - The interface between a compiled model and the runtime -----===*
 *
 * Written once, read by the compiler (lib/Target), the runtime
 * (lib/Runtime) and the Python module: the symbols a compiled library
 * exports, the version of their contract, the signature's keywords and the
 * element types that cross it. Plain C, no includes beyond <stddef.h>, so
 * that anything that loads a compiled model can use it.
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
 *   MF_ABI_SYM_RELEASE      void(void), empties the library's caches.
 *
 *===----------------------------------------------------------------------===*/

#ifndef MASFORMER_RUNTIME_ABI_H
#define MASFORMER_RUNTIME_ABI_H

#include <stddef.h>

/* Raised whenever a symbol's meaning or the signature's format changes. */
#define MF_ABI_VERSION 1

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
