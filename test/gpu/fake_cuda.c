/*===- fake_cuda.c - A CUDA driver without a GPU, for the host code -------===*
 *
 * Built as libcuda.so.1 and found through LD_LIBRARY_PATH, it lets a library
 * from `masformer-compile --target=cuda` run its host code as compiled on a
 * machine without a GPU: the LLVM-lowered host function, the runtime, the
 * buffer allocator (lib/Runtime/Allocator.c) and the shim
 * (lib/Runtime/CudaRuntime.cpp), which emulate_model.py, working on the host
 * function's MLIR before its lowering, never executes. Device memory is
 * host memory, copies are memcpy, and launches run nothing (the results are
 * whatever the buffers held, not checked). At exit it prints what it saw:
 *
 *   fake libcuda: L launches, A allocations, F frees, N live (B bytes),
 *                 R host ranges pinned, P still pinned
 *
 * and it fails the process (exit status 3, with the reason on stderr) on a
 * free of a pointer it did not allocate, a double free, a copy that
 * reaches outside an allocation, or a host range pinned twice or unpinned
 * without being pinned: what the host code must never do.
 * FAKE_CUDA_SM (default 90) is the device's compute capability.
 *
 *===----------------------------------------------------------------------===*/

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

enum { kSuccess = 0, kInvalidValue = 1 };

/* Live allocations, in a small open table: the fixtures make hundreds. */
typedef struct {
  char *base;
  size_t size;
} Block;
static Block *blocks;
static size_t numBlocks, capBlocks;
static unsigned long long launches, allocs, frees, registrations;
static size_t numPinned;

static void fail(const char *what, const void *p) {
  fprintf(stderr, "fake libcuda: %s (%p)\n", what, p);
  fflush(stderr);
  _exit(3);
}

/* The block holding [p, p + n), or fail. */
static void checkRange(const char *what, const char *p, size_t n) {
  for (size_t i = 0; i < numBlocks; ++i)
    if (p >= blocks[i].base && p + n <= blocks[i].base + blocks[i].size)
      return;
  fail(what, p);
}

static void __attribute__((destructor)) report(void) {
  size_t bytes = 0;
  for (size_t i = 0; i < numBlocks; ++i)
    bytes += blocks[i].size;
  fprintf(stderr,
          "fake libcuda: %llu launches, %llu allocations, %llu frees, %zu "
          "live (%zu bytes), %llu host ranges pinned, %zu still pinned\n",
          launches, allocs, frees, numBlocks, bytes, registrations, numPinned);
}

CUresult cuInit(unsigned flags) {
  (void)flags;
  return kSuccess;
}
CUresult cuDeviceGetCount(int *n) {
  *n = 1;
  return kSuccess;
}
CUresult cuDeviceGet(int *dev, int ordinal) {
  *dev = ordinal;
  return ordinal == 0 ? kSuccess : kInvalidValue;
}
CUresult cuDeviceGetAttribute(int *v, int attr, int dev) {
  (void)dev;
  const char *sm = getenv("FAKE_CUDA_SM");
  int cc = sm ? atoi(sm) : 90;
  switch (attr) {
  case 75: /* compute capability major */
    *v = cc / 10;
    break;
  case 76: /* minor */
    *v = cc % 10;
    break;
  case 97: /* max shared memory per block, opt-in */
    *v = 227 * 1024;
    break;
  default:
    *v = 0;
  }
  return kSuccess;
}
CUresult cuDeviceGetName(char *name, int len, int dev) {
  (void)dev;
  snprintf(name, (size_t)len, "fake GPU (no device)");
  return kSuccess;
}
static int context, module, function, stream, event;
CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev) {
  (void)dev;
  *ctx = &context;
  return kSuccess;
}
CUresult cuCtxSetCurrent(void *ctx) {
  (void)ctx;
  return kSuccess;
}
CUresult cuModuleLoadData(void **m, const void *image) {
  if (!image)
    return kInvalidValue;
  *m = &module;
  return kSuccess;
}
CUresult cuModuleUnload(void *m) {
  (void)m;
  return kSuccess;
}
CUresult cuModuleGetFunction(void **f, void *m, const char *name) {
  (void)m;
  if (!name || !*name)
    return kInvalidValue;
  *f = &function;
  return kSuccess;
}
CUresult cuFuncSetAttribute(void *f, int attr, int v) {
  (void)f, (void)attr, (void)v;
  return kSuccess;
}
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz,
                        unsigned bx, unsigned by, unsigned bz, unsigned shared,
                        void *s, void **params, void **extra) {
  (void)s, (void)params, (void)extra, (void)shared;
  if (!f || !gx || !gy || !gz || !bx || !by || !bz)
    return kInvalidValue;
  ++launches;
  return kSuccess;
}
CUresult cuStreamCreate(void **s, unsigned flags) {
  (void)flags;
  *s = &stream;
  return kSuccess;
}
CUresult cuStreamDestroy_v2(void *s) {
  (void)s;
  return kSuccess;
}
CUresult cuStreamSynchronize(void *s) {
  (void)s;
  return kSuccess;
}
CUresult cuStreamWaitEvent(void *s, void *e, unsigned flags) {
  (void)s, (void)e, (void)flags;
  return kSuccess;
}
CUresult cuEventCreate(void **e, unsigned flags) {
  (void)flags;
  *e = &event;
  return kSuccess;
}
CUresult cuEventDestroy_v2(void *e) {
  (void)e;
  return kSuccess;
}
CUresult cuEventRecord(void *e, void *s) {
  (void)e, (void)s;
  return kSuccess;
}
CUresult cuEventSynchronize(void *e) {
  (void)e;
  return kSuccess;
}
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
  char *b = malloc(n ? n : 1);
  if (!b)
    return 2; /* out of memory */
  /* Poisoned as fresh device memory is not zero. */
  memset(b, 0x5A, n);
  if (numBlocks == capBlocks) {
    capBlocks = capBlocks ? 2 * capBlocks : 256;
    blocks = realloc(blocks, capBlocks * sizeof(Block));
    if (!blocks)
      fail("out of host memory", NULL);
  }
  blocks[numBlocks].base = b;
  blocks[numBlocks].size = n;
  ++numBlocks;
  ++allocs;
  *p = (CUdeviceptr)(uintptr_t)b;
  return kSuccess;
}
CUresult cuMemAllocManaged(CUdeviceptr *p, size_t n, unsigned flags) {
  (void)flags;
  return cuMemAlloc_v2(p, n);
}
CUresult cuMemFree_v2(CUdeviceptr p) {
  char *b = (char *)(uintptr_t)p;
  for (size_t i = 0; i < numBlocks; ++i)
    if (blocks[i].base == b) {
      free(b);
      blocks[i] = blocks[--numBlocks];
      ++frees;
      return kSuccess;
    }
  fail("cuMemFree of a pointer that is not a live allocation", b);
  return kInvalidValue;
}
/* One side of a copy may be host memory (the host function's buffers):
   only a pointer inside some allocation is checked against its end. */
static void checkSide(const char *what, const char *p, size_t n) {
  for (size_t i = 0; i < numBlocks; ++i)
    if (p >= blocks[i].base && p < blocks[i].base + blocks[i].size) {
      checkRange(what, p, n);
      return;
    }
}
CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, void *s) {
  (void)s;
  checkSide("copy past the end of a destination allocation",
            (char *)(uintptr_t)dst, n);
  checkSide("copy past the end of a source allocation", (char *)(uintptr_t)src,
            n);
  memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
  return kSuccess;
}
CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned v, size_t n, void *s) {
  (void)s;
  checkRange("memset past the end of an allocation", (char *)(uintptr_t)dst,
             4 * n);
  uint32_t *p = (uint32_t *)(uintptr_t)dst;
  for (size_t i = 0; i < n; ++i)
    p[i] = v;
  return kSuccess;
}
CUresult cuMemsetD16Async(CUdeviceptr dst, unsigned short v, size_t n,
                          void *s) {
  (void)s;
  checkRange("memset past the end of an allocation", (char *)(uintptr_t)dst,
             2 * n);
  uint16_t *p = (uint16_t *)(uintptr_t)dst;
  for (size_t i = 0; i < n; ++i)
    p[i] = v;
  return kSuccess;
}
/* Page-locked host ranges: each must be unregistered (before its memory
   is freed), exactly once. */
static void *pinned[1024];
CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned flags) {
  (void)flags;
  if (!p || !n)
    return kInvalidValue;
  for (size_t i = 0; i < numPinned; ++i)
    if (pinned[i] == p)
      fail("cuMemHostRegister of a range already registered", p);
  if (numPinned == sizeof(pinned) / sizeof(pinned[0]))
    return 2;
  pinned[numPinned++] = p;
  ++registrations;
  return kSuccess;
}
CUresult cuMemHostUnregister(void *p) {
  for (size_t i = 0; i < numPinned; ++i)
    if (pinned[i] == p) {
      pinned[i] = pinned[--numPinned];
      return kSuccess;
    }
  fail("cuMemHostUnregister of a range not registered", p);
  return kInvalidValue;
}
CUresult cuGetErrorName(CUresult r, const char **s) {
  *s = r == kSuccess ? "CUDA_SUCCESS" : "CUDA_ERROR_FAKE";
  return kSuccess;
}
CUresult cuGetErrorString(CUresult r, const char **s) {
  *s = r == kSuccess ? "no error" : "an error of the fake driver";
  return kSuccess;
}
