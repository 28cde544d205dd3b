//===- Passes.td - CPU code generation ---------------------*- tablegen -*-===//
//
// CPU code generation: tiled attention and contractions on vector
// micro-kernels, parallel loops, math approximations.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_CODEGEN_CPU_PASSES_TD
#define MASFORMER_CODEGEN_CPU_PASSES_TD

include "mlir/Pass/PassBase.td"

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
    register-blocked micro-kernels in the vector dialect: the transposed
    scores `K Q^T` from the keys as stored and the query tile transposed
    once per query tile (4 key rows x 4 vectors of W queries of f32
    accumulators per step of the head dimension), the online softmax W
    queries at a time down the score columns (vertical vector maxima and
    sums), and `P V` with 4 output rows x 4 vectors of the head dimension
    held in registers across the tile's keys. While a full tile computes,
    it prefetches the rows of K, V and Q its thread reads next. Partial
    tiles at the sequence ends take the linalg path. A full tile on the
    span's edge (where the span, its sinks or the causal triangle cut
    across it) runs in two halves of its query rows:
    a half skips the tile when its rows see none of its keys, and computes
    only the half of the keys it sees when that is all it sees, so a band
    of W keys costs W + tile-q / 2 keys per query instead of W + tile-q.

    With `bf16-dot` (and `vector-width=16`), full tiles of bf16 attention
    run both products on AVX512-BF16's `vdpbf16ps` (`x86vector.avx512.dot`,
    32 multiply-adds an instruction where an f32 FMA does 16): the query
    tile is packed as pairs of the head dimension, the probabilities are
    written as bf16 pairs of keys by the softmax (and summed as rounded),
    and each key tile's values are packed as pairs of keys. Accumulation,
    the softmax and its state stay f32.

    With `amx` (and `vector-width=16`), full tiles of bf16 attention whose
    products' sizes are multiples of 32 (the head dimension, `tile-q` and
    `tile-kv`, and their halves on the span's edge) run both products as
    AMX tile products marked for `--masformer-lower-amx-tiles`. A parallel
    loop of its own first packs, once, the keys' pairs of the head
    dimension transposed and the values' pairs of keys (none when no query
    tile is full). Each tile then computes `S = Q K^T` from the queries'
    rows as stored and the packed keys, a softmax by rows in groups of 16
    (each row's maximum and sum down its vectors, one butterfly of
    shuffles across the lanes per group; P written as bf16 rows, summed as
    rounded, with `vdpbf16ps` against ones under `bf16-dot`), and `P V`
    from P's rows and the packed values into the accumulator, rescaled in
    memory. With `amx`, a query, key or value that is a head split only
    the attention reads (a `linalg.generic` that transposes `[batch, seq,
    heads, head_dim]` to `[batch, heads, seq, head_dim]`, computing nothing
    else) is read where the split reads it, and a result whose only reader
    is the merge back is written as `[batch, seq, heads, head_dim]`: the
    split and the merge are erased (ops other than the attention, so the
    pass tiles each op in turn rather than through a walk of patterns).

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
    Option<"vectorWidth", "vector-width", "int64_t", /*default=*/"0",
           "f32 lanes of the host's vector registers (16: AVX-512, 8: AVX2). "
           "When set, full tiles compute K Q^T and P V with register-blocked "
           "vector-dialect micro-kernels (4 rows x 4 vectors of "
           "accumulators); 0 keeps linalg contractions everywhere">,
    Option<"bf16Dot", "bf16-dot", "bool", /*default=*/"false",
           "With vector-width=16, bf16 attention's micro-kernels run on "
           "AVX512-BF16's vdpbf16ps: K Q^T on pairs of the head dimension, "
           "P V on pairs of keys (P rounded to bf16, V's pairs packed per "
           "key tile); accumulation stays f32">,
    Option<"amx", "amx", "bool", /*default=*/"false",
           "With vector-width=16, bf16 attention's full tiles run Q K^T and "
           "P V as AMX tile products (for --masformer-lower-amx-tiles) where "
           "the head dimension and the tiles (and their halves) are "
           "multiples of 32, on keys and values packed once per call">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::func::FuncDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect",
    "::mlir::vector::VectorDialect",
    "::mlir::x86vector::X86VectorDialect"
  ];
}

def LowerDotU8S8 : Pass<"masformer-lower-dot-u8s8"> {
  let summary = "masformer.dot_u8s8 as AVX512-VNNI's vpdpbusd";
  let description = [{
    Replaces each `masformer.dot_u8s8` with a call of the LLVM intrinsic
    `llvm.x86.avx512.vpdpbusd.512` (`llvm.call_intrinsic`), which the
    x86 backend compiles to one `vpdpbusd`. Run after bufferization (the
    call has unknown memory effects to MLIR) and before the vector
    dialect's conversion to LLVM; the target must have AVX512-VNNI.
  }];
  let dependentDialects = ["LLVM::LLVMDialect"];
}

def TileContractions : Pass<"masformer-tile-contractions"> {
  let summary = "Matrix products as parallel tiles with vector micro-kernels";
  let description = [{
    Rewrites every `linalg.generic` that is a matrix product with f32
    results, `C[b..., m, n] += A[b'..., m, k] * B[b''..., k, n]` (or
    `B[b''..., n, k]`; f32, f16 or bf16 operands extended to f32; operands
    broadcast over some batch dimensions; a static `k`), as an `scf.forall`
    over (batch..., group of row tiles, tile of `tile-n` columns, tile of
    `tile-m` rows in the group): groups of up to 4 row tiles whose rows of
    `A` take at most half of `l2-bytes` (a thread's L2 cache),
    ceil(tiles / ceil(tiles / 4)) row tiles each (an iteration past the
    last row tile computes nothing). The tiles a thread runs one after the
    other share the group's rows of `A` and, across the group, their
    columns of `B`. Where two row tiles of `A` pass half the L2, the loop
    is over (batch..., column tile, row tile): the tiles a thread runs
    share their columns of `B`.
    A full tile computes its `tile-m` x `tile-n` results with the
    register-blocked micro-kernel of `--masformer-tile-attention` (4 rows x
    4 vectors of `vector-width` f32 accumulators across `k`, in chunks of
    at most 128 so that the chunk of B's panel stays in L1) on B's tile
    packed as a contiguous `[k, tile-n]` panel:
    - a constant `B` of at least `tile-n` columns (the model's weights) is
      packed at compile time into the constant
      `[ceil(n / tile-n), k, tile-n]`, zeros past `n`, transposed or not;
      every tile reads its panel;
    - any other `B` is copied (or transposed) into a panel per tile.
    When `C` starts as a `linalg.fill` (a `MatMul`'s zeros), the kernel's
    accumulators start at the fill value and the fill of the whole result
    is not done. Tiles with fewer rows run the kernel on groups of 4 rows
    padded with zeros; the last, narrower column tile computes the same
    product on its slices as a `linalg.generic`. This is what the importer
    makes of `MatMul`, `Gemm` and `Einsum`; `--masformer-lower-to-cpu`
    runs it before the attention is tiled.

    With `u8s8-dot` (AVX512-VNNI), an integer product of `uint8` A by a
    constant `int8` B of two dimensions with `i32` sums (the importer's
    form of a quantized model's `MatMulInteger`; `k` a multiple of 4) is
    tiled the same way on B packed at compile time in quads of `k`
    (`[ceil(n / tile-n), k / 4, tile-n, 4]`, whatever `n`), each step of
    the 4 x 4 register block a `masformer.dot_u8s8` (`vpdpbusd`) per
    accumulator, `k` in chunks of 512; other integer products are left
    alone. With `amx-int8` as well (AMX-INT8), those whose `k` is a
    multiple of 64 (and `tile-m`, `tile-n` multiples of 32) run as AMX tile
    products instead, on the same packed quads, marked for
    `--masformer-lower-amx-tiles` (`tdpbusd`); a tile of at most 4 rows of
    whole columns (a decode step's) stays on `vpdpbusd`, which does not
    pad it to `tile-m` rows.
  }];
  let options = [
    Option<"tileM", "tile-m", "int64_t", /*default=*/"64",
           "Rows of C per tile (a multiple of 4)">,
    Option<"tileN", "tile-n", "int64_t", /*default=*/"64",
           "Columns of C per tile (a multiple of the kernel's vector step)">,
    Option<"vectorWidth", "vector-width", "int64_t", /*default=*/"16",
           "f32 lanes of the host's vector registers (16: AVX-512, 8: AVX2)">,
    Option<"amx", "amx", "bool", /*default=*/"false",
           "Products of bf16 operands with constant weights as tile products "
           "marked for --masformer-lower-amx-tiles (the CPU has AMX-BF16)">,
    Option<"bf16Dot", "bf16-dot", "bool", /*default=*/"false",
           "Other products of bf16 operands (k even, vector-width 16) on "
           "AVX512-BF16's vdpbf16ps, on VNNI-packed weights">,
    Option<"u8s8Dot", "u8s8-dot", "bool", /*default=*/"false",
           "Integer products of uint8 A by constant int8 B (a quantized "
           "model's MatMulInteger; k a multiple of 4, vector-width 16) on "
           "AVX512-VNNI's vpdpbusd, on weights packed in quads of k">,
    Option<"amxInt8", "amx-int8", "bool", /*default=*/"false",
           "With u8s8-dot: those whose k is a multiple of 64 as tile "
           "products marked for --masformer-lower-amx-tiles (tdpbusd; the "
           "CPU has AMX-INT8), on the same packed weights">,
    Option<"l2Bytes", "l2-bytes", "int64_t", /*default=*/"2097152",
           "Bytes of L2 cache per thread: a group of row tiles reads at most "
           "half of it of A (masformer-compile passes the target CPU's)">,
  ];
  let dependentDialects = ["arith::ArithDialect", "linalg::LinalgDialect",
                           "masformer::MASFormerDialect",
                           "scf::SCFDialect", "tensor::TensorDialect",
                           "vector::VectorDialect",
                           "x86vector::X86VectorDialect"];
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

    The ops whose results only one op reads, directly or through other such
    ops and through reshapes (a layer norm's row sums, centered rows and
    sum of squares, read only by its scaling), are computed in that op's
    loop, each tile computing its own rows (tile and fuse, along slices
    that the tile's indices place: a producer whose slice would be the
    same for every tile stays apart), with temporaries of the tile's size
    and a producer that two of them read computed once. A whole norm is
    then one pass over its rows instead of one per op. Consumers are
    visited before their producers.
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

def LowerReductions : Pass<"masformer-lower-reductions"> {
  let summary = "Row reductions as loops with the partial result in a "
                "register, vectorizable";
  let description = [{
    Lowers each `linalg.generic` on buffers whose innermost loop is its
    only reduction, and whose one output that loop does not index (a
    norm's row sum, a softmax's row maximum), to `scf.for` loops in which
    the reduction loop carries the partial result as a loop value: the
    output element is loaded once before the loop and stored once after
    it. The op of the body that combines the partial result is marked
    `fastmath<reassoc>`, so that LLVM vectorizes the loop (partial
    results in vector lanes, combined at the end).
    `convert-linalg-to-loops` instead loads and stores the output at every
    step, which LLVM cannot keep in a register (an input might alias it),
    with the adds in order: one scalar add per store-to-load latency.
    A minimum or maximum (`arith.minnumf`, `arith.maxnumf`) of one f32
    input read along the reduction loop, which LLVM does not vectorize
    (minnum's rule for NaN), is vectorized here: vectors of 16 lanes
    carried through the loop, `vector.reduction` across them, the rest one
    by one (the same result: both ops ignore NaN in any order).
    Other generics are left to `convert-linalg-to-loops`.

    ```mlir
    linalg.generic {iterator_types = ["parallel", "reduction"], ...}
        ins(%x : memref<?x768xf32>) outs(%sum : memref<?xf32>) {
    ^bb0(%in: f32, %acc: f32):
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
    ```
    becomes a loop over the rows around
    `scf.for ... iter_args(%acc = %first)` whose body is
    `arith.addf %in, %acc fastmath<reassoc>`.
  }];
  let dependentDialects = ["affine::AffineDialect", "arith::ArithDialect",
                           "memref::MemRefDialect", "scf::SCFDialect",
                           "vector::VectorDialect"];
}

def VectorizeRowCopies : Pass<"masformer-vectorize-row-copies"> {
  let summary = "Copies of rows between buffers as vector loads and stores";
  let description = [{
    Lowers each `linalg.generic` on buffers that copies one buffer into
    another with its rows kept as rows (all loops parallel, both indexing
    maps permutations whose last result is the innermost loop, both
    buffers of unit stride in their last dimension, of the same static
    size there), yielding its input or its input converted by one
    `arith.truncf` or `arith.extf`, to `scf.for` loops over the other
    dimensions around one `vector.transfer_read` and one
    `vector.transfer_write` per row (rows longer than 256 elements, in
    vectors of 64; their length must be a multiple of 64). A model's head
    splits and merges are such copies: [batch, seq, heads, head_dim] to
    [batch, heads, seq, head_dim] and back. `convert-linalg-to-loops`
    gives LLVM a scalar loop over the row that it unrolls whole before
    vectorizing, and whose loads and stores it then cannot combine (the
    buffers might alias): a scalar load and store per element. Other
    generics are left alone.

    ```mlir
    linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>,
                                     affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
                    iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
        ins(%x : memref<?x?x12x64xf32>) outs(%y : memref<?x12x?x64xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    }
    ```
    becomes three loops around a `vector<64xf32>` read of `%x` and write
    of `%y`.
  }];
  let dependentDialects = ["arith::ArithDialect", "scf::SCFDialect",
                           "vector::VectorDialect"];
}

def LowerAMXTiles : Pass<"masformer-lower-amx-tiles"> {
  let summary = "The bf16 and 8-bit tile products marked for AMX as AMX "
                "tile operations";
  let description = [{
    After bufferization, every `linalg.generic` that
    `--masformer-tile-contractions` (with `amx` or `amx-int8`) or
    `--masformer-tile-attention` marked `masformer.amx_tile` becomes AMX
    code. The product is C[m, n] += A[m, g kg + kk] * B[kg, n, kk], B in
    the VNNI layout of groups of k, m and n multiples of 32, rows
    contiguous: bf16 A and B in pairs (g = 2) with an f32 C, on
    `amx.tile_mulf` (tdpbf16ps), k a multiple of 32; or 8-bit A and B in
    quads (g = 4) with an i32 C, on `amx.tile_muli` (tdpbusd for the
    uint8 by int8 products of a quantized model; each operand zero- or
    sign-extended as the body's `arith.extui` or `arith.extsi` says), k a
    multiple of 64. For each chunk of up to 8 steps of k (256 of bf16, 512
    of 8-bit), each block of 32 x 32 results is loaded into four tile
    registers, accumulated over the chunk's steps (two tiles of A and two
    of B per step, unrolled), and stored. When a `linalg.fill` of zeros
    writes C just before, the fill is dropped and k's first chunk, peeled
    off the loop, starts from `amx.tile_zero`. No tile value crosses a
    block (LLVM's conversion of control flow has no AMX tile type). A
    marked op that does not have this form is an error naming why.
  }];
  let dependentDialects = ["::mlir::amx::AMXDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect"];
}

def EmulateAMX : Pass<"masformer-emulate-amx", "::mlir::ModuleOp"> {
  let summary = "AMX tile operations as checked scalar loops, for CPUs "
                "without AMX";
  let description = [{
    A test of the AMX path where the CPU has no AMX: every `amx.tile_zero`,
    `amx.tile_load`, `amx.tile_mulf` (bf16 or f16 tiles, f32 accumulator),
    `amx.tile_muli` (8-bit tiles, i32 accumulator) and `amx.tile_store`
    becomes scalar loops over an emulated file of 8 tile registers of 16
    rows of 64 bytes (`memref.alloca`s at the start of the closest
    enclosing parallel loop or function, one per block of tile operations
    and element type), computing what Intel's ISA reference defines for
    TILEZERO, TILELOADD, TDPBF16PS / TDPFP16PS, TDPBSSD / TDPBSUD / TDPBUSD
    / TDPBUUD and TILESTORED (each product a call of a private function
    `__masformer_amx_emulator_tdp<type>ps_<M>x<K/2>x<N>` or
    `__masformer_amx_emulator_tdpb<s|u><s|u>d_<M>x<K/4>x<N>`, kept out of
    line: inlined, a model's hundreds of products compile slowly):

    ```
    dst[m][n] += f32(a[m][2 k]) * f32(b[k][2 n])
               + f32(a[m][2 k + 1]) * f32(b[k][2 n + 1])   for k < K / 2
    dst[m][n] += sum over i < 4 of ext(a[m][4 k + i]) * ext(b[k][4 n + i])
                                        for k < K / 4 (i32, wrapping)
    ```

    where `ext` sign- or zero-extends each operand as the op's `zext`
    flags say. It is stricter than the hardware: each load and store checks
    that its tile lies inside its buffer's dimensions, and otherwise writes
    a message naming the operation and its location to stderr and aborts;
    a block with more than 8 tile values live at once, a tile value used
    outside its block, a tile larger than 16 rows of 64 bytes or an
    explicit stride is an error. Registers are assigned by a linear scan;
    a product accumulates in place when its accumulator dies there.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect"];
}

def FuseProductEpilogues : Pass<"masformer-fuse-product-epilogues"> {
  let summary = "Compute a product's element-wise consumer on each of its "
                "tiles";
  let description = [{
    A tiled product of `--masformer-tile-contractions` whose tiles start
    from a fill (a MatMul's zeros: no tile reads the result's prior
    contents; the loop carries the `masformer.product_tiles` attribute) and
    whose result one element-wise `linalg.generic` consumes (every loop
    parallel, the product read and the result written with identity maps,
    its other inputs broadcasts defined before the loop or constants, no
    `linalg.index`, its init not read): a bias and GELU after an MLP's
    first product, a bias and residual add after an attention's output
    projection, the rounding of either to bf16. The loop is rebuilt to
    produce the consumer's result: each iteration computes its product
    tile into a temporary (the slices of the old result become
    `tensor.empty`, which the tile's fill overwrites), applies the
    consumer to it and to the matching slices of the other inputs while
    the tile is in cache, and inserts that. The product's result is then
    never written to memory whole and read back by a loop of its own: for
    GPT-2's MLP in bf16, a 2048 x 3072 f32 result per layer at S = 2048.

    A product of rows flattened to `[batch * sequence]` and expanded back
    before its consumer has the consumer collapsed the same way first
    (its other inputs collapsed, its result expanded), unless another
    input is a part of each sequence (a slice that does not take every
    position: a decode entry's last rows), which collapsing would copy.

    Shape queries of the product's result (`tensor.dim`) are answered from
    its init. A product with several consumers, or one consumed through a
    reshape, keeps its loop.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect"];
}

def StackLoopTemporaries : Pass<"masformer-stack-loop-temporaries"> {
  let summary = "A parallel loop's temporaries on its thread's stack";
  let description = [{
    After bufferization, the temporaries of a tiled kernel (an attention
    tile's packed queries, its scores and probabilities, its running
    state) are `memref.alloc`s inside the `scf.forall` over tiles, many of
    them inside its key-tile loop: a `malloc` and a `free` per tile and per
    step, from every thread at once. This pass turns each such buffer into
    a `memref.alloca` at the start of the innermost enclosing `scf.forall`
    body, sized by its constant upper bound when a size is dynamic (only
    the leading one may be: a view of the bound's rows then has the
    original's layout, and the users see the original type through a
    `memref.cast`). The OpenMP lowering wraps each iteration in a
    `memref.alloca_scope`, so the stack is reclaimed per iteration.

    A buffer moves only when it cannot outlive one execution of its
    definition: every use, through views, reads or writes it (no region
    yield, call, return or op whose effects are unknown), so one slot
    serves every execution (one per key tile), and only from outside any
    `scf.parallel` nested in the loop (whose iterations would share the
    slot at once). A loop's temporaries stay within `max-bytes` together
    (256 KiB by default: libomp's worker threads had 8 MiB stacks on the
    machines measured, `KMP_SETTINGS=1`, and the calling thread, which
    runs iterations too, may have less); the rest, and buffers whose size
    has no constant bound, stay on the heap.

    ```mlir
    scf.forall (%i) in (64) {
      %n = affine.min affine_map<(d0) -> (64, 4000 - d0 * 64)>(%i)
      scf.for %k = %c0 to %c32 step %c1 {
        %s = memref.alloc(%n) : memref<?x128xf32>
        "use"(%s) : (memref<?x128xf32>) -> ()
      }
    }
    ```

    becomes

    ```mlir
    scf.forall (%i) in (64) {
      %slot = memref.alloca() : memref<64x128xf32>
      %n = affine.min affine_map<(d0) -> (64, 4000 - d0 * 64)>(%i)
      scf.for %k = %c0 to %c32 step %c1 {
        %v = memref.subview %slot[0, 0] [%n, 128] [1, 1]
            : memref<64x128xf32> to memref<?x128xf32, strided<[128, 1]>>
        %s = memref.cast %v
            : memref<?x128xf32, strided<[128, 1]>> to memref<?x128xf32>
        "use"(%s) : (memref<?x128xf32>) -> ()
      }
    }
    ```
  }];
  let options = [
    Option<"maxBytes", "max-bytes", "int64_t", /*default=*/"262144",
           "The most bytes of one loop iteration's temporaries placed on "
           "the stack">,
  ];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def FreeBuffersEarly : Pass<"masformer-free-buffers-early"> {
  let summary = "Free each buffer right after its last use, not at the end "
                "of its block";
  let description = [{
    MLIR's ownership-based buffer deallocation frees a buffer at the end of
    the block that allocated it. In a whole model every activation is
    allocated in the entry function's one block, so every activation of
    every layer would stay allocated until the model returns: the run's
    memory would grow with the depth of the model. This pass moves each
    `memref.dealloc` up to just after the last op of its block that uses the
    buffer or any view of it (subviews, reshapes, casts, values through
    region results: `BufferViewFlowAnalysis`), including uses nested in that
    op's regions (an `scf.forall` over the buffer ends before the next op).
    A dealloc stays where it is when a view leaves its block or is used in
    a way the analysis cannot follow (its aligned pointer taken as an
    index).

    ```mlir
    %a = memref.alloc() : memref<1024xf32>
    "use"(%a) : (memref<1024xf32>) -> ()
    %b = memref.alloc() : memref<1024xf32>
    "use"(%b) : (memref<1024xf32>) -> ()
    memref.dealloc %a : memref<1024xf32>
    memref.dealloc %b : memref<1024xf32>
    ```
    frees `%a` before `%b` is allocated.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def OutlineKernels : Pass<"masformer-outline-kernels", "ModuleOp"> {
  let summary = "Each parallel loop nest as a private function, identical "
                "ones shared";
  let description = [{
    On buffers, after bufferization and deallocation: every outermost
    `scf.forall` of a function (a tiled attention, a product, a fused
    element-wise nest) becomes a call to a private function that holds it.
    The values it uses from outside become the function's arguments, except
    constants and views, which are copied in: tile sizes and loop bounds
    stay constants, and a view (`memref.expand_shape`, `collapse_shape`,
    `subview`, `cast`, `reinterpret_cast`) is recomputed inside from the
    buffer it views, so that its loads and stores still fold onto that
    buffer and no reassociated or strided view crosses a call. Memref types
    keep their static shapes and layouts. Loop
    nests that come out identical (every layer of one shape and span gives
    the same attention kernel, every layer's product of one shape the same
    product once its weights are arguments) share one function.

    Everything after this pass (loops, OpenMP, the LLVM dialect, the
    translation to LLVM IR and LLVM's optimization) then handles each
    kernel once rather than once per layer: a model's layers of one span
    lower as one attention kernel per entry (test/Compile/compile-time.test).

    ```mlir
    scf.forall (%i) in (16) {
      ... uses %a, %b, %c4 = arith.constant 4 ...
    }
    ```
    becomes
    ```mlir
    func.call @masformer_kernel_0(%a, %b) : (...) -> ()
    func.func private @masformer_kernel_0(%a: ..., %b: ...) {
      %c4 = arith.constant 4 : index
      scf.forall (%i) in (16) { ... }
      return
    }
    ```
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

#endif // MASFORMER_CODEGEN_CPU_PASSES_TD
