//===- Weights.h - A compiled model's weights outside its code --*- C++ -*-===//
//
// A compiled library holds code and a manifest of its weights; the weights
// stay in files that the runtime maps read-only at load time: the model's
// own external data file where a weight's bytes are those of the file, and
// the library's weights file (`model.so` -> `model.weights`) for the rest
// (inline initializers, weights the compiler derived). The manifest's
// format is in include/masformer/Runtime/ABI.h; docs/compile.md has the
// user's view.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_TARGET_WEIGHTS_H
#define MASFORMER_TARGET_WEIGHTS_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"

#include <string>
#include <vector>

namespace llvm {
class Module;
} // namespace llvm

namespace mlir::masformer {

/// Constants smaller than this stay in the code.
constexpr uint64_t kMinExternalWeightBytes = 1024;

/// Where a compiled model's weights live.
struct WeightsLayout {
  struct File {
    bool own = false;  // the library's weights file, else a model's data
    std::string path;  // absolute, as the compiler saw it
    uint64_t size = 0; // bytes
  };
  struct Weight {
    unsigned file = 0;
    uint64_t offset = 0;
    ArrayRef<char> bytes;       // valid while the module's context lives
    std::vector<char> expanded; // a splat's elements (`bytes` views them)
  };
  std::vector<File> files;
  std::vector<Weight> weights;
  /// The slot of each moved global, by its former name.
  llvm::StringMap<unsigned> slotOf;
  /// The manifest the library exports (ABI.h).
  std::string manifest;
  uint64_t buildId = 0;

  /// The index of the own file, or -1 when every weight is in model files.
  int ownFile() const;
};

/// Moves every constant global of `module` (lowered to the LLVM dialect)
/// with at least kMinExternalWeightBytes of whole-byte elements out of the
/// code: each use of its address loads it from slot i of the exported
/// weight table instead, and the global is erased. Weights whose bytes lie
/// in a mapped model data file (MappedFiles.h), aligned to their element,
/// refer to that file; the others are laid out in `ownPath`.
FailureOr<WeightsLayout> externalizeWeights(ModuleOp module, StringRef ownPath,
                                            Location loc);

/// Writes the own weights file of `layout` (header, then each weight at
/// its offset) through `os`.
LogicalResult writeWeightsFile(const WeightsLayout &layout,
                               llvm::raw_ostream &os, Location loc);

/// Adds the manifest the runtime reads (MF_ABI_SYM_WEIGHTS) to `m`.
void addWeightsManifest(llvm::Module &m, const WeightsLayout &layout);

} // namespace mlir::masformer

#endif // MASFORMER_TARGET_WEIGHTS_H
