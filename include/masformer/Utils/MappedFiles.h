//===- MappedFiles.h - Weight files mapped read-only ------------*- C++ -*-===//
//
// The importer maps a model's external data file instead of reading it, so
// that its weights cost no copy, and so that the compiler can tell, from the
// address of a weight's bytes, which file and offset they came from: a
// compiled library then refers to the model's own data file rather than
// storing the weights again (docs/compile.md, "Weights").
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_UTILS_MAPPEDFILES_H
#define MASFORMER_UTILS_MAPPEDFILES_H

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace mlir::masformer {

/// A whole file mapped read-only and private. While it lives, its address
/// range is registered process-wide (findMappedOrigin).
class MappedFile {
public:
  /// Maps `path`; on failure returns null and sets `error` (the system's
  /// reason). An empty file maps to an empty range.
  static std::shared_ptr<MappedFile> open(StringRef path, std::string &error);
  ~MappedFile();
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;

  ArrayRef<char> bytes() const { return {data, size}; }
  /// The file's real path (links resolved).
  const std::string &path() const { return realPath; }

private:
  MappedFile() = default;
  const char *data = nullptr;
  size_t size = 0;
  std::string realPath;
};

/// Where bytes that lie in a live MappedFile came from.
struct FileOrigin {
  std::string path;
  uint64_t offset = 0;
  uint64_t fileSize = 0;
};

/// The file and offset of `bytes` when they lie wholly inside a live
/// MappedFile; nullopt for any other memory (heap blobs, derived weights).
std::optional<FileOrigin> findMappedOrigin(ArrayRef<char> bytes);

} // namespace mlir::masformer

#endif // MASFORMER_UTILS_MAPPEDFILES_H
