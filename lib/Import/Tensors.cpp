//===- Tensors.cpp - Reading ONNX tensors -----------------------*- C++ -*-===//
//
// Element types, raw and typed tensor data, and external data files (checked
// to stay inside the model's directory and within the file) for the ONNX
// importer.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cstdio>
#include <cstring>
#include <optional>
#include <sys/resource.h>
#include <unistd.h>

using namespace mlir;
using namespace mlir::masformer;

Type ONNXImporterImpl::convertElementType(int32_t t) {
  MLIRContext *ctx = getContext();
  switch (t) {
  case onnx::TensorProto::FLOAT:
    return Float32Type::get(ctx);
  case onnx::TensorProto::FLOAT16:
    return Float16Type::get(ctx);
  case onnx::TensorProto::BFLOAT16:
    return BFloat16Type::get(ctx);
  case onnx::TensorProto::DOUBLE:
    return Float64Type::get(ctx);
  case onnx::TensorProto::INT64:
    return IntegerType::get(ctx, 64);
  case onnx::TensorProto::INT32:
    return IntegerType::get(ctx, 32);
  case onnx::TensorProto::INT16:
    return IntegerType::get(ctx, 16);
  case onnx::TensorProto::INT8:
  case onnx::TensorProto::UINT8:
    return IntegerType::get(ctx, 8);
  case onnx::TensorProto::BOOL:
    return IntegerType::get(ctx, 1);
  default:
    return {};
  }
}

std::string mlir::masformer::onnxTypeName(int32_t t) {
  // The 4-bit and 8-bit float types are newer than the ONNX headers built
  // against; their numbers are fixed by the standard.
  static const char *const kNewer[] = {
      "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ",
      "UINT4",        "INT4",           "FLOAT4E2M1"};
  std::string name;
  if (onnx::TensorProto_DataType_IsValid(t))
    name = onnx::TensorProto_DataType_Name(
        static_cast<onnx::TensorProto_DataType>(t));
  else if (t >= 17 && t <= 23)
    name = kNewer[t - 17];
  return name.empty() ? std::to_string(t)
                      : name + " (" + std::to_string(t) + ")";
}

int64_t mlir::masformer::rawElementSize(int32_t t) {
  switch (t) {
  case onnx::TensorProto::DOUBLE:
  case onnx::TensorProto::INT64:
    return 8;
  case onnx::TensorProto::FLOAT:
  case onnx::TensorProto::INT32:
    return 4;
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
  case onnx::TensorProto::INT16:
    return 2;
  default:
    return 1;
  }
}

FailureOr<ONNXImporterImpl::ExternalRef>
ONNXImporterImpl::resolveExternal(const onnx::TensorProto &tensor) {
  std::string location, bad;
  int64_t offset = 0, length = -1;
  for (const onnx::StringStringEntryProto &kv : tensor.external_data()) {
    if (kv.key() == "location") {
      location = kv.value();
      continue;
    }
    // Decimal, as ONNX writes them: "0200" is 200, not octal 128, and
    // "0x10" is not a number.
    int64_t *field = kv.key() == "offset"   ? &offset
                     : kv.key() == "length" ? &length
                                            : nullptr;
    if (field && (!llvm::to_integer(kv.value(), *field, /*Base=*/10) ||
                  *field < 0) &&
        bad.empty())
      bad = kv.key() + " '" + kv.value() + "'";
  }
  if (!bad.empty())
    return emitError(loc) << "initializer '" << tensor.name()
                          << "': external data " << bad
                          << " is not a non-negative decimal integer",
           failure();
  // External data must stay inside the model's directory: a model file must
  // not make the importer read arbitrary files.
  if (location.empty() || llvm::sys::path::is_absolute(location) ||
      llvm::is_contained(llvm::make_range(llvm::sys::path::begin(location),
                                          llvm::sys::path::end(location)),
                         ".."))
    return emitError(loc) << "initializer '" << tensor.name()
                          << "': external data location '" << location
                          << "' must be a relative path inside the model's "
                             "directory",
           failure();
  SmallString<256> path(baseDir);
  llvm::sys::path::append(path, location);
  // Through links too: the file itself must lie inside the directory.
  SmallString<256> realDir, realFile;
  if (!llvm::sys::fs::real_path(baseDir, realDir) &&
      !llvm::sys::fs::real_path(path, realFile) &&
      !StringRef(realFile).starts_with((realDir + "/").str()))
    return emitError(loc) << "initializer '" << tensor.name()
                          << "': external data '" << location
                          << "' resolves to '" << realFile
                          << "', outside the model's directory",
           failure();
  // Only a regular file: a FIFO would block the read, a device never end.
  llvm::sys::fs::file_status st;
  if (!llvm::sys::fs::status(path, st) && llvm::sys::fs::exists(st) &&
      !llvm::sys::fs::is_regular_file(st))
    return emitError(loc) << "initializer '" << tensor.name()
                          << "': external data '" << location
                          << "' is not a regular file",
           failure();
  uint64_t fileSize = 0;
  if (std::error_code ec = llvm::sys::fs::file_size(path, fileSize))
    return emitError(loc) << "initializer '" << tensor.name()
                          << "': cannot read external data '" << path
                          << "': " << ec.message(),
           failure();
  if (offset > static_cast<int64_t>(fileSize))
    return emitError(loc) << "initializer '" << tensor.name()
                          << "': external data offset " << offset
                          << " lies past the end of '" << path << "' ("
                          << fileSize << " bytes)",
           failure();
  if (length < 0)
    length = static_cast<int64_t>(fileSize) - offset;
  if (length > static_cast<int64_t>(fileSize) - offset)
    return emitError(loc) << "initializer '" << tensor.name()
                          << "': external data of " << length
                          << " bytes at offset " << offset
                          << " lies past the end of '" << path << "' ("
                          << fileSize << " bytes)",
           failure();
  return ExternalRef{path.str().str(), offset, length};
}

/// Reads the first integer of a file ("max" and unreadable files: none).
static std::optional<uint64_t> readNumber(const std::string &path) {
  std::FILE *f = std::fopen(path.c_str(), "r");
  if (!f)
    return std::nullopt;
  unsigned long long v;
  bool ok = std::fscanf(f, "%llu", &v) == 1;
  std::fclose(f);
  return ok ? std::optional<uint64_t>(v) : std::nullopt;
}

MemoryBudget mlir::masformer::memoryBudget() {
  MemoryBudget budget{uint64_t(1) << 40, "this machine's physical memory"};
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
  if (pages > 0 && pageSize > 0)
    budget.bytes = static_cast<uint64_t>(pages) * pageSize;
  auto lower = [&](uint64_t limit, uint64_t used, const char *what) {
    uint64_t left = limit > used ? limit - used : 0;
    if (left < budget.bytes)
      budget = {left, what};
  };
  // The address-space limit (ulimit -v), less what is mapped already.
  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    std::optional<uint64_t> mappedPages = readNumber("/proc/self/statm");
    lower(rl.rlim_cur,
          mappedPages && pageSize > 0 ? *mappedPages * pageSize : 0,
          "the memory left under this process's address-space limit");
  }
  // The memory cgroup's limit (v2, then v1), less what it uses.
  std::FILE *f = std::fopen("/proc/self/cgroup", "r");
  if (f) {
    char line[4096];
    while (std::fgets(line, sizeof(line), f)) {
      StringRef entry = StringRef(line).rtrim("\n");
      bool v2 = entry.starts_with("0::");
      size_t memory = entry.find(":memory:");
      if (!v2 && memory == StringRef::npos)
        continue;
      std::string rel =
          entry.substr(v2 ? 3 : memory + strlen(":memory:")).str();
      std::string root = v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory";
      const char *limitFile = v2 ? "/memory.max" : "/memory.limit_in_bytes";
      const char *usageFile = v2 ? "/memory.current" : "/memory.usage_in_bytes";
      // Inside a container the cgroup's own folder is often the root.
      for (const std::string &dir : {root + rel, root}) {
        std::optional<uint64_t> limit = readNumber(dir + limitFile);
        if (!limit)
          continue;
        lower(*limit, readNumber(dir + usageFile).value_or(0),
              "the memory left under this process's cgroup limit");
        break;
      }
    }
    std::fclose(f);
  }
  return budget;
}

LogicalResult ONNXImporterImpl::reserveMemory(StringRef tensor, int64_t bytes) {
  if (!budget)
    budget = memoryBudget();
  uint64_t cap = budget->bytes;
  if (bytes >= 0 && heldBytes <= cap &&
      static_cast<uint64_t>(bytes) <= cap - heldBytes) {
    heldBytes += static_cast<uint64_t>(bytes);
    return success();
  }
  InFlightDiagnostic diag = emitError(loc);
  diag << "tensor '" << tensor << "' needs " << bytes << " bytes";
  if (heldBytes)
    diag << "; with the " << heldBytes
         << " bytes of tensor data read before it, that is";
  else
    diag << ",";
  diag << " more than " << budget->what << " (" << cap << " bytes)";
  return diag;
}

LogicalResult ONNXImporterImpl::readExternal(const ExternalRef &ref,
                                             char *dest) {
  std::FILE *f = std::fopen(ref.path.c_str(), "rb");
  if (!f)
    return failure();
  bool ok = std::fseek(f, ref.offset, SEEK_SET) == 0 &&
            std::fread(dest, 1, ref.length, f) ==
                static_cast<size_t>(ref.length);
  std::fclose(f);
  return success(ok);
}

/// The largest power of two up to 64 that divides `p`'s address.
static size_t addressAlignment(const char *p) {
  auto address = reinterpret_cast<uintptr_t>(p);
  size_t align = 64;
  while (align > 1 && address % align)
    align /= 2;
  return align;
}

AsmResourceBlob ONNXImporterImpl::inlineBlob(ArrayRef<char> bytes,
                                             int64_t elementSize) {
  size_t align = addressAlignment(bytes.data());
  if (!options.owner || align < static_cast<size_t>(elementSize))
    return HeapAsmResourceBlob::allocateAndCopyWithAlign(bytes,
                                                         alignof(uint64_t));
  return UnmanagedAsmResourceBlob::allocateWithAlign(
      bytes, align, [owner = options.owner](void *, size_t, size_t) {},
      /*dataIsMutable=*/false);
}

FailureOr<AsmResourceBlob>
ONNXImporterImpl::externalBlob(const ExternalRef &ref, StringRef tensor,
                               int64_t elementSize) {
  std::shared_ptr<MappedFile> &file = mappedFiles[ref.path];
  if (!file) {
    std::string error;
    file = MappedFile::open(ref.path, error);
    if (!file)
      return emitError(loc)
                 << "initializer '" << tensor << "': cannot map external data '"
                 << ref.path << "': " << error,
             failure();
  }
  ArrayRef<char> all = file->bytes();
  // The size was checked when the reference was resolved; a file that
  // shrank since is refused rather than read past its end.
  if (static_cast<uint64_t>(ref.offset) + ref.length > all.size())
    return emitError(loc) << "initializer '" << tensor << "': external data '"
                          << ref.path << "' changed while it was read",
           failure();
  ArrayRef<char> bytes = all.slice(ref.offset, ref.length);
  size_t align = addressAlignment(bytes.data());
  if (align < static_cast<size_t>(elementSize))
    return HeapAsmResourceBlob::allocateAndCopyWithAlign(bytes,
                                                         alignof(uint64_t));
  // The blob keeps the mapping alive.
  return UnmanagedAsmResourceBlob::allocateWithAlign(
      bytes, align, [file](void *, size_t, size_t) {},
      /*dataIsMutable=*/false);
}

FailureOr<HostTensor>
ONNXImporterImpl::readHostTensor(const onnx::TensorProto &tensor) {
  HostTensor t;
  t.elemType = convertElementType(tensor.data_type());
  if (!t.elemType)
    return emitError(loc) << "tensor '" << tensor.name()
                          << "' has unsupported element type "
                          << onnxTypeName(tensor.data_type()),
           failure();
  for (int64_t d : tensor.dims()) {
    if (d < 0)
      return emitError(loc) << "tensor '" << tensor.name()
                            << "' has a negative dimension",
             failure();
    t.shape.push_back(d);
  }
  if (isBadShape(t.shape))
    return emitError(loc) << "tensor '" << tensor.name()
                          << "' has too many elements",
           failure();
  int64_t n = t.numElements();
  int32_t dt = tensor.data_type();
  bool external = tensor.data_location() == onnx::TensorProto::EXTERNAL;
  bool raw = tensor.has_raw_data() || external;
  // What the tensor holds is checked against its shape before anything is
  // allocated: a few bytes of model may declare 2^40 elements.
  std::optional<ExternalRef> ref;
  int64_t present;
  if (raw) {
    if (external) {
      FailureOr<ExternalRef> r = resolveExternal(tensor);
      if (failed(r))
        return failure();
      ref = *r;
      present = ref->length;
    } else {
      present = static_cast<int64_t>(tensor.raw_data().size());
    }
    int64_t size = rawElementSize(dt);
    if (present != n * size)
      return emitError(loc) << "tensor '" << tensor.name() << "' holds "
                            << present << " bytes, expected " << n * size,
             failure();
  } else {
    switch (dt) {
    case onnx::TensorProto::FLOAT:
      present = tensor.float_data_size();
      break;
    case onnx::TensorProto::DOUBLE:
      present = tensor.double_data_size();
      break;
    case onnx::TensorProto::INT64:
      present = tensor.int64_data_size();
      break;
    default:
      present = tensor.int32_data_size();
      break;
    }
    if (present != n)
      return emitError(loc) << "tensor '" << tensor.name() << "' holds "
                            << present << " values, expected " << n,
             failure();
  }
  // Host tensors hold 8 bytes per element, external bytes are read first.
  if (failed(reserveMemory(tensor.name(),
                           n * 8 + (ref ? ref->length : int64_t(0)))))
    return failure();
  t.resize(n);
  if (raw) {
    std::string externalBytes;
    if (ref) {
      externalBytes.resize(ref->length);
      if (failed(readExternal(*ref, externalBytes.data())))
        return emitError(loc)
                   << "initializer '" << tensor.name()
                   << "': cannot read external data '" << ref->path << "'",
               failure();
    }
    int64_t size = rawElementSize(dt);
    const char *p = ref ? externalBytes.data() : tensor.raw_data().data();
    for (int64_t i = 0; i < n; ++i, p += size) {
      switch (dt) {
      case onnx::TensorProto::FLOAT: {
        float v;
        std::memcpy(&v, p, 4);
        t.floats[i] = v;
        break;
      }
      case onnx::TensorProto::DOUBLE:
        std::memcpy(&t.floats[i], p, 8);
        break;
      case onnx::TensorProto::FLOAT16:
      case onnx::TensorProto::BFLOAT16: {
        uint16_t bits;
        std::memcpy(&bits, p, 2);
        const llvm::fltSemantics &sem = dt == onnx::TensorProto::FLOAT16
                                            ? APFloat::IEEEhalf()
                                            : APFloat::BFloat();
        t.floats[i] = APFloat(sem, APInt(16, bits)).convertToDouble();
        break;
      }
      case onnx::TensorProto::INT64:
        std::memcpy(&t.ints[i], p, 8);
        break;
      case onnx::TensorProto::INT32: {
        int32_t v;
        std::memcpy(&v, p, 4);
        t.ints[i] = v;
        break;
      }
      case onnx::TensorProto::INT16: {
        int16_t v;
        std::memcpy(&v, p, 2);
        t.ints[i] = v;
        break;
      }
      case onnx::TensorProto::INT8:
        t.ints[i] = static_cast<int8_t>(*p);
        break;
      default: // UINT8, BOOL
        t.ints[i] = static_cast<uint8_t>(*p);
        break;
      }
    }
    return t;
  }
  switch (dt) {
  case onnx::TensorProto::FLOAT:
    for (int64_t i = 0; i < n; ++i)
      t.floats[i] = tensor.float_data(i);
    break;
  case onnx::TensorProto::DOUBLE:
    for (int64_t i = 0; i < n; ++i)
      t.floats[i] = tensor.double_data(i);
    break;
  case onnx::TensorProto::INT64:
    for (int64_t i = 0; i < n; ++i)
      t.ints[i] = tensor.int64_data(i);
    break;
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16: {
    const llvm::fltSemantics &sem = dt == onnx::TensorProto::FLOAT16
                                        ? APFloat::IEEEhalf()
                                        : APFloat::BFloat();
    for (int64_t i = 0; i < n; ++i)
      t.floats[i] =
          APFloat(sem, APInt(16, tensor.int32_data(i) & 0xffff))
              .convertToDouble();
    break;
  }
  default:
    for (int64_t i = 0; i < n; ++i)
      t.setInt(i, tensor.int32_data(i));
    break;
  }
  return t;
}
