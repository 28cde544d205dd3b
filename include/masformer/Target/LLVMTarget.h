//===- LLVMTarget.h - The host CPU as an LLVM target ------------*- C++ -*-===//
//
// The target machine for a compiled model's host code (this CPU, or the one
// --cpu names), LLVM's O3 pipeline, and object emission.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_TARGET_LLVMTARGET_H
#define MASFORMER_TARGET_LLVMTARGET_H

#include "mlir/IR/Location.h"
#include "mlir/Support/LLVM.h"
#include "llvm/Target/TargetMachine.h"

#include <memory>

namespace llvm {
class Module;
class raw_pwrite_stream;
} // namespace llvm

namespace mlir::masformer {

struct HostTarget {
  std::unique_ptr<llvm::TargetMachine> machine;
  /// Whether the CPU has AVX-512 (the micro-kernels' vector width).
  bool avx512 = false;
  /// bf16 on the CPU: AMX tiles (AMX-TILE and AMX-BF16), and AVX512-BF16.
  bool amxBF16 = false, avx512BF16 = false;
  /// 8-bit products on the CPU: AVX512-VNNI's vpdpbusd (uint8 by int8), and
  /// AMX tiles (AMX-TILE and AMX-INT8: tdpbusd).
  bool avx512VNNI = false, amxInt8 = false;
  /// Whether AVX512-BF16's vdpbf16ps does twice the multiply-adds of the
  /// f32 FMAs a cycle: AMD's Zen 4 and later issue it on two pipes. Intel's
  /// cores issue it on one (by published instruction tables), so it does no
  /// more than their two FMA ports, and bf16 attention on it ran at 0.69x
  /// the f32 kernels' speed on a Xeon with AMX (bench/RESULTS.md): there,
  /// attention keeps the f32 kernels unless AMX takes it.
  bool fastBF16Dot = false;
  /// Bytes of L2 cache per hardware thread: the cache a thread's group of
  /// row tiles of a product is sized to (--masformer-tile-contractions'
  /// l2-bytes). For "native", the host's L2 (Linux's sysfs) over the
  /// threads that share it; for a named CPU, its family's per-core L2.
  int64_t l2Bytes = 0;
  /// The CPU's name as LLVM knows it (the host's for "native").
  std::string cpu;
  /// The features `machine` was made with ("+avx2,..." for "native").
  std::string features;
  const llvm::Target *target = nullptr;

  /// Another target machine like `machine`, for another thread (a
  /// TargetMachine serves one thread at a time).
  std::unique_ptr<llvm::TargetMachine> createMachine() const;
};

/// Bytes of L2 cache per core of the CPU LLVM calls `cpu` ("znver4",
/// "sapphirerapids", ...), from the vendors' published sizes; 1 MiB for a
/// CPU not in the table.
int64_t knownL2Bytes(StringRef cpu);

/// This machine's L2 cache over the hardware threads that share it, from
/// /sys/devices/system/cpu/cpu0/cache; 0 where that cannot be read.
int64_t hostL2BytesPerThread();

/// The target machine for `cpu` ("native": this machine's CPU and
/// features); an unknown CPU is an error naming it.
FailureOr<HostTarget> createHostTarget(StringRef cpu, Location loc);

/// Runs LLVM's O3 pipeline (loop and SLP vectorization on) over `module`,
/// after marking the loops outside the kernels (the functions not named
/// masformer_kernel_*) not to unroll.
void optimizeModule(llvm::Module &module, llvm::TargetMachine &machine);

/// LLVM's MergeFunctions over `module`: identical functions become one.
void mergeIdenticalFunctions(llvm::Module &module);

/// Writes `module` as an object file to `os`.
LogicalResult emitObjectFile(llvm::Module &module, llvm::TargetMachine &machine,
                             llvm::raw_pwrite_stream &os, Location loc);

} // namespace mlir::masformer

#endif // MASFORMER_TARGET_LLVMTARGET_H
