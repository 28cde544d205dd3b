//===- CommandLine.h - The tools' own options first ----------------*- C++ -*-===//
//
// The LLVM and MLIR libraries register hundreds of options (every backend's
// flags); a tool's --help should show its own. Unlike
// cl::HideUnrelatedOptions, which makes the others unlistable, this keeps
// them listed by --help-hidden.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_UTILS_COMMANDLINE_H
#define MASFORMER_UTILS_COMMANDLINE_H

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/Signals.h"

#include <cstdio>
#include <new>
#include <unistd.h>

namespace mlir::masformer {

/// Moves every registered option outside `category` and LLVM's generic
/// ones (--help, --version) to --help-hidden.
inline void hideOptionsOutside(llvm::cl::OptionCategory &category) {
  for (auto &entry : llvm::cl::getRegisteredOptions()) {
    llvm::cl::Option *opt = entry.second;
    bool ours = false;
    for (const llvm::cl::OptionCategory *c : opt->Categories)
      ours |= c == &category || c->getName() == "Generic Options";
    if (!ours && opt->getOptionHiddenFlag() == llvm::cl::NotHidden)
      opt->setHiddenFlag(llvm::cl::Hidden);
  }
}

namespace detail {
inline const char *&toolName() {
  static const char *name = "masformer";
  return name;
}
[[noreturn]] inline void outOfMemory() {
  // Only async-signal-safe work: the heap is exhausted.
  const char *tool = toolName();
  (void)!write(2, tool, __builtin_strlen(tool));
  static const char message[] =
      ": error: out of memory: the model needs more memory than this process "
      "may use (its physical memory, ulimit -v or cgroup limit)\n";
  (void)!write(2, message, sizeof(message) - 1);
  // Removes the temporary outputs registered with RemoveFileOnSignal.
  llvm::sys::RunInterruptHandlers();
  _exit(1);
}
} // namespace detail

/// Makes running out of memory one error line and exit status 1, with the
/// temporary outputs removed, instead of LLVM's "out of memory" abort (a
/// crash report) or an uncaught std::bad_alloc.
inline void exitCleanlyOnOutOfMemory(const char *tool) {
  detail::toolName() = tool;
  llvm::install_bad_alloc_error_handler(
      [](void *, const char *, bool) { detail::outOfMemory(); });
  std::set_new_handler([] { detail::outOfMemory(); });
}

} // namespace mlir::masformer

#endif // MASFORMER_UTILS_COMMANDLINE_H
