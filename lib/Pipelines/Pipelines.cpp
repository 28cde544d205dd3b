//===- Pipelines.cpp - masformer pass pipelines -----------------*- C++ -*-===//
//
// The reference pipeline to the LLVM dialect.
//
//===----------------------------------------------------------------------===//

#include "masformer/Pipelines/Pipelines.h"
#include "masformer/InitAllPasses.h"

#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace mlir::masformer;

namespace {

/// Stands for a pipeline that cannot be built (an option value the user
/// gave is out of range): running it reports `message` as an error on the
/// operation and fails, so that a bad option is a diagnostic with a
/// non-zero exit, never an LLVM fatal error.
struct PipelineErrorPass final
    : PassWrapper<PipelineErrorPass, OperationPass<>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(PipelineErrorPass)
  explicit PipelineErrorPass(std::string message)
      : message(std::move(message)) {}
  StringRef getArgument() const override { return "masformer-pipeline-error"; }
  void runOnOperation() override {
    emitError(getOperation()->getLoc()) << message;
    signalPassFailure();
  }
  std::string message;
};

/// Replaces whatever `pm` holds by the pass that reports `message`.
void addPipelineError(OpPassManager &pm, const Twine &message) {
  pm.clear();
  pm.addPass(std::make_unique<PipelineErrorPass>(message.str()));
}

/// Adds the textual `pipeline` to `pm`; a pass it names that is not
/// registered is reported when the pipeline runs.
void addTextualPipeline(OpPassManager &pm, StringRef pipeline, StringRef name) {
  std::string error;
  llvm::raw_string_ostream os(error);
  if (failed(parsePassPipeline(pipeline, pm, os)))
    addPipelineError(pm, "internal error: the " + name +
                             " pipeline cannot be parsed: " + error);
}

} // namespace

void mlir::masformer::buildReferenceToLLVMPipeline(
    OpPassManager &pm, const ReferenceToLLVMOptions &options) {
  pm.addPass(createDecomposeAttention());
  pm.addPass(createDecomposeAggregates());
  // The upstream passes by their registered names, as MLIR's own CPU
  // integration tests spell this lowering; parsing keeps this list readable
  // and independent of the C++ factory names, which move between releases.
  static constexpr StringLiteral kLowering =
      "convert-elementwise-to-linalg,"
      "one-shot-bufferize{bufferize-function-boundaries "
      "allow-return-allocs-from-loops},"
      // Arguments updated in place (a decode entry's cache) were.
      "masformer-check-in-place,"
      "convert-linalg-to-loops,"
      // Loads and stores through reshaped views of strided slices (dynamic
      // shapes) go to the underlying buffers, and the views' sizes to the
      // values they were built from: expand-strided-metadata of LLVM 22
      // crashes on an expand_shape of a slice with a dynamic stride.
      "fold-memref-alias-ops,resolve-ranked-shaped-type-result-dims,"
      "canonicalize,"
      // (An expand_shape into several dynamic sizes, which LLVM 22's
      // expand-strided-metadata also crashes on, as a cast.)
      "masformer-expand-shapes-as-casts,"
      "expand-strided-metadata,lower-affine,"
      "convert-scf-to-cf,arith-expand,convert-math-to-llvm,convert-math-to-"
      "libm,"
      "finalize-memref-to-llvm,convert-arith-to-llvm,convert-index-to-llvm,"
      "convert-cf-to-llvm,convert-func-to-llvm,reconcile-unrealized-casts";
  addTextualPipeline(pm, kLowering, "reference lowering");
}

int64_t mlir::masformer::bf16AttentionHeadDimMultiple(
    const LowerToCPUOptions &options) {
  if (options.precision != "bf16" || !options.attentionBF16)
    return 0;
  // With AMX, bf16 attention where its tiles take it (head_dim a multiple
  // of 32); other heads keep the f32 kernels, faster on Intel's CPUs than
  // vdpbf16ps.
  return options.amx ? 32 : 16;
}

void mlir::masformer::buildLowerToCPUPipeline(
    OpPassManager &pm, const LowerToCPUOptions &options) {
  TileAttentionOptions tiling;
  tiling.tileQ = options.tileQ;
  tiling.tileKV = options.tileKV;
  tiling.vectorWidth = options.vectorWidth;
  tiling.bf16Dot = options.avx512BF16 && options.vectorWidth == 16;
  tiling.amx = options.amx;
  if (options.precision != "f32" && options.precision != "bf16")
    return addPipelineError(pm, "--masformer-lower-to-cpu: precision=" +
                                    options.precision +
                                    ": expected f32 or bf16");
  if ((options.amx || options.avx512BF16) && options.precision != "bf16")
    return addPipelineError(pm, "--masformer-lower-to-cpu: amx and "
                                "avx512-bf16 need precision=bf16");
  if (options.emulateAMX && !options.amx && !options.amxInt8)
    return addPipelineError(pm, "--masformer-lower-to-cpu: emulate-amx needs "
                                "amx or amx-int8");
  if (options.amxInt8 && (!options.avx512VNNI || options.vectorWidth != 16))
    return addPipelineError(pm, "--masformer-lower-to-cpu: amx-int8 needs "
                                "avx512-vnni and vector-width=16 (every CPU "
                                "with AMX-INT8 has AVX512-VNNI)");
  // Weights that the model transposes (a tied LM head) are transposed once,
  // here, not in every run.
  pm.addPass(createFoldConstantTransposes());
  // A quantized model's 8-bit products on vpdpbusd (or AMX tiles) where the
  // CPU has it; the others (every one without it) as f32 products, before
  // the bf16 rewrite takes them.
  bool u8s8Dot = options.avx512VNNI && options.vectorWidth == 16;
  pm.addPass(createIntegerProductsToFloat(
      IntegerProductsToFloatOptions{/*keepVPDPBUSD=*/u8s8Dot}));
  // Products and attention on bf16 operands (weights converted here, once).
  if (options.precision == "bf16") {
    MixedPrecisionOptions mixed;
    mixed.attention = options.attentionBF16;
    if (int64_t multiple = bf16AttentionHeadDimMultiple(options))
      mixed.headDimMultiple = multiple;
    pm.addPass(createMixedPrecision(mixed));
  }
  // The model's matrix products first: the tiled attention's own partial
  // tiles are generics of the same shape, and stay loops.
  if (options.vectorWidth > 0) {
    TileContractionsOptions contractions;
    contractions.vectorWidth = options.vectorWidth;
    contractions.amx = options.amx;
    contractions.bf16Dot = options.avx512BF16 && options.vectorWidth == 16;
    contractions.u8s8Dot = u8s8Dot;
    contractions.amxInt8 = options.amxInt8;
    contractions.l2Bytes = options.l2Bytes;
    pm.addPass(createTileContractions(contractions));
  }
  // Chains of element-wise ops (a GELU, a residual add, a norm's scale and
  // shift) become one loop nest: one pass over memory instead of one per
  // op. After the contractions are tiled (an element-wise producer fused
  // into a product would hide it from the kernel) and before the attention
  // is (fused ops inside its tile loops defeat in-place bufferization).
  // Transposes and broadcasts outside the kernels fuse too (a head split
  // and its bf16 rounding: one pass); the sizes of an op's result read
  // through tensor.dim would count as a second use and block its fusion
  // (a norm and its bf16 rounding): they are taken from its operands.
  addTextualPipeline(pm,
                     "masformer-decompose-aggregates,"
                     "convert-elementwise-to-linalg,"
                     "masformer-generalize-layout-ops,"
                     "resolve-ranked-shaped-type-result-dims,"
                     "linalg-fuse-elementwise-ops,"
                     // The loop nest a product feeds (its bias and GELU, a
                     // residual add, a rounding) computed on each of the
                     // product's tiles, in its loop.
                     "masformer-fuse-product-epilogues",
                     "CPU lowering");
  pm.addPass(createTileAttention(tiling));
  std::string lowering =
      // The rest of a model's ops share the cores too.
      "masformer-parallelize,"
      // exp, tanh and erf as polynomials of plain arithmetic: LLVM
      // vectorizes them with the loop instead of calling libm per element;
      // x^3 (GELU) as multiplications.
      "masformer-approximate-math,"
      // An op whose result is inserted into a slice of a larger tensor
      // writes that slice: the decode entry's transpose of a layer's cache
      // into the first rows of its keys (the element-wise fusion had given
      // it a tensor.empty of its own, which bufferized to a buffer and a
      // copy of the whole cache into those rows at every step).
      "eliminate-empty-tensors,"
      // Identity layouts at function boundaries: the rows of Q, K and V are
      // then known to be contiguous, and the micro-kernels' loads of them
      // are vector loads rather than gathers.
      "one-shot-bufferize{bufferize-function-boundaries "
      "allow-return-allocs-from-loops "
      "function-boundary-type-conversion=identity-layout-map},"
      // Arguments updated in place (a decode entry's cache) were.
      "masformer-check-in-place,"
      // Bufferization writes each tile back with a copy onto itself
      // (parallel_insert_slice of a slice of the same buffer); equal views
      // merged, the copies fold away.
      "cse,canonicalize,";
  // The tile products marked for AMX, on buffers now.
  bool amx = options.amx || options.amxInt8;
  if (amx)
    lowering += "func.func(masformer-lower-amx-tiles),";
  lowering +=
      // A tile's temporaries (an attention tile's packed queries, scores,
      // probabilities and state) on its thread's stack: no malloc and free
      // per tile and per key tile.
      "func.func(masformer-stack-loop-temporaries),"
      // Those left on the heap are allocated once per query tile, not once
      // per key tile.
      "func.func(buffer-loop-hoisting),"
      "buffer-deallocation-pipeline,"
      // Every activation is freed after its last use rather than when the
      // model returns.
      "func.func(masformer-free-buffers-early),"
      // A result the model returns from a buffer it does not own (a
      // constant output) is a bufferization.clone: an allocation and a
      // copy.
      "convert-bufferization-to-memref,";
  // AMX emulated: its register files are allocas in the parallel loops'
  // bodies, which buffer hoisting must not have seen.
  if (options.emulateAMX)
    lowering += "masformer-emulate-amx,";
  lowering +=
      // Each parallel loop nest as a private function, the identical ones
      // (every layer of one shape) shared: everything below handles each
      // kernel once rather than once per layer.
      "masformer-outline-kernels,"
      // Row reductions (norms, softmax outside attention) with their
      // partial results in registers, vectorizable; the other ops as loops.
      "scf-forall-to-parallel,masformer-lower-reductions,"
      // Head splits and merges (copies of rows) as vector loads and
      // stores of each row.
      "masformer-vectorize-row-copies,"
      // The micro-kernels' [rows, W] writes as one vector store per row.
      "convert-linalg-to-loops,convert-vector-to-scf{full-unroll},"
      "convert-scf-to-openmp,"
      // As in the reference pipeline: views of strided slices folded first
      // (whole imported models with dynamic shapes have them).
      "fold-memref-alias-ops,resolve-ranked-shaped-type-result-dims,"
      // An expand_shape into several dynamic sizes (rows of batch *
      // sequence as [batch, sequence], read by an AMX tile load: bf16
      // attention reading a GPT-2's head splits) as a cast: LLVM 22's
      // expand-strided-metadata crashes on those too.
      "canonicalize,masformer-expand-shapes-as-casts,"
      "expand-strided-metadata,lower-affine,"
      // (The 8-bit products' steps as vpdpbusd: LLVM intrinsic calls,
      // which bufferization would not have taken.)
      "masformer-lower-dot-u8s8,"
      // The micro-kernels' transfers become plain vector loads and stores,
      // their FMAs llvm.intr.fma. (The packed tiles' transposes are
      // shuffles already, from --masformer-tile-attention: a
      // vector.transpose would not reach this lowering whole, the
      // canonicalizations after bufferization take it apart element by
      // element; any other 16 x 16 one gets the shuffle network.)
      "convert-vector-to-llvm{reassociate-fp-reductions "
      "vector-transpose-lowering=shuffle16x16";
  // The AMX tile ops (with the vector ops: LLVM's conversion of control
  // flow has no tile type, so no tile value crosses a block).
  if (amx && !options.emulateAMX)
    lowering += " enable-amx";
  if (options.avx512BF16)
    lowering += " enable-x86vector";
  lowering += "},"
      // The OpenMP loop body is a memref.alloca_scope: lower it while it
      // still has one block.
      "finalize-memref-to-llvm";
  if (options.genericAllocation)
    lowering += "{use-generic-functions}";
  lowering += ",convert-scf-to-cf,";
  // Without AVX512-BF16, LLVM rounds f32 to bf16 by a call to compiler-rt's
  // __truncsfbf2, which the library is not linked with (found with the
  // emulated AMX path on a Zen 3): rounded in integer arithmetic here
  // instead.
  lowering +=
      options.avx512BF16 ? "arith-expand," : "arith-expand{include-bf16},";
  lowering += "convert-math-to-llvm,"
              "convert-math-to-libm,convert-arith-to-llvm,"
              "convert-index-to-llvm,convert-cf-to-llvm,"
              "convert-openmp-to-llvm,convert-func-to-llvm,"
              "reconcile-unrealized-casts";
  addTextualPipeline(pm, lowering, "CPU lowering");
}

LogicalResult mlir::masformer::checkNVVMChip(StringRef chip,
                                             std::string &error) {
  unsigned sm = 0;
  if (!chip.consume_front("sm_") || chip.consumeInteger(10, sm) ||
      !(chip.empty() || chip == "a") || sm < 80) {
    error = "unsupported GPU chip; expected sm_80 or newer (sm_80, sm_86, "
            "sm_89, sm_90, ...): the kernels use mma.sync on bf16";
    return failure();
  }
  return success();
}

/// From bufferization on: kernels to a gpu.binary, host code to LLVM.
/// `lowerKernels` false stops before NVVM.
template <typename Options>
static void addNVVMTail(OpPassManager &pm, const Options &options,
                        StringRef bufferization, StringRef hostPasses,
                        bool lowerKernels = true) {
  std::string lowering =
      bufferization.str() + ",canonicalize,cse," + hostPasses.str() +
      // The host function's allocations, copies, launches and frees on one
      // stream, synchronized once at the end.
      "func.func(gpu-async-region)";
  if (!lowerKernels) {
    addTextualPipeline(pm, lowering, "NVVM lowering");
    return;
  }
  lowering +=
      ",nvvm-attach-target{chip=" + options.chip +
      " features=" + options.features +
      " O=3},"
      // The kernels: their unrolled index arithmetic folded, then NVVM.
      "gpu.module(canonicalize,cse,masformer-expand-shapes-as-casts,"
      "expand-strided-metadata,lower-affine,"
      "convert-scf-to-cf,convert-nvgpu-to-nvvm,convert-vector-to-llvm,"
      "convert-gpu-to-nvvm,canonicalize,cse,reconcile-unrealized-casts),"
      "gpu-module-to-binary{format=" +
      options.format + " toolkit=" + options.toolkit + "}";
  if (options.hostToLLVM) {
    // The host's memref ops before gpu-to-llvm: that pass converts the
    // memref.allocs left to it with its own patterns, always to malloc,
    // where the runtime frees a model's results through the allocator of
    // use-generic-functions (lib/Runtime/Allocator.c), which reads a header
    // that malloc never wrote.
    lowering += ",masformer-expand-shapes-as-casts,expand-strided-metadata,"
                "lower-affine,convert-scf-to-cf,"
                "finalize-memref-to-llvm";
    if (options.genericAllocation)
      lowering += "{use-generic-functions}";
    lowering += ",gpu-to-llvm,convert-arith-to-llvm,convert-index-to-llvm,"
                "convert-cf-to-llvm,convert-func-to-llvm,"
                "reconcile-unrealized-casts";
  }
  addTextualPipeline(pm, lowering, "NVVM lowering");
}

/// Whether `options.chip` is one the kernels support; else `pm` reports it.
template <typename Options>
static bool checkChip(OpPassManager &pm, StringRef pipeline,
                      const Options &options) {
  std::string error;
  if (succeeded(checkNVVMChip(options.chip, error)))
    return true;
  addPipelineError(pm,
                   "--" + pipeline + ": chip=" + options.chip + ": " + error);
  return false;
}

void mlir::masformer::buildLowerToNVVMPipeline(
    OpPassManager &pm, const LowerToNVVMOptions &options) {
  if (!checkChip(pm, "masformer-lower-to-nvvm", options))
    return;
  pm.addPass(createContractionsToGPU());
  pm.addPass(createAttentionToGPU(AttentionToGPUOptions{options.chip}));
  // Whatever is left would compute on device memory on the host.
  pm.addPass(createCheckGPUHost());
  addNVVMTail(pm, options,
              "one-shot-bufferize{bufferize-function-boundaries "
              "function-boundary-type-conversion=identity-layout-map},"
              "masformer-check-in-place",
              "");
}

void mlir::masformer::buildModelToNVVMPipeline(
    OpPassManager &pm, const ModelToNVVMOptions &options) {
  if (!checkChip(pm, "masformer-model-to-nvvm", options))
    return;
  if (options.constants != "copy" && options.constants != "arguments")
    return addPipelineError(
        pm, "--masformer-model-to-nvvm: constants=" + options.constants +
                ": expected copy or arguments");
  if (options.precision != "f32" && options.precision != "bf16")
    return addPipelineError(
        pm, "--masformer-model-to-nvvm: precision=" + options.precision +
                ": expected f32 or bf16");
  // As on the CPU, no transpose of a weight at run time; but a tied
  // embedding is read by the product kernel as it is stored ([vocab, d],
  // B transposed), not as a transposed copy, whose rows of the
  // vocabulary's length the kernel's 16-byte copies cannot take (GPT-2's
  // 50257: the LM head ran one thread per logit, 0.6 s of a 0.64 s
  // forward pass at S = 2048 on an H200).
  pm.addPass(createFoldConstantTransposes(
      FoldConstantTransposesOptions{/*minElements=*/1, /*intoProducts=*/true}));
  // A quantized model's 8-bit products as f32 ones: the GPU's product
  // kernels are float.
  pm.addPass(createIntegerProductsToFloat());
  if (options.precision == "bf16")
    pm.addPass(createMixedPrecision());
  pm.addPass(createContractionsToGPU());
  pm.addPass(createAttentionToGPU(AttentionToGPUOptions{options.chip}));
  // (Named ops, transposes and broadcasts, as generics fuse too; the sizes
  // of an op's result read through tensor.dim would count as a second use
  // and block its fusion: they are taken from its operands.)
  addTextualPipeline(pm,
                     "masformer-decompose-aggregates,"
                     "convert-elementwise-to-linalg,"
                     "linalg-generalize-named-ops,"
                     "resolve-ranked-shaped-type-result-dims,"
                     "linalg-fuse-elementwise-ops",
                     "model GPU");
  addNVVMTail(pm, options,
              "one-shot-bufferize{bufferize-function-boundaries "
              "function-boundary-type-conversion=identity-layout-map},"
              "masformer-check-in-place",
              // Every other op a kernel, one thread per element; then the host
              // function's memory on the device.
              "func.func(masformer-loops-to-gpu),"
              // The kernels' loads and stores through views (a slice of the
              // fused QKV product, reshaped) go to the underlying buffers: the
              // host keeps no reshaped strided view, which
              // expand-strided-metadata of LLVM 22 crashes on.
              "fold-memref-alias-ops,resolve-ranked-shaped-type-result-dims,"
              // One gpu.module: one ptxas run, one cubin, one load.
              "gpu-kernel-outlining,masformer-merge-kernel-modules,"
              "masformer-buffers-to-device{constants=" +
                  options.constants + "},canonicalize,cse,",
              options.lowerKernels);
}

void mlir::masformer::registerMASFormerPipelines() {
  PassPipelineRegistration<LowerToNVVMOptions>(
      "masformer-lower-to-nvvm",
      "masformer.attention as span-aware tensor-core kernels in a gpu.binary "
      "(cubin for the chosen chip, by the CUDA toolkit's ptxas), and host "
      "code that launches them through the mgpu* runtime functions",
      buildLowerToNVVMPipeline);
  PassPipelineRegistration<ModelToNVVMOptions>(
      "masformer-model-to-nvvm",
      "A whole model on the GPU: matrix products and attention as the "
      "tensor-core kernels of --masformer-lower-to-nvvm, every other op as "
      "a kernel of one thread per element, buffers in device memory, the "
      "host function's interface unchanged (host buffers in and out)",
      buildModelToNVVMPipeline);
  PassPipelineRegistration<LowerToCPUOptions>(
      "masformer-lower-to-cpu",
      "Span-aware tiled attention lowered to the LLVM dialect for the host, "
      "parallel over (batch, head, query tile) with OpenMP",
      buildLowerToCPUPipeline);
  PassPipelineRegistration<ReferenceToLLVMOptions>(
      "masformer-reference-to-llvm",
      "Reference decomposition of masformer.attention and the upstream CPU "
      "lowering to the LLVM dialect (runnable by mlir-runner)",
      buildReferenceToLLVMPipeline);
}
