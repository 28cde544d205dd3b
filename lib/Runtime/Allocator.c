/*===- Allocator.c - The buffer allocator of every compiled model ---------===*
 *
 * Linked into every library that masformer-compile writes (compiled once by
 * CMake, once for the CPU and once with MF_CUDA for the GPU, and embedded in
 * the compiler), with what else the generated code calls, so that a CPU
 * library needs only libomp and libc at run time, no MLIR or LLVM library
 * (memrefCopy, at the end). First the allocator of its buffers, which
 * finalize-memref-to-llvm with use-generic-functions calls. Blocks of 1 MiB
 * or more (rounded up to a 16th to a 32nd of their size) are kept when
 * freed and reused for a request of up to their size, so that a model's
 * activations, freed and allocated again in every run, do not go back to the
 * kernel (an mmap, page faults and zeroed pages per buffer and per run), even
 * when they grow a little per run as a decode step's keys do. In a GPU
 * library such blocks are also page-locked (the device copies results into
 * them). masformer_free frees the results the runtime receives;
 * masformer_release_memory empties the cache.
 *
 *===----------------------------------------------------------------------===*/

#include "masformer/Runtime/ABI.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MF_HEADER 64
#define MF_BIG ((size_t)1 << 20)
#define MF_SLOTS 64

#ifdef MF_CUDA
/* A GPU library's host buffers are its results, which the device copies
   into: blocks of MF_BIG or more are page-locked when first allocated
   (the flag in the header's second word) and stay so while cached, so
   that the copies run at the bus's rate; unpinned before they are freed. */
int masformer_cuda_pin(void *ptr, uint64_t size);
void masformer_cuda_unpin(void *ptr);
#define MF_PINNED(base) (((size_t *)(base))[1])
static void mf_release(char *base) {
  if (MF_PINNED(base))
    masformer_cuda_unpin(base);
  free(base);
}
#else
static void mf_release(char *base) { free(base); }
#endif

typedef struct { char *base; size_t size; } mf_block;
static mf_block mf_cache[MF_SLOTS];
static int mf_cached;
static pthread_mutex_t mf_lock = PTHREAD_MUTEX_INITIALIZER;

__attribute__((visibility("hidden"))) void *
_mlir_memref_to_llvm_alloc(uint64_t size) {
  size_t total = (size_t)size + MF_HEADER;
  if (total < size)
    return NULL;
  if (total >= MF_BIG) {
    /* Rounded up to a 16th to a 32nd of its size, so that a buffer that
       grows a little from one run to the next (a decode step's keys, one
       position longer each time) still fits the block the last run freed. */
    size_t grain = MF_BIG;
    while (grain <= total / 32)
      grain <<= 1;
    size_t rounded = (total + grain - 1) / grain * grain;
    if (rounded < total)
      return NULL;
    total = rounded;
    pthread_mutex_lock(&mf_lock);
    int best = -1;
    for (int i = 0; i < mf_cached; ++i)
      if (mf_cache[i].size >= total && mf_cache[i].size - total <= total / 4 &&
          (best < 0 || mf_cache[i].size < mf_cache[best].size))
        best = i;
    if (best >= 0) {
      char *base = mf_cache[best].base;
      mf_cache[best] = mf_cache[--mf_cached];
      pthread_mutex_unlock(&mf_lock);
      return base + MF_HEADER;
    }
    pthread_mutex_unlock(&mf_lock);
  }
  char *base = (char *)malloc(total);
  if (!base)
    return NULL;
  *(size_t *)base = total;
#ifdef MF_CUDA
  MF_PINNED(base) = total >= MF_BIG && masformer_cuda_pin(base, total);
#endif
  return base + MF_HEADER;
}

__attribute__((visibility("hidden"))) void
_mlir_memref_to_llvm_free(void *ptr) {
  if (!ptr)
    return;
  char *base = (char *)ptr - MF_HEADER;
  size_t total = *(size_t *)base;
  if (total >= MF_BIG) {
    pthread_mutex_lock(&mf_lock);
    int slot = mf_cached < MF_SLOTS ? mf_cached++ : -1;
    if (slot < 0) {
      /* Full: this block replaces the smallest one if it is larger. */
      int small = 0;
      for (int i = 1; i < MF_SLOTS; ++i)
        if (mf_cache[i].size < mf_cache[small].size)
          small = i;
      if (mf_cache[small].size < total) {
        char *old = mf_cache[small].base;
        mf_cache[small].base = base;
        mf_cache[small].size = total;
        base = old;
      }
    } else {
      mf_cache[slot].base = base;
      mf_cache[slot].size = total;
      base = NULL;
    }
    pthread_mutex_unlock(&mf_lock);
    if (!base)
      return;
  }
  mf_release(base);
}

void MF_ABI_ID_FREE(void *ptr) { _mlir_memref_to_llvm_free(ptr); }

#ifdef MF_CUDA
/* The model's weights on the device: masformer_run uploads them, and they
   live as long as the library is loaded (every handle of it shares them). */
extern void *MF_ABI_ID_DEVICE_CONSTANTS[];
extern const int64_t MF_ABI_ID_NUM_DEVICE_CONSTANTS;
void masformer_cuda_free_constants(void **slots, int64_t n);
void masformer_cuda_release_memory(void);

__attribute__((destructor)) static void mf_free_device_constants(void) {
  masformer_cuda_free_constants(MF_ABI_ID_DEVICE_CONSTANTS,
                                MF_ABI_ID_NUM_DEVICE_CONSTANTS);
}
#endif

void MF_ABI_ID_RELEASE(void) {
  pthread_mutex_lock(&mf_lock);
  for (int i = 0; i < mf_cached; ++i)
    mf_release(mf_cache[i].base);
  mf_cached = 0;
  pthread_mutex_unlock(&mf_lock);
#ifdef MF_CUDA
  /* The shim's cached free device blocks (the weights stay). */
  masformer_cuda_release_memory();
#endif
}

#ifndef MF_CUDA
/* memref.copy between buffers of any layout: the lowering calls
   memrefCopy(element size, source, destination) on unranked descriptors
   ({rank, descriptor}; a descriptor is {allocated, aligned, offset,
   sizes[rank], strides[rank]}, strides in elements), the layout that
   finalize-memref-to-llvm writes. The trailing dimensions that are
   contiguous in both buffers are copied as one run. Hidden: a library
   loaded into a process that has MLIR's own memrefCopy keeps this one. */
typedef struct {
  int64_t rank;
  void *descriptor;
} mf_unranked_memref;

typedef struct {
  char *allocated;
  char *aligned;
  int64_t offset;
  int64_t sizes_and_strides[];
} mf_memref;

__attribute__((visibility("hidden"))) void
memrefCopy(int64_t elem_size, mf_unranked_memref *src_arg,
           mf_unranked_memref *dst_arg) {
  int64_t rank = src_arg->rank;
  const mf_memref *src = (const mf_memref *)src_arg->descriptor;
  const mf_memref *dst = (const mf_memref *)dst_arg->descriptor;
  const int64_t *sizes = src->sizes_and_strides;
  const int64_t *src_strides = src->sizes_and_strides + rank;
  const int64_t *dst_strides = dst->sizes_and_strides + rank;
  const char *from = src->aligned + src->offset * elem_size;
  char *to = dst->aligned + dst->offset * elem_size;
  for (int64_t d = 0; d < rank; ++d)
    if (sizes[d] <= 0)
      return;
  /* Dimensions [outer, rank) are contiguous in both: one run of `run`
     elements per index of the outer ones. */
  int64_t outer = rank, run = 1;
  while (outer > 0 && src_strides[outer - 1] == run &&
         dst_strides[outer - 1] == run) {
    --outer;
    run *= sizes[outer];
  }
  size_t bytes = (size_t)run * (size_t)elem_size;
  if (outer == 0) {
    memcpy(to, from, bytes);
    return;
  }
  int64_t index[outer];
  for (int64_t d = 0; d < outer; ++d)
    index[d] = 0;
  for (;;) {
    memcpy(to, from, bytes);
    /* The next index, last dimension fastest. */
    int64_t d = outer - 1;
    for (; d >= 0; --d) {
      from += src_strides[d] * elem_size;
      to += dst_strides[d] * elem_size;
      if (++index[d] < sizes[d])
        break;
      from -= src_strides[d] * sizes[d] * elem_size;
      to -= dst_strides[d] * sizes[d] * elem_size;
      index[d] = 0;
    }
    if (d < 0)
      return;
  }
}
#endif
