//===- GPUKernels.h - Shared pieces of the GPU kernels ----------*- C++ -*-===//
//
// Shared by the GPU kernels (attention, matrix products): the gpu.module
// that holds them, and builders for the register fragments of mma.sync and
// the products on them. The layouts are
// the PTX ISA's: m16n8k16 for f16/bf16 (two elements per 32-bit register),
// m16n8k8 for tf32; f32 operands run as three tf32 products of a split into
// high and low parts ("3xTF32"), which keeps f32 accuracy.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_LIB_DIALECT_MASFORMER_TRANSFORMS_GPUKERNELS_H
#define MASFORMER_LIB_DIALECT_MASFORMER_TRANSFORMS_GPUKERNELS_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <array>

namespace mlir::masformer {

/// Threads of a warp on every NVIDIA GPU the kernels target.
constexpr int64_t kThreadsPerWarp = 32;
/// Warps of a block of the tensor-core kernels (attention and products) and
/// of the generic loops: 128 threads, which keep sm_80 and sm_90 busy with
/// few idle threads at the edges.
constexpr int64_t kBlockWarps = 4;
constexpr int64_t kBlockThreads = kBlockWarps * kThreadsPerWarp;

/// Dynamic shared memory one block may use on `chip` ("sm_XY", with the
/// opt-in a kernel launch makes through cuFuncSetAttribute): 227 KiB on
/// sm_90 and sm_100, 163 KiB on sm_80 and sm_87, 99 KiB on sm_86, sm_89 and
/// sm_120 (CUDA C Programming Guide, "Technical Specifications per Compute
/// Capability"). A chip not in that list gets the smallest, 99 KiB, so that
/// a kernel never exceeds what its chip allows.
inline int64_t maxDynamicSharedMemory(StringRef chip) {
  constexpr int64_t kKiB = 1024;
  unsigned sm = 0;
  if (chip.consume_front("sm_") && !chip.consumeInteger(10, sm)) {
    switch (sm) {
    case 80:
    case 87:
      return 163 * kKiB;
    case 90:
    case 100:
    case 101:
    case 103:
      return 227 * kKiB;
    default:
      break;
    }
  }
  return 99 * kKiB;
}

/// The `gpu.module @masformer_kernels` of `module`, created (and the module
/// marked a GPU container) on first use.
inline gpu::GPUModuleOp getOrCreateKernelModule(ModuleOp module) {
  constexpr StringLiteral kName = "masformer_kernels";
  if (auto m = module.lookupSymbol<gpu::GPUModuleOp>(kName))
    return m;
  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                  UnitAttr::get(module.getContext()));
  OpBuilder b(module.getBodyRegion());
  b.setInsertionPointToEnd(module.getBody());
  return gpu::GPUModuleOp::create(b, module.getLoc(), kName);
}

/// A kernel function `name` in `kernels`, launched with `threads` threads
/// per block (known_block_size, which also becomes nvvm.maxntid: ptxas
/// allocates registers for that many threads).
inline gpu::GPUFuncOp createKernel(gpu::GPUModuleOp kernels, StringRef name,
                                   TypeRange args, int32_t threads,
                                   Location loc) {
  OpBuilder b(kernels.getContext());
  b.setInsertionPointToEnd(kernels.getBody());
  auto func =
      gpu::GPUFuncOp::create(b, loc, name, b.getFunctionType(args, {}));
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  func.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({threads, 1, 1}));
  return func;
}

/// The block's dynamic shared memory, viewed at byte `offset` as a static
/// `shape` of `elemTy`.
inline Value sharedView(OpBuilder &b, Location loc, Value dynamicSmem,
                        int64_t offset, ArrayRef<int64_t> shape,
                        Type elemTy) {
  auto ty = MemRefType::get(shape, elemTy, MemRefLayoutAttrInterface(),
                            cast<MemRefType>(dynamicSmem.getType())
                                .getMemorySpace());
  Value off = arith::ConstantIndexOp::create(b, loc, offset);
  return memref::ViewOp::create(b, loc, ty, dynamicSmem, off, ValueRange{});
}

/// The block's dynamic shared memory as bytes.
inline Value dynamicSharedMemory(OpBuilder &b, Location loc) {
  auto wg = gpu::AddressSpaceAttr::get(b.getContext(),
                                       gpu::AddressSpace::Workgroup);
  return gpu::DynamicSharedMemoryOp::create(
      b, loc,
      MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                      MemRefLayoutAttrInterface(), wg));
}

/// A 16-byte `cp.async` (bypassing L1) of `perCopy` elements from
/// `src[srcIdx]` to `dst[dstIdx]`, zero-filled where `inside` is false
/// (`srcIdx` must still be a valid address there: nothing is read).
inline void copy16ZeroFill(OpBuilder &b, Location loc, Value dst,
                           ValueRange dstIdx, Value src, ValueRange srcIdx,
                           Value inside, int64_t perCopy) {
  auto c = [&](int64_t v) {
    return arith::ConstantIndexOp::create(b, loc, v).getResult();
  };
  Value n = arith::SelectOp::create(b, loc, inside, c(perCopy), c(0));
  nvgpu::DeviceAsyncCopyOp::create(
      b, loc, nvgpu::DeviceAsyncTokenType::get(b.getContext()), dst, dstIdx,
      src, srcIdx, b.getIndexAttr(perCopy), n, /*bypassL1=*/b.getUnitAttr());
}

/// A thread's place: its warp, its lane, and the lane's group (lane / 4)
/// and index in the group (lane % 4), which the fragments' layouts use.
struct LaneCoords {
  Value tid, warp, lane, g, t;
};

inline LaneCoords buildLaneCoords(OpBuilder &b, Location loc) {
  auto c = [&](int64_t v) {
    return arith::ConstantIndexOp::create(b, loc, v).getResult();
  };
  LaneCoords lc;
  lc.tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  lc.warp = arith::DivUIOp::create(b, loc, lc.tid, c(kThreadsPerWarp));
  lc.lane = arith::RemUIOp::create(b, loc, lc.tid, c(kThreadsPerWarp));
  lc.g = arith::DivUIOp::create(b, loc, lc.lane, c(4));
  lc.t = arith::RemUIOp::create(b, loc, lc.lane, c(4));
  return lc;
}

/// Fragments of one element type (f16, bf16 or f32) at the builder's point.
struct WarpMMA {
  OpBuilder &b;
  Location loc;
  Type elemTy;
  /// The thread's lane (for the ldmatrix addresses).
  Value lane = {};

  Value idx(int64_t v) {
    return arith::ConstantIndexOp::create(b, loc, v);
  }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value mulC(Value x, int64_t y) {
    return arith::MulIOp::create(b, loc, x, idx(y));
  }
  Value laneDiv(int64_t d) {
    return arith::DivUIOp::create(b, loc, lane, idx(d));
  }
  Value laneRem(int64_t d) {
    return arith::RemUIOp::create(b, loc, lane, idx(d));
  }

  /// The A fragment (16 x 16, vector<4x2>) of rows row0 + 0..15 and columns
  /// col0 + 0..15 of `smem[buf]` (stored [row][col]) by ldmatrix.x4: its
  /// matrices are (rows 0-7, cols 0-7), (rows 8-15, cols 0-7), (rows 0-7,
  /// cols 8-15), (rows 8-15, cols 8-15); lane l addresses row l % 16, column
  /// (l / 16) * 8.
  Value loadA(Value smem, Value buf, Value row0, Value col0) {
    Value r = add(row0, laneRem(16));
    Value c = add(col0, mulC(laneDiv(16), 8));
    return nvgpu::LdMatrixOp::create(
        b, loc, VectorType::get({4, 2}, elemTy), smem, ValueRange{buf, r, c},
        /*transpose=*/false, /*numTiles=*/4);
  }

  /// The B fragments of two n8 chunks, n0 + 0..15, over k0 + 0..15, as one
  /// vector<4x2>: rows 0-1 are chunk n0's (b0b1, b2b3), rows 2-3 chunk
  /// n0 + 8's. `storedNK`: smem[buf] is [n][k] (K in Q K^T, a transposed
  /// weight), read by ldmatrix with matrices (n 0-7, k 0-7), (n 0-7,
  /// k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15); else it is [k][n] (V, a
  /// weight), read by ldmatrix.trans with matrices (k 0-7, n 0-7), (k 8-15,
  /// n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15).
  Value loadBPair(Value smem, Value buf, Value n0, Value k0, bool storedNK) {
    Value l8 = laneRem(8), half = arith::RemUIOp::create(
                               b, loc, laneDiv(8), idx(2));
    Value quarter = laneDiv(16);
    Value r, c;
    if (storedNK) {
      r = add(add(n0, l8), mulC(quarter, 8));
      c = add(k0, mulC(half, 8));
    } else {
      r = add(add(k0, l8), mulC(half, 8));
      c = add(n0, mulC(quarter, 8));
    }
    return nvgpu::LdMatrixOp::create(
        b, loc, VectorType::get({4, 2}, elemTy), smem, ValueRange{buf, r, c},
        /*transpose=*/!storedNK, /*numTiles=*/4);
  }

  Value i32(int32_t v) {
    return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
  }

  /// Two 16-bit elements as the register mma.sync takes: a vector<2xf16>
  /// for f16, an i32 for bf16.
  Value packPair(Value pair) {
    if (elemTy.isF16())
      return pair;
    Value v = vector::BitCastOp::create(
        b, loc, VectorType::get({1}, b.getI32Type()), pair);
    return vector::ExtractOp::create(b, loc, v, ArrayRef<int64_t>{0});
  }
  /// Two f32 values, rounded to the element type and packed.
  Value packF32(Value x, Value y) {
    Value v = vector::FromElementsOp::create(
        b, loc, VectorType::get({2}, b.getF32Type()), ValueRange{x, y});
    v = arith::TruncFOp::create(b, loc, VectorType::get({2}, elemTy), v);
    return packPair(v);
  }
  /// Row i of the vector<4x2xT> / vector<2x2xT> of an ldmatrix, packed.
  Value ldmRow(Value frag, int64_t i) {
    return packPair(
        vector::ExtractOp::create(b, loc, frag, ArrayRef<int64_t>{i}));
  }

  /// The tf32 high part of an f32 (low 13 mantissa bits cleared) and the
  /// remainder, both as the i32 registers of a tf32 mma.sync.
  std::pair<Value, Value> splitTF32(Value x) {
    Value bits = arith::BitcastOp::create(b, loc, b.getI32Type(), x);
    Value hiBits = arith::AndIOp::create(b, loc, bits, i32(~0x1fff));
    Value hi = arith::BitcastOp::create(b, loc, b.getF32Type(), hiBits);
    Value lo = arith::SubFOp::create(b, loc, x, hi);
    return {hiBits, arith::BitcastOp::create(b, loc, b.getI32Type(), lo)};
  }

  /// acc += A B on tensor cores; acc is 4 f32 (the m16n8 accumulator).
  SmallVector<Value> mma(ValueRange a, ValueRange bm, ArrayRef<Value> acc) {
    MLIRContext *ctx = b.getContext();
    bool tf32 = elemTy.isF32();
    NVVM::MMATypes ty = tf32                 ? NVVM::MMATypes::tf32
                        : elemTy.isBF16() ? NVVM::MMATypes::bf16
                                              : NVVM::MMATypes::f16;
    Type f32 = b.getF32Type();
    auto resTy = LLVM::LLVMStructType::getLiteral(ctx, {f32, f32, f32, f32});
    auto op = NVVM::MmaOp::create(
        b, loc, resTy, a, bm, acc,
        /*shape=*/std::array<int64_t, 3>{16, 8, tf32 ? 8 : 16},
        /*b1Op=*/std::nullopt, /*intOverflow=*/std::nullopt,
        /*multiplicandPtxTypes=*/
        std::array<NVVM::MMATypes, 2>{ty, ty},
        /*multiplicandLayouts=*/
        std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                       NVVM::MMALayout::col});
    SmallVector<Value> r;
    for (int64_t i = 0; i < 4; ++i)
      r.push_back(LLVM::ExtractValueOp::create(b, loc, op.getRes(), i));
    return r;
  }
  /// acc += A B for tf32 operands split into high and low parts.
  SmallVector<Value> mma3(ArrayRef<std::pair<Value, Value>> a,
                          ArrayRef<std::pair<Value, Value>> bm,
                          SmallVector<Value> acc) {
    SmallVector<Value> aHi, aLo, bHi, bLo;
    for (auto [h, l] : a) {
      aHi.push_back(h);
      aLo.push_back(l);
    }
    for (auto [h, l] : bm) {
      bHi.push_back(h);
      bLo.push_back(l);
    }
    // Small terms first.
    acc = mma(aLo, bHi, acc);
    acc = mma(aHi, bLo, acc);
    return mma(aHi, bHi, acc);
  }
};

} // namespace mlir::masformer

#endif // MASFORMER_LIB_DIALECT_MASFORMER_TRANSFORMS_GPUKERNELS_H
