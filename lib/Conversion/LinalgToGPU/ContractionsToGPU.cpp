//===- ContractionsToGPU.cpp - Matrix products on NVIDIA tensor -*- C++ -*-===//
//
// The model's matrix products (the contractions of matchMatmul) as a tiled
// tensor-core kernel: a gpu.func in the gpu.module of the attention kernels,
// launched by gpu.launch_func from the host code.
//
// C[b] = Cinit[b] + A[b] B[b] over 3-D views: batch dimensions collapse into
// one, and an operand without them (a weight) is broadcast. One
// thread block of 4 warps per (64 columns, 128 rows, batch); each warp owns
// 32 rows and 64 columns of accumulators. K runs in steps of 32: A and B
// tiles staged in shared memory by double-buffered cp.async, fragments by
// ldmatrix (.trans for B stored [k, n]), products by mma.sync (m16n8k16 for
// f16/bf16, 3xTF32 m16n8k8 for f32; WarpMMA.h).
//
//===----------------------------------------------------------------------===//

#include "masformer/Utils/IRBuilders.h"
#include "masformer/Utils/Contractions.h"
#include "masformer/Utils/GPUKernels.h"
#include "masformer/Conversion/Passes.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/IR/Matchers.h"

namespace mlir::masformer {
#define GEN_PASS_DEF_CONTRACTIONSTOGPU
#include "masformer/Conversion/Passes.h.inc"
} // namespace mlir::masformer

using namespace mlir;
using namespace mlir::masformer;

namespace {

constexpr int64_t kWarps = kBlockWarps;
/// Each warp owns kWarpTilesM x 16 rows and all 64 columns: each B fragment
/// feeds kWarpTilesM products.
constexpr int64_t kWarpTilesM = 2;
constexpr int64_t kTileM = kWarps * kWarpTilesM * 16;
constexpr int64_t kTileN = 64;
constexpr int64_t kTileK = 32;
constexpr int64_t kThreads = kBlockThreads;

struct GemmConfig {
  Type elemTy;   // A and B
  Type resultTy; // C
  bool transposedB;
  /// C's initial value is zero (the importer's fill): never read.
  bool zeroInit;

  bool isF32() const { return elemTy.isF32(); }
  int64_t pad() const { return isF32() ? 4 : 8; } // 16 bytes
  int64_t bytes() const { return elemTy.getIntOrFloatBitWidth() / 8; }
  /// Shared-memory tiles, [2][rows][cols + pad]: A [64][32]; B [32][64], or
  /// [64][32] when stored [n, k].
  SmallVector<int64_t> aShape() const { return {2, kTileM, kTileK + pad()}; }
  SmallVector<int64_t> bShape() const {
    return transposedB ? SmallVector<int64_t>{2, kTileN, kTileK + pad()}
                       : SmallVector<int64_t>{2, kTileK, kTileN + pad()};
  }
  int64_t aBytes() const { return 2 * kTileM * (kTileK + pad()) * bytes(); }
  int64_t bBytes() const {
    return 2 * (transposedB ? kTileN * (kTileK + pad())
                            : kTileK * (kTileN + pad())) *
           bytes();
  }
  std::string name() const {
    std::string s = "masformer_matmul_";
    llvm::raw_string_ostream os(s);
    os << elemTy << "_" << resultTy << (transposedB ? "_bt" : "")
       << (zeroInit ? "" : "_acc");
    return s;
  }
};

class GemmBuilder {
public:
  GemmBuilder(OpBuilder &b, Location loc, const GemmConfig &cfg)
      : b(b), loc(loc), ix{b, loc}, cfg(cfg), w{b, loc, cfg.elemTy} {}
  void build(gpu::GPUFuncOp func);

private:
  /// Copies of A's and B's k tile `kt` into buffer `buf`, as one group.
  void loadTile(Value kt, Value buf);
  /// acc += A_tile B_tile from buffer `buf`.
  void step(Value buf, SmallVector<SmallVector<Value>> &acc);
  /// An asynchronous copy of 16 bytes of `src` at (batch, row, col) into
  /// `dst` at (buf, r, c); zeros where `inside` is false.
  void copy(Value dst, Value buf, Value r, Value c, Value src, Value batch,
            Value row, Value col, Value inside);

  OpBuilder &b;
  Location loc;
  Idx ix;
  const GemmConfig &cfg;
  WarpMMA w;
  Value a, bm, cInit, out, aS, bS;
  Value tid, lane, g, t, warp, m0, n0, bA, bB, bi, mSize, nSize, kSize;
};

void GemmBuilder::copy(Value dst, Value buf, Value r, Value c, Value src,
                       Value batch, Value row, Value col, Value inside) {
  // Outside: a valid address, nothing read, zeros written.
  Value rowC = arith::SelectOp::create(b, loc, inside, row, ix.c(0));
  Value colC = arith::SelectOp::create(b, loc, inside, col, ix.c(0));
  copy16ZeroFill(b, loc, dst, ValueRange{buf, r, c}, src,
                 ValueRange{batch, rowC, colC}, inside, 16 / cfg.bytes());
}

void GemmBuilder::loadTile(Value kt, Value buf) {
  using P = arith::CmpIPredicate;
  int64_t per = 16 / cfg.bytes();
  Value k0 = ix.mul(kt, ix.c(kTileK));
  // A: 64 rows x 32 k.
  int64_t aChunks = kTileM * kTileK / per;
  for (int64_t i = 0; i < aChunks; i += kThreads) {
    Value c = ix.add(tid, ix.c(i));
    Value r = arith::DivUIOp::create(b, loc, c, ix.c(kTileK / per));
    Value col = ix.mul(arith::RemUIOp::create(b, loc, c, ix.c(kTileK / per)),
                       ix.c(per));
    Value row = ix.add(m0, r), k = ix.add(k0, col);
    Value inside = ix.andI(ix.cmp(P::slt, row, mSize), ix.cmp(P::slt, k, kSize));
    copy(aS, buf, r, col, a, bA, row, k, inside);
  }
  // B: 32 k x 64 n, or 64 n x 32 k.
  int64_t rowsB = cfg.transposedB ? kTileN : kTileK;
  int64_t colsB = cfg.transposedB ? kTileK : kTileN;
  for (int64_t i = 0; i < rowsB * colsB / per; i += kThreads) {
    Value c = ix.add(tid, ix.c(i));
    Value r = arith::DivUIOp::create(b, loc, c, ix.c(colsB / per));
    Value col = ix.mul(arith::RemUIOp::create(b, loc, c, ix.c(colsB / per)),
                       ix.c(per));
    Value row, cc, inside;
    if (cfg.transposedB) {
      row = ix.add(n0, r);
      cc = ix.add(k0, col);
      inside = ix.andI(ix.cmp(P::slt, row, nSize), ix.cmp(P::slt, cc, kSize));
    } else {
      row = ix.add(k0, r);
      cc = ix.add(n0, col);
      inside = ix.andI(ix.cmp(P::slt, row, kSize), ix.cmp(P::slt, cc, nSize));
    }
    copy(bS, buf, r, col, bm, bB, row, cc, inside);
  }
  NVVM::CpAsyncCommitGroupOp::create(b, loc);
}

void GemmBuilder::step(Value buf, SmallVector<SmallVector<Value>> &acc) {
  // acc[mi * 8 + nc]: rows warp * 32 + mi * 16, columns nc * 8.
  int64_t nChunks = kTileN / 8;
  Value rowA = ix.mul(warp, ix.c(16 * kWarpTilesM));
  if (!cfg.isF32()) {
    for (int64_t kc = 0; kc < kTileK / 16; ++kc) {
      SmallVector<SmallVector<Value>> aFrag;
      for (int64_t mi = 0; mi < kWarpTilesM; ++mi) {
        Value af = w.loadA(aS, buf, ix.add(rowA, ix.c(mi * 16)),
                           ix.c(kc * 16));
        aFrag.push_back({w.ldmRow(af, 0), w.ldmRow(af, 1), w.ldmRow(af, 2),
                         w.ldmRow(af, 3)});
      }
      for (int64_t np = 0; np < kTileN / 16; ++np) {
        Value frag = w.loadBPair(bS, buf, ix.c(np * 16), ix.c(kc * 16),
                                 /*storedNK=*/cfg.transposedB);
        for (int64_t h = 0; h < 2; ++h) {
          Value bFrag[] = {w.ldmRow(frag, 2 * h), w.ldmRow(frag, 2 * h + 1)};
          for (int64_t mi = 0; mi < kWarpTilesM; ++mi) {
            int64_t i = mi * nChunks + 2 * np + h;
            acc[i] = w.mma(aFrag[mi], bFrag, acc[i]);
          }
        }
      }
    }
    return;
  }
  for (int64_t kc = 0; kc < kTileK / 8; ++kc) {
    // a_j: row g (+8 for j = 1, 3), k t (+4 for j >= 2).
    SmallVector<SmallVector<std::pair<Value, Value>>> aFrag(kWarpTilesM);
    for (int64_t mi = 0; mi < kWarpTilesM; ++mi)
      for (int64_t j = 0; j < 4; ++j) {
        Value r = ix.add(ix.add(rowA, ix.c(mi * 16)),
                         ix.add(g, ix.c(j % 2 ? 8 : 0)));
        Value c = ix.add(ix.c(kc * 8 + (j >= 2 ? 4 : 0)), t);
        aFrag[mi].push_back(w.splitTF32(
            memref::LoadOp::create(b, loc, aS, ValueRange{buf, r, c})));
      }
    for (int64_t nc = 0; nc < nChunks; ++nc) {
      // b_j: k t (+4 for j = 1), n g.
      std::pair<Value, Value> bFrag[2];
      for (int64_t j = 0; j < 2; ++j) {
        Value k = ix.add(ix.c(kc * 8 + 4 * j), t);
        Value n = ix.add(ix.c(nc * 8), g);
        Value x = cfg.transposedB
                      ? memref::LoadOp::create(b, loc, bS, ValueRange{buf, n, k})
                      : memref::LoadOp::create(b, loc, bS, ValueRange{buf, k, n});
        bFrag[j] = w.splitTF32(x);
      }
      for (int64_t mi = 0; mi < kWarpTilesM; ++mi) {
        int64_t i = mi * nChunks + nc;
        acc[i] = w.mma3(aFrag[mi], bFrag, acc[i]);
      }
    }
  }
}

void GemmBuilder::build(gpu::GPUFuncOp func) {
  using P = arith::CmpIPredicate;
  Block &entry = func.getBody().front();
  b.setInsertionPointToStart(&entry);
  a = entry.getArgument(0);
  bm = entry.getArgument(1);
  cInit = entry.getArgument(2);
  out = entry.getArgument(3);

  Value dyn = dynamicSharedMemory(b, loc);
  aS = sharedView(b, loc, dyn, 0, cfg.aShape(), cfg.elemTy);
  bS = sharedView(b, loc, dyn, cfg.aBytes(), cfg.bShape(), cfg.elemTy);
  LaneCoords lc = buildLaneCoords(b, loc);
  tid = lc.tid;
  warp = lc.warp;
  lane = w.lane = lc.lane;
  g = lc.g;
  t = lc.t;
  n0 = ix.mul(gpu::BlockIdOp::create(b, loc, gpu::Dimension::x),
              ix.c(kTileN));
  m0 = ix.mul(gpu::BlockIdOp::create(b, loc, gpu::Dimension::y),
              ix.c(kTileM));
  bi = gpu::BlockIdOp::create(b, loc, gpu::Dimension::z);
  mSize = memref::DimOp::create(b, loc, out, 1);
  nSize = memref::DimOp::create(b, loc, out, 2);
  kSize = memref::DimOp::create(b, loc, a, 2);
  // Operands with one batch are broadcast.
  auto batchOf = [&](Value m) {
    Value one = ix.cmp(P::eq, memref::DimOp::create(b, loc, m, 0), ix.c(1));
    return arith::SelectOp::create(b, loc, one, ix.c(0), bi).getResult();
  };
  bA = batchOf(a);
  bB = batchOf(bm);
  // Empty products launch one block that does nothing.
  Value valid = ix.andI(
      ix.andI(ix.cmp(P::slt, m0, mSize), ix.cmp(P::slt, n0, nSize)),
      ix.cmp(P::slt, bi, memref::DimOp::create(b, loc, out, 0)));
  auto guard = scf::IfOp::create(b, loc, valid, /*withElseRegion=*/false);
  b.setInsertionPointToStart(guard.thenBlock());

  Value numK = ix.cdiv(kSize, ix.c(kTileK));
  scf::IfOp::create(b, loc, ix.cmp(P::sgt, numK, ix.c(0)),
                    [&](OpBuilder &, Location) {
                      loadTile(ix.c(0), ix.c(0));
                      scf::YieldOp::create(b, loc);
                    });
  int64_t nChunks = kTileN / 8;
  int64_t nAcc = kWarpTilesM * nChunks;
  SmallVector<Value> init(nAcc * 4, f32Const(b, loc, 0.0f));
  auto loop = scf::ForOp::create(b, loc, ix.c(0), numK, ix.c(1), init);
  {
    OpBuilder::InsertionGuard ig(b);
    b.setInsertionPointToStart(loop.getBody());
    Value kt = loop.getInductionVar();
    Value buf = arith::RemUIOp::create(b, loc, kt, ix.c(2));
    // This tile has landed, and every warp is done with the other buffer.
    NVVM::CpAsyncWaitGroupOp::create(b, loc, 0);
    gpu::BarrierOp::create(b, loc);
    Value next = ix.add(kt, ix.c(1));
    scf::IfOp::create(b, loc, ix.cmp(P::slt, next, numK),
                      [&](OpBuilder &, Location) {
                        loadTile(next, ix.sub(ix.c(1), buf));
                        scf::YieldOp::create(b, loc);
                      });
    SmallVector<SmallVector<Value>> acc(nAcc);
    for (int64_t i = 0; i < nAcc; ++i)
      for (int64_t e = 0; e < 4; ++e)
        acc[i].push_back(loop.getRegionIterArgs()[i * 4 + e]);
    step(buf, acc);
    SmallVector<Value> yield;
    for (auto &c : acc)
      llvm::append_range(yield, c);
    scf::YieldOp::create(b, loc, yield);
  }

  // C = Cinit + acc, element by element within the bounds.
  Value rowBase = ix.add(m0, ix.mul(warp, ix.c(16 * kWarpTilesM)));
  for (int64_t i = 0; i < nAcc; ++i)
    for (int64_t e = 0; e < 4; ++e) {
      int64_t mi = i / nChunks, nc = i % nChunks;
      Value row =
          ix.add(rowBase, ix.add(g, ix.c(mi * 16 + (e >= 2 ? 8 : 0))));
      Value col = ix.add(ix.add(n0, ix.c(nc * 8 + (e % 2))),
                         ix.mul(t, ix.c(2)));
      Value inside =
          ix.andI(ix.cmp(P::slt, row, mSize), ix.cmp(P::slt, col, nSize));
      Value accV = loop.getResult(i * 4 + e);
      scf::IfOp::create(b, loc, inside, [&](OpBuilder &, Location) {
        Value sum = accV;
        if (!cfg.zeroInit) {
          Value c0 = memref::LoadOp::create(b, loc, cInit,
                                            ValueRange{bi, row, col});
          sum = arith::AddFOp::create(b, loc, toF32(b, loc, c0), accV);
        }
        if (!cfg.resultTy.isF32())
          sum = arith::TruncFOp::create(b, loc, cfg.resultTy, sum);
        memref::StoreOp::create(b, loc, sum, out, ValueRange{bi, row, col});
        scf::YieldOp::create(b, loc);
      });
    }
  b.setInsertionPointAfter(guard);
  gpu::ReturnOp::create(b, loc);
}

gpu::GPUFuncOp getKernel(gpu::GPUModuleOp kernels, const GemmConfig &cfg,
                         Location loc) {
  std::string name = cfg.name();
  if (auto f = kernels.lookupSymbol<gpu::GPUFuncOp>(name))
    return f;
  int64_t dyn = ShapedType::kDynamic;
  auto in = MemRefType::get({dyn, dyn, dyn}, cfg.elemTy);
  auto res = MemRefType::get({dyn, dyn, dyn}, cfg.resultTy);
  auto func = createKernel(kernels, name, {in, in, res, res}, kThreads, loc);
  OpBuilder b(kernels.getContext());
  GemmBuilder(b, loc, cfg).build(func);
  return func;
}

/// `x` as a 3-D tensor [batch, rows, cols]: its leading dimensions
/// collapsed, or a unit batch added to a matrix. (One reshape each way:
/// LLVM 22's expand-strided-metadata crashes on some chains of them.)
Value as3D(OpBuilder &b, Location loc, Value x) {
  auto ty = cast<RankedTensorType>(x.getType());
  int64_t r = ty.getRank();
  if (r == 3)
    return x;
  if (r == 2) {
    SmallVector<int64_t> shape = {1, ty.getDimSize(0), ty.getDimSize(1)};
    SmallVector<OpFoldResult> sizes = {b.getIndexAttr(1),
                                       tensor::getMixedSize(b, loc, x, 0),
                                       tensor::getMixedSize(b, loc, x, 1)};
    return tensor::ExpandShapeOp::create(
        b, loc, RankedTensorType::get(shape, ty.getElementType()), x,
        SmallVector<ReassociationIndices>{{0, 1}, {2}}, sizes);
  }
  ReassociationIndices lead;
  for (int64_t i = 0; i < r - 2; ++i)
    lead.push_back(i);
  return tensor::CollapseShapeOp::create(
      b, loc, x, SmallVector<ReassociationIndices>{lead, {r - 2}, {r - 1}});
}

struct ContractionsToGPUPass final
    : masformer::impl::ContractionsToGPUBase<ContractionsToGPUPass> {
  using ContractionsToGPUBase::ContractionsToGPUBase;

  /// Why the product cannot run as the kernel, or success.
  LogicalResult check(linalg::GenericOp op, const MatmulDims &d,
                      std::string &why) {
    SmallVector<AffineMap> maps = op.getIndexingMapsArray();
    Type ta = cast<ShapedType>(op.getDpsInputs()[0].getType()).getElementType();
    Type tb = cast<ShapedType>(op.getDpsInputs()[1].getType()).getElementType();
    if (ta != tb) {
      why = "A and B have different element types";
      return failure();
    }
    // 16-byte copies of rows: K (and N for B stored [k, n]) a multiple of
    // 16 bytes of elements.
    int64_t per = 16 / (ta.getIntOrFloatBitWidth() / 8);
    int64_t kLen = op.getStaticLoopRanges()[d.k];
    int64_t nLen = op.getStaticLoopRanges()[d.n];
    if (kLen % per != 0 ||
        (!d.transposedB && (ShapedType::isDynamic(nLen) || nLen % per))) {
      why = "rows of A or B are not a multiple of 16 bytes";
      return failure();
    }
    // Each operand has all of C's batch dimensions, in C's order, or none.
    auto batchOf = [](AffineMap m) {
      SmallVector<unsigned> dims;
      for (unsigned r = 0; r + 2 < m.getNumResults(); ++r)
        dims.push_back(cast<AffineDimExpr>(m.getResult(r)).getPosition());
      return dims;
    };
    SmallVector<unsigned> cb = batchOf(maps[2]);
    for (int i = 0; i < 2; ++i) {
      SmallVector<unsigned> ob = batchOf(maps[i]);
      if (!ob.empty() && ob != cb) {
        why = "an operand broadcasts only some batch dimensions";
        return failure();
      }
    }
    return success();
  }

  LogicalResult convert(linalg::GenericOp op, const MatmulDims &d,
                        gpu::GPUModuleOp &kernels) {
    Value a = op.getDpsInputs()[0], bmat = op.getDpsInputs()[1];
    Value c = op.getDpsInits()[0];
    auto cTy = cast<RankedTensorType>(c.getType());
    // C's initial value: a fill with zero (MatMul) is not read at all.
    auto fill = c.getDefiningOp<linalg::FillOp>();
    bool zeroInit = fill && matchPattern(fill.getInputs()[0], m_AnyZeroFloat());
    GemmConfig cfg{cast<ShapedType>(a.getType()).getElementType(),
                   cTy.getElementType(), d.transposedB, zeroInit};
    if (!kernels)
      kernels = getOrCreateKernelModule(op->getParentOfType<ModuleOp>());
    gpu::GPUFuncOp kernel = getKernel(kernels, cfg, op.getLoc());

    OpBuilder b(op);
    Location loc = op.getLoc();
    Idx ix{b, loc};
    // With a zero init, C's shape comes from the fill's destination (a
    // tensor.empty), so that the fill goes away with the product.
    Value cSrc = zeroInit ? fill.getOutputs()[0] : c;
    Value a3 = as3D(b, loc, a);
    Value b3 = as3D(b, loc, bmat);
    Value c3 = as3D(b, loc, cSrc);
    auto c3Ty = cast<RankedTensorType>(c3.getType());
    int64_t dyn = ShapedType::kDynamic;
    auto asBuffer = [&](Value tensor, Type elem) {
      auto ty = cast<RankedTensorType>(tensor.getType());
      Value m = bufferization::ToBufferOp::create(
          b, loc, MemRefType::get(ty.getShape(), elem), tensor,
          /*readOnly=*/true);
      return memref::CastOp::create(
                 b, loc, MemRefType::get({dyn, dyn, dyn}, elem), m)
          .getResult();
    };
    Value am = asBuffer(a3, cfg.elemTy);
    Value bmm = asBuffer(b3, cfg.elemTy);
    Value cm = zeroInit ? Value() : asBuffer(c3, cfg.resultTy);
    SmallVector<Value> dynSizes;
    for (int64_t i = 0; i < 3; ++i)
      if (c3Ty.isDynamicDim(i))
        dynSizes.push_back(tensor::DimOp::create(b, loc, c3, i));
    // Synchronous forms: gpu-async-region (in the pipelines) puts a
    // function's allocations, copies and launches on one stream.
    Value outAlloc =
        gpu::AllocOp::create(b, loc,
                             MemRefType::get(c3Ty.getShape(), cfg.resultTy),
                             Type(), ValueRange{}, dynSizes, ValueRange{})
            .getMemref();
    Value outM = memref::CastOp::create(
        b, loc, MemRefType::get({dyn, dyn, dyn}, cfg.resultTy), outAlloc);
    Value one = ix.c(1);
    Value batch = memref::DimOp::create(b, loc, outM, 0);
    Value rows = memref::DimOp::create(b, loc, outM, 1);
    Value cols = memref::DimOp::create(b, loc, outM, 2);
    Value smem = arith::ConstantOp::create(
        b, loc, b.getI32IntegerAttr(cfg.aBytes() + cfg.bBytes()));
    gpu::LaunchFuncOp::create(
        b, loc, kernel,
        gpu::KernelDim3{ix.max(ix.cdiv(cols, ix.c(kTileN)), one),
                        ix.max(ix.cdiv(rows, ix.c(kTileM)), one),
                        ix.max(batch, one)},
        gpu::KernelDim3{ix.c(kThreads), one, one}, smem,
        ValueRange{am, bmm, zeroInit ? outM : cm, outM});
    Value result = bufferization::ToTensorOp::create(
        b, loc, c3Ty, outAlloc, /*restrict=*/true,
        /*writable=*/true);
    // Back to C's shape: the inverse of as3D.
    int64_t r = cTy.getRank();
    if (r == 2) {
      result = tensor::CollapseShapeOp::create(
          b, loc, cTy, result, SmallVector<ReassociationIndices>{{0, 1}, {2}});
    } else if (r > 3) {
      ReassociationIndices lead;
      for (int64_t i = 0; i < r - 2; ++i)
        lead.push_back(i);
      result = tensor::ExpandShapeOp::create(
          b, loc, cTy, result,
          SmallVector<ReassociationIndices>{lead, {r - 2}, {r - 1}},
          tensor::getMixedSizes(b, loc, cSrc));
    }
    op.getResult(0).replaceAllUsesWith(result);
    op.erase();
    if (fill && fill->use_empty())
      fill.erase();
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<std::pair<linalg::GenericOp, MatmulDims>> ops;
    module.walk([&](linalg::GenericOp op) {
      if (op->getParentOfType<gpu::GPUModuleOp>())
        return;
      FailureOr<MatmulDims> d = matchMatmul(op, /*f32ResultOnly=*/false);
      if (failed(d))
        return;
      std::string why;
      if (failed(check(op, *d, why))) {
        if (reportSkipped)
          op.emitRemark() << "matrix product left to the generic GPU "
                             "mapping: "
                          << why;
        return;
      }
      ops.push_back({op, *d});
    });
    gpu::GPUModuleOp kernels;
    for (auto &[op, d] : ops)
      if (failed(convert(op, d, kernels)))
        return signalPassFailure();
  }
};

} // namespace
