//===- ElementwiseOps.cpp - ONNX elementwise ops ----------------*- C++ -*-===//
//
// Unary, binary (numpy broadcasting), Where and Cast. Each becomes one
// linalg.generic whose body is the scalar op, or a HostTensor when its
// inputs are known at import time.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/ReshapeOpsUtils.h"

#include <cmath>

using namespace mlir;
using namespace mlir::masformer;

//===----------------------------------------------------------------------===//
// Shared builders
//===----------------------------------------------------------------------===//

Value mlir::masformer::buildBroadcastGeneric(
    OpBuilder &b, Location loc, ValueRange inputs, RankedTensorType outType,
    llvm::function_ref<Value(OpBuilder &, Location, ValueRange)> body,
    ValueRange dynSizes) {
  MLIRContext *ctx = b.getContext();
  int64_t rank = outType.getRank();
  SmallVector<AffineMap> maps;
  for (Value in : inputs) {
    auto ty = cast<RankedTensorType>(in.getType());
    SmallVector<AffineExpr> exprs;
    for (int64_t d = 0; d < ty.getRank(); ++d) {
      int64_t o = rank - ty.getRank() + d;
      exprs.push_back(ty.getDimSize(d) == 1 && outType.getDimSize(o) != 1
                          ? getAffineConstantExpr(0, ctx)
                          : getAffineDimExpr(o, ctx));
    }
    maps.push_back(AffineMap::get(rank, 0, exprs, ctx));
  }
  maps.push_back(AffineMap::getMultiDimIdentityMap(rank, ctx));
  Value init = tensor::EmptyOp::create(b, loc, outType, dynSizes);
  auto generic = linalg::GenericOp::create(
      b, loc, outType, inputs, ValueRange{init}, maps,
      SmallVector<utils::IteratorType>(rank, utils::IteratorType::parallel),
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        Value r = body(nb, nloc, args.drop_back());
        linalg::YieldOp::create(nb, nloc, r);
      });
  return generic.getResult(0);
}

Value mlir::masformer::buildFilled(OpBuilder &b, Location loc,
                                   RankedTensorType type, double value,
                                   ValueRange dynSizes) {
  Type et = type.getElementType();
  TypedAttr attr = isa<FloatType>(et)
                       ? TypedAttr(b.getFloatAttr(et, value))
                       : TypedAttr(b.getIntegerAttr(et, saturatingInt(value)));
  Value cst = arith::ConstantOp::create(b, loc, attr);
  Value empty = tensor::EmptyOp::create(b, loc, type, dynSizes);
  return linalg::FillOp::create(b, loc, cst, empty).getResult(0);
}

Value mlir::masformer::buildReshape(OpBuilder &b, Location loc, Value input,
                                    RankedTensorType resultType) {
  auto srcType = cast<RankedTensorType>(input.getType());
  if (srcType == resultType)
    return input;
  ArrayRef<int64_t> src = srcType.getShape(), dst = resultType.getShape();
  if (src.size() > dst.size()) {
    if (auto re = getReassociationIndicesForCollapse(src, dst))
      return tensor::CollapseShapeOp::create(b, loc, resultType, input, *re);
  } else if (src.size() < dst.size()) {
    if (auto re = getReassociationIndicesForCollapse(dst, src))
      return tensor::ExpandShapeOp::create(b, loc, resultType, input, *re);
  }
  SmallVector<int64_t> dims(dst.begin(), dst.end());
  auto shapeType = RankedTensorType::get({(int64_t)dims.size()},
                                         b.getIndexType());
  SmallVector<Attribute> elems;
  for (int64_t d : dims)
    elems.push_back(b.getIndexAttr(d));
  Value shape = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(shapeType, elems));
  return tensor::ReshapeOp::create(b, loc, resultType, input, shape);
}

Value mlir::masformer::castScalar(OpBuilder &b, Location loc, Value v, Type to,
                                  bool fromUnsigned, bool toUnsigned) {
  Type from = v.getType();
  if (from == to)
    return v;
  bool fromF = isa<FloatType>(from), toF = isa<FloatType>(to);
  fromUnsigned |= from.isInteger(1);
  if (fromF && toF)
    return from.getIntOrFloatBitWidth() < to.getIntOrFloatBitWidth()
               ? arith::ExtFOp::create(b, loc, to, v).getResult()
               : arith::TruncFOp::create(b, loc, to, v).getResult();
  if (!fromF && toF)
    return fromUnsigned ? arith::UIToFPOp::create(b, loc, to, v).getResult()
                        : arith::SIToFPOp::create(b, loc, to, v).getResult();
  if (fromF && !toF) {
    if (to.isInteger(1)) {
      Value zero = arith::ConstantOp::create(b, loc, b.getFloatAttr(from, 0));
      return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, v, zero);
    }
    return toUnsigned ? arith::FPToUIOp::create(b, loc, to, v).getResult()
                      : arith::FPToSIOp::create(b, loc, to, v).getResult();
  }
  if (to.isInteger(1)) {
    Value zero = arith::ConstantOp::create(b, loc, b.getIntegerAttr(from, 0));
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, v, zero);
  }
  unsigned fw = from.getIntOrFloatBitWidth(), tw = to.getIntOrFloatBitWidth();
  if (fw < tw)
    return fromUnsigned ? arith::ExtUIOp::create(b, loc, to, v).getResult()
                        : arith::ExtSIOp::create(b, loc, to, v).getResult();
  return arith::TruncIOp::create(b, loc, to, v);
}

//===----------------------------------------------------------------------===//
// Binary ops
//===----------------------------------------------------------------------===//

namespace {

struct BinaryOp {
  StringLiteral name;
  /// Host semantics on doubles (floats) and int64 (integers and bool).
  double (*hostFloat)(double, double);
  int64_t (*hostInt)(int64_t, int64_t);
  /// Builds the scalar op; `isFloat` is the operand kind.
  Value (*build)(OpBuilder &, Location, Value, Value, bool isFloat);
  bool returnsBool;
};

template <typename FOp, typename IOp>
Value arithBinary(OpBuilder &b, Location loc, Value x, Value y, bool isFloat) {
  if (isFloat)
    return FOp::create(b, loc, x, y);
  return IOp::create(b, loc, x, y);
}

template <arith::CmpFPredicate FP, arith::CmpIPredicate IP>
Value compare(OpBuilder &b, Location loc, Value x, Value y, bool isFloat) {
  if (isFloat)
    return arith::CmpFOp::create(b, loc, FP, x, y);
  return arith::CmpIOp::create(b, loc, IP, x, y);
}

Value powOp(OpBuilder &b, Location loc, Value x, Value y, bool isFloat) {
  if (!isFloat)
    return math::IPowIOp::create(b, loc, x, y);
  return math::PowFOp::create(b, loc, x, y);
}

// Integer folding wraps in two's complement, as onnxruntime's and numpy's
// int64 arithmetic does, instead of overflowing (undefined in C++, a trap
// for INT64_MIN / -1).
int64_t wrapAdd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) +
                              static_cast<uint64_t>(b));
}
int64_t wrapSub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) -
                              static_cast<uint64_t>(b));
}
int64_t wrapMul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) *
                              static_cast<uint64_t>(b));
}
/// Truncating division; a zero divisor is refused before folding.
int64_t wrapDiv(int64_t a, int64_t b) {
  if (b == 0)
    return 0;
  if (b == -1)
    return wrapSub(0, a);
  return a / b;
}

/// x^y by squaring (log y steps), wrapping; a negative exponent gives the
/// truncated result (0 unless |x| is 1).
int64_t intPow(int64_t x, int64_t y) {
  if (y < 0)
    return x == 1 ? 1 : x == -1 ? (y % 2 ? -1 : 1) : 0;
  int64_t r = 1;
  while (y > 0) {
    if (y & 1)
      r = wrapMul(r, x);
    x = wrapMul(x, x);
    y >>= 1;
  }
  return r;
}

/// The divisor of an integer Div or Mod made safe for the hardware: 1
/// where it is 0 or -1 (x86's idiv traps on a zero divisor and on
/// INT_MIN / -1); the callers select the defined results there, as the
/// host folding computes them (x / 0 = 0, x / -1 = -x wrapping, x % 0 =
/// x % -1 = 0). A model's run-time divisor of 0 then gives 0 instead of
/// killing the process.
Value safeDivisor(OpBuilder &b, Location loc, Value y, Value &isZero,
                  Value &isNegOne) {
  Type t = y.getType();
  auto cst = [&](int64_t v) -> Value {
    return arith::ConstantOp::create(b, loc, b.getIntegerAttr(t, v));
  };
  isZero = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, y, cst(0));
  isNegOne =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, y, cst(-1));
  Value special = arith::OrIOp::create(b, loc, isZero, isNegOne);
  return arith::SelectOp::create(b, loc, special, cst(1), y);
}

Value divOp(OpBuilder &b, Location loc, Value x, Value y, bool isFloat) {
  if (isFloat)
    return arith::DivFOp::create(b, loc, x, y);
  Value isZero, isNegOne;
  Value safe = safeDivisor(b, loc, y, isZero, isNegOne);
  Value q = arith::DivSIOp::create(b, loc, x, safe);
  Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(x.getType()));
  Value negated = arith::SubIOp::create(b, loc, zero, x);
  return arith::SelectOp::create(
      b, loc, isZero, zero,
      arith::SelectOp::create(b, loc, isNegOne, negated, q));
}

/// Mod with fmod = 0: the remainder takes the divisor's sign (Python's %);
/// with fmod = 1 ("FMod" here), the dividend's (C's fmod and %). A zero
/// divisor is refused before folding.
int64_t floorMod(int64_t a, int64_t b) {
  if (b == 0 || b == -1)
    return 0;
  int64_t r = a % b;
  return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
}
int64_t truncMod(int64_t a, int64_t b) { return b == 0 || b == -1 ? 0 : a % b; }

Value modOp(OpBuilder &b, Location loc, Value x, Value y, bool isFloat,
            bool floorSign) {
  if (isFloat)
    return arith::RemFOp::create(b, loc, x, y);
  // x % 0 and x % -1 are 0: the safe divisor 1 gives exactly that.
  Value isZero, isNegOne;
  Value r = arith::RemSIOp::create(b, loc, x,
                                   safeDivisor(b, loc, y, isZero, isNegOne));
  if (!floorSign)
    return r;
  // r + y where r is non-zero and its sign differs from y's.
  Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(x.getType()));
  Value nonZero =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, r, zero);
  Value rNeg =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, r, zero);
  Value yNeg =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, y, zero);
  Value differ = arith::XOrIOp::create(b, loc, rNeg, yNeg);
  Value fix = arith::AndIOp::create(b, loc, nonZero, differ);
  return arith::SelectOp::create(b, loc, fix,
                                 arith::AddIOp::create(b, loc, r, y), r);
}

const BinaryOp kBinaryOps[] = {
    {"Mod", [](double a, double b) { return std::fmod(a, b); }, floorMod,
     [](OpBuilder &b, Location loc, Value x, Value y, bool isFloat) {
       return modOp(b, loc, x, y, isFloat, /*floorSign=*/true);
     },
     false},
    {"FMod", [](double a, double b) { return std::fmod(a, b); }, truncMod,
     [](OpBuilder &b, Location loc, Value x, Value y, bool isFloat) {
       return modOp(b, loc, x, y, isFloat, /*floorSign=*/false);
     },
     false},
    {"Add", [](double a, double b) { return a + b; }, wrapAdd,
     arithBinary<arith::AddFOp, arith::AddIOp>, false},
    {"Sub", [](double a, double b) { return a - b; }, wrapSub,
     arithBinary<arith::SubFOp, arith::SubIOp>, false},
    {"Mul", [](double a, double b) { return a * b; }, wrapMul,
     arithBinary<arith::MulFOp, arith::MulIOp>, false},
    {"Div", [](double a, double b) { return a / b; }, wrapDiv, divOp, false},
    {"Max", [](double a, double b) { return std::max(a, b); },
     [](int64_t a, int64_t b) { return std::max(a, b); },
     arithBinary<arith::MaximumFOp, arith::MaxSIOp>, false},
    {"Min", [](double a, double b) { return std::min(a, b); },
     [](int64_t a, int64_t b) { return std::min(a, b); },
     arithBinary<arith::MinimumFOp, arith::MinSIOp>, false},
    {"Pow", [](double a, double b) { return std::pow(a, b); }, intPow, powOp,
     false},
    {"And", nullptr, [](int64_t a, int64_t b) -> int64_t { return a && b; },
     arithBinary<arith::AndIOp, arith::AndIOp>, false},
    {"Or", nullptr, [](int64_t a, int64_t b) -> int64_t { return a || b; },
     arithBinary<arith::OrIOp, arith::OrIOp>, false},
    {"Equal", [](double a, double b) -> double { return a == b; },
     [](int64_t a, int64_t b) -> int64_t { return a == b; },
     compare<arith::CmpFPredicate::OEQ, arith::CmpIPredicate::eq>, true},
    {"Less", [](double a, double b) -> double { return a < b; },
     [](int64_t a, int64_t b) -> int64_t { return a < b; },
     compare<arith::CmpFPredicate::OLT, arith::CmpIPredicate::slt>, true},
    {"LessOrEqual", [](double a, double b) -> double { return a <= b; },
     [](int64_t a, int64_t b) -> int64_t { return a <= b; },
     compare<arith::CmpFPredicate::OLE, arith::CmpIPredicate::sle>, true},
    {"Greater", [](double a, double b) -> double { return a > b; },
     [](int64_t a, int64_t b) -> int64_t { return a > b; },
     compare<arith::CmpFPredicate::OGT, arith::CmpIPredicate::sgt>, true},
    {"GreaterOrEqual", [](double a, double b) -> double { return a >= b; },
     [](int64_t a, int64_t b) -> int64_t { return a >= b; },
     compare<arith::CmpFPredicate::OGE, arith::CmpIPredicate::sge>, true},
};

const BinaryOp *findBinary(StringRef name) {
  for (const BinaryOp &op : kBinaryOps)
    if (op.name == name)
      return &op;
  return nullptr;
}

/// Whether `e` (built from sizes) cannot be negative.
bool isNonNegative(AffineExpr e) {
  if (auto c = dyn_cast<AffineConstantExpr>(e))
    return c.getValue() >= 0;
  if (isa<AffineSymbolExpr>(e))
    return true;
  auto bin = cast<AffineBinaryOpExpr>(e);
  if (e.getKind() == AffineExprKind::Add || e.getKind() == AffineExprKind::Mul)
    return isNonNegative(bin.getLHS()) && isNonNegative(bin.getRHS());
  return isNonNegative(bin.getLHS()) && isa<AffineConstantExpr>(bin.getRHS()) &&
         cast<AffineConstantExpr>(bin.getRHS()).getValue() > 0;
}

/// The integer binary op `name` on sizes, or nullopt when its value depends
/// on what the dynamic sizes are.
std::optional<AffineExpr> symbolicBinary(StringRef name, AffineExpr a,
                                         AffineExpr b) {
  MLIRContext *ctx = a.getContext();
  auto cst = [&](int64_t v) { return getAffineConstantExpr(v, ctx); };
  auto constOf = [](AffineExpr e) -> std::optional<int64_t> {
    if (auto c = dyn_cast<AffineConstantExpr>(e))
      return c.getValue();
    return std::nullopt;
  };
  if (name == "Add")
    return a + b;
  if (name == "Sub")
    return a - b;
  if (name == "Mul")
    return a * b;
  if (name == "Div") {
    // Truncation and floor agree on non-negative values.
    if (a == b)
      return cst(1);
    if (auto d = constOf(b); d && *d > 0 && isNonNegative(a))
      return a.floorDiv(*d);
    return std::nullopt;
  }
  // a - b's sign, where it is known: exactly (a constant difference), or
  // from a size against a constant.
  std::optional<int> sign;
  AffineExpr diff = a - b;
  if (auto c = constOf(diff))
    sign = *c < 0 ? -1 : *c > 0 ? 1 : 0;
  else if (auto cb = constOf(b); cb && *cb < 0 && isNonNegative(a))
    sign = 1;
  else if (auto ca = constOf(a); ca && *ca < 0 && isNonNegative(b))
    sign = -1;
  if (name == "Max" || name == "Min") {
    if (!sign)
      return std::nullopt;
    bool takeA = name == "Max" ? *sign >= 0 : *sign <= 0;
    return takeA ? a : b;
  }
  if (!sign)
    return std::nullopt;
  bool r;
  if (name == "Equal")
    r = *sign == 0;
  else if (name == "Less")
    r = *sign < 0;
  else if (name == "LessOrEqual")
    r = *sign <= 0;
  else if (name == "Greater")
    r = *sign > 0;
  else if (name == "GreaterOrEqual")
    r = *sign >= 0;
  else
    return std::nullopt;
  return cst(r);
}

LogicalResult importBinary(ONNXImporterImpl &im) {
  const BinaryOp *op = findBinary(im.node->op_type());
  bool isMod = op->name == "Mod";
  if (failed(isMod ? im.checkAttributes({"fmod"}) : im.checkAttributes({})))
    return failure();
  if (isMod) {
    int64_t fmod = im.attrInt("fmod", 0);
    if (fmod != 0 && fmod != 1)
      return im.error() << "fmod must be 0 or 1, got " << fmod;
    if (fmod == 0 && isa<FloatType>(im.inputType(0).getElementType()))
      return im.error() << "a float Mod needs fmod = 1";
    if (fmod == 1)
      op = findBinary("FMod");
  }
  if (im.numInputs() != 2)
    return im.error() << "expects 2 inputs, got " << im.numInputs();
  RankedTensorType lt = im.inputType(0), rt = im.inputType(1);
  Type et = lt.getElementType();
  // Pow's exponent may have its own type; everything else must match.
  if (op->name != "Pow" && rt.getElementType() != et)
    return im.error() << "operand element types differ (" << et << " and "
                      << rt.getElementType() << ")";
  FailureOr<SmallVector<AffineExpr>> dims =
      im.broadcastDims(im.inputDims(0), im.inputDims(1));
  if (failed(dims))
    return im.error() << "shapes " << im.dimsString(im.inputDims(0)) << " and "
                      << im.dimsString(im.inputDims(1)) << " do not broadcast: "
                      << im.broadcastProblem(im.inputDims(0), im.inputDims(1));
  Type resultElem = op->returnsBool ? im.builder.getI1Type() : et;
  auto outType = im.typeFor(*dims, resultElem);
  bool isFloat = isa<FloatType>(et);
  if (!isFloat && !et.isIntOrIndex())
    return im.error() << "unsupported element type " << et;

  if (im.allInputsOnHost() && outType.hasStaticShape() &&
      outType.getNumElements() <= kMaxHostElements &&
      (isFloat ? op->hostFloat != nullptr : op->hostInt != nullptr)) {
    const HostTensor &l = *im.hostInput(0), &r = *im.hostInput(1);
    if (!isFloat && (op->name == "Div" || isMod) && !r.isSymbolic())
      for (int64_t i = 0, e = r.numElements(); i < e; ++i)
        if (r.getInt(i) == 0)
          return im.error() << "integer division by zero (divisor '"
                            << im.node->input(1) << "', element " << i
                            << ")";
    HostTensor out;
    out.shape.assign(outType.getShape().begin(), outType.getShape().end());
    out.elemType = resultElem;
    out.resize(outType.getNumElements());
    ArrayRef<int64_t> shapes[] = {l.shape, r.shape};
    bool symbolic = l.isSymbolic() || r.isSymbolic(), decided = true;
    forEachBroadcast(out.shape, shapes, [&](int64_t o, ArrayRef<int64_t> in) {
      if (isFloat) {
        out.set(o, op->hostFloat(l.getDouble(in[0]), r.getDouble(in[1])));
      } else if (!symbolic) {
        out.setInt(o, op->hostInt(l.getInt(in[0]), r.getInt(in[1])));
      } else if (std::optional<AffineExpr> e =
                     symbolicBinary(op->name, l.getExpr(in[0], im.getContext()),
                                    r.getExpr(in[1], im.getContext()))) {
        out.setExpr(o, *e);
      } else {
        decided = false;
      }
    });
    // Arithmetic on dynamic sizes that the importer cannot decide is
    // computed at run time instead.
    if (decided) {
      im.setHostOutput(0, std::move(out));
      return success();
    }
  }
  Value result = buildBroadcastGeneric(
      im.builder, im.loc, {im.input(0), im.input(1)}, outType,
      [&](OpBuilder &b, Location loc, ValueRange args) {
        Value y = castScalar(b, loc, args[1], et);
        return op->build(b, loc, args[0], y, isFloat);
      },
      im.dynamicSizes(*dims));
  im.setOutput(0, result, *dims);
  return success();
}

//===----------------------------------------------------------------------===//
// Unary ops
//===----------------------------------------------------------------------===//

struct UnaryOp {
  StringLiteral name;
  double (*host)(double);
  Value (*build)(OpBuilder &, Location, Value);
};

template <typename Op>
Value mathUnary(OpBuilder &b, Location loc, Value x) {
  return Op::create(b, loc, x);
}

Value constLike(OpBuilder &b, Location loc, Value x, double v) {
  return arith::ConstantOp::create(b, loc, b.getFloatAttr(x.getType(), v));
}

const UnaryOp kUnaryOps[] = {
    {"Sqrt", [](double x) { return std::sqrt(x); }, mathUnary<math::SqrtOp>},
    {"Exp", [](double x) { return std::exp(x); }, mathUnary<math::ExpOp>},
    {"Log", [](double x) { return std::log(x); }, mathUnary<math::LogOp>},
    {"Erf", [](double x) { return std::erf(x); }, mathUnary<math::ErfOp>},
    {"Tanh", [](double x) { return std::tanh(x); }, mathUnary<math::TanhOp>},
    {"Cos", [](double x) { return std::cos(x); }, mathUnary<math::CosOp>},
    {"Sin", [](double x) { return std::sin(x); }, mathUnary<math::SinOp>},
    {"Abs", [](double x) { return std::fabs(x); }, mathUnary<math::AbsFOp>},
    {"Neg", [](double x) { return -x; }, mathUnary<arith::NegFOp>},
    {"Floor", [](double x) { return std::floor(x); }, mathUnary<math::FloorOp>},
    // -1, 0 or 1; NaN stays NaN (the comparisons are false) and -0 stays -0.
    {"Sign", [](double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : x); },
     [](OpBuilder &b, Location loc, Value x) -> Value {
       Value zero = constLike(b, loc, x, 0.0);
       Value pos =
           arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, x, zero);
       Value neg =
           arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, x, zero);
       return arith::SelectOp::create(
           b, loc, pos, constLike(b, loc, x, 1.0),
           arith::SelectOp::create(b, loc, neg, constLike(b, loc, x, -1.0), x));
     }},
    {"Ceil", [](double x) { return std::ceil(x); }, mathUnary<math::CeilOp>},
    // Halves to even, as ONNX rounds (and nearbyint in the default mode).
    {"Round", [](double x) { return std::nearbyint(x); },
     mathUnary<math::RoundEvenOp>},
    {"Reciprocal", [](double x) { return 1.0 / x; },
     [](OpBuilder &b, Location loc, Value x) -> Value {
       return arith::DivFOp::create(b, loc, constLike(b, loc, x, 1.0), x);
     }},
    {"Sigmoid", [](double x) { return 1.0 / (1.0 + std::exp(-x)); },
     [](OpBuilder &b, Location loc, Value x) -> Value {
       Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, x));
       Value one = constLike(b, loc, x, 1.0);
       return arith::DivFOp::create(b, loc, one,
                                    arith::AddFOp::create(b, loc, one, e));
     }},
    {"Relu", [](double x) { return std::max(x, 0.0); },
     [](OpBuilder &b, Location loc, Value x) -> Value {
       return arith::MaximumFOp::create(b, loc, x, constLike(b, loc, x, 0.0));
     }},
};

LogicalResult importUnary(ONNXImporterImpl &im) {
  StringRef name = im.node->op_type();
  const UnaryOp *op = nullptr;
  for (const UnaryOp &u : kUnaryOps)
    if (u.name == name)
      op = &u;
  if (failed(im.checkAttributes({})))
    return failure();
  RankedTensorType t = im.inputType(0);
  Type et = t.getElementType();
  SmallVector<AffineExpr> dims = im.inputDims(0);
  if (name == "Sign" && et.isIntOrIndex()) {
    auto sign = [](int64_t v) -> int64_t {
      return v > 0 ? 1 : (v < 0 ? -1 : 0);
    };
    if (const HostTensor *h = im.hostInput(0); h && !h->isSymbolic()) {
      HostTensor out = *h;
      for (int64_t &v : out.ints)
        v = sign(v);
      im.setHostOutput(0, std::move(out));
      return success();
    }
    im.setOutput(
        0,
        buildBroadcastGeneric(
            im.builder, im.loc, {im.input(0)}, t,
            [&](OpBuilder &b, Location loc, ValueRange args) {
              auto c = [&](int64_t v) {
                return arith::ConstantOp::create(b, loc,
                                                 b.getIntegerAttr(et, v));
              };
              Value pos = arith::CmpIOp::create(
                  b, loc, arith::CmpIPredicate::sgt, args[0], c(0));
              Value neg = arith::CmpIOp::create(
                  b, loc, arith::CmpIPredicate::slt, args[0], c(0));
              return arith::SelectOp::create(
                         b, loc, pos, c(1),
                         arith::SelectOp::create(b, loc, neg, c(-1), c(0)))
                  .getResult();
            },
            im.dynamicSizes(dims)),
        dims);
    return success();
  }
  if ((name == "Neg" || name == "Abs") && et.isIntOrIndex()) {
    // Integers wrap as in numpy and onnxruntime: -INT64_MIN is INT64_MIN.
    bool abs = name == "Abs";
    auto negate = [](int64_t v) {
      return static_cast<int64_t>(0 - static_cast<uint64_t>(v));
    };
    if (const HostTensor *h = im.hostInput(0); h && !(abs && h->isSymbolic())) {
      HostTensor out = *h;
      for (int64_t &v : out.ints)
        v = abs && v >= 0 ? v : negate(v);
      for (AffineExpr &e : out.syms)
        e = -e;
      im.setHostOutput(0, std::move(out));
      return success();
    }
    im.setOutput(0,
                 buildBroadcastGeneric(
                     im.builder, im.loc, {im.input(0)}, t,
                     [&](OpBuilder &b, Location loc, ValueRange args) {
                       Value zero = arith::ConstantOp::create(
                           b, loc, b.getIntegerAttr(et, 0));
                       Value neg = arith::SubIOp::create(b, loc, zero, args[0]);
                       if (!abs)
                         return neg;
                       // A select rather than math.absi, which not every
                       // pipeline lowers (the GPU kernels' does not).
                       Value isNeg = arith::CmpIOp::create(
                           b, loc, arith::CmpIPredicate::slt, args[0], zero);
                       return arith::SelectOp::create(b, loc, isNeg, neg,
                                                      args[0])
                           .getResult();
                     },
                     im.dynamicSizes(dims)),
                 dims);
    return success();
  }
  if (!isa<FloatType>(et))
    return im.error() << "expects a float tensor, got " << t;
  if (const HostTensor *h = im.hostInput(0);
      h && t.getNumElements() <= kMaxHostElements) {
    HostTensor out = *h;
    for (int64_t i = 0, e = out.numElements(); i < e; ++i)
      out.set(i, op->host(h->floats[i]));
    im.setHostOutput(0, std::move(out));
    return success();
  }
  im.setOutput(0,
               buildBroadcastGeneric(
                   im.builder, im.loc, {im.input(0)}, t,
                   [&](OpBuilder &b, Location loc, ValueRange args) {
                     return op->build(b, loc, args[0]);
                   },
                   im.dynamicSizes(dims)),
               dims);
  return success();
}

LogicalResult importNot(ONNXImporterImpl &im) {
  RankedTensorType t = im.inputType(0);
  if (!t.getElementType().isInteger(1))
    return im.error() << "expects a bool tensor, got " << t;
  if (const HostTensor *h = im.hostInput(0)) {
    HostTensor out = *h;
    for (int64_t &v : out.ints)
      v = !v;
    im.setHostOutput(0, std::move(out));
    return success();
  }
  SmallVector<AffineExpr> dims = im.inputDims(0);
  im.setOutput(0,
               buildBroadcastGeneric(
                   im.builder, im.loc, {im.input(0)}, t,
                   [&](OpBuilder &b, Location loc, ValueRange args) {
                     Value one = arith::ConstantIntOp::create(b, loc, 1, 1);
                     return arith::XOrIOp::create(b, loc, args[0], one)
                         .getResult();
                   },
                   im.dynamicSizes(dims)),
               dims);
  return success();
}

/// IsNaN, and IsInf with its detect_negative / detect_positive: a bool
/// tensor of the float input's shape (torch's SDPA export replaces the NaN
/// rows of fully masked queries' probabilities by zeros with them).
LogicalResult importIsNaNOrInf(ONNXImporterImpl &im) {
  RankedTensorType t = im.inputType(0);
  if (!isa<FloatType>(t.getElementType()))
    return im.error() << "expects a float tensor, got " << t;
  bool isNaN = im.node->op_type() == "IsNaN";
  bool negative = im.attrInt("detect_negative", 1) != 0;
  bool positive = im.attrInt("detect_positive", 1) != 0;
  auto test = [&](double x) {
    if (isNaN)
      return std::isnan(x);
    return std::isinf(x) && (x < 0 ? negative : positive);
  };
  if (const HostTensor *h = im.hostInput(0)) {
    HostTensor out;
    out.shape = h->shape;
    out.elemType = im.builder.getI1Type();
    out.resize(h->numElements());
    for (int64_t i = 0, e = h->numElements(); i < e; ++i)
      out.setInt(i, test(h->getDouble(i)));
    im.setHostOutput(0, std::move(out));
    return success();
  }
  SmallVector<AffineExpr> dims = im.inputDims(0);
  auto boolType = RankedTensorType::get(t.getShape(), im.builder.getI1Type());
  im.setOutput(
      0,
      buildBroadcastGeneric(
          im.builder, im.loc, {im.input(0)}, boolType,
          [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
            Value x = args[0];
            if (isNaN)
              return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNO, x,
                                           x);
            auto ft = cast<FloatType>(x.getType());
            auto inf = [&](bool neg) -> Value {
              return arith::ConstantOp::create(
                  b, loc,
                  b.getFloatAttr(ft,
                                 APFloat::getInf(ft.getFloatSemantics(), neg)));
            };
            Value result;
            for (bool neg : {true, false}) {
              if (!(neg ? negative : positive))
                continue;
              Value hit = arith::CmpFOp::create(
                  b, loc, arith::CmpFPredicate::OEQ, x, inf(neg));
              result =
                  result ? arith::OrIOp::create(b, loc, result, hit).getResult()
                         : hit;
            }
            return result
                       ? result
                       : arith::ConstantIntOp::create(b, loc, 0, 1).getResult();
          },
          im.dynamicSizes(dims)),
      dims);
  return success();
}

//===----------------------------------------------------------------------===//
// Where and Cast
//===----------------------------------------------------------------------===//

LogicalResult importWhere(ONNXImporterImpl &im) {
  if (im.numInputs() != 3)
    return im.error() << "expects 3 inputs, got " << im.numInputs();
  RankedTensorType ct = im.inputType(0), xt = im.inputType(1),
                   yt = im.inputType(2);
  if (!ct.getElementType().isInteger(1))
    return im.error() << "condition must be bool, got " << ct;
  if (xt.getElementType() != yt.getElementType())
    return im.error() << "X and Y element types differ";
  FailureOr<SmallVector<AffineExpr>> s1 =
      im.broadcastDims(im.inputDims(0), im.inputDims(1));
  FailureOr<SmallVector<AffineExpr>> dims = failure();
  if (succeeded(s1))
    dims = im.broadcastDims(*s1, im.inputDims(2));
  if (failed(dims))
    return im.error() << "shapes " << im.dimsString(im.inputDims(0)) << ", "
                      << im.dimsString(im.inputDims(1)) << ", "
                      << im.dimsString(im.inputDims(2)) << " do not broadcast: "
                      << (failed(s1)
                              ? im.broadcastProblem(im.inputDims(0),
                                                    im.inputDims(1))
                              : im.broadcastProblem(*s1, im.inputDims(2)));
  auto outType = im.typeFor(*dims, xt.getElementType());
  if (im.allInputsOnHost() && outType.hasStaticShape() &&
      outType.getNumElements() <= kMaxHostElements &&
      !im.hostInput(0)->isSymbolic()) {
    const HostTensor &c = *im.hostInput(0), &x = *im.hostInput(1),
                     &y = *im.hostInput(2);
    HostTensor out;
    out.shape.assign(outType.getShape().begin(), outType.getShape().end());
    out.elemType = outType.getElementType();
    out.resize(outType.getNumElements());
    ArrayRef<int64_t> shapes[] = {c.shape, x.shape, y.shape};
    forEachBroadcast(out.shape, shapes, [&](int64_t o, ArrayRef<int64_t> in) {
      const HostTensor &src = c.ints[in[0]] ? x : y;
      int64_t idx = c.ints[in[0]] ? in[1] : in[2];
      if (out.isFloat())
        out.floats[o] = src.floats[idx];
      else if (x.isSymbolic() || y.isSymbolic())
        out.setExpr(o, src.getExpr(idx, im.getContext()));
      else
        out.ints[o] = src.ints[idx];
    });
    im.setHostOutput(0, std::move(out));
    return success();
  }
  im.setOutput(0,
               buildBroadcastGeneric(
                   im.builder, im.loc, {im.input(0), im.input(1), im.input(2)},
                   outType,
                   [&](OpBuilder &b, Location loc, ValueRange args) {
                     return arith::SelectOp::create(b, loc, args[0], args[1],
                                                    args[2])
                         .getResult();
                   },
                   im.dynamicSizes(*dims)),
               *dims);
  return success();
}

LogicalResult importCast(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({"to", "saturate"})))
    return failure();
  std::optional<int64_t> to = im.attrInt("to");
  if (!to)
    return im.error() << "missing attribute 'to'";
  Type toType = im.convertElementType(*to);
  if (!toType)
    return im.error() << "unsupported target type " << *to;
  RankedTensorType t = im.inputType(0);
  SmallVector<AffineExpr> dims = im.inputDims(0);
  auto outType = RankedTensorType::get(t.getShape(), toType);
  bool fromUnsigned = im.inputIsUnsigned(0);
  bool toUnsigned = *to == onnx::TensorProto::UINT8;
  // Exporters leave casts to the same type around; they are no-ops.
  // (int8 to uint8 and back keeps the bits.)
  if (toType == t.getElementType() && !im.hostInput(0)) {
    im.setOutput(0, im.input(0), dims);
    if (toUnsigned)
      im.setOutputUnsigned(0);
    return success();
  }
  // MatMulInteger's product as the f32 it was computed in.
  if (Value f = im.inputExactFloat(0); f && toType.isF32()) {
    im.setOutput(0, f, dims);
    return success();
  }
  const HostTensor *h = im.hostInput(0);
  if (h && h->isSymbolic()) {
    // Sizes stay sizes through integer casts; other casts of them are
    // computed at run time.
    if (toType.isInteger(64) || toType.isInteger(32)) {
      HostTensor out = *h;
      out.elemType = toType;
      im.setHostOutput(0, std::move(out));
      return success();
    }
    h = nullptr;
  }
  if (h) {
    HostTensor out;
    out.shape = h->shape;
    out.elemType = toType;
    out.resize(h->numElements());
    for (int64_t i = 0, e = h->numElements(); i < e; ++i) {
      if (h->isFloat() && !out.isFloat())
        out.setInt(i, saturatingInt(h->floats[i]));
      else if (h->isFloat())
        out.set(i, h->floats[i]);
      else
        out.setInt(i, h->ints[i]);
      // 8-bit results wrap, as a C++ cast of the value would.
      if (toType.isInteger(8))
        out.ints[i] = toUnsigned ? static_cast<uint8_t>(out.ints[i])
                                 : static_cast<int8_t>(out.ints[i]);
    }
    im.setHostOutput(0, std::move(out));
    if (toUnsigned)
      im.setOutputUnsigned(0);
    return success();
  }
  im.setOutput(0,
               buildBroadcastGeneric(
                   im.builder, im.loc, {im.input(0)}, outType,
                   [&](OpBuilder &b, Location loc, ValueRange args) {
                     return castScalar(b, loc, args[0], toType, fromUnsigned,
                                       toUnsigned);
                   },
                   im.dynamicSizes(dims)),
               dims);
  if (toUnsigned)
    im.setOutputUnsigned(0);
  return success();
}

/// Clip(x, min?, max?) (opset >= 11; min and max scalars). NaN stays NaN,
/// as in onnxruntime.
LogicalResult importClip(ONNXImporterImpl &im) {
  if (failed(im.checkAttributes({})))
    return failure();
  RankedTensorType t = im.inputType(0);
  Type et = t.getElementType();
  bool isFloat = isa<FloatType>(et);
  if (!isFloat && !et.isIntOrIndex())
    return im.error() << "unsupported element type " << et;
  std::optional<double> bound[2];
  for (unsigned i = 1; i < 3; ++i) {
    if (!im.hasInput(i))
      continue;
    FailureOr<const HostTensor *> b =
        im.requireHostInput(i, i == 1 ? "min" : "max",
                            /*allowSymbolic=*/false, /*integer=*/false);
    if (failed(b))
      return failure();
    if ((*b)->numElements() != 1)
      return im.error() << (i == 1 ? "min" : "max") << " must be a scalar";
    bound[i - 1] = (*b)->getDouble(0);
  }
  auto clip = [&](double x) {
    if (bound[0] && x < *bound[0])
      x = *bound[0];
    if (bound[1] && x > *bound[1])
      x = *bound[1];
    return x;
  };
  if (const HostTensor *h = im.hostInput(0); h && !h->isSymbolic()) {
    HostTensor out = *h;
    for (int64_t i = 0, e = out.numElements(); i < e; ++i)
      out.set(i, clip(h->getDouble(i)));
    im.setHostOutput(0, std::move(out));
    return success();
  }
  SmallVector<AffineExpr> dims = im.inputDims(0);
  im.setOutput(
      0,
      buildBroadcastGeneric(
          im.builder, im.loc, {im.input(0)}, t,
          [&](OpBuilder &b, Location loc, ValueRange args) {
            Value x = args[0];
            for (int k = 0; k < 2; ++k) {
              if (!bound[k])
                continue;
              TypedAttr attr =
                  isFloat ? TypedAttr(b.getFloatAttr(et, *bound[k]))
                          : TypedAttr(
                                b.getIntegerAttr(et, saturatingInt(*bound[k])));
              Value c = arith::ConstantOp::create(b, loc, attr);
              if (isFloat)
                x = k == 0 ? arith::MaximumFOp::create(b, loc, x, c).getResult()
                           : arith::MinimumFOp::create(b, loc, x, c).getResult();
              else
                x = k == 0 ? arith::MaxSIOp::create(b, loc, x, c).getResult()
                           : arith::MinSIOp::create(b, loc, x, c).getResult();
            }
            return x;
          },
          im.dynamicSizes(dims)),
      dims);
  return success();
}

} // namespace

void mlir::masformer::registerElementwiseHandlers(
    llvm::StringMap<NodeHandler> &handlers) {
  for (const BinaryOp &op : kBinaryOps)
    if (op.name != "FMod") // Mod with fmod = 1, not an ONNX op
      handlers[op.name] = importBinary;
  for (const UnaryOp &op : kUnaryOps)
    handlers[op.name] = importUnary;
  handlers["Not"] = importNot;
  handlers["IsNaN"] = importIsNaNOrInf;
  handlers["IsInf"] = importIsNaNOrInf;
  handlers["Where"] = importWhere;
  handlers["Cast"] = importCast;
  handlers["Clip"] = importClip;
}
