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
// ONNX's 8-bit ops, what onnxruntime's quantizers write: quantize_dynamic
// (DynamicQuantizeLinear on the activations, MatMulInteger against int8
// weights, DequantizeLinear after gathers from int8 embedding tables) and
// quantize_static's QDQ format (QuantizeLinear and DequantizeLinear pairs).
// Each computes what onnxruntime computes: quantized values bit for bit, and
// MatMulInteger's product against constant weights as an integer product of
// uint8 by int8 with i32 sums (vpdpbusd's operands; the zero points' terms
// after it), any other in f32 (the quantized values and weights are small
// integers, exact in f32 and bf16; the sum is onnxruntime's int32 up to f32
// rounding once it passes 2^24).
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

#include "masformer/Utils/ConstantData.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"

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

//===----------------------------------------------------------------------===//
// ONNX's 8-bit quantization ops
//===----------------------------------------------------------------------===//

/// The values of an 8-bit quantized type: [0, 255] for uint8, [-128, 127]
/// for int8.
std::pair<double, double> quantizedRange(bool isUnsigned) {
  return isUnsigned ? std::make_pair(0.0, 255.0)
                    : std::make_pair(-128.0, 127.0);
}

/// An element of an 8-bit quantized tensor (uint8 with `isUnsigned`) or of
/// an int32 one, as i32.
Value extendQuantized(OpBuilder &b, Location loc, Value v, bool isUnsigned) {
  Type i32 = b.getI32Type();
  if (v.getType() == i32)
    return v;
  return isUnsigned ? arith::ExtUIOp::create(b, loc, i32, v).getResult()
                    : arith::ExtSIOp::create(b, loc, i32, v).getResult();
}

/// (x - zeroPoint) as `to` (a float type), x and zeroPoint quantized
/// (zeroPoint null: 0); exact for 8-bit values.
Value centered(OpBuilder &b, Location loc, Value x, Value zeroPoint,
               bool isUnsigned, Type to) {
  Value d = extendQuantized(b, loc, x, isUnsigned);
  if (zeroPoint)
    d = arith::SubIOp::create(b, loc, d,
                              extendQuantized(b, loc, zeroPoint, isUnsigned));
  return arith::SIToFPOp::create(b, loc, to, d);
}

/// A byte of an 8-bit quantized tensor's data as its value.
int32_t quantizedValue(uint8_t byte, bool isUnsigned) {
  return isUnsigned ? int32_t(byte) : int32_t(static_cast<int8_t>(byte));
}

/// Fails, naming the node, unless input `i` holds 8-bit integers (and, with
/// `allowInt32`, int32).
LogicalResult checkQuantizedInput(ONNXImporterImpl &im, unsigned i,
                                  StringRef what, bool allowInt32 = false) {
  Type et = im.inputType(i).getElementType();
  if (et.isInteger(8) || (allowInt32 && et.isInteger(32)))
    return success();
  return im.error() << what << " (input " << i << ") is " << im.inputType(i)
                    << "; expected uint8 or int8"
                    << (allowInt32 ? " (or int32)" : "");
}

/// A quantization parameter (scale or zero point, input `i`) shaped to
/// broadcast against x (dimensions `xDims`) the way the op reads it: one
/// value for the whole tensor (a scalar or a tensor of one element), or
/// one per index of x's `axis` (1-D, that axis' size). Null when the input
/// is absent.
FailureOr<Value> quantizationParam(ONNXImporterImpl &im, unsigned i,
                                   StringRef what, ArrayRef<AffineExpr> xDims,
                                   int64_t axis) {
  if (!im.hasInput(i))
    return Value();
  RankedTensorType t = im.inputType(i);
  SmallVector<AffineExpr> pd = im.inputDims(i);
  if (t.hasStaticShape() && t.getNumElements() == 1) {
    // One value: a scalar, which broadcasts against any rank.
    Value v = im.input(i);
    if (t.getRank() != 0)
      v = buildReshape(im.builder, im.loc, v,
                       RankedTensorType::get({}, t.getElementType()));
    return v;
  }
  int64_t rank = xDims.size();
  if (t.getRank() == 1 && rank > 0 && pd[0] == xDims[axis]) {
    // Per axis: [C] -> [C, 1, ..., 1] for the dimensions after the axis.
    SmallVector<AffineExpr> out{pd[0]};
    out.append(rank - axis - 1, im.cst(1));
    return buildReshapeDims(im, im.input(i), pd, out);
  }
  return im.error() << what << " (input " << i << ") is " << t
                    << "; expected one value, or one per index of axis " << axis
                    << " of x " << im.dimsString(xDims)
                    << " (blocked quantization is not supported)";
}

/// The operands of QuantizeLinear's and DequantizeLinear's element-wise
/// computation: x (input 0), its scale (input 1) and, when present, its
/// zero point (input 2), shaped by quantizationParam.
FailureOr<SmallVector<Value>>
quantizationOperands(ONNXImporterImpl &im, ArrayRef<AffineExpr> xDims,
                     int64_t axis, StringRef scaleName, StringRef zeroName) {
  auto oneValue = [](RankedTensorType t) {
    return t.hasStaticShape() && t.getNumElements() == 1;
  };
  if (im.hasInput(2) &&
      im.inputType(2).getShape() != im.inputType(1).getShape() &&
      !(oneValue(im.inputType(1)) && oneValue(im.inputType(2))))
    return im.error() << zeroName << " (input 2) is " << im.inputType(2)
                      << "; expected the shape of " << scaleName
                      << " (input 1), " << im.inputType(1);
  FailureOr<Value> scale = quantizationParam(im, 1, scaleName, xDims, axis);
  FailureOr<Value> zero = quantizationParam(im, 2, zeroName, xDims, axis);
  if (failed(scale) || failed(zero))
    return failure();
  SmallVector<Value> ins{im.input(0), *scale};
  if (*zero)
    ins.push_back(*zero);
  return ins;
}

/// Checks DequantizeLinear/QuantizeLinear's axis and block_size; the axis
/// normalized for `rank` (a scale of one value, per tensor, ignores it, as
/// onnxruntime does: the quantizer writes axis 1 on 1-D biases).
FailureOr<int64_t> quantizationAxis(ONNXImporterImpl &im, int64_t rank) {
  if (int64_t bs = im.attrInt("block_size", 0); bs != 0)
    return im.error() << "blocked quantization (block_size " << bs
                      << ") is not supported",
           failure();
  RankedTensorType st = im.inputType(1);
  if (rank == 0 || (st.hasStaticShape() && st.getNumElements() == 1))
    return int64_t(0);
  return im.normalizeAxis(im.attrInt("axis", 1), rank);
}

/// Input i's element type for messages: "uint8", "int8", "int32", ...
std::string quantizedTypeName(ONNXImporterImpl &im, unsigned i) {
  Type et = im.inputType(i).getElementType();
  if (et.isInteger(8))
    return im.inputIsUnsigned(i) ? "uint8" : "int8";
  std::string s;
  llvm::raw_string_ostream os(s);
  os << et;
  return s;
}

/// Whether input `i` is a uint8 zero point (an absent one is not).
bool zeroPointIsUnsigned(ONNXImporterImpl &im, unsigned i) {
  return im.hasInput(i) && im.inputIsUnsigned(i);
}

/// DequantizeLinear(x, x_scale, x_zero_point?): y = (x - x_zero_point) *
/// x_scale in the scale's type, per tensor or per `axis`. x is uint8, int8
/// or int32 (the QDQ format's biases, with a zero point of 0). A constant x (a
/// weight stored quantized, as the QDQ format and the int8 embedding tables of
/// quantize_dynamic hold them) with f32 parameters is dequantized here, once,
/// into a weight.
LogicalResult importDequantizeLinear(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({"axis", "block_size", "output_dtype"})))
    return failure();
  if (failed(checkQuantizedInput(im, 0, "x", /*allowInt32=*/true)))
    return failure();
  RankedTensorType xt = im.inputType(0);
  SmallVector<AffineExpr> xDims = im.inputDims(0);
  auto et = dyn_cast<FloatType>(im.inputType(1).getElementType());
  if (!et || !(et.isF32() || et.isF16() || et.isBF16()))
    return im.error() << "x_scale (input 1) is " << im.inputType(1)
                      << "; expected f32, f16 or bf16";
  if (std::optional<int64_t> out = im.attrInt("output_dtype");
      out && *out != 0 && im.convertElementType(*out) != et)
    return im.error() << "output_dtype " << *out << " is not the scale's type ("
                      << et << ")";
  bool isUnsigned = im.inputIsUnsigned(0);
  if (im.hasInput(2)) {
    if (im.inputType(2).getElementType() != xt.getElementType() ||
        zeroPointIsUnsigned(im, 2) != isUnsigned)
      return im.error() << "x_zero_point (input 2) holds "
                        << quantizedTypeName(im, 2) << " and x (input 0) "
                        << quantizedTypeName(im, 0)
                        << ": they must be of one type";
  }
  FailureOr<int64_t> axis = quantizationAxis(im, xt.getRank());
  if (failed(axis))
    return failure();
  // A weight: dequantized once (the same arithmetic as below).
  if (xt.getElementType().isInteger(8) && xt.hasStaticShape() &&
      xt.getRank() > 0 && et.isF32() && im.isConstantInput(0) &&
      im.isConstantInput(1) && (!im.hasInput(2) || im.isConstantInput(2))) {
    FailureOr<std::vector<uint8_t>> q = im.constantBytes(0, "x");
    FailureOr<HostTensor> scales = im.constantInput(1, "x_scale");
    std::optional<HostTensor> zeros;
    if (im.hasInput(2)) {
      FailureOr<HostTensor> z = im.constantInput(2, "x_zero_point");
      if (failed(z))
        return failure();
      zeros = std::move(*z);
    }
    if (failed(q) || failed(scales))
      return failure();
    const HostTensor *hs = &*scales, *hz = zeros ? &*zeros : nullptr;
    int64_t channels = hs->numElements();
    bool perAxis = hs->shape.size() == 1 && channels == xt.getDimSize(*axis);
    if (channels != 1 && !perAxis)
      return im.error() << "x_scale (input 1) is " << hs->getType()
                        << "; expected one value, or one per index of axis "
                        << *axis << " of x " << xt;
    if (hz && hz->numElements() != channels)
      return im.error() << "x_zero_point (input 2) is " << hz->getType()
                        << "; expected as many values as x_scale (" << channels
                        << ")";
    {
      int64_t inner = 1;
      for (int64_t d = *axis + 1; d < xt.getRank(); ++d)
        inner *= xt.getDimSize(d);
      auto fill = [&](MutableArrayRef<char> out) {
        auto *y = reinterpret_cast<float *>(out.data());
        for (int64_t i = 0, e = xt.getNumElements(); i < e; ++i) {
          int64_t c = channels == 1 ? 0 : (i / inner) % channels;
          int32_t v = quantizedValue((*q)[i], isUnsigned);
          int32_t z = hz ? static_cast<int32_t>(hz->getInt(c)) : 0;
          y[i] =
              static_cast<float>(v - z) * static_cast<float>(hs->getDouble(c));
        }
      };
      FailureOr<Value> w =
          im.weightConstant(im.node->input(0) + ".dequantized",
                            RankedTensorType::get(xt.getShape(), et), fill);
      if (failed(w))
        return failure();
      im.setOutput(0, *w);
      return success();
    }
  }

  FailureOr<SmallVector<Value>> ins =
      quantizationOperands(im, xDims, *axis, "x_scale", "x_zero_point");
  if (failed(ins))
    return failure();
  im.setOutput(0,
               buildBroadcastGeneric(
                   im.builder, im.loc, *ins, im.typeFor(xDims, et),
                   [&](OpBuilder &b, Location loc, ValueRange a) -> Value {
                     Value zp = a.size() > 2 ? a[2] : Value();
                     return arith::MulFOp::create(
                         b, loc, centered(b, loc, a[0], zp, isUnsigned, et),
                         a[1]);
                   },
                   im.dynamicSizes(xDims)),
               xDims);
  return success();
}

/// round-half-to-even(x / scale) + zeroPoint, saturated to the quantized
/// range, as an i8 (f32 operands; zeroPointF the zero point as f32).
/// onnxruntime's order: a NaN quotient takes the range's low end.
Value quantizeScalar(OpBuilder &b, Location loc, Value x, Value scale,
                     Value zeroPointF, bool isUnsigned) {
  auto [lo, hi] = quantizedRange(isUnsigned);
  Type f32 = b.getF32Type();
  Value q = math::RoundEvenOp::create(b, loc,
                                      arith::DivFOp::create(b, loc, x, scale));
  q = arith::AddFOp::create(b, loc, q, zeroPointF);
  q = arith::MaxNumFOp::create(
      b, loc, q, arith::ConstantOp::create(b, loc, b.getFloatAttr(f32, lo)));
  q = arith::MinNumFOp::create(
      b, loc, q, arith::ConstantOp::create(b, loc, b.getFloatAttr(f32, hi)));
  Value i = arith::FPToSIOp::create(b, loc, b.getI32Type(), q);
  return arith::TruncIOp::create(b, loc, b.getI8Type(), i);
}

/// An f32 operand: extended from f16/bf16.
Value toF32(OpBuilder &b, Location loc, Value v) {
  Type f32 = b.getF32Type();
  return v.getType() == f32 ? v : arith::ExtFOp::create(b, loc, f32, v);
}

/// QuantizeLinear(x, y_scale, y_zero_point?): y = saturate(round(x /
/// y_scale) + y_zero_point), rounded half to even, per tensor or per
/// `axis`; y is uint8 or int8 as the zero point (or output_dtype; uint8
/// when neither says).
LogicalResult importQuantizeLinear(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes(
          {"axis", "block_size", "output_dtype", "saturate"})))
    return failure();
  RankedTensorType xt = im.inputType(0);
  auto xe = dyn_cast<FloatType>(xt.getElementType());
  if (!xe || !(xe.isF32() || xe.isF16() || xe.isBF16()))
    return im.error() << "x (input 0) is " << xt
                      << "; expected f32, f16 or bf16";
  if (!isa<FloatType>(im.inputType(1).getElementType()))
    return im.error() << "y_scale (input 1) is " << im.inputType(1)
                      << "; expected floats";
  bool isUnsigned = true;
  if (im.hasInput(2)) {
    if (failed(checkQuantizedInput(im, 2, "y_zero_point")))
      return failure();
    isUnsigned = im.inputIsUnsigned(2);
  } else if (std::optional<int64_t> out = im.attrInt("output_dtype");
             out && *out != 0) {
    if (*out != onnx::TensorProto::UINT8 && *out != onnx::TensorProto::INT8)
      return im.error() << "output_dtype " << *out
                        << " is not supported (uint8 or int8)";
    isUnsigned = *out == onnx::TensorProto::UINT8;
  }
  SmallVector<AffineExpr> xDims = im.inputDims(0);
  FailureOr<int64_t> axis = quantizationAxis(im, xt.getRank());
  if (failed(axis))
    return failure();
  FailureOr<SmallVector<Value>> ins =
      quantizationOperands(im, xDims, *axis, "y_scale", "y_zero_point");
  if (failed(ins))
    return failure();
  im.setOutput(
      0,
      buildBroadcastGeneric(
          im.builder, im.loc, *ins, im.typeFor(xDims, im.builder.getI8Type()),
          [&](OpBuilder &b, Location loc, ValueRange a) -> Value {
            Value zp =
                a.size() > 2
                    ? centered(b, loc, a[2], Value(), isUnsigned,
                               b.getF32Type())
                    : arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0));
            return quantizeScalar(b, loc, toF32(b, loc, a[0]),
                                  toF32(b, loc, a[1]), zp, isUnsigned);
          },
          im.dynamicSizes(xDims)),
      xDims);
  if (isUnsigned)
    im.setOutputUnsigned(0);
  return success();
}

/// x (dimensions `xDims`) reduced to a scalar (rank 0) by `combine`, from
/// `init`: first along the last dimension (a reduction of rows, in
/// parallel over them), then the rows' results.
Value reduceToScalar(
    ONNXImporterImpl &im, Value x, ArrayRef<AffineExpr> xDims, double init,
    function_ref<Value(OpBuilder &, Location, Value, Value)> combine) {
  OpBuilder &b = im.builder;
  MLIRContext *ctx = b.getContext();
  auto reduce = [&](Value in, int64_t keep,
                    ArrayRef<AffineExpr> outDims) -> Value {
    auto t = cast<RankedTensorType>(in.getType());
    int64_t rank = t.getRank();
    Value acc = buildFilled(b, im.loc, im.typeFor(outDims, t.getElementType()),
                            init, im.dynamicSizes(outDims));
    SmallVector<AffineExpr> outExprs;
    SmallVector<utils::IteratorType> iters;
    for (int64_t d = 0; d < rank; ++d) {
      iters.push_back(d < keep ? utils::IteratorType::parallel
                               : utils::IteratorType::reduction);
      if (d < keep)
        outExprs.push_back(getAffineDimExpr(d, ctx));
    }
    return linalg::GenericOp::create(
               b, im.loc, acc.getType(), ValueRange{in}, ValueRange{acc},
               ArrayRef<AffineMap>{AffineMap::getMultiDimIdentityMap(rank, ctx),
                                   AffineMap::get(rank, 0, outExprs, ctx)},
               iters,
               [&](OpBuilder &nb, Location nloc, ValueRange a) {
                 linalg::YieldOp::create(nb, nloc,
                                         combine(nb, nloc, a[0], a[1]));
               })
        .getResult(0);
  };
  if (xDims.size() < 2)
    return reduce(x, 0, {});
  ArrayRef<AffineExpr> rows = xDims.drop_back();
  return reduce(reduce(x, rows.size(), rows), 0, {});
}

/// The derivedValues key of a DynamicQuantizeLinear's y and zero point.
std::string dynamicQuantizeKey(StringRef y, StringRef zeroPoint) {
  return ("dql:" + y + ":" + zeroPoint).str();
}

/// The scale (f32) and zero point (uint8) of x (dimensions `xDims`), rank-0
/// tensors, as onnxruntime's DynamicQuantizeLinear computes them: the range
/// [min(x, 0), max(x, 0)] over the whole tensor, scale = (max - min) / 255
/// (1 when the range is empty), zero point = round(clamp(-min / scale, 0,
/// 255)).
std::pair<Value, Value> buildDynamicQuantization(ONNXImporterImpl &im, Value x,
                                                 ArrayRef<AffineExpr> xDims) {
  OpBuilder &b = im.builder;
  Location loc = im.loc;
  // One scale for every position of a [batch, sequence, ...] activation.
  if (xDims.size() >= 2)
    im.noteCrossPosition(
        "node '" + im.node->name() + "' (" + im.node->op_type() +
        ") quantizes every position of its input with one scale, so a "
        "decode step, which computes only the new positions, would compute "
        "other values than the whole sequence");
  // From 0: the range always includes zero.
  Value lo = reduceToScalar(
      im, x, xDims, 0.0,
      [](OpBuilder &nb, Location l, Value v, Value acc) -> Value {
        return arith::MinNumFOp::create(nb, l, v, acc);
      });
  Value hi = reduceToScalar(
      im, x, xDims, 0.0,
      [](OpBuilder &nb, Location l, Value v, Value acc) -> Value {
        return arith::MaxNumFOp::create(nb, l, v, acc);
      });
  Type f32 = b.getF32Type(), i8 = b.getI8Type();
  auto scalarF32 = RankedTensorType::get({}, f32);
  auto scalarI8 = RankedTensorType::get({}, i8);
  MLIRContext *ctx = b.getContext();
  AffineMap scalarMap = AffineMap::get(0, 0, {}, ctx);
  auto params = linalg::GenericOp::create(
      b, loc, TypeRange{scalarF32, scalarI8}, ValueRange{lo, hi},
      ValueRange{tensor::EmptyOp::create(b, loc, scalarF32, ValueRange{}),
                 tensor::EmptyOp::create(b, loc, scalarI8, ValueRange{})},
      SmallVector<AffineMap>(4, scalarMap), ArrayRef<utils::IteratorType>{},
      [&](OpBuilder &nb, Location l, ValueRange a) {
        auto cst = [&](double v) -> Value {
          return arith::ConstantOp::create(nb, l, nb.getF32FloatAttr(v));
        };
        Value range = arith::SubFOp::create(nb, l, a[1], a[0]);
        Value empty =
            arith::CmpFOp::create(nb, l, arith::CmpFPredicate::OEQ, a[1], a[0]);
        Value scale = arith::SelectOp::create(
            nb, l, empty, cst(1.0),
            arith::DivFOp::create(nb, l, range, cst(255)));
        // qmin - min / scale, clamped, rounded half to even.
        Value zp = arith::SubFOp::create(
            nb, l, cst(0), arith::DivFOp::create(nb, l, a[0], scale));
        zp = arith::MinNumFOp::create(
            nb, l, arith::MaxNumFOp::create(nb, l, zp, cst(0)), cst(255));
        zp = math::RoundEvenOp::create(nb, l, zp);
        Value zpI = arith::TruncIOp::create(
            nb, l, i8, arith::FPToSIOp::create(nb, l, nb.getI32Type(), zp));
        linalg::YieldOp::create(nb, l, ValueRange{scale, zpI});
      });
  return {params.getResult(0), params.getResult(1)};
}

/// x (dimensions `dims`) quantized to uint8 with the rank-0 scale and zero
/// point: DynamicQuantizeLinear's y.
Value buildQuantized(ONNXImporterImpl &im, Value x, ArrayRef<AffineExpr> dims,
                     Value scale, Value zero) {
  return buildBroadcastGeneric(
      im.builder, im.loc, {x, scale, zero},
      im.typeFor(dims, im.builder.getI8Type()),
      [&](OpBuilder &b, Location loc, ValueRange a) -> Value {
        Value zpF = centered(b, loc, a[2], Value(), /*isUnsigned=*/true,
                             b.getF32Type());
        return quantizeScalar(b, loc, a[0], a[1], zpF, /*isUnsigned=*/true);
      },
      im.dynamicSizes(dims));
}

/// DynamicQuantizeLinear's y less its zero point, as f32, computed from x:
/// clamp(round(x / scale), -zero point, 255 - zero point).
Value buildQuantizedCentered(ONNXImporterImpl &im, Value x,
                             ArrayRef<AffineExpr> dims, Value scale,
                             Value zero) {
  return buildBroadcastGeneric(
      im.builder, im.loc, {x, scale, zero},
      im.typeFor(dims, im.builder.getF32Type()),
      [&](OpBuilder &b, Location loc, ValueRange a) -> Value {
        Value zf = centered(b, loc, a[2], Value(), /*isUnsigned=*/true,
                            b.getF32Type());
        Value q = math::RoundEvenOp::create(
            b, loc, arith::DivFOp::create(b, loc, a[0], a[1]));
        Value lo = arith::NegFOp::create(b, loc, zf);
        Value hi = arith::SubFOp::create(
            b, loc, arith::ConstantOp::create(b, loc, b.getF32FloatAttr(255)),
            zf);
        // maxnumf first: a NaN quotient is y = 0, -zero point.
        return arith::MinNumFOp::create(
            b, loc, arith::MaxNumFOp::create(b, loc, q, lo), hi);
      },
      im.dynamicSizes(dims));
}

/// DynamicQuantizeLinear(x) -> y (uint8), y_scale, y_zero_point (uint8):
/// buildDynamicQuantization's scale and zero point, then QuantizeLinear.
LogicalResult importDynamicQuantizeLinear(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({})))
    return failure();
  RankedTensorType xt = im.inputType(0);
  if (!xt.getElementType().isF32())
    return im.error() << "x (input 0) is " << xt << "; expected f32";
  SmallVector<AffineExpr> xDims = im.inputDims(0);
  Value x = im.input(0);
  auto [scale, zeroPoint] = buildDynamicQuantization(im, x, xDims);
  Value y = buildQuantized(im, x, xDims, scale, zeroPoint);
  im.setOutput(0, y, xDims);
  im.setOutputUnsigned(0);
  im.setOutput(1, scale);
  im.setOutput(2, zeroPoint);
  im.setOutputUnsigned(2);
  // For a MatMulInteger of y less y_zero_point (quantize_dynamic's chain):
  // x, the scale and the zero point, from which it computes that operand
  // without y.
  if (im.hasOutput(0) && im.hasOutput(2)) {
    std::string key =
        dynamicQuantizeKey(im.node->output(0), im.node->output(2));
    im.derivedValues[key + ":x"] = x;
    im.derivedValues[key + ":scale"] = scale;
    im.derivedValues[key + ":zero"] = zeroPoint;
  }
  return success();
}

/// Fails, naming the node, unless A and B (dimensions `ad`, `bd`) of a
/// quantized product have two dimensions or more.
LogicalResult checkMatrixOperands(ONNXImporterImpl &im, ArrayRef<AffineExpr> ad,
                                  ArrayRef<AffineExpr> bd) {
  if (ad.size() >= 2 && bd.size() >= 2)
    return success();
  return im.error() << "A " << im.dimsString(ad) << " and B "
                    << im.dimsString(bd) << " must have two dimensions or more";
}

/// Whether zero point input `zpInput` (when present) holds the type of
/// operand `i`; an error naming both otherwise.
LogicalResult checkZeroPointType(ONNXImporterImpl &im, unsigned i,
                                 unsigned zpInput) {
  if (!im.hasInput(zpInput))
    return success();
  RankedTensorType zt = im.inputType(zpInput);
  if (zt.getElementType().isInteger(8) &&
      im.inputIsUnsigned(zpInput) == im.inputIsUnsigned(i))
    return success();
  return im.error() << (i == 0 ? "a_zero_point" : "b_zero_point") << " (input "
                    << zpInput << ") holds " << quantizedTypeName(im, zpInput)
                    << " and " << (i == 0 ? "A" : "B") << " (input " << i
                    << ") " << quantizedTypeName(im, i)
                    << ": they must be of one type";
}

/// A MatMulInteger operand (input `i`, dimensions `dims`) less its zero
/// point (input `zpInput`), as f32: the zero point is one value, one per
/// row of A (`perRow`: [M], or A's shape with the last dimension 1) or
/// one per column of B ([N], or B's shape with the second-to-last 1).
/// A constant 2-D B with a constant zero point is converted once, into a
/// weight.
FailureOr<Value> integerOperand(ONNXImporterImpl &im, unsigned i,
                                unsigned zpInput, bool perRow,
                                ArrayRef<AffineExpr> dims) {
  StringRef what = i == 0 ? "a_zero_point" : "b_zero_point";
  bool isUnsigned = im.inputIsUnsigned(i);
  Type f32 = im.builder.getF32Type();
  Value zp;
  RankedTensorType zt;
  int64_t rank = dims.size();
  if (im.hasInput(zpInput)) {
    if (failed(checkZeroPointType(im, i, zpInput)))
      return failure();
    zt = im.inputType(zpInput);
    SmallVector<AffineExpr> zd = im.inputDims(zpInput);
    // The dimension a zero point per row or column runs along.
    AffineExpr along = perRow ? dims[rank - 2] : dims[rank - 1];
    if (zt.hasStaticShape() && zt.getNumElements() == 1) {
      zp = buildReshape(im.builder, im.loc, im.input(zpInput),
                        RankedTensorType::get({}, zt.getElementType()));
    } else if (zt.getRank() == 1 && zd[0] == along) {
      SmallVector<AffineExpr> out{zd[0]};
      if (perRow)
        out.push_back(im.cst(1));
      zp = buildReshapeDims(im, im.input(zpInput), zd, out);
    } else if (static_cast<int64_t>(zd.size()) == rank &&
               zd[perRow ? rank - 1 : rank - 2] == im.cst(1) &&
               succeeded(ONNXImporterImpl::broadcastDims(dims, zd))) {
      zp = im.input(zpInput);
    } else {
      return im.error() << what << " (input " << zpInput << ") has dimensions "
                        << im.dimsString(zd)
                        << "; expected one value, or one per "
                        << (perRow ? "row of A" : "column of B") << " ("
                        << im.dimString(along) << ")";
    }
  }

  RankedTensorType t = im.inputType(i);
  if (!perRow && rank == 2 && t.hasStaticShape() && im.isConstantInput(i) &&
      (!zp || im.isConstantInput(zpInput))) {
    FailureOr<std::vector<uint8_t>> q = im.constantBytes(i, "B");
    if (failed(q))
      return failure();
    std::optional<HostTensor> zeros;
    if (zp) {
      FailureOr<HostTensor> z = im.constantInput(zpInput, what);
      if (failed(z))
        return failure();
      zeros = std::move(*z);
    }
    const HostTensor *hz = zeros ? &*zeros : nullptr;
    {
      int64_t K = t.getDimSize(0), N = t.getDimSize(1);
      bool perColumn = hz && hz->numElements() == N && N != 1;
      auto fill = [&](MutableArrayRef<char> out) {
        auto *w = reinterpret_cast<float *>(out.data());
        for (int64_t k = 0; k < K; ++k)
          for (int64_t n = 0; n < N; ++n) {
            int32_t v = quantizedValue((*q)[k * N + n], isUnsigned);
            int32_t z =
                hz ? static_cast<int32_t>(hz->getInt(perColumn ? n : 0)) : 0;
            w[k * N + n] = static_cast<float>(v - z);
          }
      };
      return im.weightConstant(im.node->input(i) + ".centered",
                               RankedTensorType::get({K, N}, f32), fill);
    }
  }
  // One per operand and zero point: Q, K and V's products share it.
  // (The role is in the key: a zero point per row and one per column of
  // one tensor broadcast differently.)
  std::string key = std::string(perRow ? "centered-rows:" : "centered-cols:") +
                    im.node->input(i) + ":" +
                    (zp ? im.node->input(zpInput) : std::string());
  if (Value v = im.derivedValues.lookup(key))
    return v;
  // y - zero point of a DynamicQuantizeLinear(x) is clamp(round(x / scale),
  // -zero point, 255 - zero point): computed from x in one pass.
  if (zp) {
    std::string dql =
        dynamicQuantizeKey(im.node->input(i), im.node->input(zpInput));
    Value x = im.derivedValues.lookup(dql + ":x");
    Value scale = im.derivedValues.lookup(dql + ":scale");
    Value zero = im.derivedValues.lookup(dql + ":zero");
    if (x && scale && zero) {
      Value v = buildQuantizedCentered(im, x, dims, scale, zero);
      im.derivedValues[key] = v;
      return v;
    }
  }
  SmallVector<Value> ins{im.input(i)};
  if (zp)
    ins.push_back(zp);
  Value v = buildBroadcastGeneric(
      im.builder, im.loc, ins, im.typeFor(dims, f32),
      [&](OpBuilder &b, Location loc, ValueRange a) -> Value {
        return centered(b, loc, a[0], a.size() > 1 ? a[1] : Value(), isUnsigned,
                        b.getF32Type());
      },
      im.dynamicSizes(dims));
  im.derivedValues[key] = v;
  return v;
}

/// Whether an integer product applies: B (input `bInput`) a constant 2-D
/// tensor of static shape, its zero point (input `bZp`) absent or a
/// constant of one value or one per column, A's zero point (input `aZp`,
/// -1: none) absent or one value, A's last dimension B's first.
bool integerProductApplies(ONNXImporterImpl &im, int aZp, unsigned bInput,
                           unsigned bZp, ArrayRef<AffineExpr> ad) {
  RankedTensorType bt = im.inputType(bInput);
  if (bt.getRank() != 2 || !bt.hasStaticShape() ||
      !im.isConstantInput(bInput) || ad.size() < 2 ||
      ad.back() != im.cst(bt.getDimSize(0)))
    return false;
  if (im.hasInput(bZp)) {
    RankedTensorType zt = im.inputType(bZp);
    if (!im.isConstantInput(bZp) || !zt.hasStaticShape() ||
        !(zt.getNumElements() == 1 ||
          (zt.getRank() == 1 && zt.getDimSize(0) == bt.getDimSize(1))))
      return false;
  }
  if (aZp >= 0 && im.hasInput(aZp)) {
    RankedTensorType zt = im.inputType(aZp);
    if (!zt.hasStaticShape() || zt.getNumElements() != 1)
      return false;
  }
  return true;
}

/// The sums of the rows (the last dimension) of `x`, 8-bit integers
/// (uint8 with `isUnsigned`) of dimensions `dims`, as i32 [dims less the
/// last].
Value reduceRows(ONNXImporterImpl &im, Value x, ArrayRef<AffineExpr> dims,
                 bool isUnsigned) {
  OpBuilder &b = im.builder;
  MLIRContext *ctx = b.getContext();
  int64_t rank = dims.size();
  SmallVector<AffineExpr> rows(dims.begin(), dims.end() - 1);
  Value acc = buildFilled(b, im.loc, im.typeFor(rows, b.getI32Type()), 0.0,
                          im.dynamicSizes(rows));
  SmallVector<utils::IteratorType> iters(rank - 1,
                                         utils::IteratorType::parallel);
  iters.push_back(utils::IteratorType::reduction);
  return linalg::GenericOp::create(
             b, im.loc, acc.getType(), ValueRange{x}, ValueRange{acc},
             ArrayRef<AffineMap>{
                 AffineMap::getMultiDimIdentityMap(rank, ctx),
                 AffineMap::getMultiDimIdentityMap(rank, ctx).getMajorSubMap(
                     rank - 1)},
             iters,
             [&](OpBuilder &nb, Location l, ValueRange a) {
               Value v = extendQuantized(nb, l, a[0], isUnsigned);
               linalg::YieldOp::create(
                   nb, l, arith::AddIOp::create(nb, l, a[1], v).getResult());
             })
      .getResult(0);
}

/// The product (A - a_zero_point)(B - b_zero_point) of 8-bit A (`a`, the
/// graph's tensor `aName`, dimensions `ad`, uint8 with `aUnsigned`; its
/// zero point `aZero` a one-element tensor or null) and the constant 2-D B
/// of input `bInput` (zero point input `bZp`), exactly, as onnxruntime's
/// int32 sums, in
/// element type `outElem` (i32, or f32 converted from them); `outDims` is
/// set to the result's dimensions. integerProductApplies must hold.
///
/// The product itself is one of uint8 by int8, the operands of x86's
/// vpdpbusd (`--masformer-tile-contractions` runs it there, other targets
/// in f32, exact up to 2^24): A' = A (+128 for int8 A) and B' = B (-128
/// for uint8 B) with zero points za' and zb' moved alike, then
/// (A - za)(B - zb) = A'B' - za' C'[n] - zb'[n] R'[m] + K za' zb'[n], with
/// C' the column sums of B' (constants) and R' the row sums of A' (only
/// where some zb' is not zero).
FailureOr<Value> buildIntegerProduct(ONNXImporterImpl &im, Value a,
                                     StringRef aName, ArrayRef<AffineExpr> ad,
                                     bool aUnsigned, Value aZero,
                                     unsigned bInput, unsigned bZp,
                                     Type outElem,
                                     SmallVector<AffineExpr> &outDims) {
  OpBuilder &b = im.builder;
  Location loc = im.loc;
  MLIRContext *ctx = b.getContext();
  Type i8 = b.getI8Type(), i32 = b.getI32Type();
  RankedTensorType bt = im.inputType(bInput);
  int64_t K = bt.getDimSize(0), N = bt.getDimSize(1);
  bool bUnsigned = im.inputIsUnsigned(bInput);
  FailureOr<std::vector<uint8_t>> bytes = im.constantBytes(bInput, "B");
  if (failed(bytes))
    return failure();
  std::vector<int32_t> zb(N, 0);
  if (im.hasInput(bZp)) {
    FailureOr<HostTensor> z = im.constantInput(bZp, "b_zero_point");
    if (failed(z))
      return failure();
    for (int64_t n = 0; n < N; ++n)
      zb[n] = static_cast<int32_t>(z->getInt(z->numElements() == 1 ? 0 : n));
  }
  // B' (int8) = B - 128 for uint8 B: its bytes with the top bit flipped.
  int32_t offB = bUnsigned ? 128 : 0;
  std::vector<int32_t> colSums(N, 0);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n)
      colSums[n] += quantizedValue((*bytes)[k * N + n], bUnsigned) - offB;
  bool rowSums = false;
  std::vector<int32_t> zbShifted(N), d(N);
  for (int64_t n = 0; n < N; ++n) {
    zbShifted[n] = zb[n] - offB;
    rowSums |= zbShifted[n] != 0;
    d[n] = static_cast<int32_t>(K) * zbShifted[n] - colSums[n];
  }
  std::string bName = im.node->input(bInput);
  FailureOr<Value> bw = im.weightConstant(
      bName + ".s8", RankedTensorType::get({K, N}, i8),
      [&](MutableArrayRef<char> out) {
        for (int64_t i = 0; i < K * N; ++i)
          out[i] = static_cast<char>((*bytes)[i] ^ (bUnsigned ? 0x80 : 0));
      });
  if (failed(bw))
    return failure();
  auto columnConstant = [&](StringRef suffix,
                            ArrayRef<int32_t> v) -> FailureOr<Value> {
    return im.weightConstant(
        (bName + suffix + ":" +
         (im.hasInput(bZp) ? im.node->input(bZp) : std::string()))
            .str(),
        RankedTensorType::get({N}, i32), [&](MutableArrayRef<char> out) {
          std::memcpy(out.data(), v.data(), N * sizeof(int32_t));
        });
  };
  FailureOr<Value> dConst = columnConstant(".colterm", d);
  if (failed(dConst))
    return failure();

  // A' (uint8) = A + 128 for int8 A: the top bit flipped (one for the
  // products that share A: the raise sees Q, K and V project one source).
  std::string aKey = ("uint8:" + aName).str();
  if (Value shared = im.derivedValues.lookup(aKey); !aUnsigned && shared)
    a = shared;
  else if (!aUnsigned)
    a = im.derivedValues[aKey] = buildBroadcastGeneric(
        b, loc, {a}, cast<RankedTensorType>(a.getType()),
        [&](OpBuilder &nb, Location l, ValueRange v) -> Value {
          return arith::XOrIOp::create(
              nb, l, v[0],
              arith::ConstantOp::create(nb, l, nb.getIntegerAttr(i8, -128)));
        },
        im.dynamicSizes(ad));

  // A'B': loops batch..., m, n, k.
  int64_t br = ad.size() - 2, rank = br + 3;
  int64_t dm = br, dn = br + 1, dk = br + 2;
  SmallVector<AffineExpr> aExprs, cExprs;
  for (int64_t d0 = 0; d0 < br + 2; ++d0)
    cExprs.push_back(getAffineDimExpr(d0, ctx));
  aExprs.assign(cExprs.begin(), cExprs.begin() + br);
  aExprs.push_back(getAffineDimExpr(dm, ctx));
  aExprs.push_back(getAffineDimExpr(dk, ctx));
  outDims.assign(ad.begin(), ad.end() - 1);
  outDims.push_back(im.cst(N));
  RankedTensorType pt = im.typeFor(outDims, i32);
  Value init = buildFilled(b, loc, pt, 0.0, im.dynamicSizes(outDims));
  SmallVector<utils::IteratorType> iters(br + 2, utils::IteratorType::parallel);
  iters.push_back(utils::IteratorType::reduction);
  Value p =
      linalg::GenericOp::create(
          b, loc, pt, ValueRange{a, *bw}, ValueRange{init},
          ArrayRef<AffineMap>{AffineMap::get(rank, 0, aExprs, ctx),
                              AffineMap::get(rank, 0,
                                             {getAffineDimExpr(dk, ctx),
                                              getAffineDimExpr(dn, ctx)},
                                             ctx),
                              AffineMap::get(rank, 0, cExprs, ctx)},
          iters,
          [&](OpBuilder &nb, Location l, ValueRange v) {
            Value x = arith::ExtUIOp::create(nb, l, i32, v[0]);
            Value y = arith::ExtSIOp::create(nb, l, i32, v[1]);
            Value prod = arith::MulIOp::create(nb, l, x, y);
            linalg::YieldOp::create(
                nb, l, arith::AddIOp::create(nb, l, v[2], prod).getResult());
          })
          .getResult(0);

  // The corrections, in the epilogue: P + za' D[n] - zb'[n] R'[m].
  SmallVector<Value> ins{p, *dConst};
  if (aZero)
    ins.push_back(buildReshape(b, loc, aZero, RankedTensorType::get({}, i8)));
  if (rowSums) {
    FailureOr<Value> z = columnConstant(".zeropoint", zbShifted);
    if (failed(z))
      return failure();
    SmallVector<AffineExpr> rows(ad.begin(), ad.end() - 1);
    SmallVector<AffineExpr> rowsOne(rows);
    rowsOne.push_back(im.cst(1));
    // (One per A: the products that share it share its row sums.)
    Value &r = im.derivedValues["row-sums:" + aKey];
    if (!r)
      r = reduceRows(im, a, ad, /*isUnsigned=*/true);
    ins.push_back(buildReshapeDims(im, r, rows, rowsOne));
    ins.push_back(*z);
  }
  int32_t offA = aUnsigned ? 0 : 128;
  bool hasZero = !!aZero;
  return buildBroadcastGeneric(
      b, loc, ins, im.typeFor(outDims, outElem),
      [&](OpBuilder &nb, Location l, ValueRange v) -> Value {
        auto c32 = [&](int32_t x) -> Value {
          return arith::ConstantOp::create(nb, l, nb.getI32IntegerAttr(x));
        };
        // za' = za (+128 for int8 A).
        Value za = hasZero ? extendQuantized(nb, l, v[2], aUnsigned) : c32(0);
        if (offA)
          za = arith::AddIOp::create(nb, l, za, c32(offA));
        Value y = arith::AddIOp::create(nb, l, v[0],
                                        arith::MulIOp::create(nb, l, za, v[1]));
        if (rowSums) {
          unsigned at = hasZero ? 3 : 2;
          y = arith::SubIOp::create(
              nb, l, y, arith::MulIOp::create(nb, l, v[at + 1], v[at]));
        }
        if (outElem.isF32())
          return arith::SIToFPOp::create(nb, l, outElem, y);
        return y;
      },
      im.dynamicSizes(outDims));
}

/// MatMulInteger(A, B, a_zero_point?, b_zero_point?): the int32 product
/// (A - a_zero_point)(B - b_zero_point) of 8-bit operands, as numpy's
/// matmul. Against constant 2-D weights, an integer product
/// (buildIntegerProduct); otherwise computed in f32 (each operand less its
/// zero point is an integer of at most 255 in magnitude: exact, in bf16
/// too), then converted, and a Cast of the result to float takes the f32
/// product as it is.
LogicalResult importMatMulInteger(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({})))
    return failure();
  if (failed(checkQuantizedInput(im, 0, "A")) ||
      failed(checkQuantizedInput(im, 1, "B")))
    return failure();
  SmallVector<AffineExpr> ad = im.inputDims(0), bd = im.inputDims(1);
  if (failed(checkMatrixOperands(im, ad, bd)) ||
      failed(checkZeroPointType(im, 0, 2)) ||
      failed(checkZeroPointType(im, 1, 3)))
    return failure();
  SmallVector<AffineExpr> outDims;
  if (integerProductApplies(im, 2, 1, 3, ad)) {
    FailureOr<Value> y = buildIntegerProduct(
        im, im.input(0), im.node->input(0), ad, im.inputIsUnsigned(0),
        im.hasInput(2) ? im.input(2) : Value(), 1, 3, im.builder.getI32Type(),
        outDims);
    if (failed(y))
      return failure();
    im.setOutput(0, *y, outDims);
    return success();
  }
  FailureOr<Value> a = integerOperand(im, 0, 2, /*perRow=*/true, ad);
  if (failed(a))
    return failure();
  FailureOr<Value> b = integerOperand(im, 1, 3, /*perRow=*/false, bd);
  if (failed(b))
    return failure();
  FailureOr<Value> y = buildMatMul(im, *a, ad, *b, bd, outDims);
  if (failed(y))
    return failure();
  Value yi = buildBroadcastGeneric(
      im.builder, im.loc, {*y}, im.typeFor(outDims, im.builder.getI32Type()),
      [](OpBuilder &nb, Location l, ValueRange v) -> Value {
        return arith::FPToSIOp::create(nb, l, nb.getI32Type(), v[0]);
      },
      im.dynamicSizes(outDims));
  im.setOutput(0, yi, outDims);
  im.setOutputExactFloat(0, *y);
  return success();
}

/// Y * (a_scale * b_scale) + bias, onnxruntime's output of its quantized
/// products: a_scale one value, b_scale one or one per column ([N]), bias
/// [N] (absent: -1); inputs of the current node.
FailureOr<Value> scaleProduct(ONNXImporterImpl &im, Value y,
                              ArrayRef<AffineExpr> yDims, Value aScale,
                              unsigned bScaleInput, int biasInput) {
  AffineExpr n = yDims.back();
  auto oneOrColumns = [&](unsigned i, StringRef what,
                          bool allowOne) -> FailureOr<Value> {
    RankedTensorType t = im.inputType(i);
    if (!t.getElementType().isF32())
      return im.error() << what << " (input " << i << ") is " << t
                        << "; expected f32";
    if (allowOne && t.hasStaticShape() && t.getNumElements() == 1)
      return buildReshape(im.builder, im.loc, im.input(i),
                          RankedTensorType::get({}, t.getElementType()));
    SmallVector<AffineExpr> d = im.inputDims(i);
    if (d.size() == 1 && d[0] == n)
      return im.input(i);
    return im.error() << what << " (input " << i << ") has dimensions "
                      << im.dimsString(d) << "; expected "
                      << (allowOne ? "one value or " : "") << "["
                      << im.dimString(n) << "] (one per column)";
  };
  FailureOr<Value> bScale = oneOrColumns(bScaleInput, "b_scale", true);
  if (failed(bScale))
    return failure();
  SmallVector<Value> ins{y, aScale, *bScale};
  if (biasInput >= 0 && im.hasInput(biasInput)) {
    FailureOr<Value> bias = oneOrColumns(biasInput, "bias", false);
    if (failed(bias))
      return failure();
    ins.push_back(*bias);
  }
  Type f32 = im.builder.getF32Type();
  return buildBroadcastGeneric(
      im.builder, im.loc, ins, im.typeFor(yDims, f32),
      [&](OpBuilder &b, Location loc, ValueRange a) -> Value {
        // onnxruntime multiplies by the product of the scales.
        Value s = arith::MulFOp::create(b, loc, a[1], a[2]);
        Value r = arith::MulFOp::create(b, loc, a[0], s);
        return a.size() > 3 ? arith::AddFOp::create(b, loc, r, a[3]) : r;
      },
      im.dynamicSizes(yDims));
}

/// com.microsoft.DynamicQuantizeMatMul(A, B, b_scale, b_zero_point?, bias?),
/// what onnxruntime's graph optimizer makes of quantize_dynamic's
/// DynamicQuantizeLinear + MatMulInteger + Cast + Mul (+ Add): A (f32)
/// quantized to uint8 with one scale, times B (8-bit) less its zero point,
/// scaled by a_scale * b_scale, plus bias.
LogicalResult importDynamicQuantizeMatMul(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({})))
    return failure();
  RankedTensorType at = im.inputType(0);
  if (!at.getElementType().isF32())
    return im.error() << "A (input 0) is " << at << "; expected f32";
  if (failed(checkQuantizedInput(im, 1, "B")))
    return failure();
  SmallVector<AffineExpr> ad = im.inputDims(0), bd = im.inputDims(1);
  if (failed(checkMatrixOperands(im, ad, bd)))
    return failure();
  if (failed(checkZeroPointType(im, 1, 3)))
    return failure();
  Value x = im.input(0);
  // One quantization of x for the products that read it (Q, K and V).
  std::string key = "dynamic-quantization:" + im.node->input(0);
  Value scale = im.derivedValues.lookup(key + ":scale");
  Value zero = im.derivedValues.lookup(key + ":zero");
  if (!scale || !zero) {
    std::tie(scale, zero) = buildDynamicQuantization(im, x, ad);
    im.derivedValues[key + ":scale"] = scale;
    im.derivedValues[key + ":zero"] = zero;
  }
  SmallVector<AffineExpr> outDims;
  FailureOr<Value> y;
  if (integerProductApplies(im, -1, 1, 3, ad)) {
    Value q = im.derivedValues.lookup(key + ":y");
    if (!q)
      q = im.derivedValues[key + ":y"] = buildQuantized(im, x, ad, scale, zero);
    y = buildIntegerProduct(im, q, key, ad, /*aUnsigned=*/true, zero, 1, 3,
                            im.builder.getF32Type(), outDims);
  } else {
    Value a = buildQuantizedCentered(im, x, ad, scale, zero);
    FailureOr<Value> b = integerOperand(im, 1, 3, /*perRow=*/false, bd);
    if (failed(b))
      return failure();
    y = buildMatMul(im, a, ad, *b, bd, outDims);
  }
  if (failed(y))
    return failure();
  FailureOr<Value> out = scaleProduct(im, *y, outDims, scale, 2, 4);
  if (failed(out))
    return failure();
  im.setOutput(0, *out, outDims);
  return success();
}

/// com.microsoft.MatMulIntegerToFloat(A, B, a_scale, b_scale,
/// a_zero_point?, b_zero_point?, bias?): MatMulInteger's product, scaled by
/// a_scale * b_scale, plus bias (f32).
LogicalResult importMatMulIntegerToFloat(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({})))
    return failure();
  if (failed(checkQuantizedInput(im, 0, "A")) ||
      failed(checkQuantizedInput(im, 1, "B")))
    return failure();
  SmallVector<AffineExpr> ad = im.inputDims(0), bd = im.inputDims(1);
  if (failed(checkMatrixOperands(im, ad, bd)))
    return failure();
  RankedTensorType st = im.inputType(2);
  if (!st.getElementType().isF32() || !st.hasStaticShape() ||
      st.getNumElements() != 1)
    return im.error() << "a_scale (input 2) is " << st
                      << "; expected one f32 value";
  if (failed(checkZeroPointType(im, 0, 4)) ||
      failed(checkZeroPointType(im, 1, 5)))
    return failure();
  SmallVector<AffineExpr> outDims;
  FailureOr<Value> y;
  if (integerProductApplies(im, 4, 1, 5, ad)) {
    y = buildIntegerProduct(im, im.input(0), im.node->input(0), ad,
                            im.inputIsUnsigned(0),
                            im.hasInput(4) ? im.input(4) : Value(), 1, 5,
                            im.builder.getF32Type(), outDims);
  } else {
    FailureOr<Value> a = integerOperand(im, 0, 4, /*perRow=*/true, ad);
    if (failed(a))
      return failure();
    FailureOr<Value> b = integerOperand(im, 1, 5, /*perRow=*/false, bd);
    if (failed(b))
      return failure();
    y = buildMatMul(im, *a, ad, *b, bd, outDims);
  }
  if (failed(y))
    return failure();
  Value aScale = buildReshape(im.builder, im.loc, im.input(2),
                              RankedTensorType::get({}, st.getElementType()));
  FailureOr<Value> out = scaleProduct(im, *y, outDims, aScale, 3, 6);
  if (failed(out))
    return failure();
  im.setOutput(0, *out, outDims);
  return success();
}

} // namespace

void mlir::masformer::registerQuantizedHandlers(
    llvm::StringMap<NodeHandler> &handlers) {
  handlers["com.microsoft.MatMulNBits"] = importMatMulNBits;
  handlers["com.microsoft.GatherBlockQuantized"] = importGatherBlockQuantized;
  handlers["DequantizeLinear"] = importDequantizeLinear;
  handlers["QuantizeLinear"] = importQuantizeLinear;
  handlers["DynamicQuantizeLinear"] = importDynamicQuantizeLinear;
  handlers["MatMulInteger"] = importMatMulInteger;
  handlers["com.microsoft.DynamicQuantizeMatMul"] = importDynamicQuantizeMatMul;
  handlers["com.microsoft.MatMulIntegerToFloat"] = importMatMulIntegerToFloat;
}
