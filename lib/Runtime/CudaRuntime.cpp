//===- CudaRuntime.cpp - The mgpu* functions on the CUDA driver -*- C++ -*-===//
//
// The functions that MLIR's GPU host code calls (gpu-to-llvm and the
// gpu.binary translation emit calls to mgpuModuleLoad, mgpuLaunchKernel,
// mgpuMemAlloc, ...), implemented on the CUDA driver API. libcuda is opened
// at run time with dlopen, so this library builds and links on machines
// without a GPU or a CUDA toolkit; only running a kernel needs the driver.
//
// Errors are sticky, not fatal: the first failing driver call records a
// message naming the call and the driver's error, and every later call does
// nothing until masformer_cuda_clear_error(). Generated host code cannot
// check return values, so callers check masformer_cuda_error() after each
// call into compiled code. A machine without a driver or a GPU is such an
// error (reported on first use, e.g. the module load that runs when a
// compiled library is opened), never a crash.
//
// Context: the primary context of the device chosen by mgpuSetDefaultDevice
// (device 0 by default), shared with the CUDA runtime API (PyTorch, cuBLAS),
// so device pointers from those can be passed to compiled code.
//
// Memory: freed blocks are kept per size and reused. A block freed on a
// stream is reused at once by an allocation on the same stream (stream
// order makes that safe: a compiled model's function runs on one stream),
// and by any other once that stream has been synchronized;
// masformer_cuda_release_memory() returns the blocks to the driver.
// Streams are pooled the same way. A compiled model's weights are uploaded
// once (masformer_cuda_upload_constants) and freed when the library is
// unloaded (masformer_cuda_free_constants, from its destructor).
//
//===----------------------------------------------------------------------===//

#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#define MASFORMER_CUDA_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

// The few driver types and constants used, so that no CUDA header is needed.
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st *;
using CUmodule = struct CUmod_st *;
using CUfunction = struct CUfunc_st *;
using CUstream = struct CUstream_st *;
using CUevent = struct CUevent_st *;
constexpr CUresult kSuccess = 0;
constexpr int kFuncAttrMaxDynamicShared = 8;
constexpr int kDevAttrMaxSharedOptin = 97;
constexpr int kDevAttrCCMajor = 75, kDevAttrCCMinor = 76;
constexpr unsigned kStreamNonBlocking = 1;
constexpr unsigned kEventDisableTiming = 2;
constexpr unsigned kMemAttachGlobal = 1;

struct Driver {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGetCount)(int *);
  CUresult (*cuDeviceGet)(CUdevice *, int);
  CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
  CUresult (*cuDeviceGetName)(char *, int, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuModuleLoadData)(CUmodule *, const void *);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned,
                             unsigned, unsigned, unsigned, unsigned, CUstream,
                             void **, void **);
  CUresult (*cuStreamCreate)(CUstream *, unsigned);
  CUresult (*cuStreamDestroy)(CUstream);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned);
  CUresult (*cuEventCreate)(CUevent *, unsigned);
  CUresult (*cuEventDestroy)(CUevent);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
  CUresult (*cuMemAllocManaged)(CUdeviceptr *, size_t, unsigned);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemcpyAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*cuMemsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream);
  CUresult (*cuMemsetD16Async)(CUdeviceptr, unsigned short, size_t, CUstream);
  CUresult (*cuMemHostRegister)(void *, size_t, unsigned);
  CUresult (*cuMemHostUnregister)(void *);
  CUresult (*cuGetErrorName)(CUresult, const char **);
  CUresult (*cuGetErrorString)(CUresult, const char **);
};

struct State {
  std::mutex mutex;
  bool tried = false;
  bool ready = false;
  int device = 0;
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  Driver d{};
  std::string error;
  std::vector<CUstream> streams;
  /// A freed block, and the stream whose queued work may still use it
  /// (null: none).
  struct FreeBlock {
    CUdeviceptr ptr;
    CUstream stream;
  };
  std::multimap<size_t, FreeBlock> freeBlocks;
  /// Why the last module load failed: the reason a launch finds no kernel.
  std::string loadError;
  std::map<CUdeviceptr, size_t> liveBlocks;
};

State &state() {
  static State *s = new State; // never destroyed: used from atexit paths
  return *s;
}

/// Records the first error; later ones are consequences.
void setError(State &s, std::string message) {
  if (s.error.empty())
    s.error = std::move(message);
}

std::string describe(State &s, CUresult r) {
  const char *name = nullptr, *text = nullptr;
  if (s.d.cuGetErrorName)
    s.d.cuGetErrorName(r, &name);
  if (s.d.cuGetErrorString)
    s.d.cuGetErrorString(r, &text);
  std::string out = name ? name : "CUDA error " + std::to_string(r);
  if (text)
    out += std::string(" (") + text + ")";
  return out;
}

/// Checks a driver call's result; false (and the error recorded) on failure.
bool check(State &s, CUresult r, const char *call) {
  if (r == kSuccess)
    return true;
  setError(s, std::string(call) + " failed: " + describe(s, r));
  return false;
}

template <typename F> bool load(void *lib, F &fn, const char *name) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  return fn != nullptr;
}

/// Opens the driver and makes the device's primary context current on this
/// thread. False when anything is missing; the error says what.
bool ensureReady(State &s) {
  if (!s.error.empty())
    return false;
  if (!s.tried) {
    s.tried = true;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      setError(s, "the NVIDIA driver library libcuda.so.1 cannot be loaded "
                  "(no NVIDIA driver on this machine?): " +
                      std::string(dlerror()));
      return false;
    }
    Driver &d = s.d;
    bool ok = load(lib, d.cuInit, "cuInit") &&
              load(lib, d.cuDeviceGetCount, "cuDeviceGetCount") &&
              load(lib, d.cuDeviceGet, "cuDeviceGet") &&
              load(lib, d.cuDeviceGetAttribute, "cuDeviceGetAttribute") &&
              load(lib, d.cuDeviceGetName, "cuDeviceGetName") &&
              load(lib, d.cuDevicePrimaryCtxRetain,
                   "cuDevicePrimaryCtxRetain") &&
              load(lib, d.cuCtxSetCurrent, "cuCtxSetCurrent") &&
              load(lib, d.cuModuleLoadData, "cuModuleLoadData") &&
              load(lib, d.cuModuleUnload, "cuModuleUnload") &&
              load(lib, d.cuModuleGetFunction, "cuModuleGetFunction") &&
              load(lib, d.cuFuncSetAttribute, "cuFuncSetAttribute") &&
              load(lib, d.cuLaunchKernel, "cuLaunchKernel") &&
              load(lib, d.cuStreamCreate, "cuStreamCreate") &&
              load(lib, d.cuStreamDestroy, "cuStreamDestroy_v2") &&
              load(lib, d.cuStreamSynchronize, "cuStreamSynchronize") &&
              load(lib, d.cuStreamWaitEvent, "cuStreamWaitEvent") &&
              load(lib, d.cuEventCreate, "cuEventCreate") &&
              load(lib, d.cuEventDestroy, "cuEventDestroy_v2") &&
              load(lib, d.cuEventRecord, "cuEventRecord") &&
              load(lib, d.cuEventSynchronize, "cuEventSynchronize") &&
              load(lib, d.cuMemAlloc, "cuMemAlloc_v2") &&
              load(lib, d.cuMemAllocManaged, "cuMemAllocManaged") &&
              load(lib, d.cuMemFree, "cuMemFree_v2") &&
              load(lib, d.cuMemcpyAsync, "cuMemcpyAsync") &&
              load(lib, d.cuMemsetD32Async, "cuMemsetD32Async") &&
              load(lib, d.cuMemsetD16Async, "cuMemsetD16Async") &&
              load(lib, d.cuMemHostRegister, "cuMemHostRegister_v2") &&
              load(lib, d.cuMemHostUnregister, "cuMemHostUnregister") &&
              load(lib, d.cuGetErrorName, "cuGetErrorName") &&
              load(lib, d.cuGetErrorString, "cuGetErrorString");
    if (!ok) {
      setError(s, "libcuda.so.1 lacks a driver API function this runtime "
                  "needs (driver too old?): " +
                      std::string(dlerror() ? dlerror() : ""));
      return false;
    }
    if (!check(s, d.cuInit(0), "cuInit"))
      return false;
    int count = 0;
    if (!check(s, d.cuDeviceGetCount(&count), "cuDeviceGetCount"))
      return false;
    if (s.device >= count) {
      setError(s, "CUDA device " + std::to_string(s.device) +
                      " does not exist (" + std::to_string(count) +
                      " device(s) present)");
      return false;
    }
    if (!check(s, d.cuDeviceGet(&s.dev, s.device), "cuDeviceGet") ||
        !check(s, d.cuDevicePrimaryCtxRetain(&s.ctx, s.dev),
               "cuDevicePrimaryCtxRetain"))
      return false;
    s.ready = true;
  }
  if (!s.ready)
    return false;
  return check(s, s.d.cuCtxSetCurrent(s.ctx), "cuCtxSetCurrent");
}

/// After `stream` has been synchronized: its freed blocks are free for all.
void untagBlocks(State &s, CUstream stream) {
  for (auto &[size, block] : s.freeBlocks)
    if (block.stream == stream)
      block.stream = nullptr;
}

/// Waits for the work queued on every cached block (before freeing them).
void syncTaggedStreams(State &s) {
  for (auto &[size, block] : s.freeBlocks)
    if (block.stream) {
      s.d.cuStreamSynchronize(block.stream);
      untagBlocks(s, block.stream);
    }
}

/// Returns every cached block to the driver.
void freeCachedBlocks(State &s) {
  syncTaggedStreams(s);
  for (auto &[size, block] : s.freeBlocks)
    s.d.cuMemFree(block.ptr);
  s.freeBlocks.clear();
}

} // namespace

//===----------------------------------------------------------------------===//
// The project's own entry points.
//===----------------------------------------------------------------------===//

/// The first error since the last clear, or null.
MASFORMER_CUDA_EXPORT const char *masformer_cuda_error() {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.error.empty() ? nullptr : s.error.c_str();
}

MASFORMER_CUDA_EXPORT void masformer_cuda_clear_error() {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.error.clear();
  // A failed start may be retried (e.g. after the device was changed).
  if (!s.ready)
    s.tried = false;
}

/// Writes "<name> (sm_XY, N KiB shared memory per block)" of the current
/// device; returns 0, or 1 with the error in masformer_cuda_error().
MASFORMER_CUDA_EXPORT int masformer_cuda_device(char *buf, size_t size) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!ensureReady(s))
    return 1;
  char name[256] = {0};
  int major = 0, minor = 0, smem = 0;
  if (!check(s, s.d.cuDeviceGetName(name, sizeof(name), s.dev),
             "cuDeviceGetName") ||
      !check(s, s.d.cuDeviceGetAttribute(&major, kDevAttrCCMajor, s.dev),
             "cuDeviceGetAttribute") ||
      !check(s, s.d.cuDeviceGetAttribute(&minor, kDevAttrCCMinor, s.dev),
             "cuDeviceGetAttribute") ||
      !check(s, s.d.cuDeviceGetAttribute(&smem, kDevAttrMaxSharedOptin, s.dev),
             "cuDeviceGetAttribute"))
    return 1;
  snprintf(buf, size, "%s (sm_%d%d, %d KiB shared memory per block)", name,
           major, minor, smem / 1024);
  return 0;
}

/// Returns the cached device memory to the driver.
MASFORMER_CUDA_EXPORT void masformer_cuda_release_memory() {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.ready)
    return;
  s.d.cuCtxSetCurrent(s.ctx);
  freeCachedBlocks(s);
}

/// Uploads a compiled model's constants: each null `slots[i]` becomes a
/// device copy of the `bytes[i]` bytes at `hosts[i]`. Returns 0, or 1 with
/// the error in masformer_cuda_error(). Thread-safe: concurrent callers see
/// each constant uploaded once.
MASFORMER_CUDA_EXPORT int masformer_cuda_upload_constants(
    void **slots, const void *const *hosts, const uint64_t *bytes, int64_t n) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!ensureReady(s))
    return 1;
  for (int64_t i = 0; i < n; ++i) {
    if (slots[i] || bytes[i] == 0)
      continue;
    CUdeviceptr ptr = 0;
    CUresult r = s.d.cuMemAlloc(&ptr, bytes[i]);
    if (r != kSuccess && !s.freeBlocks.empty()) {
      freeCachedBlocks(s);
      r = s.d.cuMemAlloc(&ptr, bytes[i]);
    }
    if (!check(s, r,
               ("cuMemAlloc of " + std::to_string(bytes[i]) +
                " bytes for the model's weights")
                   .c_str()))
      return 1;
    if (!check(s,
               s.d.cuMemcpyAsync(ptr,
                                 reinterpret_cast<CUdeviceptr>(hosts[i]),
                                 bytes[i], nullptr),
               "cuMemcpyAsync (the model's weights)") ||
        !check(s, s.d.cuStreamSynchronize(nullptr),
               "cuStreamSynchronize (the model's weights)")) {
      s.d.cuMemFree(ptr);
      return 1;
    }
    slots[i] = reinterpret_cast<void *>(ptr);
  }
  return 0;
}

/// Frees the constants masformer_cuda_upload_constants uploaded into
/// `slots` and clears the slots.
MASFORMER_CUDA_EXPORT void masformer_cuda_free_constants(void **slots,
                                                         int64_t n) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.ready)
    return;
  s.d.cuCtxSetCurrent(s.ctx);
  for (int64_t i = 0; i < n; ++i) {
    if (slots[i])
      s.d.cuMemFree(reinterpret_cast<CUdeviceptr>(slots[i]));
    slots[i] = nullptr;
  }
}

//===----------------------------------------------------------------------===//
// The functions MLIR's GPU host code calls (the names and signatures of
// upstream's CUDA runtime wrappers, which Debian does not package).
//===----------------------------------------------------------------------===//

MASFORMER_CUDA_EXPORT void mgpuSetDefaultDevice(int32_t device) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.ready && device != s.device) {
    setError(s, "mgpuSetDefaultDevice: the device cannot change after the "
                "first use");
    return;
  }
  s.device = device;
}

MASFORMER_CUDA_EXPORT void *mgpuModuleLoad(void *data, size_t /*size*/) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!ensureReady(s))
    return nullptr;
  CUmodule module = nullptr;
  CUresult r = s.d.cuModuleLoadData(&module, data);
  if (r != kSuccess) {
    int major = 0, minor = 0;
    s.d.cuDeviceGetAttribute(&major, kDevAttrCCMajor, s.dev);
    s.d.cuDeviceGetAttribute(&minor, kDevAttrCCMinor, s.dev);
    s.loadError = "cuModuleLoadData failed: " + describe(s, r) +
                  "; this GPU is sm_" + std::to_string(major) +
                  std::to_string(minor) +
                  ": was the model compiled for another chip (--chip)?";
    setError(s, s.loadError);
    return nullptr;
  }
  return module;
}

MASFORMER_CUDA_EXPORT void *mgpuModuleLoadJIT(void *data, int /*optLevel*/) {
  return mgpuModuleLoad(data, 0);
}

MASFORMER_CUDA_EXPORT void mgpuModuleUnload(void *module) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (module && s.ready) {
    s.d.cuCtxSetCurrent(s.ctx);
    s.d.cuModuleUnload(static_cast<CUmodule>(module));
  }
}

MASFORMER_CUDA_EXPORT void *mgpuModuleGetFunction(void *module,
                                                  const char *name) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!ensureReady(s))
    return nullptr;
  if (!module) {
    setError(s, std::string("kernel ") + name + " is not loaded: " +
                    (s.loadError.empty() ? "its module failed to load"
                                         : s.loadError));
    return nullptr;
  }
  CUfunction fn = nullptr;
  if (!check(s,
             s.d.cuModuleGetFunction(&fn, static_cast<CUmodule>(module), name),
             (std::string("cuModuleGetFunction(") + name + ")").c_str()))
    return nullptr;
  return fn;
}

MASFORMER_CUDA_EXPORT void
mgpuLaunchKernel(void *function, intptr_t gridX, intptr_t gridY,
                 intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                 intptr_t blockZ, int32_t smem, void *stream, void **params,
                 void **extra, size_t /*paramsCount*/) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!ensureReady(s))
    return;
  if (!function) {
    setError(s, "a kernel launch has no kernel: " +
                    (s.loadError.empty() ? std::string("its module failed to "
                                                       "load")
                                         : s.loadError));
    return;
  }
  auto fn = static_cast<CUfunction>(function);
  if (smem > 48 * 1024) {
    int limit = 0;
    s.d.cuDeviceGetAttribute(&limit, kDevAttrMaxSharedOptin, s.dev);
    if (smem > limit) {
      setError(s, "a kernel needs " + std::to_string(smem) +
                      " bytes of shared memory; this GPU allows " +
                      std::to_string(limit) + " per block");
      return;
    }
    if (!check(s,
               s.d.cuFuncSetAttribute(fn, kFuncAttrMaxDynamicShared, smem),
               "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)"))
      return;
  }
  check(s,
        s.d.cuLaunchKernel(fn, gridX, gridY, gridZ, blockX, blockY, blockZ,
                           smem, static_cast<CUstream>(stream), params, extra),
        "cuLaunchKernel");
}

MASFORMER_CUDA_EXPORT void *mgpuStreamCreate() {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!ensureReady(s))
    return nullptr;
  if (!s.streams.empty()) {
    CUstream st = s.streams.back();
    s.streams.pop_back();
    return st;
  }
  CUstream st = nullptr;
  if (!check(s, s.d.cuStreamCreate(&st, kStreamNonBlocking), "cuStreamCreate"))
    return nullptr;
  return st;
}

MASFORMER_CUDA_EXPORT void mgpuStreamDestroy(void *stream) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!stream)
    return;
  // Blocks freed on it are free for all once its work is done.
  auto st = static_cast<CUstream>(stream);
  for (auto &[size, block] : s.freeBlocks)
    if (block.stream == st) {
      if (s.ready)
        s.d.cuStreamSynchronize(st);
      untagBlocks(s, st);
      break;
    }
  s.streams.push_back(st);
}

MASFORMER_CUDA_EXPORT void mgpuStreamSynchronize(void *stream) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!stream || !ensureReady(s))
    return;
  if (check(s, s.d.cuStreamSynchronize(static_cast<CUstream>(stream)),
            "cuStreamSynchronize (a kernel failed?)"))
    untagBlocks(s, static_cast<CUstream>(stream));
}

MASFORMER_CUDA_EXPORT void mgpuStreamWaitEvent(void *stream, void *event) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!stream || !event || !ensureReady(s))
    return;
  check(s,
        s.d.cuStreamWaitEvent(static_cast<CUstream>(stream),
                              static_cast<CUevent>(event), 0),
        "cuStreamWaitEvent");
}

MASFORMER_CUDA_EXPORT void *mgpuEventCreate() {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!ensureReady(s))
    return nullptr;
  CUevent e = nullptr;
  if (!check(s, s.d.cuEventCreate(&e, kEventDisableTiming), "cuEventCreate"))
    return nullptr;
  return e;
}

MASFORMER_CUDA_EXPORT void mgpuEventDestroy(void *event) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (event && s.ready)
    s.d.cuEventDestroy(static_cast<CUevent>(event));
}

MASFORMER_CUDA_EXPORT void mgpuEventSynchronize(void *event) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!event || !ensureReady(s))
    return;
  check(s, s.d.cuEventSynchronize(static_cast<CUevent>(event)),
        "cuEventSynchronize");
}

MASFORMER_CUDA_EXPORT void mgpuEventRecord(void *event, void *stream) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!event || !ensureReady(s))
    return;
  check(s,
        s.d.cuEventRecord(static_cast<CUevent>(event),
                          static_cast<CUstream>(stream)),
        "cuEventRecord");
}

MASFORMER_CUDA_EXPORT void *mgpuMemAlloc(uint64_t size, void *stream,
                                         bool isHostShared) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (size == 0 || !ensureReady(s))
    return nullptr;
  CUdeviceptr ptr = 0;
  if (isHostShared) {
    if (!check(s, s.d.cuMemAllocManaged(&ptr, size, kMemAttachGlobal),
               "cuMemAllocManaged"))
      return nullptr;
    return reinterpret_cast<void *>(ptr);
  }
  // A cached block of this size: one free for all or freed on this
  // stream, else one whose stream is waited for.
  auto range = s.freeBlocks.equal_range(size);
  auto it = s.freeBlocks.end();
  for (auto i = range.first; i != range.second; ++i)
    if (!i->second.stream || i->second.stream == stream) {
      it = i;
      break;
    }
  if (it == s.freeBlocks.end() && range.first != range.second) {
    it = range.first;
    CUstream other = it->second.stream;
    if (!check(s, s.d.cuStreamSynchronize(other), "cuStreamSynchronize"))
      return nullptr;
    untagBlocks(s, other);
  }
  if (it != s.freeBlocks.end()) {
    ptr = it->second.ptr;
    s.freeBlocks.erase(it);
  } else {
    CUresult r = s.d.cuMemAlloc(&ptr, size);
    if (r != kSuccess && !s.freeBlocks.empty()) {
      // Out of memory with blocks cached: return them and try again.
      freeCachedBlocks(s);
      r = s.d.cuMemAlloc(&ptr, size);
    }
    if (!check(s, r,
               ("cuMemAlloc of " + std::to_string(size) + " bytes").c_str()))
      return nullptr;
  }
  s.liveBlocks[ptr] = size;
  return reinterpret_cast<void *>(ptr);
}

MASFORMER_CUDA_EXPORT void mgpuMemFree(void *ptr, void *stream) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!ptr || !s.ready)
    return;
  s.d.cuCtxSetCurrent(s.ctx);
  auto dptr = reinterpret_cast<CUdeviceptr>(ptr);
  auto it = s.liveBlocks.find(dptr);
  if (it == s.liveBlocks.end()) {
    // Not ours (managed memory, or another allocator's): free directly.
    check(s, s.d.cuMemFree(dptr), "cuMemFree");
    return;
  }
  // Reused at once on this stream, by others once it is synchronized.
  s.freeBlocks.emplace(it->second,
                       State::FreeBlock{dptr, static_cast<CUstream>(stream)});
  s.liveBlocks.erase(it);
}

MASFORMER_CUDA_EXPORT void mgpuMemcpy(void *dst, void *src, size_t size,
                                      void *stream) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (size == 0 || !ensureReady(s))
    return;
  check(s,
        s.d.cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(dst),
                          reinterpret_cast<CUdeviceptr>(src), size,
                          static_cast<CUstream>(stream)),
        "cuMemcpyAsync");
}

MASFORMER_CUDA_EXPORT void mgpuMemset32(void *dst, unsigned value,
                                        size_t count, void *stream) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (count == 0 || !ensureReady(s))
    return;
  check(s,
        s.d.cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(dst), value, count,
                             static_cast<CUstream>(stream)),
        "cuMemsetD32Async");
}

MASFORMER_CUDA_EXPORT void mgpuMemset16(void *dst, unsigned short value,
                                        size_t count, void *stream) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (count == 0 || !ensureReady(s))
    return;
  check(s,
        s.d.cuMemsetD16Async(reinterpret_cast<CUdeviceptr>(dst), value, count,
                             static_cast<CUstream>(stream)),
        "cuMemsetD16Async");
}

/// Page-locks a host buffer of a compiled model (its results, which the
/// device copies into): a copy to pinned memory runs at the bus's rate,
/// where a copy to pageable memory goes through the driver's staging
/// buffers (9 GB/s for GPT-2's logits on an H200, 45 ms of a 58 ms run at
/// S = 2048). Returns 1 when pinned; 0, with no error recorded, when the
/// driver is not ready or refuses (a memory-lock limit): the buffer then
/// stays pageable, which is slower and as correct.
MASFORMER_CUDA_EXPORT int masformer_cuda_pin(void *ptr, uint64_t size) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.ready || !s.error.empty())
    return 0;
  s.d.cuCtxSetCurrent(s.ctx);
  return s.d.cuMemHostRegister(ptr, size, 0) == kSuccess ? 1 : 0;
}

/// Undoes masformer_cuda_pin before the buffer is freed (no error
/// recorded: a driver already gone at exit has unpinned it).
MASFORMER_CUDA_EXPORT void masformer_cuda_unpin(void *ptr) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.ready)
    return;
  s.d.cuCtxSetCurrent(s.ctx);
  s.d.cuMemHostUnregister(ptr);
}

MASFORMER_CUDA_EXPORT void mgpuMemHostRegister(void *ptr, uint64_t size) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!ensureReady(s))
    return;
  check(s, s.d.cuMemHostRegister(ptr, size, 0), "cuMemHostRegister");
}

MASFORMER_CUDA_EXPORT void mgpuMemHostUnregister(void *ptr) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!ensureReady(s))
    return;
  check(s, s.d.cuMemHostUnregister(ptr), "cuMemHostUnregister");
}
