//===- Toolchain.h - The tools a compiled library is made with --*- C++ -*-===//
//
// What lies outside the compiler: the C compiler driver that links a
// library, the CUDA toolkit whose ptxas makes cubins, the directory of
// libMASFormerCudaRuntime, and files written on the way.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_TARGET_TOOLCHAIN_H
#define MASFORMER_TARGET_TOOLCHAIN_H

#include "mlir/IR/Location.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace mlir::masformer {

/// A temporary file, removed when this goes out of scope and, until then,
/// on signals (Ctrl-C) too.
struct TempFile {
  TempFile() = default;
  TempFile(const TempFile &) = delete;
  TempFile &operator=(const TempFile &) = delete;
  ~TempFile();
  llvm::SmallString<256> path;
  llvm::FileRemover remover;
  LogicalResult create(StringRef suffix, Location loc);
};

/// Writes `path` with `fn`; an error names the file.
LogicalResult
writeFile(StringRef path,
          llvm::function_ref<LogicalResult(llvm::raw_fd_ostream &)> fn,
          Location loc);

/// Links `objects` and the runtime's allocator (lib/Runtime/Allocator.c,
/// built by CMake and embedded here) into the shared library `out` with the
/// system's C compiler driver: for the CPU with libomp and the MLIR C runner
/// utilities, for the GPU (`cudaRuntimeDir` non-empty) with
/// libMASFormerCudaRuntime from that directory. A failure quotes the
/// linker's output.
LogicalResult linkLibrary(ArrayRef<std::string> objects, StringRef out,
                          StringRef cudaRuntimeDir, Location loc);

/// The CUDA toolkit to compile kernels with (`option`, else $CUDA_HOME,
/// $CUDA_PATH, /usr/local/cuda); fails unless it has ptxas.
FailureOr<std::string> findCudaToolkit(StringRef option, Location loc);

/// The directory of libMASFormerCudaRuntime.so, which GPU libraries link
/// (`option`, else $MASFORMER_LIBRARY_DIR, ../lib next to the running
/// executable, the build tree's lib/).
FailureOr<std::string> findCudaRuntimeDir(StringRef option, Location loc);

} // namespace mlir::masformer

#endif // MASFORMER_TARGET_TOOLCHAIN_H
