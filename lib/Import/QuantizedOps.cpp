//===- QuantizedOps.cpp - Weight-quantized products -------------*- C++ -*-===//
//
// Models whose weights are stored quantized: com.microsoft.MatMulNBits, what
// onnxruntime's weight-only quantizer (MatMulNBitsQuantizer) and
// onnxruntime-genai's model builder (`-p int4`) write for every MatMul of a
// decoder, and GatherBlockQuantized, the builder's int4 embedding table. The
// packed weights are dequantized here, once, exactly as onnxruntime dequantizes
// them, into a weight of the activations' type; the product is then an ordinary
// MatMul. A rewrite exported back to ONNX keeps the quantized nodes as they are
// (the exporter edits attention nodes only).
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

#include "masformer/Utils/ConstantData.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <algorithm>
#include <cstring>

using namespace mlir;
using namespace mlir::masformer;

namespace {

/// `f` as IEEE half-precision bits, rounded to nearest even (overflow to
/// infinity, subnormals kept, NaN quiet): the rounding APFloat does, without
/// its cost per element (a 7B model has 7e9 weights to convert).
uint16_t toHalfBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint16_t sign = (u >> 16) & 0x8000u;
  uint32_t absBits = u & 0x7FFFFFFFu;
  if (absBits >= 0x7F800000u) // Inf or NaN.
    return sign | 0x7C00u | (absBits > 0x7F800000u ? 0x200u : 0u);
  if (absBits >= 0x477FF000u) // Rounds to at least 65520: infinity.
    return sign | 0x7C00u;
  if (absBits < 0x38800000u) {
    // Below the smallest normal half (2^-14): a subnormal half (or zero),
    // the mantissa with its implicit bit shifted into place, rounded.
    if (absBits < 0x33000000u) // Below half the smallest subnormal: zero.
      return sign;
    uint32_t exp = absBits >> 23, mant = (absBits & 0x7FFFFFu) | 0x800000u;
    uint32_t shift = 126 - exp; // 14..24: 2^-24 is the half's last bit.
    uint32_t half = mant >> shift, rest = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rest > mid || (rest == mid && (half & 1u)))
      ++half;
    return sign | static_cast<uint16_t>(half);
  }
  // Normal: rebias the exponent (127 -> 15), round the 13 dropped bits.
  uint32_t bits = absBits - 0x38000000u;
  uint32_t half = bits >> 13, rest = bits & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u)))
    ++half; // A carry into the exponent is the right rounding.
  return sign | static_cast<uint16_t>(half);
}

/// Stores `v` as an element of `et` (f32, f16 or bf16; rounded to nearest
/// even) at `dest`.
void storeElement(char *dest, float v, FloatType et) {
  if (et.isF32()) {
    std::memcpy(dest, &v, 4);
    return;
  }
  uint16_t bits = et.isF16() ? toHalfBits(v) : toBF16(v);
  std::memcpy(dest, &bits, 2);
}

/// Element `index` of a run of `bits`-bit elements packed low bits first
/// from `row` (the layout of onnxruntime's packed weights and zero points).
float unpacked(const uint8_t *row, int64_t index, int64_t bits) {
  int64_t bit = index * bits;
  return static_cast<float>((row[bit / 8] >> (bit % 8)) &
                            ((int64_t(1) << bits) - 1));
}

/// Fails, naming the node, unless `bs` is a power of two from 16.
LogicalResult checkBlockSize(ONNXImporterImpl &im, int64_t bs) {
  if (bs < 16 || bs > (int64_t(1) << 20) || (bs & (bs - 1)))
    return im.error() << "block_size must be a power of two from 16, got "
                      << bs;
  return success();
}

/// com.microsoft.MatMulNBits: Y = A W (+ bias) for A [..., K]. W is stored
/// transposed, [N, K], in blocks of `block_size` along K (the last block
/// zero-padded): B [N, ceil(K / block_size), block_size * bits / 8] holds
/// `bits` (2, 4 or 8) per element, low bits first; each block has a scale
/// (A's type) and a zero point (packed like B, `bits` per block, low bits
/// first, ceil(blocks * bits / 8) bytes per row; or unpacked in A's type;
/// 2^(bits - 1) when absent). W[k, n] = (q - zero point) * scale.
///
/// accuracy_level is onnxruntime's license to compute less exactly (4: A
/// quantized to int8 per block); masformer computes the product of A and
/// the dequantized weights in A's type. g_idx (act_order) is refused.
LogicalResult importMatMulNBits(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes(
          {"K", "N", "bits", "block_size", "accuracy_level"})))
    return failure();
  std::optional<int64_t> kAttr = im.attrInt("K"), nAttr = im.attrInt("N"),
                         bsAttr = im.attrInt("block_size");
  if (!kAttr || !nAttr || !bsAttr)
    return im.error() << "attributes K, N and block_size are required";
  int64_t K = *kAttr, N = *nAttr, bs = *bsAttr, bits = im.attrInt("bits", 4);
  if (K <= 0 || N <= 0 || isBadShape({K, N}))
    return im.error() << "K (" << K << ") and N (" << N
                      << ") must be positive, and K * N a tensor's size";
  if (bits != 2 && bits != 4 && bits != 8)
    return im.error() << "bits must be 2, 4 or 8, got " << bits;
  if (failed(checkBlockSize(im, bs)))
    return failure();
  if (im.hasInput(4))
    return im.error() << "g_idx (input 4, a model quantized with act_order) "
                         "is not supported";

  RankedTensorType at = im.inputType(0);
  auto et = dyn_cast<FloatType>(at.getElementType());
  if (!et || !(et.isF32() || et.isF16() || et.isBF16()))
    return im.error() << "A (input 0) is " << at
                      << "; expected elements of f32, f16 or bf16";
  SmallVector<AffineExpr> ad = im.inputDims(0);
  if (ad.empty() || ad.back() != im.cst(K))
    return im.error() << "A (input 0) has dimensions " << im.dimsString(ad)
                      << "; the last must be K (" << K << ")";

  int64_t blocks = (K + bs - 1) / bs, blobSize = bs * bits / 8;
  RankedTensorType bt = im.inputType(1);
  if (bt.getRank() != 3 ||
      bt.getShape() != ArrayRef<int64_t>{N, blocks, blobSize})
    return im.error() << "B (input 1) is " << bt << "; expected [" << N << ", "
                      << blocks << ", " << blobSize
                      << "] (N, ceil(K / block_size), block_size * bits / 8)";
  FailureOr<std::vector<uint8_t>> b = im.constantBytes(1, "B");
  if (failed(b))
    return failure();

  FailureOr<HostTensor> scales = im.constantInput(2, "scales");
  if (failed(scales))
    return failure();
  if (scales->elemType != et || scales->numElements() != N * blocks)
    return im.error() << "scales (input 2) is " << scales->getType()
                      << "; expected " << N * blocks << " elements of " << et
                      << " (N * ceil(K / block_size))";

  // Zero points: packed (i8 here, uint8 in the model), or unpacked floats.
  int64_t zpRowBytes = (blocks * bits + 7) / 8;
  std::vector<uint8_t> zpPacked;
  std::optional<HostTensor> zpFloat;
  if (im.hasInput(3)) {
    RankedTensorType zt = im.inputType(3);
    // (Read first: a constant's shape is static.)
    if (zt.getElementType().isInteger(8)) {
      FailureOr<std::vector<uint8_t>> z = im.constantBytes(3, "zero_points");
      if (failed(z))
        return failure();
      if (static_cast<int64_t>(z->size()) != N * zpRowBytes)
        return im.error() << "zero_points (input 3) is " << zt << "; expected "
                          << N * zpRowBytes
                          << " bytes (N rows of ceil(blocks * bits / 8))";
      zpPacked = std::move(*z);
    } else if (zt.getElementType() == et) {
      FailureOr<HostTensor> z = im.constantInput(3, "zero_points");
      if (failed(z))
        return failure();
      if (z->numElements() != N * blocks)
        return im.error() << "zero_points (input 3) is " << zt << "; expected "
                          << N * blocks << " elements (N * blocks)";
      zpFloat = std::move(*z);
    } else {
      return im.error() << "zero_points (input 3) is " << zt
                        << "; expected uint8 or " << et;
    }
  }

  std::vector<float> scale(N * blocks), zero(N * blocks);
  for (int64_t i = 0, e = N * blocks; i < e; ++i) {
    int64_t n = i / blocks, blk = i % blocks;
    scale[i] = static_cast<float>(scales->getDouble(i));
    if (zpFloat) {
      zero[i] = static_cast<float>(zpFloat->getDouble(i));
    } else if (!zpPacked.empty()) {
      zero[i] = unpacked(&zpPacked[n * zpRowBytes], blk, bits);
    } else {
      zero[i] = static_cast<float>(int64_t(1) << (bits - 1));
    }
  }
  // W [K, N] in A's type, written in bands of columns so that B's rows and
  // W's rows are both read and written in runs.
  auto fill = [&](MutableArrayRef<char> out) {
    char *w = out.data();
    int64_t elemBytes = et.getWidth() / 8;
    constexpr int64_t kBand = 64;
    for (int64_t n0 = 0; n0 < N; n0 += kBand) {
      int64_t n1 = std::min(N, n0 + kBand);
      for (int64_t k = 0; k < K; ++k) {
        int64_t blk = k / bs;
        for (int64_t n = n0; n < n1; ++n) {
          int64_t s = n * blocks + blk;
          float q = unpacked(&(*b)[s * blobSize], k % bs, bits);
          // onnxruntime's order: (q - zero point) in float, then the scale.
          storeElement(w + (k * N + n) * elemBytes, (q - zero[s]) * scale[s],
                       et);
        }
      }
    }
  };
  std::string name = im.node->input(1) + ".dequantized";
  FailureOr<Value> weight =
      im.weightConstant(name, RankedTensorType::get({K, N}, et), fill);
  if (failed(weight))
    return failure();

  SmallVector<AffineExpr> outDims;
  FailureOr<Value> y = buildMatMul(im, im.input(0), ad, *weight,
                                   {im.cst(K), im.cst(N)}, outDims);
  if (failed(y))
    return failure();
  if (im.hasInput(5)) {
    RankedTensorType biasType = im.inputType(5);
    if (biasType.getElementType() != et || biasType.getRank() != 1 ||
        biasType.getDimSize(0) != N)
      return im.error() << "bias (input 5) is " << biasType << "; expected ["
                        << N << "] of " << et;
    *y = buildBroadcastGeneric(
        im.builder, im.loc, {*y, im.input(5)}, im.typeFor(outDims, et),
        [](OpBuilder &bld, Location loc, ValueRange a) -> Value {
          return arith::AddFOp::create(bld, loc, a[0], a[1]);
        },
        im.dynamicSizes(outDims));
  }
  im.setOutput(0, *y, outDims);
  return success();
}

/// com.microsoft.GatherBlockQuantized on uint8 data, what onnxruntime-genai
/// writes for an int4 embedding table (tied to the LM head: the table is
/// the head's MatMulNBits weights through a Reshape). data [d0, ..., dn]
/// packs `bits` (4 or 8) per element along the last axis, low bits first
/// (logical shape [d0, ..., dn * 8 / bits]); each block of `block_size`
/// along that axis has a scale (scales: the logical shape with the last
/// axis in blocks, the output's type) and a zero point (packed like data,
/// per row; 2^(bits - 1) when absent). The table is dequantized at import
/// as onnxruntime does, then gathered along axis 0 as ONNX Gather. The
/// layout onnxruntime takes for uint8 data is the only one: gather_axis 0,
/// quantize_axis the last.
LogicalResult importGatherBlockQuantized(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes(
          {"bits", "block_size", "gather_axis", "quantize_axis"})))
    return failure();
  int64_t bits = im.attrInt("bits", 4), bs = im.attrInt("block_size", 128);
  if (bits != 4 && bits != 8)
    return im.error() << "bits must be 4 or 8, got " << bits;
  if (failed(checkBlockSize(im, bs)))
    return failure();
  RankedTensorType dt = im.inputType(0), it = im.inputType(1);
  if (!dt.getElementType().isInteger(8) || dt.getRank() < 2 ||
      !dt.hasStaticShape() || dt.getNumElements() == 0)
    return im.error() << "data (input 0) is " << dt
                      << "; expected a constant of uint8 of rank 2 or more, "
                         "not empty";
  int64_t rank = dt.getRank();
  FailureOr<int64_t> gatherAxis =
      im.normalizeAxis(im.attrInt("gather_axis", 0), rank);
  FailureOr<int64_t> quantizeAxis =
      im.normalizeAxis(im.attrInt("quantize_axis", 1), rank);
  if (failed(gatherAxis) || failed(quantizeAxis))
    return failure();
  if (*gatherAxis != 0 || *quantizeAxis != rank - 1)
    return im.error() << "gather_axis " << *gatherAxis << " and quantize_axis "
                      << *quantizeAxis
                      << " are not supported: uint8 data is gathered along "
                         "axis 0 and quantized along the last";
  if (!it.getElementType().isInteger(64) && !it.getElementType().isInteger(32))
    return im.error() << "indices must be int32 or int64, got " << it;

  int64_t perByte = 8 / bits, packedCols = dt.getShape().back();
  SmallVector<int64_t> logical(dt.getShape());
  logical.back() = packedCols * perByte;
  int64_t cols = logical.back(), blocks = (cols + bs - 1) / bs;
  int64_t rows = dt.getNumElements() / packedCols;
  FailureOr<std::vector<uint8_t>> data = im.constantBytes(0, "data");
  if (failed(data))
    return failure();
  FailureOr<HostTensor> scales = im.constantInput(2, "scales");
  if (failed(scales))
    return failure();
  SmallVector<int64_t> scalesShape(logical);
  scalesShape.back() = blocks;
  auto et = dyn_cast<FloatType>(scales->elemType);
  if (!et || !(et.isF32() || et.isF16() || et.isBF16()) ||
      ArrayRef<int64_t>(scales->shape) != ArrayRef<int64_t>(scalesShape))
    return im.error() << "scales (input 2) is " << scales->getType()
                      << "; expected "
                      << RankedTensorType::get(scalesShape,
                                               im.builder.getF32Type())
                      << " (or f16, bf16): the data's shape with the last "
                         "axis in blocks of "
                      << bs;
  int64_t zpRowBytes = (blocks * bits + 7) / 8;
  std::vector<uint8_t> zp;
  if (im.hasInput(3)) {
    FailureOr<std::vector<uint8_t>> z = im.constantBytes(3, "zero_points");
    if (failed(z))
      return failure();
    if (static_cast<int64_t>(z->size()) != rows * zpRowBytes)
      return im.error() << "zero_points (input 3) is " << im.inputType(3)
                        << "; expected " << rows * zpRowBytes
                        << " bytes (the scales' rows, packed like data)";
    zp = std::move(*z);
  }
  auto fill = [&](MutableArrayRef<char> out) {
    int64_t elemBytes = et.getWidth() / 8;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        int64_t blk = c / bs, s = r * blocks + blk;
        float q = unpacked(&(*data)[r * packedCols], c, bits);
        float z = zp.empty() ? static_cast<float>(int64_t(1) << (bits - 1))
                             : unpacked(&zp[r * zpRowBytes], blk, bits);
        storeElement(out.data() + (r * cols + c) * elemBytes,
                     (q - z) * static_cast<float>(scales->getDouble(s)), et);
      }
    }
  };
  std::string name = im.node->input(0) + ".dequantized";
  FailureOr<Value> table =
      im.weightConstant(name, RankedTensorType::get(logical, et), fill);
  if (failed(table))
    return failure();
  SmallVector<AffineExpr> tableDims, iDims = im.inputDims(1);
  for (int64_t d : logical)
    tableDims.push_back(im.cst(d));
  Value indices = im.input(1);
  SmallVector<AffineExpr> dims(iDims);
  llvm::append_range(dims, ArrayRef<AffineExpr>(tableDims).drop_front());
  im.setOutput(0, buildGather(im, *table, tableDims, indices, iDims, 0), dims);
  return success();
}

} // namespace

void mlir::masformer::registerQuantizedHandlers(
    llvm::StringMap<NodeHandler> &handlers) {
  handlers["com.microsoft.MatMulNBits"] = importMatMulNBits;
  handlers["com.microsoft.GatherBlockQuantized"] = importGatherBlockQuantized;
}
