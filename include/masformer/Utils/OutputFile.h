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
#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>

namespace mlir::masformer {

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
  // TempFile removes the file on signals until it is kept or discarded.
  llvm::Expected<llvm::sys::fs::TempFile> temp =
      llvm::sys::fs::TempFile::create(path + ".tmp-%%%%%%");
  if (!temp)
    return emitError(loc) << "cannot write '" << path
                          << "': " << llvm::toString(temp.takeError());
  bool ok;
  {
    llvm::raw_fd_ostream os(temp->FD, /*shouldClose=*/false);
    ok = succeeded(write(os));
    os.flush();
    // Cleared in every case: a stream destroyed with an error set aborts.
    if (os.has_error()) {
      if (ok)
        emitError(loc) << "cannot write '" << path
                       << "': " << os.error().message();
      os.clear_error();
      ok = false;
    }
  }
  if (!ok) {
    llvm::consumeError(temp->discard());
    return failure();
  }
  if (llvm::Error e = temp->keep(path))
    return emitError(loc) << "cannot write '" << path
                          << "': " << llvm::toString(std::move(e));
  return success();
}

} // namespace mlir::masformer

#endif // MASFORMER_UTILS_OUTPUTFILE_H
