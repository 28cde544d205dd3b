//===- Signature.cpp - The signature a compiled model carries ---*- C++ -*-===//

#include "masformer/Target/Signature.h"
#include "masformer/Runtime/ABI.h"
#include "masformer/Runtime/Runtime.h"

#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mlir::masformer;

/// The runtime's dtype of an element type (Runtime.h), if it has one.
static std::optional<mf_dtype> runtimeDtype(Type t) {
  if (t.isF32())
    return MF_F32;
  if (t.isF16())
    return MF_F16;
  if (t.isBF16())
    return MF_BF16;
  if (t.isF64())
    return MF_F64;
  if (t.isInteger(1))
    return MF_BOOL;
  if (auto i = dyn_cast<IntegerType>(t)) {
    if (i.isUnsigned() && i.getWidth() == 8)
      return MF_U8;
    switch (i.getWidth()) {
    case 8:
      return MF_I8;
    case 16:
      return MF_I16;
    case 32:
      return MF_I32;
    case 64:
      return MF_I64;
    default:
      break;
    }
  }
  return std::nullopt;
}

/// The runtime's name of an element type; empty when it has none.
static StringRef dtypeName(Type t) {
  std::optional<mf_dtype> d = runtimeDtype(t);
  return d ? StringRef(mf_abi_dtypes[*d].name) : StringRef();
}

std::string mlir::masformer::escapeSignatureName(StringRef s) {
  std::string out;
  for (char c : s) {
    if (c == '%' || c == '\t' || c == '\n' || c == ',' ||
        static_cast<unsigned char>(c) < 0x20) {
      out += '%';
      out += llvm::hexdigit((c >> 4) & 0xF);
      out += llvm::hexdigit(c & 0xF);
    } else {
      out += c;
    }
  }
  return out;
}

/// One "input|output <name> <dtype> <dims>" line: a dimension is its size,
/// or "?" and the key of its symbol (equal keys are equal sizes; "?" alone
/// is a size known only after the run).
static FailureOr<std::string> signatureLine(StringRef kind, unsigned index,
                                            Type type, DictionaryAttr attrs,
                                            Location loc) {
  auto tt = dyn_cast<RankedTensorType>(type);
  StringRef dtype = tt ? dtypeName(tt.getElementType()) : "";
  // uint8 is i8 in the IR; the importer marks the model's uint8 tensors.
  if (dtype == "i8" && attrs && attrs.get("onnx.unsigned"))
    dtype = mf_abi_dtypes[MF_U8].name;
  auto nameAttr = attrs ? attrs.getAs<StringAttr>("onnx.name") : nullptr;
  std::string name = nameAttr ? nameAttr.str() : (kind + Twine(index)).str();
  if (dtype.empty())
    return emitError(loc) << kind << " '" << name << "' has type " << type
                          << ", which the runtime cannot pass",
           failure();
  auto dimsAttr = attrs ? attrs.getAs<ArrayAttr>("onnx.dims") : nullptr;
  std::string line =
      (kind + "\t" + escapeSignatureName(name) + "\t" + dtype + "\t").str();
  for (int64_t d = 0; d < tt.getRank(); ++d) {
    if (d)
      line += ',';
    if (!tt.isDynamicDim(d)) {
      line += std::to_string(tt.getDimSize(d));
      continue;
    }
    line += '?';
    if (dimsAttr && d < static_cast<int64_t>(dimsAttr.size()))
      if (auto key = dyn_cast<StringAttr>(dimsAttr[d]))
        if (key.getValue() != "?")
          line += escapeSignatureName(key.getValue());
  }
  return line + "\n";
}

FailureOr<std::string> mlir::masformer::buildRuntimeSignature(func::FuncOp main,
                                                              StringRef target,
                                                              StringRef chip) {
  Location loc = main.getLoc();
  std::string sig = (Twine(MF_ABI_SIGNATURE_MAGIC) + "\t" +
                     Twine(MF_ABI_VERSION) + "\ntarget\t" + target + "\n")
                        .str();
  if (target == "cuda")
    sig += ("chip\t" + chip + "\n").str();
  FunctionType type = main.getFunctionType();
  for (unsigned i = 0; i < type.getNumInputs(); ++i) {
    FailureOr<std::string> line = signatureLine("input", i, type.getInput(i),
                                                main.getArgAttrDict(i), loc);
    if (failed(line))
      return failure();
    sig += *line;
  }
  for (unsigned i = 0; i < type.getNumResults(); ++i) {
    FailureOr<std::string> line = signatureLine("output", i, type.getResult(i),
                                                main.getResultAttrDict(i), loc);
    if (failed(line))
      return failure();
    sig += *line;
  }
  return sig;
}
