//===- Codegen.h - Host code in parts: parallel and cached ------*- C++ -*-===//
//
// A compiled model's LLVM module becomes machine code in parts: each kernel
// (--masformer-outline-kernels' masformer_kernel_N) with the functions and
// constants only it uses, and the rest (the entry points, the runtime
// interface, the weights). Each part is optimized (O3) and compiled on its
// own thread, in its own LLVMContext, and its object file can be kept in a
// cache keyed by the part's bitcode, so that a model compiled again (with
// another span, another shape, or by another build of the same sources)
// only compiles the parts that changed. See docs/compile.md.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_TARGET_CODEGEN_H
#define MASFORMER_TARGET_CODEGEN_H

#include "masformer/Target/LLVMTarget.h"

#include "mlir/IR/Location.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/SmallVector.h"

#include <memory>
#include <optional>
#include <string>

namespace llvm {
class LLVMContext;
class Module;
} // namespace llvm

namespace mlir {
class ModuleOp;
} // namespace mlir

namespace mlir::masformer {

/// Names the module's private and internal globals (in the LLVM dialect)
/// after the order in which its functions first use them, and puts them
/// first in that order, so that the same model always gives the same code,
/// the same weight slots and the same object-cache keys.
void orderGlobalsByFirstUse(ModuleOp module);

/// One part of a module, as bitcode.
struct ModulePart {
  /// The part's kernel, or "" for the rest of the module.
  std::string kernel;
  SmallVector<char, 0> bitcode;
};

/// Splits `module` (consumed) into parts: one per kernel, with every
/// function that only it references and the globals its functions use; one
/// for the exported data no code uses (the signature, the weights'
/// manifest); one for the rest. A symbol that one part defines and another
/// uses gets hidden external linkage; small constants that several parts
/// use are copied into each. The first part is the rest, the kernels follow
/// in the module's order, the data last. A module without kernels, or with
/// aliases or ifuncs, stays whole.
SmallVector<ModulePart> splitModule(std::unique_ptr<llvm::Module> module);

struct CodegenOptions {
  /// Threads compiling parts at once (0: one per core).
  unsigned jobs = 0;
  /// The object cache's directory; empty: no cache.
  std::string cacheDir;
};

struct CodegenStats {
  unsigned parts = 0, cached = 0, threads = 0;
};

/// The objects of `parts`, each optimized (optimizeModule) and compiled for
/// `host`'s target, `options.jobs` at a time. Each object's path goes to
/// `objects`, in the parts' order: a file of the cache, or a temporary
/// file kept alive in `temporaries`.
struct TempFile;
FailureOr<CodegenStats> compileParts(
    ArrayRef<ModulePart> parts, const HostTarget &host,
    const CodegenOptions &options, SmallVectorImpl<std::string> &objects,
    SmallVectorImpl<std::unique_ptr<TempFile>> &temporaries, Location loc);

/// The parts optimized as compileParts does, in parallel, and linked back
/// into one module in `context` (what --emit=llvm prints and --emit=object
/// compiles).
FailureOr<std::unique_ptr<llvm::Module>>
optimizeParts(ArrayRef<ModulePart> parts, const HostTarget &host, unsigned jobs,
              llvm::LLVMContext &context, Location loc);

/// Why the object cache cannot be used in this process, or nothing: LLVM's
/// own options (--unroll-threshold=..., given to masformer-compile) change
/// the code without changing a part's bitcode.
std::optional<std::string> objectCacheUnusable();

} // namespace mlir::masformer

#endif // MASFORMER_TARGET_CODEGEN_H
