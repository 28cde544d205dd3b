//===- Passes.td - Code generation for every target --------*- tablegen -*-===//
//
// Code generation passes that both the CPU and the GPU pipelines run before
// their target-specific lowering.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_CODEGEN_COMMON_PASSES_TD
#define MASFORMER_CODEGEN_COMMON_PASSES_TD

include "mlir/Pass/PassBase.td"

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

def FoldConstantTransposes : Pass<"masformer-fold-constant-transposes"> {
  let summary = "Transpose weights at compile time";
  let description = [{
    Replaces a static `linalg.transpose` of an `arith.constant` (a
    `dense_resource` blob or a non-splat `dense` attribute of whole-byte
    elements) with the transposed constant, as a new `dense_resource` blob.
    An ONNX `Transpose` of a weight (a tied LM head multiplies by the
    transposed token embedding) then costs nothing at run time. Constants
    of fewer than `min-elements` elements are left to the other folders.

    With `into-products`, a transpose of the last two dimensions whose
    every use is the second operand (B) of a matrix product is not
    materialized: the products read the constant as it is, with B's
    indexing map transposed (B stored [n, k]). The GPU's product kernel
    reads such a B by rows of k, where the transposed copy of a tied
    embedding has rows of the vocabulary's length (50257 for GPT-2: no
    multiple of 16 bytes, which its asynchronous copies need), and no
    second copy of the weight is stored.
  }];
  let options = [
    Option<"minElements", "min-elements", "int64_t", /*default=*/"1",
           "Smallest constant to transpose">,
    Option<"intoProducts", "into-products", "bool", /*default=*/"false",
           "Fold a transpose that only feeds matrix products' B operands "
           "into their indexing maps instead">,
  ];
  let dependentDialects = ["arith::ArithDialect", "linalg::LinalgDialect"];
}

def IntegerProductsToFloat : Pass<"masformer-integer-products-to-float"> {
  let summary = "8-bit integer matrix products as f32 products";
  let description = [{
    Rewrites every integer matrix product (the importer's form of a
    quantized model's `MatMulInteger`: `i8` operands extended signed or
    unsigned, `i32` sums) as the same product of the operands converted to
    `f32`, converted back to `i32`: a constant operand (the weights) is
    converted at compile time, any other by an element-wise generic. The
    products then run on the float kernels of targets that have no integer
    one (the GPU, and CPUs without AVX512-VNNI, where
    `--masformer-tile-contractions` has no 8-bit kernel). Exact while the
    partial sums stay below 2^24 in magnitude (certainly for k up to 514
    for the importer's uint8 by int8, 258 for uint8 by uint8; beyond, the
    sum is the int32 one up to f32's rounding). With `keep-vpdpbusd`, the
    products that `--masformer-tile-contractions{u8s8-dot}` runs on
    AVX512-VNNI stay integer.
  }];
  let options = [
    Option<"keepVPDPBUSD", "keep-vpdpbusd", "bool", /*default=*/"false",
           "Keep the products of uint8 by constant int8 with k a multiple "
           "of 4 (those --masformer-tile-contractions{u8s8-dot} takes)">,
  ];
  let dependentDialects = ["arith::ArithDialect", "linalg::LinalgDialect",
                           "tensor::TensorDialect"];
}

def CheckInPlace : Pass<"masformer-check-in-place", "::mlir::ModuleOp"> {
  let summary = "Check that arguments updated in place were written in "
                "place by bufferization";
  let description = [{
    A function argument marked `masformer.in_place` (the decode entry's
    cache buffers, `--masformer-derive-decode`) is a buffer the caller
    expects the function to write: the runtime finds a step's new keys
    and values in its cache because the entry wrote them there. Tensors
    have no such side effect; one-shot bufferization gives it (the
    argument is `bufferization.writable`, `--masformer-prepare-entry`)
    only when it decides that the write can happen in place. This pass,
    run after bufferization, makes that decision a checked one: each such
    argument must be written by some op, directly or through views
    (`memref.subview`, casts, reshapes), or the pass fails naming the
    function and argument. It then drops the attribute.

    ```mlir
    func.func @decode(%cache: memref<1x4x?x8xf32> {masformer.in_place}, ...)
    ```
    passes when a `memref.subview` of `%cache` is a linalg op's output or
    a copy's target; when bufferization copied the argument instead (a
    later op read its old contents), only reads of it are left and the
    pass reports it.
  }];
}

def ExpandShapesAsCasts : Pass<"masformer-expand-shapes-as-casts"> {
  let summary = "Reshapes into several dynamic sizes as casts of their "
                "source's strided metadata";
  let description = [{
    Rewrites each `memref.expand_shape` that splits one dimension into two
    or more dynamic sizes (rows of `batch * sequence` expanded to
    `[batch, sequence]`) as a `memref.reinterpret_cast` of its source's
    base buffer, with the source's offset, the expand's output sizes, and
    strides taken from the source's: within a group, the innermost size
    keeps the source dimension's stride and each outer one is that stride
    times the sizes inside it.

    `--expand-strided-metadata` of LLVM 22 crashes on the strided metadata
    of such an expand_shape; `--fold-memref-alias-ops` removes the ones
    that only loads and stores read, but not those read by an AMX tile load
    (bf16 attention on AMX reading Q, K and V through the head splits of a
    GPT-2 exported by transformers). Run it right
    before `--expand-strided-metadata`; other expand_shapes are left alone.

    ```mlir
    %e = memref.expand_shape %a [[0, 1], [2]] output_shape [%b, %s, 384]
        : memref<?x384xbf16> into memref<?x?x384xbf16>
    ```
    becomes
    ```mlir
    %base, %offset, %sizes:2, %strides:2 = memref.extract_strided_metadata %a
    %st = affine.apply affine_map<()[s0, s1] -> (s0 * s1)>()[%strides#0, %s]
    %e = memref.reinterpret_cast %base to offset: [0],
        sizes: [%b, %s, 384], strides: [%st, 384, 1]
    ```
  }];
  let dependentDialects = ["affine::AffineDialect",
                           "memref::MemRefDialect"];
}

def GeneralizeLayoutOps : Pass<"masformer-generalize-layout-ops"> {
  let summary = "Transposes and broadcasts as generics the fusion can merge";
  let description = [{
    Rewrites each `linalg.transpose` and `linalg.broadcast` on tensors
    whose parent is a function (not one inside a loop: the tiled kernels'
    fills and transposed tiles, which later passes match by name) as the
    equivalent `linalg.generic`, so that `linalg-fuse-elementwise-ops`
    merges it with the element-wise op that produces or consumes it (the
    heads split off a QKV projection and their bf16 rounding, a mask
    broadcast over the heads and its use): one pass over memory instead of
    two.

    ```mlir
    %t = linalg.transpose ins(%x : tensor<?x?x12x64xf32>)
           outs(%e : tensor<?x12x?x64xf32>) permutation = [0, 2, 1, 3]
    ```
    becomes a `linalg.generic` copying `%x` through the permuted map
    `(d0, d1, d2, d3) -> (d0, d2, d1, d3)`.
  }];
  let dependentDialects = ["linalg::LinalgDialect"];
}

def MixedPrecision : Pass<"masformer-mixed-precision", "::mlir::ModuleOp"> {
  let summary = "Matrix products and attention on bf16 operands";
  let description = [{
    Every matrix product of an activation and a weight (a constant) with
    f32 operands and a reduction of at least 16 (the contractions that
    `--masformer-contractions-to-gpu` recognizes) takes bf16 operands and
    keeps its f32 result and accumulation. Shorter products gain nothing
    and are where exact values meet: rotary embeddings multiply positions
    by frequencies with k = 1, and bf16 holds integers exactly only up to
    256. Products of two activations keep f32. Every `masformer.attention` on
    f32 with a static head dimension that is a multiple of 16 (of
    `head-dim-multiple`) runs on bf16
    query, key and value, its result extended back to f32 (the mask stays
    f32; not with `attention=0`, which leaves attention in f32: the CPUs
    whose bf16 attention kernels are slower than their f32 ones). Constant
    operands (weights) are converted at compile time,
    rounding to nearest even; other operands get an element-wise `truncf`,
    placed before their reshapes and transposes, and before a slice of a
    tensor that is read only through slices (the query, key and value of a
    fused projection: one `truncf` of the whole projection), so that it
    meets the op that computes the value.
    The rest of the model stays f32. On the GPU the products and attention
    then run on bf16 tensor cores instead of 3xTF32 (about 1e-2 relative
    instead of 1e-6).
  }];
  let options = [
    Option<"type", "type", "std::string", /*default=*/"\"bf16\"",
           "The operand type: bf16">,
    Option<"attention", "attention", "bool", /*default=*/"true",
           "Attention on bf16 operands too (otherwise only the products)">,
    Option<"headDimMultiple", "head-dim-multiple", "int64_t",
           /*default=*/"16",
           "Attention takes bf16 operands only where its head dimension is a "
           "multiple of this: 16 (the bf16 kernels' step), 32 (AMX's tiles: "
           "the CPU pipeline with amx)">
  ];
  let dependentDialects = ["arith::ArithDialect", "linalg::LinalgDialect"];
}

def PrepareEntry : Pass<"masformer-prepare-entry", "::mlir::ModuleOp"> {
  let summary = "Make a model's entry function callable by the runtime";
  let description = [{
    The runtime (include/masformer/Runtime) calls a compiled model's entry
    through its C interface with the caller's input buffers, and frees every
    result buffer it gets back. This pass makes the entry keep that
    contract before bufferization:

    - every argument is marked `bufferization.writable = false`, so that
      the caller's buffers are never written, except those marked
      `masformer.in_place` (a decode entry's cache buffers), which are
      writable: `--masformer-check-in-place` checks after bufferization
      that they were written in place;
    - a result that is (through views) an argument, a constant, or a value
      already returned is copied into a fresh tensor, so that each result is
      a buffer of its own that the runtime may free;
    - the function gets `llvm.emit_c_interface`.

    ```mlir
    func.func @main(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
      return %x, %x : tensor<4xf32>, tensor<4xf32>
    }
    ```
    returns two `linalg.copy` results instead.
  }];
  let options = [
    Option<"entry", "entry", "std::string", /*default=*/"\"main\"",
           "The entry function's name">,
  ];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

#endif // MASFORMER_CODEGEN_COMMON_PASSES_TD
