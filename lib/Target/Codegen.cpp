//===- Codegen.cpp - Host code in parts: parallel and cached ----*- C++ -*-===//

#include "masformer/Target/Codegen.h"
#include "masformer/Target/Toolchain.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/AttrTypeSubElements.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/Linker/Linker.h"
#include "llvm/Support/BLAKE3.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/Threading.h"
#include "llvm/Transforms/Utils/Cloning.h"
#include "llvm/Transforms/Utils/ValueMapper.h"

#include <exception>
#include <mutex>

// MASFORMER_CODEGEN_SOURCES_HASH: this file's and LLVMTarget.cpp's SHA-256,
// taken by CMake (lib/Target/CMakeLists.txt), part of every cache key.
#include "CodegenSourcesHash.inc"

using namespace mlir;
using namespace mlir::masformer;

//===----------------------------------------------------------------------===//
// Globals in a stable order
//===----------------------------------------------------------------------===//

void mlir::masformer::orderGlobalsByFirstUse(ModuleOp module) {
  // The private globals in the order the functions first take their
  // address, then those no function uses.
  llvm::SetVector<LLVM::GlobalOp> order;
  SymbolTable symbols(module);
  auto visit = [&](Operation *root) {
    root->walk([&](LLVM::AddressOfOp op) {
      if (auto g = symbols.lookup<LLVM::GlobalOp>(op.getGlobalName()))
        if (g.getLinkage() == LLVM::Linkage::Private ||
            g.getLinkage() == LLVM::Linkage::Internal)
          order.insert(g);
    });
  };
  for (auto f : module.getOps<LLVM::LLVMFuncOp>())
    visit(f);
  for (size_t i = 0; i < order.size(); ++i)
    visit(order[i]);
  for (auto g : module.getOps<LLVM::GlobalOp>())
    if (g.getLinkage() == LLVM::Linkage::Private ||
        g.getLinkage() == LLVM::Linkage::Internal)
      order.insert(g);
  if (order.empty())
    return;

  // Each named after its type and its place in that order: the numbers
  // bufferization gave them (__constant_32xf32_27) follow a counter that
  // runs over the functions in an order that can change from run to run.
  llvm::StringSet<> taken;
  for (Operation &op : *module.getBody())
    if (auto name =
            op.getAttrOfType<StringAttr>(SymbolTable::getSymbolAttrName()))
      if (!order.contains(dyn_cast<LLVM::GlobalOp>(&op)))
        taken.insert(name.getValue());
  llvm::StringMap<unsigned> next;
  llvm::DenseMap<StringAttr, StringAttr> renamed;
  MLIRContext *ctx = module.getContext();
  for (LLVM::GlobalOp g : order) {
    StringRef name = g.getSymName();
    StringRef base = name.rtrim("0123456789");
    if (base.size() < name.size() && base.ends_with("_"))
      name = base.drop_back();
    std::string fresh = name.str();
    unsigned &n = next[name];
    while (!taken.insert(fresh).second)
      fresh = (name + "_" + Twine(++n)).str();
    renamed[g.getSymNameAttr()] = StringAttr::get(ctx, fresh);
  }
  // Every reference (llvm.mlir.addressof, @main's masformer.constants) to
  // the new names in one walk, outside nested symbol tables; then the
  // globals moved to the front in their order.
  AttrTypeReplacer replacer;
  replacer.addReplacement([&](SymbolRefAttr ref) -> std::optional<Attribute> {
    if (!ref.getNestedReferences().empty())
      return std::nullopt;
    if (StringAttr to = renamed.lookup(ref.getRootReference()))
      return FlatSymbolRefAttr::get(to);
    return std::nullopt;
  });
  module.walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (op != module.getOperation() && op->hasTrait<OpTrait::SymbolTable>())
      return WalkResult::skip();
    replacer.replaceElementsIn(op);
    return WalkResult::advance();
  });
  Block *body = module.getBody();
  Operation *front = &body->front();
  for (LLVM::GlobalOp g : order) {
    g.setSymNameAttr(renamed.lookup(g.getSymNameAttr()));
    if (g.getOperation() != front)
      g->moveBefore(front);
    else
      front = front->getNextNode();
  }
}

//===----------------------------------------------------------------------===//
// Splitting
//===----------------------------------------------------------------------===//

namespace {

/// A kernel of --masformer-outline-kernels: masformer_kernel_<digits>. (The
/// OpenMP bodies outlined from it, masformer_kernel_N..omp_par, are not
/// kernels of their own: they go with theirs.)
bool isKernel(const llvm::Function &f) {
  StringRef name = f.getName();
  return !f.isDeclaration() && name.consume_front("masformer_kernel_") &&
         !name.empty() && llvm::all_of(name, llvm::isDigit);
}

/// The globals `v` refers to, through constant expressions and aggregates.
void collectGlobals(const llvm::Value *v,
                    llvm::SmallSetVector<llvm::GlobalValue *, 8> &out,
                    llvm::SmallPtrSetImpl<const llvm::Constant *> &seen) {
  if (auto *gv = dyn_cast<llvm::GlobalValue>(v)) {
    out.insert(const_cast<llvm::GlobalValue *>(gv));
    return;
  }
  auto *c = dyn_cast<llvm::Constant>(v);
  if (!c || !seen.insert(c).second)
    return;
  for (const llvm::Use &op : c->operands())
    collectGlobals(op.get(), out, seen);
}

/// The globals a function's body or a variable's initializer refers to.
llvm::SmallSetVector<llvm::GlobalValue *, 8>
referencedGlobals(const llvm::GlobalValue &gv) {
  llvm::SmallSetVector<llvm::GlobalValue *, 8> out;
  llvm::SmallPtrSet<const llvm::Constant *, 16> seen;
  if (auto *f = dyn_cast<llvm::Function>(&gv)) {
    for (const llvm::BasicBlock &bb : *f)
      for (const llvm::Instruction &inst : bb)
        for (const llvm::Use &op : inst.operands())
          collectGlobals(op.get(), out, seen);
  } else if (auto *var = dyn_cast<llvm::GlobalVariable>(&gv)) {
    if (var->hasInitializer())
      collectGlobals(var->getInitializer(), out, seen);
  }
  return out;
}

/// Constants at most this large that several parts use are copied into
/// each; larger ones (and variables) live in the rest and are shared.
constexpr uint64_t kCopyLimitBytes = 1 << 20;

/// Gives `gv` hidden external linkage, so that another part of the same
/// library can use it, and a name if it had none.
void externalize(llvm::GlobalValue &gv) {
  if (!gv.hasLocalLinkage())
    return;
  if (!gv.hasName())
    gv.setName("masformer.part");
  gv.setLinkage(llvm::GlobalValue::ExternalLinkage);
  gv.setVisibility(llvm::GlobalValue::HiddenVisibility);
  gv.setDSOLocal(true);
}

/// Erases the declarations and local definitions nothing uses any more.
void dropUnused(llvm::Module &m) {
  bool changed = true;
  while (changed) {
    changed = false;
    for (llvm::Function &f : llvm::make_early_inc_range(m))
      if (f.use_empty() && (f.isDeclaration() || f.hasLocalLinkage())) {
        f.eraseFromParent();
        changed = true;
      }
    for (llvm::GlobalVariable &g : llvm::make_early_inc_range(m.globals()))
      if (g.use_empty() && (g.isDeclaration() || g.hasLocalLinkage())) {
        g.eraseFromParent();
        changed = true;
      }
  }
}

SmallVector<char, 0> toBitcode(llvm::Module &m) {
  // Nothing of the model's file name: the same code gives the same bytes.
  m.setModuleIdentifier("masformer-part");
  m.setSourceFileName("masformer-part");
  SmallVector<char, 0> out;
  llvm::raw_svector_ostream os(out);
  llvm::WriteBitcodeToFile(m, os);
  return out;
}

} // namespace

SmallVector<ModulePart>
mlir::masformer::splitModule(std::unique_ptr<llvm::Module> module) {
  llvm::Module &m = *module;
  SmallVector<llvm::Function *> kernels;
  for (llvm::Function &f : m)
    if (isKernel(f))
      kernels.push_back(&f);
  if (kernels.empty() || !m.alias_empty() || !m.ifunc_empty())
    return {ModulePart{"", toBitcode(m)}};

  // Part 0 is the rest; part i + 1 is kernels[i].
  constexpr unsigned kRest = 0;
  llvm::DenseMap<const llvm::GlobalValue *, unsigned> kernelPart;
  for (auto [i, f] : llvm::enumerate(kernels))
    kernelPart[f] = i + 1;

  // 1. Each defined function goes to the one kernel that reaches it alone,
  // or to the rest. A part's roots: its kernel; for the rest, every
  // function and variable the library exports.
  llvm::DenseMap<const llvm::GlobalValue *, SmallVector<unsigned, 2>> reachedBy;
  auto reach = [&](unsigned part, ArrayRef<llvm::GlobalValue *> roots) {
    llvm::SmallPtrSet<const llvm::GlobalValue *, 32> seen;
    SmallVector<llvm::GlobalValue *> work(roots.begin(), roots.end());
    while (!work.empty()) {
      llvm::GlobalValue *gv = work.pop_back_val();
      if (gv->isDeclaration() || !seen.insert(gv).second)
        continue;
      auto *f = dyn_cast<llvm::Function>(gv);
      if (f) {
        reachedBy[f].push_back(part);
        // Another kernel is only called from here.
        if (kernelPart.count(f) && kernelPart.lookup(f) != part)
          continue;
      }
      for (llvm::GlobalValue *ref : referencedGlobals(*gv))
        work.push_back(ref);
    }
  };
  SmallVector<llvm::GlobalValue *> restRoots;
  for (llvm::GlobalValue &gv : m.global_values())
    if (!gv.isDeclaration() && !kernelPart.count(&gv) &&
        (!gv.hasLocalLinkage() || gv.getName().starts_with("llvm.")))
      restRoots.push_back(&gv);
  reach(kRest, restRoots);
  for (auto [i, f] : llvm::enumerate(kernels))
    reach(i + 1, {f});

  llvm::DenseMap<const llvm::GlobalValue *, unsigned> home;
  for (llvm::Function &f : m) {
    if (f.isDeclaration())
      continue;
    if (unsigned k = kernelPart.lookup(&f)) {
      home[&f] = k;
      continue;
    }
    ArrayRef<unsigned> by = reachedBy[&f];
    home[&f] = by.size() == 1 ? by[0] : kRest;
  }

  // 2. The variables each part's functions use, through the initializers of
  // the variables it holds.
  unsigned numParts = kernels.size() + 1;
  llvm::DenseMap<const llvm::GlobalValue *, llvm::SmallSetVector<unsigned, 2>>
      usedBy;
  for (unsigned part = 0; part < numParts; ++part) {
    SmallVector<llvm::GlobalValue *> work;
    for (llvm::Function &f : m)
      if (!f.isDeclaration() && home.lookup(&f) == part)
        llvm::append_range(work, referencedGlobals(f));
    if (part == kRest)
      for (llvm::GlobalVariable &g : m.globals())
        if (!g.hasLocalLinkage() || g.getName().starts_with("llvm."))
          work.push_back(&g);
    llvm::SmallPtrSet<const llvm::GlobalValue *, 32> seen;
    while (!work.empty()) {
      llvm::GlobalValue *gv = work.pop_back_val();
      if (!seen.insert(gv).second)
        continue;
      usedBy[gv].insert(part);
      if (isa<llvm::GlobalVariable>(gv))
        llvm::append_range(work, referencedGlobals(*gv));
    }
  }

  // 3. Each variable's home (or homes, for small constants), and hidden
  // linkage for whatever one part defines and another uses.
  llvm::DenseMap<const llvm::GlobalValue *, SmallVector<unsigned, 2>> copies;
  const llvm::DataLayout &layout = m.getDataLayout();
  for (llvm::GlobalVariable &g : m.globals()) {
    if (g.isDeclaration())
      continue;
    auto it = usedBy.find(&g);
    if (it == usedBy.end() || it->second.size() == 1) {
      home[&g] = it == usedBy.end() ? kRest : it->second[0];
      continue;
    }
    home[&g] = kRest;
    if (g.isConstant() && g.hasLocalLinkage() &&
        layout.getTypeAllocSize(g.getValueType()) <= kCopyLimitBytes)
      copies[&g].assign(it->second.begin(), it->second.end());
  }
  // (usedBy holds the functions each part calls too.)
  for (auto &[gv, parts] : usedBy) {
    if (gv->isDeclaration() || copies.count(gv))
      continue;
    unsigned h = home.lookup(gv);
    if (llvm::any_of(parts, [&](unsigned p) { return p != h; }))
      externalize(*const_cast<llvm::GlobalValue *>(gv));
  }

  // 4. The kernels' parts, cloned with their own definitions only, and one
  // for the data the library exports and no code uses (its signature, the
  // weights' manifest, which names the output's files: the rest's code
  // stays the same whatever the output is called); then the rest, in place.
  llvm::SmallPtrSet<const llvm::GlobalValue *, 8> data;
  for (llvm::GlobalVariable &g : m.globals())
    if (!g.isDeclaration() && g.hasExternalLinkage() && g.use_empty() &&
        !g.getName().starts_with("llvm.") && referencedGlobals(g).empty())
      data.insert(&g);
  SmallVector<ModulePart> parts(numParts);
  if (!data.empty()) {
    llvm::ValueToValueMapTy map;
    std::unique_ptr<llvm::Module> clone = llvm::CloneModule(
        m, map, [&](const llvm::GlobalValue *gv) { return data.count(gv); });
    dropUnused(*clone);
    parts.push_back(ModulePart{"", toBitcode(*clone)});
    for (const llvm::GlobalValue *gv : data)
      cast<llvm::GlobalVariable>(const_cast<llvm::GlobalValue *>(gv))
          ->setInitializer(nullptr);
  }
  for (auto [i, f] : llvm::enumerate(kernels)) {
    unsigned part = i + 1;
    llvm::ValueToValueMapTy map;
    std::unique_ptr<llvm::Module> clone =
        llvm::CloneModule(m, map, [&](const llvm::GlobalValue *gv) {
          if (home.lookup(gv) == part)
            return true;
          auto it = copies.find(gv);
          return it != copies.end() && llvm::is_contained(it->second, part);
        });
    dropUnused(*clone);
    parts[part] = ModulePart{f->getName().str(), toBitcode(*clone)};
  }
  for (llvm::Function &f : m)
    if (!f.isDeclaration() && home.lookup(&f) != kRest) {
      f.deleteBody();
      f.setComdat(nullptr);
    }
  for (llvm::GlobalVariable &g : m.globals())
    if (!g.isDeclaration() && home.lookup(&g) != kRest && !copies.count(&g)) {
      g.setInitializer(nullptr);
      g.setLinkage(llvm::GlobalValue::ExternalLinkage);
    }
  dropUnused(m);
  parts[kRest] = ModulePart{"", toBitcode(m)};
  return parts;
}

//===----------------------------------------------------------------------===//
// Compiling the parts
//===----------------------------------------------------------------------===//

std::optional<std::string> mlir::masformer::objectCacheUnusable() {
  for (auto &[name, opt] : llvm::cl::getRegisteredOptions()) {
    if (!opt->getNumOccurrences())
      continue;
    bool ours = llvm::any_of(opt->Categories, [](llvm::cl::OptionCategory *c) {
      return c->getName().starts_with("masformer");
    });
    if (!ours)
      return ("LLVM's option --" + name + " was given").str();
  }
  return std::nullopt;
}

namespace {

/// The cache key of a part's object: its bitcode and everything else that
/// decides the code (LLVM's version, the target, this file's and
/// LLVMTarget.cpp's sources).
std::string cacheKey(const ModulePart &part, const HostTarget &host) {
  llvm::BLAKE3 hash;
  auto add = [&](StringRef s) {
    hash.update(s);
    hash.update(StringRef("\0", 1));
  };
  add("masformer object cache 1");
  add(LLVM_VERSION_STRING);
  add(MASFORMER_CODEGEN_SOURCES_HASH);
  add(host.machine->getTargetTriple().str());
  add(host.cpu);
  add(host.features);
  hash.update(llvm::ArrayRef<uint8_t>(
      reinterpret_cast<const uint8_t *>(part.bitcode.data()),
      part.bitcode.size()));
  return llvm::toHex(hash.final(), /*LowerCase=*/true);
}

/// Writes `bytes` to `path` through a unique temporary file renamed into
/// place, so that a reader (another compile sharing the cache) never sees a
/// partial file.
std::string writeAtomically(StringRef path, ArrayRef<char> bytes) {
  int fd;
  SmallString<256> tmp;
  if (std::error_code ec =
          llvm::sys::fs::createUniqueFile(path + ".tmp-%%%%%%%%", fd, tmp))
    return "cannot write '" + path.str() + "': " + ec.message();
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os.write(bytes.data(), bytes.size());
    os.close();
    if (os.has_error()) {
      llvm::sys::fs::remove(tmp);
      return "cannot write '" + path.str() + "': " + os.error().message();
    }
  }
  if (std::error_code ec = llvm::sys::fs::rename(tmp, path)) {
    llvm::sys::fs::remove(tmp);
    return "cannot write '" + path.str() + "': " + ec.message();
  }
  return "";
}

/// Parses and optimizes one part in a context of its own; then either its
/// object (`object` set) or its optimized bitcode. Returns an error
/// message, or "" (this runs on a worker thread: no MLIR diagnostics).
///
/// LLVM is built without exceptions: when its allocation handler throws
/// std::bad_alloc (the Python module installs one that does, so that a
/// compile out of memory is a masformer.Error), the IR a pass was changing
/// is left half-made, and destroying it then crashes (a segmentation fault
/// in Module's destructor, under an address-space limit:
/// python/tests/test_hostile.py). On that path the context, the module, the
/// target machine and the pass manager are leaked, not destroyed; the
/// exception goes on to runParallel.
std::string optimizeAndEmit(const ModulePart &part, const HostTarget &host,
                            SmallVectorImpl<char> *object,
                            SmallVectorImpl<char> *bitcode) {
  auto context = std::make_unique<llvm::LLVMContext>();
  std::unique_ptr<llvm::Module> module;
  std::unique_ptr<llvm::TargetMachine> machine;
  auto codegen = std::make_unique<llvm::legacy::PassManager>();
  try {
    llvm::Expected<std::unique_ptr<llvm::Module>> parsed =
        llvm::parseBitcodeFile(
            llvm::MemoryBufferRef(
                StringRef(part.bitcode.data(), part.bitcode.size()),
                "masformer-part"),
            *context);
    if (!parsed)
      return "internal error: a part's bitcode does not parse: " +
             llvm::toString(parsed.takeError());
    module = std::move(*parsed);
    machine = host.createMachine();
    optimizeModule(*module, *machine);
    if (bitcode) {
      llvm::raw_svector_ostream os(*bitcode);
      llvm::WriteBitcodeToFile(*module, os);
      return "";
    }
    llvm::raw_svector_ostream os(*object);
    if (machine->addPassesToEmitFile(*codegen, os, nullptr,
                                     llvm::CodeGenFileType::ObjectFile))
      return "LLVM cannot emit an object file for " +
             machine->getTargetTriple().str();
    codegen->run(*module);
    return "";
  } catch (...) {
    (void)codegen.release();
    (void)machine.release();
    (void)module.release();
    (void)context.release();
    throw;
  }
}

unsigned threadsFor(unsigned jobs, size_t work) {
  unsigned n =
      jobs ? jobs : llvm::hardware_concurrency().compute_thread_count();
  return std::max<unsigned>(1, std::min<size_t>(n, work));
}

/// Runs `fn(i)` for each index of `order` on `threads` threads (in that
/// order: the largest parts first). An exception a part throws (LLVM's
/// allocations throw std::bad_alloc where the Python module installs its
/// handler) is thrown again here, on the calling thread, once every part
/// has stopped: thrown on a pool thread it would end the process.
void runParallel(ArrayRef<size_t> order, unsigned threads,
                 llvm::function_ref<void(size_t)> fn) {
  if (threads <= 1) {
    for (size_t i : order)
      fn(i);
    return;
  }
  std::mutex failedLock;
  std::exception_ptr failed;
  {
    llvm::DefaultThreadPool pool(llvm::hardware_concurrency(threads));
    for (size_t i : order)
      pool.async([&, fn, i] {
        {
          std::lock_guard<std::mutex> guard(failedLock);
          if (failed)
            return;
        }
        try {
          fn(i);
        } catch (...) {
          std::lock_guard<std::mutex> guard(failedLock);
          if (!failed)
            failed = std::current_exception();
        }
      });
    pool.wait();
  }
  if (failed)
    std::rethrow_exception(failed);
}

SmallVector<size_t> largestFirst(ArrayRef<ModulePart> parts,
                                 ArrayRef<size_t> which) {
  SmallVector<size_t> order(which.begin(), which.end());
  llvm::stable_sort(order, [&](size_t a, size_t b) {
    return parts[a].bitcode.size() > parts[b].bitcode.size();
  });
  return order;
}

} // namespace

FailureOr<CodegenStats> mlir::masformer::compileParts(
    ArrayRef<ModulePart> parts, const HostTarget &host,
    const CodegenOptions &options, SmallVectorImpl<std::string> &objects,
    SmallVectorImpl<std::unique_ptr<TempFile>> &temporaries, Location loc) {
  CodegenStats stats;
  stats.parts = parts.size();
  objects.assign(parts.size(), "");
  SmallVector<std::string> keys(parts.size());
  SmallVector<size_t> todo;
  if (!options.cacheDir.empty()) {
    if (std::error_code ec =
            llvm::sys::fs::create_directories(options.cacheDir))
      return emitError(loc) << "object cache '" << options.cacheDir
                            << "': " << ec.message(),
             failure();
  }
  for (auto [i, part] : llvm::enumerate(parts)) {
    if (!options.cacheDir.empty()) {
      keys[i] = cacheKey(part, host);
      SmallString<256> path(options.cacheDir);
      llvm::sys::path::append(path, keys[i] + ".o");
      objects[i] = path.str().str();
      if (llvm::sys::fs::exists(path)) {
        ++stats.cached;
        continue;
      }
    } else {
      temporaries.push_back(std::make_unique<TempFile>());
      if (failed(temporaries.back()->create("o", loc)))
        return failure();
      objects[i] = temporaries.back()->path.str().str();
    }
    todo.push_back(i);
  }
  stats.threads = threadsFor(options.jobs, todo.size());
  SmallVector<std::string> errors(parts.size());
  runParallel(largestFirst(parts, todo), stats.threads, [&](size_t i) {
    SmallVector<char, 0> object;
    errors[i] = optimizeAndEmit(parts[i], host, &object, nullptr);
    if (errors[i].empty())
      errors[i] = writeAtomically(objects[i], object);
  });
  for (auto [i, error] : llvm::enumerate(errors))
    if (!error.empty())
      return emitError(loc) << "compiling "
                            << (parts[i].kernel.empty()
                                    ? std::string("the model's entry code")
                                    : "kernel " + parts[i].kernel)
                            << ": " << error,
             failure();
  return stats;
}

FailureOr<std::unique_ptr<llvm::Module>>
mlir::masformer::optimizeParts(ArrayRef<ModulePart> parts,
                               const HostTarget &host, unsigned jobs,
                               llvm::LLVMContext &context, Location loc) {
  SmallVector<SmallVector<char, 0>> optimized(parts.size());
  SmallVector<std::string> errors(parts.size());
  SmallVector<size_t> all = llvm::to_vector(llvm::seq<size_t>(0, parts.size()));
  runParallel(
      largestFirst(parts, all), threadsFor(jobs, parts.size()), [&](size_t i) {
        errors[i] = optimizeAndEmit(parts[i], host, nullptr, &optimized[i]);
      });
  for (const std::string &error : errors)
    if (!error.empty())
      return emitError(loc) << error, failure();
  std::unique_ptr<llvm::Module> whole;
  for (auto [i, bitcode] : llvm::enumerate(optimized)) {
    llvm::Expected<std::unique_ptr<llvm::Module>> m = llvm::parseBitcodeFile(
        llvm::MemoryBufferRef(StringRef(bitcode.data(), bitcode.size()),
                              "masformer-part"),
        context);
    if (!m)
      return emitError(loc) << "internal error: an optimized part does not "
                               "parse: "
                            << llvm::toString(m.takeError()),
             failure();
    if (!whole) {
      whole = std::move(*m);
      continue;
    }
    if (llvm::Linker::linkModules(*whole, std::move(*m)))
      return emitError(loc) << "internal error: the optimized parts do not "
                               "link",
             failure();
  }
  return whole;
}
