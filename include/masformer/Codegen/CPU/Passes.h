//===- Passes.h - CPU code generation ---------------------------*- C++ -*-===//
//
// Tiled attention and contractions, parallel loops, math approximations.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_CODEGEN_CPU_PASSES_H
#define MASFORMER_CODEGEN_CPU_PASSES_H

#include "masformer/Dialect/MASFormer/IR/MASFormerDialect.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
class RewritePatternSet;
namespace masformer {

#define GEN_PASS_DECL
#include "masformer/Codegen/CPU/Passes.h.inc"

/// The attribute that marks the bf16 tile products of
/// --masformer-tile-contractions (amx=true) for --masformer-lower-amx-tiles:
/// the tile's static size [m, n] (its operands' sizes may have become
/// dynamic by then).
inline constexpr llvm::StringLiteral kAMXTileAttrName = "masformer.amx_tile";

/// The attribute that marks the tile loop of a product of
/// --masformer-tile-contractions whose tiles never read the result's prior
/// contents (its init is a fill, which each tile applies itself), for
/// --masformer-fuse-product-epilogues.
inline constexpr llvm::StringLiteral kProductTilesAttrName =
    "masformer.product_tiles";

struct TileAttentionPatternOptions {
  /// Query rows and keys per tile.
  int64_t tileQ = 64, tileKV = 64;
  /// f32 lanes of the micro-kernels' vectors; 0: linalg contractions only.
  int64_t vectorWidth = 0;
  /// bf16 attention's full tiles on AVX512-BF16's vdpbf16ps (vector width
  /// 16): both products on pairs of bf16, P rounded to bf16.
  bool bf16Dot = false;
  /// bf16 attention's full tiles with both products as AMX tile products
  /// (vector width 16; sizes multiples of 32).
  bool amx = false;
  /// With `amx`: the tiles read Q, K and V through their head splits (a
  /// transpose of [batch, seq, heads, head_dim] that only the attention
  /// reads) and write the result through its head merge (the transpose
  /// back, when it is the result's only reader), which are then erased: the
  /// pattern then erases ops other than the one it matched, which
  /// walkAndApplyPatterns does not allow (--masformer-tile-attention sets
  /// it and tiles each op in turn).
  bool readThroughHeadLayouts = false;
  /// Testing only (--masformer-test-tile-counts): each query tile prints how
  /// many key tiles it visits, through the runner utils' printI64 and
  /// printNewline, which the module must declare.
  bool printTileCountsForTesting = false;
};

/// The span-aware tiling of masformer.attention that
/// --masformer-tile-attention applies.
void populateTileAttentionPatterns(RewritePatternSet &patterns,
                                   const TileAttentionPatternOptions &options);

#define GEN_PASS_REGISTRATION
#include "masformer/Codegen/CPU/Passes.h.inc"

} // namespace masformer
} // namespace mlir

#endif // MASFORMER_CODEGEN_CPU_PASSES_H
