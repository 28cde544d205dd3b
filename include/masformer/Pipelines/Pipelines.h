//===- Pipelines.h - masformer pass pipelines -------------------*- C++ -*-===//
//
// Named pipelines, registered once, for masformer-opt and library users.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_PIPELINES_PIPELINES_H
#define MASFORMER_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir::masformer {

/// Options of the reference pipeline (none yet: the reference is meant to be
/// boring and exact).
struct ReferenceToLLVMOptions
    : public PassPipelineOptions<ReferenceToLLVMOptions> {};

/// masformer.attention through the reference decomposition, bufferization
/// and the upstream CPU lowering down to the LLVM dialect, runnable by
/// mlir-runner with libmlir_runner_utils and libmlir_c_runner_utils. Slow by
/// design (dense, scalar loops): the numerics every fast path is checked
/// against.
void buildReferenceToLLVMPipeline(OpPassManager &pm,
                                  const ReferenceToLLVMOptions &options);

/// Options of the tiled CPU pipeline.
struct LowerToCPUOptions : public PassPipelineOptions<LowerToCPUOptions> {
  PassOptions::Option<int64_t> tileQ{*this, "tile-q",
                                     llvm::cl::desc("Query rows per tile"),
                                     llvm::cl::init(64)};
  PassOptions::Option<int64_t> tileKV{*this, "tile-kv",
                                      llvm::cl::desc("Keys per tile"),
                                      llvm::cl::init(128)};
  PassOptions::Option<int64_t> vectorWidth{
      *this, "vector-width",
      llvm::cl::desc("f32 lanes of the micro-kernels' vectors (16: AVX-512, "
                     "8: AVX2, 0: no micro-kernels)"),
      llvm::cl::init(16)};
  PassOptions::Option<int64_t> l2Bytes{
      *this, "l2-bytes",
      llvm::cl::desc("Bytes of L2 cache per thread, which sizes the groups "
                     "of row tiles of the model's products "
                     "(--masformer-tile-contractions)"),
      llvm::cl::init(2 << 20)};
  PassOptions::Option<bool> genericAllocation{
      *this, "generic-allocation",
      llvm::cl::desc("Allocate buffers with _mlir_memref_to_llvm_alloc and "
                     "_mlir_memref_to_llvm_free, which the embedder provides "
                     "(masformer-compile links a caching allocator), instead "
                     "of malloc and free"),
      llvm::cl::init(false)};
  PassOptions::Option<std::string> precision{
      *this, "precision",
      llvm::cl::desc("f32, or bf16: matrix products and attention on bf16 "
                     "operands with f32 accumulation "
                     "(--masformer-mixed-precision)"),
      llvm::cl::init("f32")};
  PassOptions::Option<bool> amx{
      *this, "amx",
      llvm::cl::desc("With precision=bf16: products with constant weights, "
                     "and attention whose head dimension is a multiple of "
                     "32, on AMX tiles (the CPU has AMX-BF16)"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> emulateAMX{
      *this, "emulate-amx",
      llvm::cl::desc("With amx or amx-int8: the AMX tile operations as "
                     "checked scalar loops (--masformer-emulate-amx), which "
                     "run on any CPU: a test of the AMX path where there is "
                     "no AMX"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> avx512BF16{
      *this, "avx512-bf16",
      llvm::cl::desc("With precision=bf16: the bf16 products AMX does not "
                     "take, and bf16 attention, on AVX512-BF16's vdpbf16ps "
                     "(the CPU has AVX512-BF16)"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> avx512VNNI{
      *this, "avx512-vnni",
      llvm::cl::desc("A quantized model's 8-bit products (uint8 by int8 "
                     "weights) on AVX512-VNNI's vpdpbusd, with i32 sums "
                     "(the CPU has AVX512-VNNI; with vector-width 16); "
                     "off, they run as f32 products "
                     "(--masformer-integer-products-to-float)"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> amxInt8{
      *this, "amx-int8",
      llvm::cl::desc("With avx512-vnni: those 8-bit products whose k is a "
                     "multiple of 64 on AMX tiles (tdpbusd; the CPU has "
                     "AMX-INT8), at any precision"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> attentionBF16{
      *this, "attention-bf16",
      llvm::cl::desc("With precision=bf16: attention on bf16 operands too "
                     "(on AMX tiles with amx, else on vdpbf16ps with "
                     "avx512-bf16); off, attention stays f32: "
                     "masformer-compile's choice on Intel's CPUs without "
                     "AMX, whose f32 attention kernels are faster than the "
                     "bf16 ones"),
      llvm::cl::init(true)};
};

/// The head dimension multiple at which --masformer-lower-to-cpu runs
/// attention on bf16 operands (--masformer-mixed-precision's
/// head-dim-multiple), or 0 when attention stays f32 (f32 precision, or
/// attention-bf16 off). A decode entry's cache is bf16 for those layers
/// (--masformer-derive-decode's bf16-cache-head-dim-multiple).
int64_t bf16AttentionHeadDimMultiple(const LowerToCPUOptions &options);

/// masformer.attention through --masformer-tile-attention (span-aware key
/// tiles, online softmax) down to the LLVM dialect, the (batch, head, query
/// tile) loop as an OpenMP parallel loop, buffers freed. Runs with
/// mlir-runner given libomp and the runner utils.
void buildLowerToCPUPipeline(OpPassManager &pm,
                             const LowerToCPUOptions &options);

/// Options of the GPU pipelines: the chip, the binary, the host lowering.
template <typename Derived>
struct NVVMTargetOptions : public PassPipelineOptions<Derived> {
  using PassOptions = mlir::detail::PassOptions;
  PassOptions::Option<std::string> chip{
      *this, "chip",
      llvm::cl::desc("The GPU to compile for: sm_80 (Ampere), sm_90 (Hopper), "
                     "or any sm_XY from sm_80 on"),
      llvm::cl::init("sm_90")};
  PassOptions::Option<std::string> features{
      *this, "features",
      llvm::cl::desc("PTX features of the NVVM target"),
      llvm::cl::init("+ptx80")};
  PassOptions::Option<std::string> format{
      *this, "format",
      llvm::cl::desc("What the gpu.binary holds: bin (cubin, by ptxas), isa "
                     "(PTX text) or fatbin"),
      llvm::cl::init("bin")};
  PassOptions::Option<std::string> toolkit{
      *this, "toolkit",
      llvm::cl::desc("The CUDA toolkit whose ptxas and libdevice are used"),
      llvm::cl::init("/usr/local/cuda")};
  PassOptions::Option<bool> hostToLLVM{
      *this, "host-to-llvm",
      llvm::cl::desc("Also lower the host code (launches, allocations) to "
                     "the LLVM dialect, calling the mgpu* runtime functions "
                     "of libMASFormerCudaRuntime"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> genericAllocation{
      *this, "generic-allocation",
      llvm::cl::desc("Allocate host buffers with _mlir_memref_to_llvm_alloc "
                     "and free them with _mlir_memref_to_llvm_free, which "
                     "the embedder provides"),
      llvm::cl::init(false)};
};

/// Options of the attention and matrix product kernels' pipeline.
struct LowerToNVVMOptions : public NVVMTargetOptions<LowerToNVVMOptions> {};

/// Options of the whole-model GPU pipeline.
struct ModelToNVVMOptions : public NVVMTargetOptions<ModelToNVVMOptions> {
  PassOptions::Option<std::string> constants{
      *this, "constants",
      llvm::cl::desc("copy: the weights are copied to the device in every "
                     "call; arguments: they become trailing arguments of "
                     "the function, in device memory, which the caller "
                     "copies once (masformer-compile does)"),
      llvm::cl::init("copy")};
  PassOptions::Option<std::string> precision{
      *this, "precision",
      llvm::cl::desc("f32: products and attention of an f32 model in f32 "
                     "(3xTF32 on tensor cores); bf16: on bf16 operands with "
                     "f32 accumulation (--masformer-mixed-precision)"),
      llvm::cl::init("f32")};
  PassOptions::Option<bool> lowerKernels{
      *this, "lower-kernels",
      llvm::cl::desc("false: stop before NVVM, with the kernels in the gpu "
                     "dialect and the host code on device buffers (what "
                     "test/gpu/emulate_model.py runs)"),
      llvm::cl::init(true)};
};

/// A whole model to the GPU: the kernels of buildLowerToNVVMPipeline for
/// matrix products and attention, every other op as a kernel of one thread
/// per element (--masformer-loops-to-gpu), every buffer in device memory
/// (--masformer-buffers-to-device): host buffers in, host buffers out.
void buildModelToNVVMPipeline(OpPassManager &pm,
                              const ModelToNVVMOptions &options);

/// masformer.attention and the matrix products to GPU kernels in a
/// gpu.binary for `chip`, and the host code that launches them.
void buildLowerToNVVMPipeline(OpPassManager &pm,
                              const LowerToNVVMOptions &options);

/// The same options as a pass pipeline string's
/// `--masformer-lower-to-nvvm="..."`; fails on an unknown chip.
LogicalResult checkNVVMChip(StringRef chip, std::string &error);

/// Registers the pipelines above with the pass registry
/// (`--masformer-reference-to-llvm`, `--masformer-lower-to-cpu`,
/// `--masformer-lower-to-nvvm`, `--masformer-model-to-nvvm`).
void registerMASFormerPipelines();

} // namespace mlir::masformer

#endif // MASFORMER_PIPELINES_PIPELINES_H
