//===- AttentionToGPU.cpp - Span-aware attention kernels for NV -*- C++ -*-===//
//
// masformer.attention as a flash-attention kernel on NVIDIA tensor cores: a
// gpu.func in a gpu.module, launched by gpu.launch_func from the host code.
//
// One thread block of 4 warps per (query tile of 64 rows, head, batch); each
// warp owns 16 query rows. The block loops over exactly the key tiles of 64
// keys that meet the span and the causal triangle (the same bounds as the
// CPU tiling); key and value tiles are staged in shared memory by
// asynchronous copies (cp.async), double-buffered so that the next tile
// loads while this one is computed. Scores, the online softmax and the
// output accumulator stay in registers, in the layout of the mma.sync
// accumulators:
//
//  - f16 / bf16: mma.sync m16n8k16 with f32 accumulation. Q's fragments are
//    loaded once from global memory; K's come from shared memory by ldmatrix,
//    V's by ldmatrix.trans; P goes from the accumulator layout of S straight
//    to the A operand of P V (the layouts coincide per 16 keys).
//  - f32: mma.sync m16n8k8 on tf32, three products per step (hi*hi + hi*lo +
//    lo*hi of a split into tf32 high and low parts), which keeps f32
//    accuracy. Fragments are read from shared memory word by word; the keys
//    of each 8-key step are permuted (k index t is key 2t, t+4 is 2t+1) so
//    that P's accumulator layout is again the A operand of P V.
//
// Only tiles crossing the span's or the triangle's boundary evaluate the
// position mask; the others run the unmasked copy of the loop body.
//
//===----------------------------------------------------------------------===//

#include "masformer/Conversion/Passes.h"
#include "masformer/Dialect/MASFormer/IR/MASFormerOps.h"
#include "masformer/Dialect/MASFormer/Utils/HeadSpans.h"
#include "masformer/Dialect/MASFormer/Utils/RowOffsets.h"
#include "masformer/Dialect/MASFormer/Utils/SpanUtils.h"
#include "masformer/Utils/GPUKernels.h"
#include "masformer/Utils/IRBuilders.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/MathExtras.h"

#include <array>
#include <cmath>
#include <limits>

namespace mlir::masformer {
#define GEN_PASS_DEF_ATTENTIONTOGPU
#include "masformer/Conversion/Passes.h.inc"
} // namespace mlir::masformer

using namespace mlir;
using namespace mlir::masformer;

namespace {

/// Warps per block, query rows per warp (the M of mma.sync), keys per tile.
constexpr int64_t kWarps = kBlockWarps;
constexpr int64_t kWarpRows = 16;
constexpr int64_t kBlockRows = kWarps * kWarpRows;
constexpr int64_t kTileKV = 64;
constexpr int64_t kThreads = kBlockThreads;

/// What a kernel is specialized on; kernels are shared between attention ops
/// with the same configuration.
struct KernelConfig {
  Type elemTy;
  int64_t headDim;
  SpanAttr span;
  bool causal;
  float scale;
  /// The additive mask's element type; null without a mask.
  Type maskTy;
  /// The scores' softcap, if any.
  std::optional<float> softcap;

  /// Whether logits stay in natural units (exp2 of their difference scaled
  /// by log2(e)) rather than carrying log2(e) in the scale: an additive
  /// mask is added and a softcap applies to the natural scores.
  bool natural() const { return maskTy || softcap; }

  bool isF32() const { return elemTy.isF32(); }
  /// Elements of a row of a shared-memory tile: the head dimension padded by
  /// 16 bytes, so that the 8 rows read by one ldmatrix phase (or the 8 rows
  /// of a word-wise fragment read) fall in different banks.
  int64_t smemRow() const { return headDim + (isF32() ? 4 : 8); }
  int64_t tileBytes() const {
    return kTileKV * smemRow() * (elemTy.getIntOrFloatBitWidth() / 8);
  }
  /// Two buffers each of K and V.
  int64_t smemBytes() const { return 4 * tileBytes(); }

  std::string name() const {
    std::string s = "masformer_attention_";
    llvm::raw_string_ostream os(s);
    os << elemTy << "_d" << headDim << "_";
    switch (span.getKind()) {
    case SpanKind::Full:
      os << "full";
      break;
    case SpanKind::Block:
      os << "block" << span.getSize();
      break;
    case SpanKind::Window:
      os << "window" << span.getSize();
      break;
    }
    if (span.getSink() > 0)
      os << "_sink" << span.getSink();
    if (causal)
      os << "_causal";
    if (maskTy)
      os << "_mask" << maskTy;
    // The scale is part of the code; name non-default ones by their bits.
    if (scale != AttentionOp::getDefaultScale(headDim))
      os << "_s" << llvm::format_hex_no_prefix(llvm::bit_cast<uint32_t>(scale),
                                               8);
    if (softcap)
      os << "_cap"
         << llvm::format_hex_no_prefix(llvm::bit_cast<uint32_t>(*softcap), 8);
    return s;
  }
};

/// Builds the kernel body. All offsets are `index`; the NVVM lowering makes
/// them 64-bit.
class KernelBuilder {
public:
  KernelBuilder(OpBuilder &b, Location loc, const KernelConfig &cfg)
      : b(b), loc(loc), ix{b, loc}, cfg(cfg), w{b, loc, cfg.elemTy} {}

  void build(gpu::GPUFuncOp func);

private:
  // Scalars.
  Value f32(float v) { return f32Const(b, loc, v); }
  Value i32(int32_t v) {
    return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
  }
  Value fmax(Value x, Value y) {
    return arith::MaxNumFOp::create(b, loc, x, y);
  }
  Value fmul(Value x, Value y) { return arith::MulFOp::create(b, loc, x, y); }
  Value fadd(Value x, Value y) { return arith::AddFOp::create(b, loc, x, y); }
  Value fsub(Value x, Value y) { return arith::SubFOp::create(b, loc, x, y); }
  Value exp2(Value x) { return math::Exp2Op::create(b, loc, x); }
  Value select(Value c, Value x, Value y) {
    return arith::SelectOp::create(b, loc, c, x, y);
  }

  /// The f32 `v` combined across the 4 lanes of a quad (the lanes holding
  /// the same accumulator rows).
  Value quadReduce(Value v, bool isMax) {
    for (int32_t mask : {1, 2}) {
      Value other = gpu::ShuffleOp::create(b, loc, v, i32(mask), i32(32),
                                           gpu::ShuffleMode::XOR)
                        .getShuffleResult();
      v = isMax ? fmax(v, other) : fadd(v, other);
    }
    return v;
  }

  // Fragments and tensor-core products (GPUKernels.h).
  Value packPair(Value pair) { return w.packPair(pair); }
  Value packF32(Value x, Value y) { return w.packF32(x, y); }
  Value ldmRow(Value frag, int64_t i) { return w.ldmRow(frag, i); }
  std::pair<Value, Value> splitTF32(Value x) { return w.splitTF32(x); }
  SmallVector<Value> mma(ValueRange a, ValueRange bm, ArrayRef<Value> acc) {
    return w.mma(a, bm, acc);
  }
  SmallVector<Value> mma3(ArrayRef<std::pair<Value, Value>> a,
                          ArrayRef<std::pair<Value, Value>> bm,
                          SmallVector<Value> acc) {
    return w.mma3(a, bm, std::move(acc));
  }

  /// Issues the asynchronous copies of key tile `kt` of K and V into buffer
  /// `buf`, and commits them as one group. Rows past the sequence are zero.
  void loadTile(Value kt, Value buf);

  /// Per n8 chunk of keys, an mma.sync accumulator of 4 f32.
  using Accumulators = SmallVector<SmallVector<Value>>;

  // The kernel's prologue, in order.
  /// Binds the kernel's arguments and its shared-memory tiles.
  void bindArguments(gpu::GPUFuncOp func);
  /// Sets the thread's, lane's and block's coordinates and the sizes they
  /// are checked against; returns whether the block has work (empty inputs
  /// launch one block that does nothing).
  Value buildCoordinates();
  /// The range [ktLo, ktHi) of key tiles that meet the span and the causal
  /// triangle for this block's queries: the CPU tiling's bounds (with
  /// sinks, steps that tileOf maps to tiles).
  void buildKeyTileRange();
  /// The key tile of loop step `step`.
  Value tileOf(Value step);
  /// Q's fragments, once, from global memory.
  void loadQueryFragments();

  // The loop over key tiles.
  /// The double-buffered loop over [ktLo, ktHi), the first tile already in
  /// flight before it; returns the final state (m, l, accumulators).
  ValueRange buildKeyLoop();
  /// The body of `loop`: waits for its tile, prefetches the next one, and
  /// runs the masked or the unmasked step.
  void buildKeyLoopBody(scf::ForOp loop);
  /// Whether every (query, key) pair of key tile `kt` passes the position
  /// mask. Block-uniform.
  Value isInteriorTile(Value kt);
  /// One key tile: scores, online softmax, P V. `masked` evaluates the
  /// position mask. Returns the new state (m, l, accumulators).
  SmallVector<Value> step(Value kt, Value buf, ValueRange state, bool masked);

  // The steps of one key tile.
  /// S = Q K^T for the key tile in buffer `buf`.
  Accumulators computeScores(Value buf);
  /// Turns S into logits in place: scaled, the additive mask added, and
  /// with `masked`, -inf outside the span and past the keys. `k0` is the
  /// tile's first key.
  void toLogits(Accumulators &s, Value k0, bool masked);
  /// The additive mask at element `e` of chunk `nc`, clamped into bounds.
  Value loadMask(int64_t nc, int64_t e, Value k0);
  /// Whether element `e` of chunk `nc` is a real key inside the span.
  Value isAllowed(int64_t nc, int64_t e, Value k0);
  /// The online-softmax update: turns the logits `s` into P, writes the new
  /// row max m and partial sum l into `next`, and returns the factor alpha
  /// that rescales each row's old accumulators.
  std::array<Value, 2> updateSoftmax(Accumulators &s, ValueRange state,
                                     MutableArrayRef<Value> next);
  /// O = alpha O + P V, for P in `p` and V's tile in buffer `buf`.
  Accumulators accumulatePV(const Accumulators &p, Value buf, ValueRange state,
                            ArrayRef<Value> alpha);

  /// O = acc / l, stored for the rows inside the sequence; rows with no
  /// allowed key are zero.
  void storeOutput(ValueRange fin);

  OpBuilder &b;
  Location loc;
  Idx ix;
  const KernelConfig &cfg;
  WarpMMA w;

  // Kernel values.
  Value q, k, v, o, mask;
  /// Per dimension of the (rank-4) mask: 1 if it broadcasts, else 0.
  Value maskBcast[4];
  Value kS, vS;
  Value bi, hi, kvh, tid, lane, g, t, warp;
  Value sq, skv, offset, rowBase;
  /// The block's first query row, and the positions of its first and last
  /// queries among the keys.
  Value q0, qPos0, qPosLast;
  /// The key tiles the block visits.
  /// The key loop's steps [ktLo, ktHi): key tiles themselves without sinks;
  /// with sinks, the first `sinkTiles` steps are the sink tiles and the rest
  /// the span's run from `spanFirst` (tileOf).
  Value ktLo, ktHi;
  Value sinkTiles, spanFirst;
  SmallVector<SmallVector<Value>> qFrag;              // f16/bf16
  SmallVector<SmallVector<Value>> qFrag32; // f32, split per use
  Value scaleLog2;
};

void KernelBuilder::loadTile(Value kt, Value buf) {
  int64_t d = cfg.headDim;
  int64_t perCopy = cfg.isF32() ? 4 : 8; // 16 bytes
  int64_t chunksPerRow = d / perCopy;
  int64_t total = kTileKV * chunksPerRow;
  Value k0 = ix.mul(kt, ix.c(kTileKV));
  for (int64_t i = 0; i < total; i += kThreads) {
    Value c = ix.add(tid, ix.c(i));
    Value row = arith::DivUIOp::create(b, loc, c, ix.c(chunksPerRow));
    Value col = ix.mul(arith::RemUIOp::create(b, loc, c, ix.c(chunksPerRow)),
                       ix.c(perCopy));
    Value key = ix.add(k0, row);
    Value inside = ix.cmp(arith::CmpIPredicate::slt, key, skv);
    // Past the end: a valid address, nothing read, zeros written.
    Value keyC = ix.min(key, ix.sub(skv, ix.c(1)));
    for (auto [src, dst] : {std::pair{k, kS}, std::pair{v, vS}})
      copy16ZeroFill(b, loc, dst, ValueRange{buf, row, col}, src,
                     ValueRange{bi, kvh, keyC, col}, inside, perCopy);
  }
  NVVM::CpAsyncCommitGroupOp::create(b, loc);
}

KernelBuilder::Accumulators KernelBuilder::computeScores(Value buf) {
  int64_t d = cfg.headDim;
  int64_t nChunks = kTileKV / 8; // n8 chunks of keys
  Accumulators s(nChunks, SmallVector<Value>(4, f32(0.0f)));
  if (!cfg.isF32()) {
    for (int64_t kc = 0; kc < d / 16; ++kc) {
      for (int64_t np = 0; np < nChunks / 2; ++np) {
        // Keys np*16 + 0..15 over head dims kc*16 + 0..15; K is [key][d].
        Value frag = w.loadBPair(kS, buf, ix.c(np * 16), ix.c(kc * 16),
                                 /*storedNK=*/true);
        for (int64_t h = 0; h < 2; ++h) {
          Value bFrag[] = {ldmRow(frag, 2 * h), ldmRow(frag, 2 * h + 1)};
          s[2 * np + h] = mma(qFrag[kc], bFrag, s[2 * np + h]);
        }
      }
    }
    return s;
  }
  for (int64_t kc = 0; kc < d / 8; ++kc) {
    // Split here rather than held split: Q's fragments alone would take
    // 128 registers at head_dim 128.
    SmallVector<std::pair<Value, Value>> aFrag;
    for (Value x : qFrag32[kc])
      aFrag.push_back(splitTF32(x));
    for (int64_t nc = 0; nc < nChunks; ++nc) {
      // b0 = K[key g][d t], b1 = K[key g][d t + 4].
      Value row = ix.add(ix.c(nc * 8), g);
      std::pair<Value, Value> bFrag[2];
      for (int64_t r = 0; r < 2; ++r) {
        Value col = ix.add(ix.c(kc * 8 + 4 * r), t);
        Value x = memref::LoadOp::create(b, loc, kS, ValueRange{buf, row, col});
        bFrag[r] = splitTF32(x);
      }
      s[nc] = mma3(aFrag, bFrag, s[nc]);
    }
  }
  return s;
}

Value KernelBuilder::loadMask(int64_t nc, int64_t e, Value k0) {
  Value row = ix.min(ix.add(rowBase, ix.add(g, ix.c(8 * (e / 2)))),
                     ix.sub(sq, ix.c(1)));
  Value key =
      ix.min(ix.add(k0, ix.add(ix.c(nc * 8 + (e % 2)), ix.mul(t, ix.c(2)))),
             ix.sub(skv, ix.c(1)));
  Value pos[4] = {bi, hi, row, key};
  SmallVector<Value> idx;
  for (int64_t i = 0; i < 4; ++i)
    idx.push_back(select(maskBcast[i], ix.c(0), pos[i]));
  return memref::LoadOp::create(b, loc, mask, idx);
}

Value KernelBuilder::isAllowed(int64_t nc, int64_t e, Value k0) {
  Value row = ix.add(rowBase, ix.add(g, ix.c(8 * (e / 2))));
  Value qPos = ix.add(row, offset);
  Value key = ix.add(k0, ix.add(ix.c(nc * 8 + (e % 2)), ix.mul(t, ix.c(2))));
  Value ok = ix.cmp(arith::CmpIPredicate::slt, key, skv);
  if (Value span = buildSpanAllowed(b, loc, cfg.span, cfg.causal, qPos, key))
    ok = ix.andI(ok, span);
  return ok;
}

void KernelBuilder::toLogits(Accumulators &s, Value k0, bool masked) {
  float negInf = -std::numeric_limits<float>::infinity();
  // In the log2 domain without a mask or softcap (scale * log2(e) folded
  // into one multiply); with one, in natural units, so that a large finite
  // mask (-3.4e38) stays finite and the softcap sees the scores the model
  // caps: the exponent is scaled after the subtraction of the row max.
  for (int64_t nc = 0, nChunks = s.size(); nc < nChunks; ++nc) {
    for (int64_t e = 0; e < 4; ++e) {
      Value x = AttentionOp::applySoftcap(b, loc, fmul(s[nc][e], scaleLog2),
                                          cfg.softcap);
      if (mask) {
        Value m = loadMask(nc, e, k0);
        x = fadd(x, toF32(b, loc, m));
      }
      if (masked) {
        Value ok = isAllowed(nc, e, k0);
        x = select(ok, x, f32(negInf));
      }
      s[nc][e] = x;
    }
  }
}

std::array<Value, 2>
KernelBuilder::updateSoftmax(Accumulators &s, ValueRange state,
                             MutableArrayRef<Value> next) {
  float negInf = -std::numeric_limits<float>::infinity();
  int64_t nChunks = s.size();
  std::array<Value, 2> alpha;
  // Per accumulator row r: query rows g and g + 8.
  for (int64_t r = 0; r < 2; ++r) {
    Value mx = s[0][2 * r];
    for (int64_t nc = 0; nc < nChunks; ++nc)
      for (int64_t e = 0; e < 2; ++e)
        mx = fmax(mx, s[nc][2 * r + e]);
    mx = quadReduce(mx, /*isMax=*/true);
    Value mOld = state[r];
    Value mNew = fmax(mOld, mx);
    // A row with nothing allowed yet keeps m = -inf: subtract 0 instead, so
    // that exp2(-inf - base) is 0, not NaN.
    Value none = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, mNew,
                                       f32(negInf));
    Value base = select(none, f32(0.0f), mNew);
    auto toLog2 = [&](Value x) {
      return cfg.natural() ? fmul(x, f32(llvm::numbers::log2ef)) : x;
    };
    alpha[r] = exp2(toLog2(fsub(mOld, base)));
    Value sum = f32(0.0f);
    for (int64_t nc = 0; nc < nChunks; ++nc)
      for (int64_t e = 0; e < 2; ++e) {
        Value p = exp2(toLog2(fsub(s[nc][2 * r + e], base)));
        s[nc][2 * r + e] = p;
        sum = fadd(sum, p);
      }
    next[r] = mNew;
    // l is this lane's partial sum; the quad's are added at the end.
    next[2 + r] = fadd(fmul(state[2 + r], alpha[r]), sum);
  }
  return alpha;
}

KernelBuilder::Accumulators
KernelBuilder::accumulatePV(const Accumulators &p, Value buf, ValueRange state,
                            ArrayRef<Value> alpha) {
  int64_t nChunks = kTileKV / 8;     // n8 chunks of keys
  int64_t dChunks = cfg.headDim / 8; // n8 chunks of the head dimension
  Accumulators acc(dChunks);
  for (int64_t dc = 0; dc < dChunks; ++dc)
    for (int64_t e = 0; e < 4; ++e)
      acc[dc].push_back(fmul(state[4 + dc * 4 + e], alpha[e / 2]));
  if (!cfg.isF32()) {
    for (int64_t kc = 0; kc < kTileKV / 16; ++kc) {
      // P's A fragment for keys kc*16 + 0..15: chunks 2kc and 2kc + 1.
      Value pFrag[] = {packF32(p[2 * kc][0], p[2 * kc][1]),
                       packF32(p[2 * kc][2], p[2 * kc][3]),
                       packF32(p[2 * kc + 1][0], p[2 * kc + 1][1]),
                       packF32(p[2 * kc + 1][2], p[2 * kc + 1][3])};
      for (int64_t dp = 0; dp < dChunks / 2; ++dp) {
        // Head dims dp*16 + 0..15 over keys kc*16 + 0..15; V is [key][d].
        Value frag = w.loadBPair(vS, buf, ix.c(dp * 16), ix.c(kc * 16),
                                 /*storedNK=*/false);
        for (int64_t h = 0; h < 2; ++h) {
          Value bFrag[] = {ldmRow(frag, 2 * h), ldmRow(frag, 2 * h + 1)};
          acc[2 * dp + h] = mma(pFrag, bFrag, acc[2 * dp + h]);
        }
      }
    }
    return acc;
  }
  for (int64_t nc = 0; nc < nChunks; ++nc) {
    // k index t is key 2t, t + 4 is key 2t + 1 of the chunk.
    std::pair<Value, Value> pFrag[] = {
        splitTF32(p[nc][0]), splitTF32(p[nc][2]), splitTF32(p[nc][1]),
        splitTF32(p[nc][3])};
    for (int64_t dc = 0; dc < dChunks; ++dc) {
      Value col = ix.add(ix.c(dc * 8), g);
      std::pair<Value, Value> bFrag[2];
      for (int64_t r = 0; r < 2; ++r) {
        Value row = ix.add(ix.c(nc * 8 + r), ix.mul(t, ix.c(2)));
        Value x = memref::LoadOp::create(b, loc, vS, ValueRange{buf, row, col});
        bFrag[r] = splitTF32(x);
      }
      acc[dc] = mma3(pFrag, bFrag, acc[dc]);
    }
  }
  return acc;
}

SmallVector<Value> KernelBuilder::step(Value kt, Value buf, ValueRange state,
                                       bool masked) {
  Value k0 = ix.mul(kt, ix.c(kTileKV));
  Accumulators s = computeScores(buf);
  toLogits(s, k0, masked);
  SmallVector<Value> next(state.begin(), state.end());
  std::array<Value, 2> alpha = updateSoftmax(s, state, next);
  Accumulators acc = accumulatePV(s, buf, state, alpha);
  for (int64_t dc = 0, dChunks = acc.size(); dc < dChunks; ++dc)
    for (int64_t e = 0; e < 4; ++e)
      next[4 + dc * 4 + e] = acc[dc][e];
  return next;
}

void KernelBuilder::bindArguments(gpu::GPUFuncOp func) {
  Block &entry = func.getBody().front();
  b.setInsertionPointToStart(&entry);
  q = entry.getArgument(0);
  k = entry.getArgument(1);
  v = entry.getArgument(2);
  o = entry.getArgument(3);
  if (cfg.maskTy)
    mask = entry.getArgument(4);

  // Shared memory: K buffers, then V buffers, [2][tile keys][padded row].
  Value dyn = dynamicSharedMemory(b, loc);
  SmallVector<int64_t> tileShape = {2, kTileKV, cfg.smemRow()};
  kS = sharedView(b, loc, dyn, 0, tileShape, cfg.elemTy);
  vS = sharedView(b, loc, dyn, 2 * cfg.tileBytes(), tileShape, cfg.elemTy);
}

Value KernelBuilder::buildCoordinates() {
  LaneCoords lc = buildLaneCoords(b, loc);
  tid = lc.tid;
  warp = lc.warp;
  lane = w.lane = lc.lane;
  g = lc.g;
  t = lc.t;
  Value qt = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
  hi = gpu::BlockIdOp::create(b, loc, gpu::Dimension::y);
  bi = gpu::BlockIdOp::create(b, loc, gpu::Dimension::z);
  Value heads = memref::DimOp::create(b, loc, q, 1);
  Value kvHeads = memref::DimOp::create(b, loc, k, 1);
  sq = memref::DimOp::create(b, loc, q, 2);
  skv = memref::DimOp::create(b, loc, k, 2);
  kvh = arith::DivUIOp::create(b, loc, hi,
                               arith::DivUIOp::create(b, loc, heads, kvHeads));
  offset = ix.sub(skv, sq);
  if (mask)
    for (int64_t i = 0; i < 4; ++i)
      maskBcast[i] = ix.cmp(arith::CmpIPredicate::eq,
                            memref::DimOp::create(b, loc, mask, i), ix.c(1));
  q0 = ix.mul(qt, ix.c(kBlockRows));
  return ix.andI(ix.cmp(arith::CmpIPredicate::slt, q0, sq),
                 ix.andI(ix.cmp(arith::CmpIPredicate::slt, bi,
                                memref::DimOp::create(b, loc, q, 0)),
                         ix.cmp(arith::CmpIPredicate::slt, hi, heads)));
}

void KernelBuilder::buildKeyTileRange() {
  qPos0 = ix.add(q0, offset);
  qPosLast =
      ix.add(ix.sub(ix.min(ix.add(q0, ix.c(kBlockRows)), sq), ix.c(1)), offset);
  auto [lo, hiK] =
      buildSpanKeyRange(ix, cfg.span, cfg.causal, qPos0, qPosLast, skv);
  ktLo = ix.fdiv(lo, ix.c(kTileKV));
  ktHi = ix.max(ktLo, ix.cdiv(hiK, ix.c(kTileKV)));
  // With sinks, the tiles of the sink keys this block's queries may see
  // come first, then the span's run without the tiles already visited: each
  // tile once, in ascending order (as on the CPU).
  Value sinkEnd = buildSinkKeyEnd(ix, cfg.span, cfg.causal, qPosLast, skv);
  if (!sinkEnd)
    return;
  sinkTiles = ix.cdiv(sinkEnd, ix.c(kTileKV));
  spanFirst = ix.max(ktLo, sinkTiles);
  Value spanEnd = ix.max(spanFirst, ktHi);
  ktLo = ix.c(0);
  ktHi = ix.add(sinkTiles, ix.sub(spanEnd, spanFirst));
}

Value KernelBuilder::tileOf(Value step) {
  if (!sinkTiles)
    return step;
  Value inSinks = ix.cmp(arith::CmpIPredicate::slt, step, sinkTiles);
  return arith::SelectOp::create(
      b, loc, inSinks, step, ix.add(ix.sub(step, sinkTiles), spanFirst));
}

void KernelBuilder::loadQueryFragments() {
  int64_t d = cfg.headDim;
  // Rows past the end read the last row (never stored).
  auto qRow = [&](int64_t r) {
    return ix.min(ix.add(rowBase, ix.add(g, ix.c(r))), ix.sub(sq, ix.c(1)));
  };
  Value rows[2] = {qRow(0), qRow(8)};
  if (!cfg.isF32()) {
    auto pairTy = VectorType::get({2}, cfg.elemTy);
    for (int64_t kc = 0; kc < d / 16; ++kc) {
      SmallVector<Value> regs;
      for (int64_t half = 0; half < 2; ++half)
        for (int64_t r = 0; r < 2; ++r) {
          Value col = ix.add(ix.c(kc * 16 + half * 8), ix.mul(t, ix.c(2)));
          Value pair = vector::LoadOp::create(b, loc, pairTy, q,
                                              ValueRange{bi, hi, rows[r], col});
          regs.push_back(packPair(pair));
        }
      qFrag.push_back(regs);
    }
    return;
  }
  for (int64_t kc = 0; kc < d / 8; ++kc) {
    SmallVector<Value> regs;
    for (int64_t half = 0; half < 2; ++half)
      for (int64_t r = 0; r < 2; ++r) {
        Value col = ix.add(ix.c(kc * 8 + half * 4), t);
        regs.push_back(memref::LoadOp::create(
            b, loc, q, ValueRange{bi, hi, rows[r], col}));
      }
    qFrag32.push_back(regs);
  }
}

Value KernelBuilder::isInteriorTile(Value kt) {
  using P = arith::CmpIPredicate;
  Value k0 = ix.mul(kt, ix.c(kTileKV));
  Value kLast = ix.add(k0, ix.c(kTileKV - 1));
  Value interior = ix.cmp(P::slt, kLast, skv);
  if (Value inSpan = buildSpanTileInterior(ix, cfg.span, cfg.causal, qPos0,
                                           qPosLast, k0, kLast))
    interior = ix.andI(interior, inSpan);
  return interior;
}

void KernelBuilder::buildKeyLoopBody(scf::ForOp loop) {
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  Value stepIv = loop.getInductionVar();
  Value kt = tileOf(stepIv);
  Value buf = arith::RemUIOp::create(b, loc, ix.sub(stepIv, ktLo), ix.c(2));
  // This tile has landed, and every warp is done with the other buffer.
  NVVM::CpAsyncWaitGroupOp::create(b, loc, 0);
  gpu::BarrierOp::create(b, loc);
  Value nextStep = ix.add(stepIv, ix.c(1));
  scf::IfOp::create(b, loc, ix.cmp(arith::CmpIPredicate::slt, nextStep, ktHi),
                    [&](OpBuilder &, Location) {
                      loadTile(tileOf(nextStep), ix.sub(ix.c(1), buf));
                      scf::YieldOp::create(b, loc);
                    });

  // Only tiles crossing a boundary of the span or the triangle evaluate the
  // position mask.
  Value interior = isInteriorTile(kt);
  ValueRange state = loop.getRegionIterArgs();
  auto ifOp = scf::IfOp::create(
      b, loc, interior,
      [&](OpBuilder &, Location) {
        scf::YieldOp::create(b, loc, step(kt, buf, state, false));
      },
      [&](OpBuilder &, Location) {
        scf::YieldOp::create(b, loc, step(kt, buf, state, true));
      });
  scf::YieldOp::create(b, loc, ifOp.getResults());
}

ValueRange KernelBuilder::buildKeyLoop() {
  float negInf = -std::numeric_limits<float>::infinity();
  // The first tile in flight before the loop.
  Value any = ix.cmp(arith::CmpIPredicate::slt, ktLo, ktHi);
  scf::IfOp::create(b, loc, any, [&](OpBuilder &, Location) {
    loadTile(tileOf(ktLo), ix.c(0));
    scf::YieldOp::create(b, loc);
  });

  SmallVector<Value> init = {f32(negInf), f32(negInf), f32(0.0f), f32(0.0f)};
  for (int64_t i = 0; i < cfg.headDim / 8 * 4; ++i)
    init.push_back(f32(0.0f));
  auto loop = scf::ForOp::create(b, loc, ktLo, ktHi, ix.c(1), init);
  buildKeyLoopBody(loop);
  return loop.getResults();
}

void KernelBuilder::storeOutput(ValueRange fin) {
  for (int64_t r = 0; r < 2; ++r) {
    Value l = quadReduce(fin[2 + r], /*isMax=*/false);
    Value empty =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, l, f32(0.0f));
    Value inv =
        select(empty, f32(0.0f), arith::DivFOp::create(b, loc, f32(1.0f), l));
    Value row = ix.add(rowBase, ix.add(g, ix.c(8 * r)));
    Value inside = ix.cmp(arith::CmpIPredicate::slt, row, sq);
    scf::IfOp::create(b, loc, inside, [&](OpBuilder &, Location) {
      for (int64_t dc = 0; dc < cfg.headDim / 8; ++dc) {
        Value x0 = fmul(fin[4 + dc * 4 + 2 * r], inv);
        Value x1 = fmul(fin[4 + dc * 4 + 2 * r + 1], inv);
        Value col = ix.add(ix.c(dc * 8), ix.mul(t, ix.c(2)));
        Value pair = vector::FromElementsOp::create(
            b, loc, VectorType::get({2}, b.getF32Type()), ValueRange{x0, x1});
        if (!cfg.isF32())
          pair = arith::TruncFOp::create(
              b, loc, VectorType::get({2}, cfg.elemTy), pair);
        vector::StoreOp::create(b, loc, pair, o, ValueRange{bi, hi, row, col});
      }
      scf::YieldOp::create(b, loc);
    });
  }
}

void KernelBuilder::build(gpu::GPUFuncOp func) {
  bindArguments(func);
  Value valid = buildCoordinates();
  auto guardIf = scf::IfOp::create(b, loc, valid, /*withElseRegion=*/false);
  b.setInsertionPointToStart(guardIf.thenBlock());
  rowBase = ix.add(q0, ix.mul(warp, ix.c(kWarpRows)));
  scaleLog2 =
      f32(cfg.natural() ? cfg.scale : cfg.scale * llvm::numbers::log2ef);
  buildKeyTileRange();
  loadQueryFragments();
  storeOutput(buildKeyLoop());
  b.setInsertionPointAfter(guardIf);
  gpu::ReturnOp::create(b, loc);
}

/// The kernel for `cfg`, built on first use.
gpu::GPUFuncOp getKernel(gpu::GPUModuleOp kernels, const KernelConfig &cfg,
                         Location loc) {
  std::string name = cfg.name();
  if (auto f = kernels.lookupSymbol<gpu::GPUFuncOp>(name))
    return f;
  int64_t dyn = ShapedType::kDynamic;
  auto ty = MemRefType::get({dyn, dyn, dyn, cfg.headDim}, cfg.elemTy);
  SmallVector<Type> args = {ty, ty, ty, ty};
  if (cfg.maskTy)
    args.push_back(MemRefType::get({dyn, dyn, dyn, dyn}, cfg.maskTy));
  auto func = createKernel(kernels, name, args, kThreads, loc);
  OpBuilder b(kernels.getContext());
  KernelBuilder(b, loc, cfg).build(func);
  return func;
}

struct AttentionToGPUPass final
    : masformer::impl::AttentionToGPUBase<AttentionToGPUPass> {
  using AttentionToGPUBase::AttentionToGPUBase;

  LogicalResult convert(AttentionOp op, gpu::GPUModuleOp &kernels) {
    RankedTensorType qTy = op.getQueryType();
    Type elemTy = qTy.getElementType();
    auto fail = [&](const Twine &why) {
      return op.emitOpError() << "cannot be lowered to the GPU: " << why;
    };
    if (qTy.getRank() != 4 || op.getKeyType().getRank() != 4)
      return fail("query, key and value must have rank 4");
    Value mask = op.getMask();
    Type maskTy;
    if (mask) {
      auto mTy = cast<RankedTensorType>(mask.getType());
      if (mTy.getRank() == 0)
        return fail("a rank-0 mask is not supported; give it shape [1]");
      maskTy = mTy.getElementType();
    }
    int64_t d = qTy.getDimSize(3);
    if (ShapedType::isDynamic(d))
      return fail("the head dimension must be static");
    // f16/bf16 step through the head dimension by 16 (m16n8k16, and P V's
    // pairs of n8 chunks), f32 by 8 (m16n8k8).
    int64_t step = elemTy.isF32() ? 8 : 16;
    if (d % step != 0 || d > 256)
      return fail("the head dimension must be a multiple of " + Twine(step) +
                  " up to 256 for " +
                  (elemTy.isF32() ? "f32" : "f16 and bf16") + ", got " +
                  Twine(d));
    if (op.getKeyType().getDimSize(3) != d ||
        op.getValueType().getDimSize(3) != d)
      return fail("value's head dimension must equal the query's");
    float scale = *op.getStaticScale();
    KernelConfig cfg{elemTy, d,      op.getSpan(),        op.getCausal(),
                     scale,  maskTy, op.getSoftcapValue()};
    // Checked here, not at launch: a kernel over the chip's shared memory
    // compiles fine and fails only on the GPU.
    int64_t limit = maxDynamicSharedMemory(chip);
    if (cfg.smemBytes() > limit) {
      std::string type;
      llvm::raw_string_ostream(type) << elemTy;
      return fail("head_dim " + Twine(d) + " in " + type + " needs " +
                  Twine(cfg.smemBytes()) +
                  " bytes of shared memory per block (K and V tiles of " +
                  Twine(kTileKV) + " keys, double-buffered), more than the " +
                  Twine(limit) + " bytes chip " + chip + " allows");
    }

    if (!kernels)
      kernels = getOrCreateKernelModule(op->getParentOfType<ModuleOp>());
    gpu::GPUFuncOp kernel = getKernel(kernels, cfg, op.getLoc());

    OpBuilder b(op);
    Location loc = op.getLoc();
    Idx ix{b, loc};
    int64_t dyn = ShapedType::kDynamic;
    auto kernelTy = MemRefType::get({dyn, dyn, dyn, d}, elemTy);
    auto asBuffer = [&](Value tensor) {
      auto ty = cast<RankedTensorType>(tensor.getType());
      auto memTy = MemRefType::get(ty.getShape(), elemTy);
      Value m = bufferization::ToBufferOp::create(b, loc, memTy, tensor,
                                                  /*readOnly=*/true);
      return memref::CastOp::create(b, loc, kernelTy, m).getResult();
    };
    Value qm = asBuffer(op.getQuery());
    Value km = asBuffer(op.getKey());
    Value vm = asBuffer(op.getValue());
    SmallVector<Value> kernelArgs = {qm, km, vm};
    Value mm;
    if (mask) {
      // As a rank-4 memref: leading unit dimensions for a lower rank.
      auto mTy = cast<RankedTensorType>(mask.getType());
      int64_t r = mTy.getRank();
      mm = bufferization::ToBufferOp::create(
          b, loc, MemRefType::get(mTy.getShape(), maskTy), mask,
          /*readOnly=*/true);
      if (r < 4) {
        SmallVector<int64_t> shape(4 - r, 1);
        llvm::append_range(shape, mTy.getShape());
        SmallVector<ReassociationIndices> groups;
        ReassociationIndices first;
        for (int64_t i = 0; i <= 4 - r; ++i)
          first.push_back(i);
        groups.push_back(first);
        for (int64_t i = 5 - r; i < 4; ++i)
          groups.push_back({i});
        SmallVector<OpFoldResult> outSizes;
        for (int64_t i = 0; i < 4; ++i)
          outSizes.push_back(
              i < 4 - r ? OpFoldResult(b.getIndexAttr(1))
                        : memref::getMixedSize(b, loc, mm, i - (4 - r)));
        mm = memref::ExpandShapeOp::create(
            b, loc, MemRefType::get(shape, maskTy), mm, groups, outSizes);
      }
      mm = memref::CastOp::create(
          b, loc, MemRefType::get({dyn, dyn, dyn, dyn}, maskTy), mm);
    }
    SmallVector<Value> dynSizes;
    for (int64_t i = 0; i < 4; ++i)
      if (qTy.isDynamicDim(i))
        dynSizes.push_back(memref::DimOp::create(b, loc, qm, i));
    // Synchronous forms: gpu-async-region (in the pipelines) puts a
    // function's allocations, copies and launches on one stream.
    auto outTy = MemRefType::get(qTy.getShape(), elemTy);
    Value out = gpu::AllocOp::create(b, loc, outTy, Type(), ValueRange{},
                                     dynSizes, ValueRange{})
                    .getMemref();
    Value om = memref::CastOp::create(b, loc, kernelTy, out);
    kernelArgs.push_back(om);
    if (mm)
      kernelArgs.push_back(mm);
    Value batch = memref::DimOp::create(b, loc, qm, 0);
    Value heads = memref::DimOp::create(b, loc, qm, 1);
    Value sq = memref::DimOp::create(b, loc, qm, 2);
    // A grid of zero blocks is an error for the driver: empty inputs launch
    // one block, which returns at once.
    Value one = ix.c(1);
    Value numQT = ix.max(ix.cdiv(sq, ix.c(kBlockRows)), one);
    Value smem = arith::ConstantOp::create(
        b, loc, b.getI32IntegerAttr(cfg.smemBytes()));
    gpu::LaunchFuncOp::create(
        b, loc, kernel,
        gpu::KernelDim3{numQT, ix.max(heads, one), ix.max(batch, one)},
        gpu::KernelDim3{ix.c(kThreads), one, one}, smem, kernelArgs);
    Value result = bufferization::ToTensorOp::create(
        b, loc, qTy, out, /*restrict=*/true, /*writable=*/true);
    op.replaceAllUsesWith(result);
    op.erase();
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Rows with positions of their own: ops the kernels take.
    resolveAllRowOffsets(module);
    // Per-head spans: one kernel per run of heads with the same span.
    if (failed(splitAllHeadSpans(module)))
      return signalPassFailure();
    SmallVector<AttentionOp> ops;
    module.walk([&](AttentionOp op) { ops.push_back(op); });
    gpu::GPUModuleOp kernels;
    for (AttentionOp op : ops)
      if (failed(convert(op, kernels)))
        return signalPassFailure();
  }
};

} // namespace
