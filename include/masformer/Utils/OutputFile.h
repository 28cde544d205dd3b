//===- OutputFile.h - Outputs written whole or not at all ---------*- C++ -*-===//
//
// Every file a tool writes goes through writeOutputAtomically: a temporary
// file next to the target, renamed over it only once everything was
// written, so that a failure, an error or a kill (Ctrl-C) leaves an
// existing target as it was and never a partial file under its name.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_UTILS_OUTPUTFILE_H
#define MASFORMER_UTILS_OUTPUTFILE_H

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Signals.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>

namespace mlir::masformer {

/// Creates and opens a new file named after `model` (each '%' a random hex
/// digit; a relative model lies in the system's temporary directory when
/// `inTempDir`, else in the current one) and has it removed on signals
/// (Ctrl-C). The name is registered before the file exists: with
/// createUniqueFile followed by RemoveFileOnSignal, as
/// llvm::sys::fs::TempFile does, a signal in between leaves the file behind.
/// The caller calls DontRemoveFileOnSignal(path) once the file is renamed or
/// removed.
inline std::error_code
createFileRemovedOnSignal(const llvm::Twine &model, bool inTempDir, int &fd,
                          llvm::SmallVectorImpl<char> &path) {
  std::error_code ec;
  for (int attempt = 0; attempt < 128; ++attempt) {
    llvm::sys::fs::createUniquePath(model, path, inTempDir);
    llvm::StringRef name(path.data(), path.size());
    llvm::sys::RemoveFileOnSignal(name);
    ec = llvm::sys::fs::openFileForWrite(name, fd, llvm::sys::fs::CD_CreateNew);
    if (!ec)
      return ec;
    // Someone else's file: never ours to remove.
    llvm::sys::DontRemoveFileOnSignal(name);
    if (ec != std::errc::file_exists)
      return ec;
  }
  return ec;
}

/// Writes `path` through `write`: to a temporary file in the target's
/// directory (removed on failure and on signals), renamed over the target
/// only once `write` succeeded and the bytes reached the file. "-" is
/// stdout and "/dev/null" discards; any other existing target that is not
/// a regular file (a device, a FIFO, a directory) is refused, so that a
/// rename never replaces it. Errors are emitted at `loc`; `write` emits its
/// own.
inline LogicalResult
writeOutputAtomically(llvm::StringRef path, Location loc,
                      std::function<LogicalResult(llvm::raw_ostream &)> write) {
  if (path == "-")
    return write(llvm::outs());
  if (path == "/dev/null") {
    llvm::raw_null_ostream os;
    return write(os);
  }
  llvm::sys::fs::file_status st;
  if (!llvm::sys::fs::status(path, st) && llvm::sys::fs::exists(st) &&
      !llvm::sys::fs::is_regular_file(st))
    return emitError(loc) << "cannot write '" << path
                          << "': it exists and is not a regular file";
  llvm::SmallString<256> tmp;
  int fd;
  if (std::error_code ec =
          createFileRemovedOnSignal(path + ".tmp-%%%%%%", false, fd, tmp))
    return emitError(loc) << "cannot write '" << path << "': " << ec.message();
  bool ok;
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    ok = succeeded(write(os));
    os.close();
    // Cleared in every case: a stream destroyed with an error set aborts.
    if (os.has_error()) {
      if (ok)
        emitError(loc) << "cannot write '" << path
                       << "': " << os.error().message();
      os.clear_error();
      ok = false;
    }
  }
  std::error_code ec;
  if (ok && (ec = llvm::sys::fs::rename(tmp, path)))
    emitError(loc) << "cannot write '" << path << "': " << ec.message();
  if (!ok || ec)
    llvm::sys::fs::remove(tmp);
  llvm::sys::DontRemoveFileOnSignal(tmp);
  return success(ok && !ec);
}

} // namespace mlir::masformer

#endif // MASFORMER_UTILS_OUTPUTFILE_H
