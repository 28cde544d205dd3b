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

} // namespace mlir::masformer

#endif // MASFORMER_UTILS_COMMANDLINE_H
