//===- Weights.cpp - A model's weights outside its code ---------*- C++ -*-===//
//
// The large constants of a lowered model leave the code: each becomes a slot
// of an exported table of pointers that the runtime fills at load time from
// the files named in the library's manifest (ABI.h). The LLVM module then
// carries references, not bytes, so that compiling a model costs about its
// weights in memory, and a library stays small whatever its weights.
//
//===----------------------------------------------------------------------===//

#include "masformer/Target/Weights.h"
#include "masformer/Runtime/ABI.h"
#include "masformer/Target/Signature.h"
#include "masformer/Utils/ConstantData.h"
#include "masformer/Utils/MappedFiles.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/GlobalVariable.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

using namespace mlir;
using namespace mlir::masformer;

int WeightsLayout::ownFile() const {
  for (auto [i, f] : llvm::enumerate(files))
    if (f.own)
      return static_cast<int>(i);
  return -1;
}

/// The bytes of a constant's elements: the attribute's own, or a splat's
/// single element repeated into `expanded`.
static std::optional<ArrayRef<char>>
weightBytes(ElementsAttr value, uint64_t size, std::vector<char> &expanded) {
  if (std::optional<ArrayRef<char>> bytes = constantBytes(value))
    return bytes->size() == size ? bytes : std::nullopt;
  auto dense = dyn_cast<DenseIntOrFPElementsAttr>(value);
  if (!dense || !dense.isSplat())
    return std::nullopt;
  ArrayRef<char> one = dense.getRawData();
  if (one.empty() || size % one.size())
    return std::nullopt;
  expanded.resize(size);
  for (uint64_t at = 0; at < size; at += one.size())
    std::memcpy(expanded.data() + at, one.data(), one.size());
  return ArrayRef<char>(expanded);
}

/// The weights that may leave the code: constant globals in the default
/// address space of whole-byte elements, at least kMinExternalWeightBytes,
/// whose address is taken only inside functions.
static SmallVector<LLVM::GlobalOp> movableGlobals(ModuleOp module) {
  llvm::StringSet<> inInitializers;
  module.walk([&](LLVM::AddressOfOp op) {
    if (op->getParentOfType<LLVM::GlobalOp>())
      inInitializers.insert(op.getGlobalName());
  });
  SmallVector<LLVM::GlobalOp> out;
  for (auto g : module.getOps<LLVM::GlobalOp>()) {
    auto value = dyn_cast_or_null<ElementsAttr>(g.getValueOrNull());
    if (!g.getConstant() || !value || g.getAddrSpace() != 0 ||
        inInitializers.contains(g.getSymName()))
      continue;
    Type et = value.getShapedType().getElementType();
    if (!et.isIntOrFloat() || et.getIntOrFloatBitWidth() % 8)
      continue;
    uint64_t size = static_cast<uint64_t>(value.getNumElements()) *
                    (et.getIntOrFloatBitWidth() / 8);
    if (size >= kMinExternalWeightBytes)
      out.push_back(g);
  }
  return out;
}

FailureOr<WeightsLayout> mlir::masformer::externalizeWeights(ModuleOp module,
                                                             StringRef ownPath,
                                                             Location loc) {
  WeightsLayout layout;
  llvm::StringMap<unsigned> fileIndex;
  uint64_t ownEnd = MF_ABI_WEIGHTS_HEADER_BYTES;
  SmallVector<LLVM::GlobalOp> globals = movableGlobals(module);
  for (LLVM::GlobalOp g : globals) {
    auto value = cast<ElementsAttr>(g.getValueOrNull());
    Type et = value.getShapedType().getElementType();
    uint64_t elementBytes = et.getIntOrFloatBitWidth() / 8;
    uint64_t size = value.getNumElements() * elementBytes;
    WeightsLayout::Weight w;
    std::optional<ArrayRef<char>> bytes = weightBytes(value, size, w.expanded);
    if (!bytes)
      continue; // Not readable as bytes: it stays in the code.
    w.bytes = *bytes;
    // In a model's data file at an offset its element allows: used there.
    std::optional<FileOrigin> origin = findMappedOrigin(w.bytes);
    if (origin && origin->offset % elementBytes == 0) {
      auto [it, inserted] =
          fileIndex.try_emplace(origin->path, layout.files.size());
      if (inserted)
        layout.files.push_back({false, origin->path, origin->fileSize});
      w.file = it->second;
      w.offset = origin->offset;
    } else {
      auto [it, inserted] = fileIndex.try_emplace("", layout.files.size());
      if (inserted)
        layout.files.push_back({true, "", 0});
      w.file = it->second;
      w.offset = llvm::alignTo(ownEnd, MF_ABI_WEIGHTS_ALIGN);
      ownEnd = w.offset + size;
    }
    layout.slotOf[g.getSymName()] = layout.weights.size();
    // (A moved vector keeps its buffer: a splat's `bytes` stay valid.)
    layout.weights.push_back(std::move(w));
  }
  if (int own = layout.ownFile(); own >= 0) {
    SmallString<256> abs(ownPath);
    if (std::error_code ec = llvm::sys::fs::make_absolute(abs))
      return emitError(loc)
                 << "cannot resolve '" << ownPath << "': " << ec.message(),
             failure();
    layout.files[own].path = abs.str().str();
    layout.files[own].size = ownEnd;
  }
  if (layout.weights.empty())
    return layout;

  // Each use of a moved global's address loads it from its slot, which
  // never changes once the library is loaded.
  MLIRContext *ctx = module.getContext();
  OpBuilder b(ctx);
  b.setInsertionPointToStart(module.getBody());
  auto ptrTy = LLVM::LLVMPointerType::get(ctx);
  auto tableTy = LLVM::LLVMArrayType::get(ptrTy, layout.weights.size());
  auto table = LLVM::GlobalOp::create(
      b, loc, tableTy, /*isConstant=*/false, LLVM::Linkage::External,
      MF_ABI_SYM_WEIGHT_TABLE, Attribute(), /*alignment=*/64);
  table.setExternallyInitialized(true);
  {
    Block *init = b.createBlock(&table.getInitializerRegion());
    b.setInsertionPointToStart(init);
    Value zero = LLVM::ZeroOp::create(b, loc, tableTy);
    LLVM::ReturnOp::create(b, loc, zero);
  }
  SmallVector<LLVM::AddressOfOp> uses;
  module.walk([&](LLVM::AddressOfOp op) {
    if (layout.slotOf.contains(op.getGlobalName()))
      uses.push_back(op);
  });
  for (LLVM::AddressOfOp op : uses) {
    b.setInsertionPoint(op);
    unsigned slot = layout.slotOf.lookup(op.getGlobalName());
    Value base = LLVM::AddressOfOp::create(b, op.getLoc(), table);
    Value at = LLVM::GEPOp::create(
        b, op.getLoc(), ptrTy, tableTy, base,
        ArrayRef<LLVM::GEPArg>{0, static_cast<int32_t>(slot)},
        LLVM::GEPNoWrapFlags::inbounds);
    Value p = LLVM::LoadOp::create(b, op.getLoc(), ptrTy, at, /*alignment=*/8,
                                   /*isVolatile=*/false,
                                   /*isNonTemporal=*/false,
                                   /*isInvariant=*/true);
    op.replaceAllUsesWith(p);
    op.erase();
  }
  for (LLVM::GlobalOp g : globals)
    if (layout.slotOf.contains(g.getSymName()))
      g.erase();

  // The manifest; the build id covers every line after the first.
  std::string body;
  llvm::raw_string_ostream os(body);
  for (const WeightsLayout::File &f : layout.files)
    os << "file\t" << (f.own ? "own" : "model") << "\t"
       << escapeSignatureName(llvm::sys::path::filename(f.path)) << "\t"
       << escapeSignatureName(f.path) << "\t" << f.size << "\n";
  for (const WeightsLayout::Weight &w : layout.weights)
    os << "weight\t" << w.file << "\t" << w.offset << "\t" << w.bytes.size()
       << "\t"
       << llvm::utohexstr(
              mf_abi_weight_fingerprint(w.bytes.data(), w.bytes.size()),
              /*LowerCase=*/true)
       << "\n";
  layout.buildId = mf_abi_fnv1a(MF_ABI_FNV_START, body.data(), body.size());
  layout.manifest =
      (Twine(MF_ABI_WEIGHTS_MAGIC) + "\t" + Twine(MF_ABI_WEIGHTS_FORMAT) +
       "\t" + llvm::utohexstr(layout.buildId, /*LowerCase=*/true) + "\n" + body)
          .str();
  return layout;
}

LogicalResult mlir::masformer::writeWeightsFile(const WeightsLayout &layout,
                                                llvm::raw_ostream &os,
                                                Location loc) {
  int own = layout.ownFile();
  if (own < 0)
    return success();
  char header[MF_ABI_WEIGHTS_HEADER_BYTES] = {};
  std::memcpy(header, MF_ABI_WEIGHTS_FILE_MAGIC, 8);
  uint32_t format = MF_ABI_WEIGHTS_FORMAT;
  uint64_t id = layout.buildId, size = layout.files[own].size;
  std::memcpy(header + 8, &format, 4);
  std::memcpy(header + 16, &id, 8);
  std::memcpy(header + 24, &size, 8);
  os.write(header, sizeof(header));
  uint64_t at = sizeof(header);
  for (const WeightsLayout::Weight &w : layout.weights) {
    if (w.file != static_cast<unsigned>(own))
      continue;
    os.write_zeros(w.offset - at);
    os.write(w.bytes.data(), w.bytes.size());
    at = w.offset + w.bytes.size();
  }
  if (at != size)
    return emitError(loc) << "internal error: the weights file's layout is "
                             "inconsistent",
           failure();
  return success();
}

void mlir::masformer::addWeightsManifest(llvm::Module &m,
                                         const WeightsLayout &layout) {
  if (layout.weights.empty())
    return;
  auto *init =
      llvm::ConstantDataArray::getString(m.getContext(), layout.manifest);
  new llvm::GlobalVariable(m, init->getType(), /*isConstant=*/true,
                           llvm::GlobalValue::ExternalLinkage, init,
                           MF_ABI_SYM_WEIGHTS);
}
