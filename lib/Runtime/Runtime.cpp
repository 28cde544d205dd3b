//===- Runtime.cpp - Load and run a compiled masformer model ----*- C++ -*-===//
//
// A compiled library exports three symbols (lib/API/CompileONNX.cpp):
//   masformer_abi_version  int32, the interface version;
//   masformer_signature    text: "input|output <name> <dtype> <dims>" lines;
//   masformer_run          void(void **inputs, void *results): the C
//                          interface of MLIR's @main, inputs as memref
//                          descriptors, results as a struct of descriptors
//                          whose buffers (malloc'd) the caller frees.
// A memref descriptor of rank R is {ptr allocated, ptr aligned, i64 offset,
// i64 sizes[R], i64 strides[R]}: 3 + 2R words of 8 bytes, and the results'
// struct is their concatenation. The results' buffers are freed with the
// library's masformer_free (its caching allocator made them), and
// masformer_release_memory empties that cache when the model is freed.
//
// A library whose weights are outside its code exports their manifest
// (masformer_weights) and a table of pointers (masformer_weight_table):
// loading maps each file the manifest names read-only, checks it (size,
// header, each weight's fingerprint) and writes every weight's address into
// its slot, once per loaded library however many handles share it.
//
// A library compiled for the GPU ("target cuda" and "chip sm_XY" in its
// signature) has the same interface: host buffers in and out. It links
// libMASFormerCudaRuntime, whose errors are sticky: the runtime reads
// masformer_cuda_error() after each run (and before: the GPU code is loaded
// when the library is opened) and clears it.
//
//===----------------------------------------------------------------------===//

#include "masformer/Runtime/Runtime.h"
#include "Internal.h"
#include "masformer/Runtime/ABI.h"

#include <dlfcn.h>
#include <elf.h>
#if defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#endif
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace {

thread_local std::string lastError;

} // namespace

int masformer::runtime::detail::fail(std::string message) {
  lastError = std::move(message);
  return 1;
}

namespace {

using masformer::runtime::detail::fail;

/// An open file descriptor, closed on every path.
struct FileHandle {
  int fd;
  explicit FileHandle(int fd) : fd(fd) {}
  ~FileHandle() {
    if (fd >= 0)
      close(fd);
  }
};

/// Reads exactly `size` bytes at `offset`; false if the file is shorter.
bool readAt(int fd, uint64_t offset, void *out, size_t size) {
  auto *bytes = static_cast<char *>(out);
  while (size) {
    ssize_t n = pread(fd, bytes, size, static_cast<off_t>(offset));
    if (n <= 0)
      return false;
    bytes += n;
    offset += static_cast<uint64_t>(n);
    size -= static_cast<size_t>(n);
  }
  return true;
}

/// Whether [offset, offset + size) lies inside a file of `fileSize` bytes.
bool inside(uint64_t offset, uint64_t size, uint64_t fileSize) {
  return offset <= fileSize && size <= fileSize - offset;
}

/// Checks, before dlopen maps anything, that `path` is a complete x86-64
/// shared library exporting masformer_abi_version: every segment the loader
/// maps and every table read below lie inside the file. dlopen of a
/// truncated library maps pages past its end, and the first touch of one
/// kills the process with SIGBUS; a library that is not masformer's would
/// run its constructors before dlsym could tell. Returns an empty string or
/// what is wrong.
std::string checkLibraryFile(const char *path) {
  FileHandle file(open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  struct stat st;
  if (file.fd < 0 || fstat(file.fd, &st) != 0)
    return std::string("cannot be opened: ") + std::strerror(errno);
  if (!S_ISREG(st.st_mode))
    return "is not a regular file";
  uint64_t size = static_cast<uint64_t>(st.st_size);
  Elf64_Ehdr eh;
  if (!readAt(file.fd, 0, &eh, sizeof(eh)) ||
      std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
    return "is not a shared library (no ELF header)";
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_machine != EM_X86_64 ||
      eh.e_type != ET_DYN)
    return "is not a 64-bit x86 shared library";
  if (eh.e_phentsize != sizeof(Elf64_Phdr) ||
      !inside(eh.e_phoff, uint64_t(eh.e_phnum) * sizeof(Elf64_Phdr), size))
    return "is truncated or corrupt (program headers past its end)";
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    if (!readAt(file.fd, eh.e_phoff + i * sizeof(ph), &ph, sizeof(ph)))
      return "is truncated (program headers)";
    if (ph.p_type != PT_NULL && !inside(ph.p_offset, ph.p_filesz, size))
      return "is truncated: a segment of " + std::to_string(ph.p_filesz) +
             " bytes at offset " + std::to_string(ph.p_offset) +
             " ends past the file's " + std::to_string(size) + " bytes";
  }
  // The dynamic symbol table must name masformer's interface.
  if (eh.e_shentsize != sizeof(Elf64_Shdr) ||
      !inside(eh.e_shoff, uint64_t(eh.e_shnum) * sizeof(Elf64_Shdr), size))
    return "is truncated or corrupt (section headers past its end)";
  static constexpr char kSymbol[] = MF_ABI_SYM_VERSION;
  for (unsigned i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr sh;
    if (!readAt(file.fd, eh.e_shoff + i * sizeof(sh), &sh, sizeof(sh)))
      return "is truncated (section headers)";
    if (sh.sh_type != SHT_DYNSYM)
      continue;
    Elf64_Shdr strtab;
    if (sh.sh_entsize != sizeof(Elf64_Sym) || sh.sh_link >= eh.e_shnum ||
        !readAt(file.fd, eh.e_shoff + sh.sh_link * sizeof(strtab), &strtab,
                sizeof(strtab)) ||
        !inside(sh.sh_offset, sh.sh_size, size) ||
        !inside(strtab.sh_offset, strtab.sh_size, size))
      return "is truncated or corrupt (dynamic symbols)";
    for (uint64_t s = 0; s + sizeof(Elf64_Sym) <= sh.sh_size;
         s += sizeof(Elf64_Sym)) {
      Elf64_Sym sym;
      char name[sizeof(kSymbol)];
      if (!readAt(file.fd, sh.sh_offset + s, &sym, sizeof(sym)))
        return "is truncated (dynamic symbols)";
      if (sym.st_shndx == SHN_UNDEF ||
          !inside(sym.st_name, sizeof(name), strtab.sh_size) ||
          !readAt(file.fd, strtab.sh_offset + sym.st_name, name, sizeof(name)))
        continue;
      if (std::memcmp(name, kSymbol, sizeof(name)) == 0)
        return "";
    }
  }
  return "is not a model compiled by masformer-compile (it does not "
         "export " MF_ABI_SYM_VERSION ")";
}

constexpr auto &kDtypes = mf_abi_dtypes;
constexpr int kNumDtypes = MF_ABI_NUM_DTYPES;
static_assert(MF_BOOL + 1 == MF_ABI_NUM_DTYPES,
              "mf_dtype and the ABI's dtype table disagree");

bool validDtype(mf_dtype d) {
  return static_cast<int>(d) >= 0 && static_cast<int>(d) < kNumDtypes;
}

struct TensorDecl {
  std::string name;
  mf_dtype dtype;
  std::vector<int64_t> dims;           // -1: dynamic
  std::vector<std::string> keys;       // symbol keys ("" if none)
  std::vector<std::string> dimNames;   // for mf_tensor_info
  std::vector<const char *> dimNamePtrs;
};

struct Binding {
  bool bound = false;
  std::vector<int64_t> shape;
  const void *data = nullptr;
};

struct Output {
  std::vector<int64_t> shape;
  void *data = nullptr;
  size_t bytes = 0;
};

int hexValue(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  return -1;
}

/// Undoes the compiler's percent-encoding of separators in names.
std::string unescape(const std::string &s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    int hi = i + 2 < s.size() ? hexValue(s[i + 1]) : -1;
    int lo = i + 2 < s.size() ? hexValue(s[i + 2]) : -1;
    if (s[i] == '%' && hi >= 0 && lo >= 0) {
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::vector<std::string> split(const std::string &s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t end = s.find(sep, start);
    parts.push_back(s.substr(start, end - start));
    if (end == std::string::npos)
      return parts;
    start = end + 1;
  }
}

bool parseInt(const std::string &s, int64_t &v) {
  if (s.empty() || s.size() > 18)
    return false;
  v = 0;
  for (char c : s) {
    if (c < '0' || c > '9')
      return false;
    v = v * 10 + (c - '0');
  }
  return true;
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string declString(const TensorDecl &d) {
  std::string s = "[";
  for (size_t i = 0; i < d.dims.size(); ++i) {
    s += i ? ", " : "";
    s += d.dims[i] >= 0 ? std::to_string(d.dims[i])
                        : (d.dimNames[i].empty() ? "?" : d.dimNames[i]);
  }
  return s + "]";
}

/// A file mapped read-only.
struct Mapping {
  void *addr = nullptr;
  size_t size = 0;
};

/// A weights file of a loaded library: the path it was opened from.
struct WeightFile {
  std::string path;
  uint64_t bytes = 0;
};

/// The weights of one loaded library (dlopen handle), shared by its models.
struct BoundWeights {
  int refs = 0;
  std::vector<Mapping> maps;
  std::vector<WeightFile> files;
  void **table = nullptr;
  size_t slots = 0;

  void unmap() {
    for (Mapping &m : maps)
      munmap(m.addr, m.size);
    maps.clear();
    if (table)
      std::memset(table, 0, slots * sizeof(void *));
  }
};

std::mutex weightsMutex;
std::map<void *, BoundWeights> &boundWeights() {
  static auto *m = new std::map<void *, BoundWeights>; // used at exit
  return *m;
}

std::string directoryOf(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

bool isRegularFile(const std::string &path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

/// Maps the files of the manifest `text` of library `lib` and fills
/// `w.table`; returns an error or "". On error nothing stays mapped.
std::string mapWeights(const std::string &lib, const char *text,
                       BoundWeights &w) {
  std::string bad = "'" + lib + "' has a malformed weights manifest";
  std::vector<std::string> lines = split(text, '\n');
  std::vector<std::string> head =
      lines.empty() ? std::vector<std::string>() : split(lines[0], '\t');
  if (head.size() != 3 || head[0] != MF_ABI_WEIGHTS_MAGIC ||
      head[1] != std::to_string(MF_ABI_WEIGHTS_FORMAT))
    return bad;
  uint64_t buildId = std::strtoull(head[2].c_str(), nullptr, 16);
  std::string dir = directoryOf(lib);
  std::vector<bool> own;
  size_t slot = 0;
  for (size_t l = 1; l < lines.size(); ++l) {
    if (lines[l].empty())
      continue;
    std::vector<std::string> f = split(lines[l], '\t');
    int64_t a, b;
    if (f.size() == 5 && f[0] == "file" && (f[1] == "own" || f[1] == "model") &&
        parseInt(f[4], a)) {
      bool isOwn = f[1] == "own";
      std::string name = unescape(f[2]), recorded = unescape(f[3]);
      std::string beside = dir + "/" + name;
      // The own file travels with the library; a model's data file is
      // where the model was, or was moved beside the library.
      std::string first = isOwn ? beside : recorded;
      std::string second = isOwn ? recorded : beside;
      std::string path = isRegularFile(first)    ? first
                         : isRegularFile(second) ? second
                                                 : "";
      if (path.empty())
        return "'" + lib + "' needs its weights file '" + name +
               "', found neither at '" + first + "' nor at '" + second + "'";
      FileHandle fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
      struct stat st;
      if (fd.fd < 0 || fstat(fd.fd, &st) != 0)
        return "cannot open the weights file '" + path +
               "': " + std::strerror(errno);
      if (static_cast<uint64_t>(st.st_size) != static_cast<uint64_t>(a))
        return "the weights file '" + path + "' is " +
               std::to_string(st.st_size) + " bytes, but '" + lib +
               "' was compiled with one of " + std::to_string(a) +
               " bytes: it is not this library's weights file (compile the "
               "model again, or put the right file back)";
      Mapping m;
      m.size = static_cast<size_t>(a);
      if (m.size) {
        m.addr = mmap(nullptr, m.size, PROT_READ, MAP_PRIVATE, fd.fd, 0);
        if (m.addr == MAP_FAILED)
          return "cannot map the weights file '" + path +
                 "': " + std::strerror(errno);
      }
      w.maps.push_back(m);
      w.files.push_back({path, static_cast<uint64_t>(a)});
      own.push_back(isOwn);
      if (isOwn) {
        const auto *h = static_cast<const unsigned char *>(m.addr);
        uint32_t format = 0;
        uint64_t id = 0, size = 0;
        if (m.size >= MF_ABI_WEIGHTS_HEADER_BYTES) {
          std::memcpy(&format, h + 8, 4);
          std::memcpy(&id, h + 16, 8);
          std::memcpy(&size, h + 24, 8);
        }
        if (m.size < MF_ABI_WEIGHTS_HEADER_BYTES ||
            std::memcmp(h, MF_ABI_WEIGHTS_FILE_MAGIC, 8) != 0 ||
            format != MF_ABI_WEIGHTS_FORMAT)
          return "'" + path + "' is not a masformer weights file";
        if (id != buildId || size != m.size)
          return "the weights file '" + path +
                 "' was written for another "
                 "compilation than '" +
                 lib +
                 "' (compile the model again, "
                 "or put the right file back)";
      }
      continue;
    }
    if (f.size() == 5 && f[0] == "weight" && parseInt(f[1], a) &&
        parseInt(f[2], b) && static_cast<size_t>(a) < w.maps.size() &&
        slot < w.slots) {
      int64_t bytes;
      if (!parseInt(f[3], bytes))
        return bad;
      const Mapping &m = w.maps[a];
      if (static_cast<uint64_t>(b) > m.size ||
          static_cast<uint64_t>(bytes) > m.size - static_cast<uint64_t>(b))
        return bad;
      const char *p = static_cast<const char *>(m.addr) + b;
      uint64_t fingerprint = std::strtoull(f[4].c_str(), nullptr, 16);
      if (mf_abi_weight_fingerprint(p, static_cast<uint64_t>(bytes)) !=
          fingerprint)
        return "the weights file '" + w.files[a].path +
               "' does not hold the weights '" + lib +
               "' was compiled with (the " + std::to_string(bytes) +
               " bytes at offset " + std::to_string(b) +
               " differ): compile the model again, or put the right file "
               "back";
      w.table[slot++] = const_cast<char *>(p);
      continue;
    }
    return bad;
  }
  if (slot != w.slots)
    return bad;
  return "";
}

} // namespace

/// Checks that this CPU has the instruction set `name` that the library at
/// `path` was compiled to use, and enables it where the kernel must be
/// asked first (AMX's tile data, per process on Linux); "" or the error.
/// Whether this runtime can check and enable the instruction set `name`
/// of a signature's "isa" line.
static bool isKnownISA(const std::string &name) {
  return name == "amx-bf16" || name == "amx-int8";
}

static std::string enableISA(const std::string &name, const char *path) {
  bool bf16 = name == "amx-bf16";
  if (!isKnownISA(name))
    return std::string("'") + path + "' needs the instruction set '" + name +
           "', which this runtime does not know";
  std::string what = bf16 ? "its bf16 products and attention"
                          : "its 8-bit (quantized) products";
#if defined(__x86_64__) && defined(__linux__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  // CPUID leaf 7: EDX bit 22 AMX-BF16, bit 24 AMX-TILE, bit 25 AMX-INT8.
  bool have = __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) &&
              (edx & (1u << (bf16 ? 22 : 25))) && (edx & (1u << 24));
  if (!have)
    return std::string("'") + path + "' runs " + what +
           " on AMX tiles, and this CPU has no " +
           (bf16 ? "AMX-BF16" : "AMX-INT8") +
           ": compile the model on this machine" +
           (bf16 ? ", or with --precision=f32"
                 : ", or for a CPU without it (--cpu=icelake-server: "
                   "vpdpbusd)");
  // ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA: without it the first tile
  // instruction is SIGILL.
  constexpr long kReqXcompPerm = 0x1023, kXtileData = 18;
  if (syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) != 0)
    return std::string("'") + path + "' runs " + what +
           " on AMX tiles, and the kernel refused them to this process "
           "(arch_prctl(ARCH_REQ_XCOMP_PERM): " +
           std::strerror(errno) + ")";
  return "";
#else
  return std::string("'") + path + "' runs " + what +
         " on AMX tiles, which need x86-64 Linux";
#endif
}

using masformer::runtime::detail::CacheDecl;
struct mf_model {
  std::string path;
  std::vector<CacheDecl> caches;
  int64_t maxLength = -1;
  void *handle = nullptr;
  void (*run)(void **, void *) = nullptr;
  void (*freeBuffer)(void *) = nullptr;
  void (*releaseMemory)() = nullptr;
  // The CUDA runtime shim's error state (GPU libraries only).
  const char *(*cudaError)() = nullptr;
  void (*cudaClearError)() = nullptr;
  std::string target, chip;
  /// Instruction sets the code needs beyond the compile target's
  /// (signature lines "isa\t<name>").
  std::vector<std::string> isa;
  std::vector<TensorDecl> inputs, outputs;
  std::vector<Binding> bindings;
  std::vector<Output> results;
  std::vector<void *> owned;  // the last run's buffers (the library's)
  std::vector<void *> copies; // contiguous copies of strided results
  bool weightsBound = false;  // holds a reference on boundWeights()
  std::vector<WeightFile> weightFiles;

  ~mf_model() {
    releaseResults();
    if (releaseMemory)
      releaseMemory();
    if (weightsBound) {
      std::lock_guard<std::mutex> lock(weightsMutex);
      auto it = boundWeights().find(handle);
      if (it != boundWeights().end() && --it->second.refs == 0) {
        it->second.unmap();
        boundWeights().erase(it);
      }
    }
    if (handle)
      dlclose(handle);
  }
  std::string bindWeights();
  void releaseResults() {
    for (void *p : owned)
      freeBuffer(p);
    for (void *p : copies)
      std::free(p);
    owned.clear();
    copies.clear();
    results.clear();
  }
  bool parseSignature(const char *text);
};

bool mf_model::parseSignature(const char *text) {
  std::vector<std::string> lines = split(text, '\n');
  if (lines.empty() || lines[0] != std::string(MF_ABI_SIGNATURE_MAGIC "\t") +
                               std::to_string(MF_ABI_VERSION))
    return false;
  for (size_t l = 1; l < lines.size(); ++l) {
    if (lines[l].empty())
      continue;
    std::vector<std::string> f = split(lines[l], '\t');
    if (f.size() == 2 && f[0] == "target") {
      target = f[1];
      continue;
    }
    if (f.size() == 2 && f[0] == "chip") {
      chip = f[1];
      continue;
    }
    // The decode entry's cache inputs and maximum length.
    if (f.size() == 5 && f[0] == "cache") {
      CacheDecl c;
      if (!parseInt(f[1], c.input) || !parseInt(f[3], c.size) ||
          !parseInt(f[4], c.sink) ||
          (f[2] != "full" && f[2] != "block" && f[2] != "window") ||
          (f[2] != "full" && c.size <= 0))
        return false;
      c.kind = f[2];
      caches.push_back(c);
      continue;
    }
    if (f.size() == 2 && f[0] == "isa") {
      if (!isKnownISA(f[1]))
        return false;
      isa.push_back(f[1]);
      continue;
    }
    if (f.size() == 2 && f[0] == "max_length") {
      if (!parseInt(f[1], maxLength))
        return false;
      continue;
    }
    if (f.size() != 4 || (f[0] != "input" && f[0] != "output"))
      return false;
    TensorDecl d;
    d.name = unescape(f[1]);
    int dt = -1;
    for (int i = 0; i < kNumDtypes; ++i)
      if (f[2] == kDtypes[i].name)
        dt = i;
    if (dt < 0)
      return false;
    d.dtype = static_cast<mf_dtype>(dt);
    if (!f[3].empty()) {
      for (const std::string &dim : split(f[3], ',')) {
        int64_t v;
        if (!dim.empty() && dim[0] == '?') {
          std::string key = unescape(dim.substr(1));
          d.dims.push_back(-1);
          d.keys.push_back(key);
          // An unnamed dimension's key is "?<input>.<dim>": no name.
          d.dimNames.push_back(!key.empty() && key[0] == '?' ? "" : key);
        } else if (parseInt(dim, v)) {
          d.dims.push_back(v);
          d.keys.push_back("");
          d.dimNames.push_back("");
        } else {
          return false;
        }
      }
    }
    (f[0] == "input" ? inputs : outputs).push_back(std::move(d));
  }
  for (auto *list : {&inputs, &outputs})
    for (TensorDecl &d : *list)
      for (const std::string &n : d.dimNames)
        d.dimNamePtrs.push_back(n.c_str());
  return !target.empty();
}

std::string mf_model::bindWeights() {
  const char *manifest =
      static_cast<const char *>(dlsym(handle, MF_ABI_SYM_WEIGHTS));
  if (!manifest)
    return ""; // every weight is in the code
  auto **table = static_cast<void **>(dlsym(handle, MF_ABI_SYM_WEIGHT_TABLE));
  if (!table)
    return "'" + path + "' has a weights manifest but no weight table";
  std::lock_guard<std::mutex> lock(weightsMutex);
  BoundWeights &w = boundWeights()[handle];
  if (w.refs == 0) {
    // The slots: one per "weight" line.
    size_t slots = 0;
    for (const char *p = std::strstr(manifest, "\nweight\t"); p;
         p = std::strstr(p + 1, "\nweight\t"))
      ++slots;
    w.table = table;
    w.slots = slots;
    std::string error = mapWeights(path, manifest, w);
    if (!error.empty()) {
      w.unmap();
      boundWeights().erase(handle);
      return error;
    }
  }
  ++w.refs;
  weightsBound = true;
  weightFiles = w.files;
  return "";
}

extern "C" {

const char *mf_dtype_name(mf_dtype dtype) {
  return validDtype(dtype) ? kDtypes[dtype].name : "invalid";
}

size_t mf_dtype_size(mf_dtype dtype) {
  return validDtype(dtype) ? kDtypes[dtype].size : 0;
}

const char *mf_last_error(void) { return lastError.c_str(); }

/// Loads the library at `path` as the entry whose run function and
/// signature are `runSym` and `sigSym` (the whole-sequence model, or the
/// decode entry).
static mf_model *loadEntry(const char *path, const char *runSym,
                           const char *sigSym) {
  if (!path) {
    fail("mf_model_load: no path");
    return nullptr;
  }
  struct stat st;
  if (stat(path, &st) != 0) {
    fail(std::string("'") + path + "': no such file");
    return nullptr;
  }
  if (std::string problem = checkLibraryFile(path); !problem.empty()) {
    fail(std::string("'") + path + "' " + problem);
    return nullptr;
  }
  // dlopen searches the library path for names without a slash.
  std::string file = path;
  if (file.find('/') == std::string::npos)
    file = "./" + file;
  void *handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *err = dlerror();
    fail(std::string("'") + path + "' cannot be loaded as a library: " +
         (err ? err : "unknown error"));
    return nullptr;
  }
  auto *model = new mf_model;
  model->path = path;
  model->handle = handle;
  auto *version =
      static_cast<const int32_t *>(dlsym(handle, MF_ABI_SYM_VERSION));
  auto *signature = static_cast<const char *>(dlsym(handle, sigSym));
  bool decode = std::strcmp(runSym, MF_ABI_SYM_DECODE_RUN) == 0;
  if (decode && version &&
      (!signature || std::strncmp(signature, MF_ABI_DECODE_UNAVAILABLE "\t",
                                  sizeof(MF_ABI_DECODE_UNAVAILABLE)) == 0)) {
    std::string why =
        signature ? std::string(signature + sizeof(MF_ABI_DECODE_UNAVAILABLE))
                  : "it was compiled before generation existed (compile it "
                    "again)";
    while (!why.empty() && why.back() == '\n')
      why.pop_back();
    fail(std::string("'") + path + "' has no decode entry, so it cannot " +
         "generate: " + why);
    delete model;
    return nullptr;
  }
  model->run =
      reinterpret_cast<void (*)(void **, void *)>(dlsym(handle, runSym));
  model->freeBuffer =
      reinterpret_cast<void (*)(void *)>(dlsym(handle, MF_ABI_SYM_FREE));
  model->releaseMemory = reinterpret_cast<void (*)()>(
      dlsym(handle, MF_ABI_SYM_RELEASE));
  if (!version || !signature || !model->run || !model->freeBuffer ||
      !model->releaseMemory) {
    fail(std::string("'") + path +
         "' is not a model compiled by masformer-compile");
    delete model;
    return nullptr;
  }
  if (*version != MF_ABI_VERSION) {
    fail(std::string("'") + path + "' was compiled for runtime interface " +
         std::to_string(*version) + ", this runtime has " +
         std::to_string(MF_ABI_VERSION) + ": compile it again");
    delete model;
    return nullptr;
  }
  if (!model->parseSignature(signature)) {
    fail(std::string("'") + path + "' has a malformed signature");
    delete model;
    return nullptr;
  }
  if (model->target == "cuda") {
    // Resolved through the library's dependencies.
    model->cudaError = reinterpret_cast<const char *(*)()>(
        dlsym(handle, "masformer_cuda_error"));
    model->cudaClearError = reinterpret_cast<void (*)()>(
        dlsym(handle, "masformer_cuda_clear_error"));
    if (!model->cudaError || !model->cudaClearError) {
      fail(std::string("'") + path +
           "' is compiled for the GPU but does not link "
           "libMASFormerCudaRuntime");
      delete model;
      return nullptr;
    }
  } else if (model->target != "cpu") {
    fail(std::string("'") + path + "' is compiled for target '" +
         model->target + "', which this runtime cannot run");
    delete model;
    return nullptr;
  }
  for (const std::string &name : model->isa) {
    if (std::string error = enableISA(name, path); !error.empty()) {
      fail(error);
      delete model;
      return nullptr;
    }
  }
  if (std::string error = model->bindWeights(); !error.empty()) {
    fail(error);
    delete model;
    return nullptr;
  }
  model->bindings.resize(model->inputs.size());
  return model;
}
mf_model *mf_model_load(const char *path) {
  return loadEntry(path, MF_ABI_SYM_RUN, MF_ABI_SYM_SIGNATURE);
}

size_t mf_model_num_weight_files(const mf_model *model) {
  return model ? model->weightFiles.size() : 0;
}

int mf_model_weight_file(const mf_model *model, size_t index, const char **path,
                         uint64_t *bytes) {
  if (!model || index >= model->weightFiles.size())
    return fail("mf_model_weight_file: no weights file " +
                std::to_string(index));
  if (path)
    *path = model->weightFiles[index].path.c_str();
  if (bytes)
    *bytes = model->weightFiles[index].bytes;
  return 0;
}

void mf_model_free(mf_model *model) { delete model; }

const char *mf_model_target(const mf_model *model) {
  return model ? model->target.c_str() : "";
}

size_t mf_model_num_inputs(const mf_model *model) {
  return model ? model->inputs.size() : 0;
}

size_t mf_model_num_outputs(const mf_model *model) {
  return model ? model->outputs.size() : 0;
}

static int tensorInfo(const std::vector<TensorDecl> &list, size_t index,
                      const char *what, mf_tensor_info *info) {
  if (!info)
    return fail("no mf_tensor_info to fill");
  if (index >= list.size())
    return fail(std::string(what) + " index " + std::to_string(index) +
                " is out of range: the model has " +
                std::to_string(list.size()));
  const TensorDecl &d = list[index];
  info->name = d.name.c_str();
  info->dtype = d.dtype;
  info->rank = static_cast<int64_t>(d.dims.size());
  info->dims = d.dims.data();
  info->dim_names = d.dimNamePtrs.data();
  return 0;
}

int mf_model_input_info(const mf_model *model, size_t index,
                        mf_tensor_info *info) {
  if (!model)
    return fail("no model");
  return tensorInfo(model->inputs, index, "input", info);
}

int mf_model_output_info(const mf_model *model, size_t index,
                         mf_tensor_info *info) {
  if (!model)
    return fail("no model");
  return tensorInfo(model->outputs, index, "output", info);
}

static int64_t indexOf(const std::vector<TensorDecl> &list,
                       const char *name) {
  if (!name)
    return -1;
  for (size_t i = 0; i < list.size(); ++i)
    if (list[i].name == name)
      return static_cast<int64_t>(i);
  return -1;
}

int64_t mf_model_input_index(const mf_model *model, const char *name) {
  return model ? indexOf(model->inputs, name) : -1;
}

int64_t mf_model_output_index(const mf_model *model, const char *name) {
  return model ? indexOf(model->outputs, name) : -1;
}

int mf_model_set_input(mf_model *model, const char *name, mf_dtype dtype,
                       const int64_t *shape, int64_t rank, const void *data) {
  if (!model)
    return fail("no model");
  int64_t i = indexOf(model->inputs, name);
  if (i < 0) {
    std::string names;
    for (const TensorDecl &d : model->inputs)
      names += (names.empty() ? "'" : ", '") + d.name + "'";
    return fail(std::string("the model has no input '") +
                (name ? name : "") + "'; its inputs are " + names);
  }
  const TensorDecl &d = model->inputs[i];
  if (!validDtype(dtype))
    return fail("input '" + d.name + "': invalid element type " +
                std::to_string(static_cast<int>(dtype)));
  if (dtype != d.dtype)
    return fail("input '" + d.name + "' has element type " +
                kDtypes[d.dtype].name + ", got " + kDtypes[dtype].name);
  if (rank != static_cast<int64_t>(d.dims.size()) || rank < 0 ||
      (rank > 0 && !shape))
    return fail("input '" + d.name + "' has shape " + declString(d) +
                ", got rank " + std::to_string(rank));
  std::vector<int64_t> s(shape, shape + rank);
  size_t elements = 1;
  for (int64_t k = 0; k < rank; ++k) {
    if (s[k] < 0 || (d.dims[k] >= 0 && s[k] != d.dims[k]))
      return fail("input '" + d.name + "' has shape " + declString(d) +
                  ", got " + shapeString(s));
    if (s[k] > 0 && elements > (size_t(1) << 48) / static_cast<size_t>(s[k]))
      return fail("input '" + d.name + "': shape " + shapeString(s) +
                  " is too large");
    elements *= static_cast<size_t>(s[k]);
  }
  if (!data && elements > 0)
    return fail("input '" + d.name + "': no data");
  Binding &b = model->bindings[i];
  b.bound = true;
  b.shape = std::move(s);
  b.data = data;
  return 0;
}

void mf_model_clear_inputs(mf_model *model) {
  if (model)
    for (Binding &b : model->bindings)
      b = Binding();
}

int mf_model_run(mf_model *model) {
  if (!model)
    return fail("no model");
  // Every input bound, and named dimensions equal across inputs.
  std::map<std::string, std::pair<int64_t, std::string>> sizes;
  for (size_t i = 0; i < model->inputs.size(); ++i) {
    const TensorDecl &d = model->inputs[i];
    const Binding &b = model->bindings[i];
    if (!b.bound)
      return fail("input '" + d.name + "' is not set");
    for (size_t k = 0; k < d.dims.size(); ++k) {
      if (d.keys[k].empty())
        continue;
      auto [it, inserted] =
          sizes.try_emplace(d.keys[k], b.shape[k], d.name);
      if (!inserted && it->second.first != b.shape[k]) {
        std::string dim = d.dimNames[k].empty() ? "dimension " +
                                                      std::to_string(k)
                                                : "'" + d.dimNames[k] + "'";
        return fail("input '" + d.name + "': " + dim + " is " +
                    std::to_string(b.shape[k]) + ", but it is " +
                    std::to_string(it->second.first) + " in input '" +
                    it->second.second + "'");
      }
    }
  }
  model->releaseResults();

  std::vector<std::vector<int64_t>> descs(model->inputs.size());
  std::vector<void *> args;
  for (size_t i = 0; i < model->inputs.size(); ++i) {
    const Binding &b = model->bindings[i];
    size_t rank = b.shape.size();
    std::vector<int64_t> &desc = descs[i];
    desc.assign(3 + 2 * rank, 0);
    void *data = const_cast<void *>(b.data);
    std::memcpy(&desc[0], &data, sizeof(void *));
    std::memcpy(&desc[1], &data, sizeof(void *));
    int64_t stride = 1;
    for (size_t k = rank; k-- > 0;) {
      desc[3 + k] = b.shape[k];
      desc[3 + rank + k] = stride;
      stride *= b.shape[k];
    }
    args.push_back(desc.data());
  }
  size_t words = 0;
  for (const TensorDecl &d : model->outputs)
    words += 3 + 2 * d.dims.size();
  std::vector<int64_t> results(words, 0);
  if (model->cudaError) {
    // An error from loading the library's GPU code (no driver, no GPU, a
    // cubin for another chip) or from an earlier run.
    if (const char *err = model->cudaError()) {
      std::string message = err;
      model->cudaClearError();
      return fail("cannot run '" + model->path + "' (compiled for " +
                  model->chip + ") on the GPU: " + message);
    }
  }
  model->run(args.data(), results.data());
  if (model->cudaError) {
    if (const char *err = model->cudaError()) {
      std::string message = err;
      model->cudaClearError();
      // The results are garbage: free what the run allocated.
      std::set<void *> freed;
      size_t w = 0;
      for (const TensorDecl &d : model->outputs) {
        void *allocated;
        std::memcpy(&allocated, &results[w], sizeof(void *));
        if (allocated && freed.insert(allocated).second)
          model->freeBuffer(allocated);
        w += 3 + 2 * d.dims.size();
      }
      return fail("running '" + model->path + "' on the GPU failed: " +
                  message);
    }
  }

  // Each result's buffer is the model's until the next run; a strided one
  // (not produced by the compiler today) is copied to a contiguous buffer.
  std::set<void *> seen;
  size_t w = 0;
  for (const TensorDecl &d : model->outputs) {
    size_t rank = d.dims.size();
    void *allocated, *aligned;
    std::memcpy(&allocated, &results[w], sizeof(void *));
    std::memcpy(&aligned, &results[w + 1], sizeof(void *));
    int64_t offset = results[w + 2];
    Output out;
    out.shape.assign(&results[w + 3], &results[w + 3] + rank);
    const int64_t *strides = &results[w + 3 + rank];
    size_t esize = kDtypes[d.dtype].size;
    size_t elements = 1;
    for (int64_t s : out.shape)
      elements *= static_cast<size_t>(s);
    out.bytes = elements * esize;
    bool contiguous = true;
    int64_t expect = 1;
    for (size_t k = rank; k-- > 0;) {
      if (out.shape[k] != 1 && strides[k] != expect)
        contiguous = false;
      expect *= out.shape[k];
    }
    char *base = static_cast<char *>(aligned) + offset * esize;
    if (contiguous) {
      out.data = base;
    } else {
      out.data = std::malloc(out.bytes ? out.bytes : 1);
      model->copies.push_back(out.data);
      std::vector<int64_t> idx(rank, 0);
      for (size_t e = 0; e < elements; ++e) {
        int64_t src = 0;
        for (size_t k = 0; k < rank; ++k)
          src += idx[k] * strides[k];
        std::memcpy(static_cast<char *>(out.data) + e * esize,
                    base + src * esize, esize);
        for (size_t k = rank; k-- > 0;) {
          if (++idx[k] < out.shape[k])
            break;
          idx[k] = 0;
        }
      }
    }
    if (allocated && seen.insert(allocated).second)
      model->owned.push_back(allocated);
    model->results.push_back(std::move(out));
    w += 3 + 2 * rank;
  }
  return 0;
}

int mf_model_output(const mf_model *model, size_t index, mf_tensor *out) {
  if (!model)
    return fail("no model");
  if (!out)
    return fail("no mf_tensor to fill");
  if (model->results.empty() && !model->outputs.empty())
    return fail("the model has not run yet");
  if (index >= model->results.size())
    return fail("output index " + std::to_string(index) +
                " is out of range: the model has " +
                std::to_string(model->outputs.size()));
  const Output &o = model->results[index];
  out->dtype = model->outputs[index].dtype;
  out->rank = static_cast<int64_t>(o.shape.size());
  out->shape = o.shape.data();
  out->data = o.data;
  out->size_bytes = o.bytes;
  return 0;
}

} // extern "C"

mf_model *masformer::runtime::detail::loadDecodeEntry(const char *path) {
  return loadEntry(path, MF_ABI_SYM_DECODE_RUN, MF_ABI_SYM_DECODE_SIGNATURE);
}
const std::string &
masformer::runtime::detail::modelPath(const mf_model *model) {
  return model->path;
}
const std::vector<CacheDecl> &
masformer::runtime::detail::decodeCaches(const mf_model *model) {
  return model->caches;
}
int64_t masformer::runtime::detail::decodeMaxLength(const mf_model *model) {
  return model->maxLength;
}
