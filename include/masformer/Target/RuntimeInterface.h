//===- RuntimeInterface.h - What a compiled library exports -----*- C++ -*-===//
//
// The symbols of include/masformer/Runtime/ABI.h added to a lowered model's
// LLVM module: the run function over @main's C interface, the signature,
// the ABI version and, for the GPU, the weights uploaded once.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_TARGET_RUNTIMEINTERFACE_H
#define MASFORMER_TARGET_RUNTIMEINTERFACE_H

#include "mlir/IR/BuiltinOps.h"

#include <optional>
#include <string>

namespace llvm {
class Module;
} // namespace llvm

namespace mlir::masformer {

/// A weight that the GPU code takes as a trailing argument of @main: the
/// global holding it on the host, its shape and size in bytes, and, once
/// externalizeWeights moved it out of the code, its weight-table slot.
struct DeviceConstant {
  std::string global;
  SmallVector<int64_t> shape;
  uint64_t bytes = 0;
  std::optional<unsigned> slot;
};

/// The weights that --masformer-buffers-to-device made trailing arguments
/// of @main (its `masformer.constants`), in order; empty for the CPU.
FailureOr<SmallVector<DeviceConstant>> collectDeviceConstants(ModuleOp module,
                                                              Location loc);

/// Adds `masformer_run(void **inputs, void *results)` (calls the C
/// interface of @main with the input descriptors and the results' struct),
/// the signature and the ABI version; everything else becomes internal.
/// With device constants, masformer_run first uploads them (once: their
/// device pointers stay in `masformer_device_constants` until the library
/// is unloaded) and passes their descriptors after the inputs.
LogicalResult addRuntimeInterface(llvm::Module &m, unsigned numInputs,
                                  StringRef signature, bool device,
                                  ArrayRef<DeviceConstant> constants,
                                  Location loc);

/// After addRuntimeInterface: `masformer_decode_run` over the C interface
/// of @decode (DeriveDecode.h) with `numInputs` inputs, and its signature
/// `masformer_decode_signature`; or, when `signature` starts with
/// MF_ABI_DECODE_UNAVAILABLE, only that signature, which says why the
/// library has no decode entry.
LogicalResult addDecodeInterface(llvm::Module &m, unsigned numInputs,
                                 StringRef signature, Location loc);

} // namespace mlir::masformer

#endif // MASFORMER_TARGET_RUNTIMEINTERFACE_H
