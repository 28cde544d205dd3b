//===- Toolchain.cpp - The tools a compiled library is made wit -*- C++ -*-===//

#include "masformer/Target/Toolchain.h"
#include "masformer/Utils/OutputFile.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/Signals.h"

using namespace mlir;
using namespace mlir::masformer;

#ifndef MASFORMER_LLVM_LIBRARY_DIR
#define MASFORMER_LLVM_LIBRARY_DIR "/usr/lib/llvm-22/lib"
#endif

// kAllocatorObjectCPU and kAllocatorObjectCUDA: lib/Runtime/Allocator.c
// compiled by CMake (lib/Runtime/CMakeLists.txt).
#include "AllocatorObjects.inc"

/// The C compiler driver that links the library.
static FailureOr<std::string> findLinker(Location loc) {
  for (StringRef name : {"clang-22", "clang", "cc", "gcc"})
    if (llvm::ErrorOr<std::string> p = llvm::sys::findProgramByName(name))
      return *p;
  return emitError(loc) << "no C compiler driver (clang-22, clang, cc or "
                           "gcc) in PATH to link the library with; "
                           "scripts/setup.sh installs one",
         failure();
}

LogicalResult TempFile::create(StringRef suffix, Location loc) {
  int fd;
  if (std::error_code ec = createFileRemovedOnSignal(
          "masformer-%%%%%%%%." + suffix, /*inTempDir=*/true, fd, path)) {
    path.clear();
    return emitError(loc) << "cannot create a temporary file: " << ec.message();
  }
  llvm::sys::Process::SafelyCloseFileDescriptor(fd);
  remover.setFile(path);
  return success();
}

TempFile::~TempFile() {
  if (!path.empty())
    llvm::sys::DontRemoveFileOnSignal(path);
}

LogicalResult mlir::masformer::writeFile(
    StringRef path,
    llvm::function_ref<LogicalResult(llvm::raw_fd_ostream &)> fn,
    Location loc) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec)
    return emitError(loc) << "cannot write '" << path << "': " << ec.message();
  return fn(os);
}

LogicalResult mlir::masformer::linkLibrary(ArrayRef<std::string> objects,
                                           StringRef out,
                                           StringRef cudaRuntimeDir,
                                           Location loc) {
  FailureOr<std::string> driver = findLinker(loc);
  if (failed(driver))
    return failure();
  TempFile log, allocator;
  if (failed(log.create("log", loc)) || failed(allocator.create("o", loc)))
    return failure();
  bool cuda = !cudaRuntimeDir.empty();
  if (failed(writeFile(
          allocator.path,
          [&](llvm::raw_fd_ostream &os) {
            if (cuda)
              os.write(reinterpret_cast<const char *>(kAllocatorObjectCUDA),
                       sizeof(kAllocatorObjectCUDA));
            else
              os.write(reinterpret_cast<const char *>(kAllocatorObjectCPU),
                       sizeof(kAllocatorObjectCPU));
            return success();
          },
          loc)))
    return failure();
  std::string libDir = MASFORMER_LLVM_LIBRARY_DIR;
  SmallVector<std::string> args = {*driver, "-shared", "-o", out.str()};
  llvm::append_range(args, objects);
  args.append({allocator.path.str().str(), "-Wl,-z,defs"});
  if (cudaRuntimeDir.empty()) {
    // libomp from LLVM's directory, or next to the library (a copy of both
    // carried to another machine). Nothing of MLIR's: the allocator object
    // defines memrefCopy.
    args.append({"-L" + libDir, "-Wl,-rpath," + libDir, "-Wl,-rpath,$ORIGIN",
                 "-lomp"});
  } else {
    // The shim from where it is, or next to the library (a copy of both
    // carried to a GPU machine).
    args.append({"-L" + cudaRuntimeDir.str(),
                 "-Wl,-rpath," + cudaRuntimeDir.str(), "-Wl,-rpath,$ORIGIN",
                 "-lMASFormerCudaRuntime"});
  }
  args.push_back("-lm");
  SmallVector<StringRef> argRefs(args.begin(), args.end());
  std::optional<StringRef> redirects[] = {std::nullopt, log.path.str(),
                                          log.path.str()};
  std::string err;
  int rc = llvm::sys::ExecuteAndWait(*driver, argRefs, std::nullopt, redirects,
                                     0, 0, &err);
  if (rc != 0) {
    std::string text;
    if (auto buf = llvm::MemoryBuffer::getFile(log.path))
      text = (*buf)->getBuffer().take_back(2000).str();
    return emitError(loc) << "linking the library with " << *driver << " failed"
                          << (err.empty() ? "" : ": " + err) << "\n"
                          << text,
           failure();
  }
  return success();
}

FailureOr<std::string> mlir::masformer::findCudaToolkit(StringRef option,
                                                        Location loc) {
  std::string dir = option.str();
  if (dir.empty())
    for (const char *var : {"CUDA_HOME", "CUDA_PATH"})
      if (std::optional<std::string> v = llvm::sys::Process::GetEnv(var))
        if (!v->empty()) {
          dir = *v;
          break;
        }
  if (dir.empty())
    dir = "/usr/local/cuda";
  SmallString<256> ptxas(dir);
  llvm::sys::path::append(ptxas, "bin", "ptxas");
  if (!llvm::sys::fs::can_execute(ptxas))
    return emitError(loc) << "--target=cuda: no CUDA toolkit at '" << dir
                          << "' (no " << ptxas
                          << "); pass --cuda-toolkit=DIR or set CUDA_HOME",
           failure();
  return dir;
}

FailureOr<std::string> mlir::masformer::findCudaRuntimeDir(StringRef option,
                                                           Location loc) {
  SmallVector<std::string> candidates;
  if (!option.empty()) {
    candidates.push_back(option.str());
  } else {
    if (std::optional<std::string> v =
            llvm::sys::Process::GetEnv("MASFORMER_LIBRARY_DIR"))
      candidates.push_back(*v);
    // Next to the tool: <prefix>/bin/masformer-compile, <prefix>/lib.
    static int anchor;
    std::string exe = llvm::sys::fs::getMainExecutable(nullptr, &anchor);
    if (!exe.empty()) {
      SmallString<256> dir(
          llvm::sys::path::parent_path(llvm::sys::path::parent_path(exe)));
      llvm::sys::path::append(dir, "lib");
      candidates.push_back(dir.str().str());
    }
#ifdef MASFORMER_BUILD_LIBRARY_DIR
    candidates.push_back(MASFORMER_BUILD_LIBRARY_DIR);
#endif
  }
  for (const std::string &dir : candidates) {
    SmallString<256> lib(dir);
    llvm::sys::path::append(lib, "libMASFormerCudaRuntime.so");
    if (llvm::sys::fs::exists(lib)) {
      SmallString<256> abs(dir);
      llvm::sys::fs::make_absolute(abs);
      return abs.str().str();
    }
  }
  return emitError(loc) << "--target=cuda: libMASFormerCudaRuntime.so is "
                           "not in "
                        << llvm::join(candidates, ", ")
                        << "; set MASFORMER_LIBRARY_DIR to the directory "
                           "that has it",
         failure();
}
