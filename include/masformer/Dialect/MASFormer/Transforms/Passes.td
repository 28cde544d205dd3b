//===- Passes.td - masformer passes ------------------------*- tablegen -*-===//
//
// Passes over the masformer dialect.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_DIALECT_MASFORMER_TRANSFORMS_PASSES_TD
#define MASFORMER_DIALECT_MASFORMER_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def DecomposeAttention : Pass<"masformer-decompose-attention"> {
  let summary = "Lower masformer.attention to plain upstream tensor ops";
  let description = [{
    Rewrites every `masformer.attention` into `linalg`, `tensor`, `arith` and
    `math` ops on tensors that compute exactly the semantics of the op: Q K^T
    in f32, the scale, the span and causal masks (from the loop indices, with
    queries aligned to the end of the keys), the additive mask, a softmax
    that gives zero to rows with no allowed key, and the product with V.

    It exists as the semantic reference: it computes every pair densely and
    masks, so it is slow by design, and every faster lowering (tiled CPU and
    GPU kernels, the ONNX export) is tested against it.

    ```mlir
    %o = masformer.attention %q, %k, %v {span = #masformer.span<block 64>}
           : tensor<1x4x128x32xf32>, tensor<1x4x128x32xf32>,
             tensor<1x4x128x32xf32> -> tensor<1x4x128x32xf32>
    ```
    becomes a chain of `linalg.generic` ops ending in a tensor of the same
    type.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

def DecomposeAggregates : Pass<"masformer-decompose-aggregates"> {
  let summary = "Decompose linalg.softmax and tensor.concat into simpler ops";
  let description = [{
    The ONNX importer keeps `Softmax` as `linalg.softmax` and `Concat` as
    `tensor.concat` so that passes such as `--masformer-raise-attention` can
    recognize them. Upstream bufferization and loop lowering do not handle
    these aggregate ops, so lowering pipelines run this pass first: softmax
    becomes its max / exp / sum / divide generics, and concat an empty tensor
    with one insert_slice per operand.

    ```mlir
    %1 = linalg.softmax dimension(1) ins(%0 : tensor<2x16xf32>)
           outs(%init : tensor<2x16xf32>) -> tensor<2x16xf32>
    ```
    becomes four `linalg.generic`/`linalg.fill` ops.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

def RaiseAttention : Pass<"masformer-raise-attention", "::mlir::func::FuncOp"> {
  let summary = "Replace attention subgraphs by masformer.attention";
  let description = [{
    Finds, in an imported model, every attention layer as exporters write it
    (`softmax(scale * Q K^T + masks) V` spread over contractions, transposes,
    casts, `Mul`/`Div` by constants, `Where` and `Add` masks) and replaces it
    with one `masformer.attention` whose `causal`, `scale`, mask and `layer`
    say the same thing. The module computes the same values.

    Recognized shapes: the scale applied to the scores, to Q, to K, or split
    between Q and K (`head_dim^-1/4` each); a causal mask as `Where` with a
    constant lower-triangular condition or as an added constant
    `triu(-inf | float-min)`; other masks (padding, combined causal+padding)
    as additive masks; key/value heads repeated by unsqueeze + expand +
    reshape (grouped-query attention); softmax in f32 with casts around it.

    Layer indices count the raised ops in function order from 0. A softmax
    over the last axis of a rank-4 tensor that cannot be raised is reported
    with its location (a warning, or an error with `strict`).

    ```mlir
    %s = linalg.generic ... (Q K^T) ...
    %p = linalg.softmax dimension(3) ins(%s ...) ...
    %o = linalg.generic ... (P V) ...
    ```
    becomes
    ```mlir
    %o = masformer.attention %q, %k, %v {span = #masformer.span<full>,
           scale = 0.125 : f32, layer = 0 : i64} : ...
    ```
  }];
  let options = [
    Option<"strict", "strict", "bool", /*default=*/"false",
           "Fail on an attention-like softmax that cannot be raised">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::tensor::TensorDialect",
    "::mlir::masformer::MASFormerDialect"
  ];
}

def FoldConstantTransposes : Pass<"masformer-fold-constant-transposes"> {
  let summary = "Transpose weights at compile time";
  let description = [{
    Replaces a static `linalg.transpose` of an `arith.constant` (a
    `dense_resource` blob or a non-splat `dense` attribute of whole-byte
    elements) with the transposed constant, as a new `dense_resource` blob.
    An ONNX `Transpose` of a weight (a tied LM head multiplies by the
    transposed token embedding) then costs nothing at run time. Constants
    of fewer than `min-elements` elements are left to the other folders.
  }];
  let options = [
    Option<"minElements", "min-elements", "int64_t", /*default=*/"1",
           "Smallest constant to transpose">,
  ];
  let dependentDialects = ["arith::ArithDialect", "linalg::LinalgDialect"];
}

def TileContractions : Pass<"masformer-tile-contractions"> {
  let summary = "Matrix products as parallel tiles with vector micro-kernels";
  let description = [{
    Rewrites every `linalg.generic` that is a matrix product with f32
    results, `C[b..., m, n] += A[b'..., m, k] * B[b''..., k, n]` (or
    `B[b''..., n, k]`; f32, f16 or bf16 operands extended to f32; operands
    broadcast over some batch dimensions; a static `k`), as an `scf.forall`
    over (batch..., tiles of `tile-m` rows, tiles of `tile-n` columns). A
    full tile computes its `tile-m` x `tile-n` results with the
    register-blocked micro-kernel of `--masformer-tile-attention` (4 rows x
    4 vectors of `vector-width` f32 accumulators across `k`, in chunks of at
    most 512 so that the panels of A and B stay in L2, accumulating into the
    tile; a transposed `B` tile is packed first); partial tiles at the edges compute
    the same product on their slices as a `linalg.generic`. This is what the
    importer makes of `MatMul`, `Gemm` and `Einsum`; `--masformer-lower-to-cpu`
    runs it before the attention is tiled.
  }];
  let options = [
    Option<"tileM", "tile-m", "int64_t", /*default=*/"64",
           "Rows of C per tile (a multiple of 4)">,
    Option<"tileN", "tile-n", "int64_t", /*default=*/"64",
           "Columns of C per tile (a multiple of the kernel's vector step)">,
    Option<"vectorWidth", "vector-width", "int64_t", /*default=*/"16",
           "f32 lanes of the host's vector registers (16: AVX-512, 8: AVX2)">,
  ];
  let dependentDialects = ["arith::ArithDialect", "linalg::LinalgDialect",
                           "scf::SCFDialect", "tensor::TensorDialect",
                           "vector::VectorDialect"];
}

def Parallelize : Pass<"masformer-parallelize"> {
  let summary = "Top-level linalg ops as parallel tiles (scf.forall)";
  let description = [{
    Tiles every linalg op on tensors whose parent is a function (the
    element-wise ops, normalizations and reductions of an imported model;
    not the ops inside the tiled attention or contractions) over its
    parallel dimensions with `scf.forall`: each parallel loop but the
    innermost is tiled by 1, the last of them by `grain`; the innermost loop
    and reductions stay whole. Ops with fewer than `min-elements` iterations
    (static shapes) are left alone. `--masformer-lower-to-cpu` runs the
    `scf.forall` loops with OpenMP.
  }];
  let options = [
    Option<"grain", "grain", "int64_t", /*default=*/"8",
           "Rows of the last tiled loop per task">,
    Option<"minElements", "min-elements", "int64_t", /*default=*/"16384",
           "Ops with fewer iterations (static shapes) stay serial">,
  ];
  let dependentDialects = ["scf::SCFDialect", "tensor::TensorDialect",
                           "affine::AffineDialect", "arith::ArithDialect"];
}

def TileAttention : Pass<"masformer-tile-attention"> {
  let summary = "Span-aware tiled attention with online softmax";
  let description = [{
    Rewrites every `masformer.attention` (static or dynamic shapes) into
    loops over batch, query head and query tiles of `tile-q` rows; for each
    query tile, an inner loop visits only the key tiles of `tile-kv` keys
    that meet the span and the causal triangle. Its bounds come from the span, not from a
    mask: a block span visits the keys of the query tile's blocks, a window
    the keys within W, causal attention the keys up to the tile's last
    query. Inside, scores are computed in f32 and folded into a running
    softmax (flash-attention style: row max, rescaled sums and accumulator).
    Tiles entirely inside the span and the triangle run without any mask;
    only boundary tiles evaluate the position mask.

    With `vector-width=W`, tiles that are full (`tile-q` query rows and
    `tile-kv` keys, head_dim a multiple of W) compute both contractions with
    register-blocked micro-kernels in the vector dialect: `Q K^T` against a
    transposed key tile as outer products (4 query rows x 4 vectors of W keys
    of f32 accumulators per step of the head dimension), and `P V` with 4
    output rows x 4 vectors of the head dimension held in registers across
    the tile's keys. Partial tiles at the sequence ends take the linalg
    path.

    ```mlir
    %o = masformer.attention %q, %k, %v {span = #masformer.span<block 64>, causal = true}
           : tensor<1x4x256x32xf32>, ... -> tensor<1x4x256x32xf32>
    ```
    becomes `scf.for` nests whose key-tile loop runs from
    `floor(q0 / 64) * 64 / tile-kv` to the end of the last query's block.
  }];
  let options = [
    Option<"tileQ", "tile-q", "int64_t", /*default=*/"64",
           "Query rows per tile">,
    Option<"tileKV", "tile-kv", "int64_t", /*default=*/"64",
           "Keys per tile">,
    Option<"printTileCounts", "print-tile-counts", "bool", /*default=*/"false",
           "Instrumentation: print, per query tile, how many key tiles it "
           "visits (printI64 of the MLIR runner utils)">,
    Option<"vectorWidth", "vector-width", "int64_t", /*default=*/"0",
           "f32 lanes of the host's vector registers (16: AVX-512, 8: AVX2). "
           "When set, full tiles compute Q K^T and P V with register-blocked "
           "vector-dialect micro-kernels (4 rows x 4 vectors of "
           "accumulators); 0 keeps linalg contractions everywhere">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::func::FuncDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect",
    "::mlir::vector::VectorDialect"
  ];
}

def AttentionToGPU : Pass<"masformer-attention-to-gpu", "::mlir::ModuleOp"> {
  let summary = "masformer.attention as span-aware flash-attention kernels "
                "on NVIDIA tensor cores";
  let description = [{
    Replaces every `masformer.attention` by a `gpu.launch_func` of a kernel
    in the `gpu.module @masformer_kernels` (created on first use), one
    kernel per element type, head dimension, span, causal flag and scale.

    The kernel: one thread block of 4 warps per (64 query rows, head,
    batch), each warp owning 16 rows; a loop over exactly the key tiles of
    64 keys that meet the span and the causal triangle (tiles outside are
    never loaded); key and value tiles staged in shared memory by
    double-buffered `cp.async`; `Q K^T` and `P V` on tensor cores by
    `mma.sync` (m16n8k16 for f16/bf16 with f32 accumulation; m16n8k8 on
    tf32 with a high/low split for f32, which keeps f32 accuracy); the online
    softmax in registers. Only tiles crossing the span's or the triangle's
    boundary evaluate the position mask.

    An additive mask (rank 1 to 4, broadcast by numpy rules) is read per
    score from global memory and added to the logits, which are then kept
    in natural units so that a large finite mask stays finite.

    Operands are read through `bufferization.to_buffer` and must be device
    memory at run time; the result is a `gpu.alloc`. The head dimension must
    be static, at most 256, and a multiple of 16 (f16, bf16) or 8 (f32);
    other cases are refused with an error naming the op.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::nvgpu::NVGPUDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect"
  ];
}

def ContractionsToGPU : Pass<"masformer-contractions-to-gpu", "::mlir::ModuleOp"> {
  let summary = "The model's matrix products as tiled tensor-core kernels";
  let description = [{
    Replaces every matrix product (the `linalg.generic` contractions that
    the importer makes of MatMul, Gemm and Einsum: `C[b..., m, n] +=
    A[b..., m, k] * B[b..., k, n]` or `B[b..., n, k]`, f16, bf16 or f32
    operands, f32/f16/bf16 result) by a `gpu.launch_func` of a kernel in
    `gpu.module @masformer_kernels`, one per element types and layout of B.

    Batch dimensions collapse into one, and an operand without them (a
    weight) is broadcast. One thread block of 4 warps per 128 x 64 tile of C and batch, each
    warp owning 32 rows (two m16 tiles share each B fragment); k in steps
    of 32 with A and B tiles in shared
    memory by double-buffered `cp.async`, fragments by `ldmatrix`
    (`.trans` for B stored [k, n]) and `mma.sync` (m16n8k16 on f16/bf16
    with f32 accumulation, 3xTF32 m16n8k8 on f32). The result is
    `Cinit + A B`, rounded to C's type; when C starts as a zero
    `linalg.fill` (MatMul as imported) it is not read, and the fill goes.

    Products whose rows are not a multiple of 16 bytes (K, and N for B
    stored [k, n]), whose A and B types differ, or whose operands broadcast
    only some batch dimensions are left as they are (`report-skipped`
    says why).
  }];
  let options = [
    Option<"reportSkipped", "report-skipped", "bool", /*default=*/"false",
           "Emit a remark on each matrix product left unconverted, with the "
           "reason">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::nvgpu::NVGPUDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect",
    "::mlir::vector::VectorDialect"
  ];
}

def CheckGPUHost : Pass<"masformer-check-gpu-host", "::mlir::ModuleOp"> {
  let summary = "Refuses host code that computes on device tensors";
  let description = [{
    Run after `--masformer-attention-to-gpu` and
    `--masformer-contractions-to-gpu`: outside the `gpu.module`s, only ops
    that describe, reshape or move tensors, launch kernels, or compute
    scalars may remain. Anything else (a `linalg` op, an element-wise op on
    tensors, a slice, an attention the kernels refused) is an error naming
    the op: its operands would be device memory read on the host.
  }];
}

def LoopsToGPU : Pass<"masformer-loops-to-gpu", "::mlir::func::FuncOp"> {
  let summary = "A bufferized function's linalg ops and loops as GPU kernels";
  let description = [{
    Every top-level `linalg` op on buffers becomes a `gpu.launch`:

    - a reduction over its innermost loop whose body folds into the output
      with `addf`, `mulf`, `maxnumf`, `maximumf`, `minnumf` or `minimumf`
      (a norm's mean and variance, a softmax's max and sum): one warp per
      output element, 4 per block. Each lane folds every 32nd element from
      its own, so that a warp reads 32 consecutive elements at a time, then
      butterfly shuffles combine the lanes and lane 0 folds the result into
      the output's initial value;
    - any other op: its parallel loops (`linalg::linalgOpToParallelLoops`)
      with one thread per iteration, over the linearized iteration space,
      128 threads per block along it, the innermost dimension fastest (so
      that neighbouring threads touch neighbouring elements); loops nested
      in the body (the reduction dimensions) run in sequence in the thread.

    Top-level `scf.parallel` loops get the second form too, and a
    `memref.copy` (bufferization's copies of slices, concatenations and
    pads) becomes such a loop first. A top-level `scf.for` that touches
    memory, and the loads, arithmetic and stores of an op without loops
    (rank 0), run as one thread. `gpu-kernel-outlining` then makes kernels
    of the launches.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect"
  ];
}

def MergeKernelModules : Pass<"masformer-merge-kernel-modules", "::mlir::ModuleOp"> {
  let summary = "All gpu.modules of a module as one";
  let description = [{
    `gpu-kernel-outlining` puts each kernel in a `gpu.module` of its own: a
    whole model gets hundreds, each compiled by its own `ptxas` run,
    embedded as its own cubin and loaded by its own `cuModuleLoadData` when
    the library is opened. This pass moves every kernel (and any other
    symbol) of the module's `gpu.module`s into the first one, renaming
    those whose names collide (an outlined kernel takes its module's name),
    and updates the `gpu.launch_func`s: one module, one cubin, one load.
    Identical kernels (the same element-wise op in every layer) are kept
    once.
    The `gpu.module`s must not have targets yet (run it before
    `nvvm-attach-target`).
  }];
}

def BuffersToDevice : Pass<"masformer-buffers-to-device", "::mlir::ModuleOp"> {
  let summary = "A bufferized host function's memory on the GPU";
  let description = [{
    Run on a bufferized module whose functions only launch kernels (after
    `--masformer-loops-to-gpu` and `gpu-kernel-outlining`, or the kernel
    passes). In each function with a body:

    - every `memref.alloc`/`memref.alloca` becomes a `gpu.alloc`;
    - each memref argument is copied to a device buffer at entry;
    - each constant (`memref.get_global`) is copied to the device at entry
      (`constants=copy`), or becomes a trailing argument of the function
      that the caller provides in device memory (`constants=arguments`;
      the function's `masformer.constants` attribute lists their globals,
      in the order of the new arguments);
    - each returned buffer is copied into a new host buffer;
    - every device buffer is freed (`gpu.dealloc`) after its last use.

    The host function keeps its interface: host buffers in, host buffers
    out. `gpu-async-region` then puts its copies, launches and frees on one
    stream. An op left on the host that reads or writes memory is an error
    naming it: its buffers are now device memory.
  }];
  let options = [
    Option<"constants", "constants", "std::string", /*default=*/"\"copy\"",
           "copy: constants are copied to the device in every call; "
           "arguments: they become arguments the caller passes in device "
           "memory (so that it copies them once)">
  ];
  let dependentDialects = [
    "::mlir::gpu::GPUDialect",
    "::mlir::memref::MemRefDialect"
  ];
}

def MixedPrecision : Pass<"masformer-mixed-precision", "::mlir::ModuleOp"> {
  let summary = "Matrix products and attention on bf16 operands";
  let description = [{
    Every matrix product with f32 operands (the contractions that
    `--masformer-contractions-to-gpu` recognizes) takes bf16 operands and
    keeps its f32 result and accumulation; every `masformer.attention` on
    f32 with a static head dimension that is a multiple of 16 runs on bf16
    query, key and value, its result extended back to f32 (the mask stays
    f32). Constant operands (weights) are converted at compile time,
    rounding to nearest even; other operands get an element-wise `truncf`.
    The rest of the model stays f32. On the GPU the products and attention
    then run on bf16 tensor cores instead of 3xTF32 (about 1e-2 relative
    instead of 1e-6).
  }];
  let options = [
    Option<"type", "type", "std::string", /*default=*/"\"bf16\"",
           "The operand type: bf16">
  ];
  let dependentDialects = ["arith::ArithDialect", "linalg::LinalgDialect"];
}

def ApproximateMath : Pass<"masformer-approximate-math"> {
  let summary = "exp, tanh and erf as polynomials; small constant powers as "
                "multiplications";
  let description = [{
    Replaces f32 `math.exp`, `math.tanh` and `math.erf` with MLIR's
    polynomial approximations (a few ulp; exp(-inf) = 0 exactly), built from
    arithmetic that LLVM vectorizes together with the loop around it: a libm
    call per element keeps a loop scalar (the softmax of the tiled
    attention, a GELU). Scalar constant operands of `linalg.generic` ops are
    inlined first, so that `math.powf` by a constant 2 or 3 (GELU's x^3)
    becomes multiplications and by 0.5 a square root.

    ```mlir
    %e = math.exp %x : f32
    ```
    becomes `arith` and `math.fma` ops.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::vector::VectorDialect"];
}

def RewriteSpans : Pass<"masformer-rewrite-spans", "::mlir::ModuleOp"> {
  let summary = "MASFormer: keep full attention in a few layers, block-sparse "
                "or windowed spans in the others";
  let description = [{
    The MASFormer rewrite (Zhang et al., EMNLP 2023): a transformer keeps
    most of its quality at long context with full attention in only a few
    layers and block-sparse attention in the rest, cutting attention cost by
    up to 75% at 8k tokens. This pass sets the `span` of every
    `masformer.attention` (numbered by its `layer` attribute, as
    `--masformer-raise-attention` leaves them) without touching a weight.

    Which layers stay full:
    - `full-layers=0,1,5`: exactly these;
    - `policy=bottom|top|spread` with `num-full=L`: the first L layers (the
      paper's placement), the last L, or L spread evenly;
    - default: `policy=bottom` with `num-full = ceil(layers / 6)`.
    The others get `span=block:B` or `span=window:W`.

    Errors (each one diagnostic, and the pass fails): no span or a span size
    of 0 or less, a layer index out of range, `num-full` larger than the
    number of layers, `full-layers` together with `policy` or `num-full`, a
    module without attention layers. `policy=calibrated` (choosing layers
    from data) is not implemented yet and says so.

    ```mlir
    // --masformer-rewrite-spans="span=block:64 full-layers=0"
    %a = masformer.attention ... {layer = 1 : i64, span = #masformer.span<full>}
    // becomes
    %a = masformer.attention ... {layer = 1 : i64, span = #masformer.span<block 64>}
    ```
  }];
  let options = [
    Option<"span", "span", "std::string", /*default=*/"\"\"",
           "Span of the rewritten layers: block:B or window:W">,
    ListOption<"fullLayers", "full-layers", "int64_t",
               "Layers that keep full attention (excludes policy/num-full)">,
    Option<"policy", "policy", "std::string", /*default=*/"\"\"",
           "bottom (default), top or spread">,
    Option<"numFull", "num-full", "int64_t", /*default=*/"-1",
           "How many layers keep full attention (default ceil(layers/6))">,
    Option<"calibration", "calibration", "std::string", /*default=*/"\"\"",
           "Calibration inputs (.npz) for policy=calibrated">
  ];
}

def SpanReport : Pass<"masformer-span-report", "::mlir::ModuleOp"> {
  let summary = "Print each attention layer's span and attention cost";
  let description = [{
    Prints, for every `masformer.attention` in layer order, its span, causal
    flag, heads and head_dim, the attention FLOPs at sequence length
    `seq-len` (batch 1; 4 * heads * head_dim per computed query/key pair, for
    Q K^T and P V) and the fraction of what full attention with the same
    causal flag computes; then the totals. With `json=path` the same goes to
    a JSON file. The IR is not changed.

    ```
    layer  span          causal  heads  head_dim        GFLOP  of full
        0  full          yes         4         8        0.000    1.000
    ```
  }];
  let options = [
    Option<"seqLen", "seq-len", "int64_t", /*default=*/"0",
           "Sequence length the costs are computed at (required)">,
    Option<"json", "json", "std::string", /*default=*/"\"\"",
           "Also write the report as JSON to this file">
  ];
}

#endif // MASFORMER_DIALECT_MASFORMER_TRANSFORMS_PASSES_TD
