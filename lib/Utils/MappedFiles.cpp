//===- MappedFiles.cpp - Weight files mapped read-only ----------*- C++ -*-===//

#include "masformer/Utils/MappedFiles.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <mutex>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace mlir;
using namespace mlir::masformer;

namespace {
/// The live mappings by start address.
struct Registry {
  std::mutex mutex;
  std::map<uintptr_t, const MappedFile *> byStart;
};
Registry &registry() {
  static Registry *r = new Registry; // never destroyed: used at exit
  return *r;
}
} // namespace

std::shared_ptr<MappedFile> MappedFile::open(StringRef path,
                                             std::string &error) {
  std::string p = path.str();
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = std::strerror(errno);
    return nullptr;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    error = S_ISREG(st.st_mode) ? std::strerror(errno) : "not a regular file";
    ::close(fd);
    return nullptr;
  }
  std::shared_ptr<MappedFile> file(new MappedFile);
  file->size = static_cast<size_t>(st.st_size);
  if (file->size) {
    void *addr = mmap(nullptr, file->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      error = std::strerror(errno);
      ::close(fd);
      return nullptr;
    }
    file->data = static_cast<const char *>(addr);
  }
  ::close(fd);
  SmallString<256> real;
  file->realPath = llvm::sys::fs::real_path(path, real) ? p : real.str().str();
  if (file->size) {
    Registry &r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.byStart[reinterpret_cast<uintptr_t>(file->data)] = file.get();
  }
  return file;
}

MappedFile::~MappedFile() {
  if (!size)
    return;
  {
    Registry &r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.byStart.erase(reinterpret_cast<uintptr_t>(data));
  }
  munmap(const_cast<char *>(data), size);
}

std::optional<FileOrigin>
mlir::masformer::findMappedOrigin(ArrayRef<char> bytes) {
  if (bytes.empty())
    return std::nullopt;
  auto start = reinterpret_cast<uintptr_t>(bytes.data());
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.byStart.upper_bound(start);
  if (it == r.byStart.begin())
    return std::nullopt;
  --it;
  const MappedFile &file = *it->second;
  uint64_t offset = start - it->first;
  if (offset + bytes.size() > file.bytes().size())
    return std::nullopt;
  return FileOrigin{file.path(), offset, file.bytes().size()};
}
