//===- EmulateAMX.cpp - AMX tile operations as checked scalar loops ------===//
//
// A test of the AMX path on a CPU without AMX: every amx.tile_zero,
// tile_load, tile_mulf, tile_muli and tile_store becomes scalar loops over
// an emulated file of 8 tile registers (16 rows of 64 bytes each), written
// from the definitions of TILEZERO, TILELOADD, TDPBF16PS / TDPFP16PS,
// TDPBSSD / TDPBSUD / TDPBUSD / TDPBUUD and TILESTORED in Intel's ISA
// reference, independent of how --masformer-lower-amx-tiles uses them. It is
// stricter than the hardware: a load or store past its buffer's bounds stops
// the program with a message naming the operation, its indices and the
// buffer's sizes, and more than 8 tile values live at once is a compile-time
// error. The emulation depends on nothing but the operations (no location):
// each layer's kernels stay identical, and --masformer-outline-kernels shares
// them as it does on the AMX path.
//
//===----------------------------------------------------------------------===//

#include "masformer/Codegen/CPU/Passes.h"

#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::masformer {
#define GEN_PASS_DEF_EMULATEAMX
#include "masformer/Codegen/CPU/Passes.h.inc"
} // namespace mlir::masformer

using namespace mlir;
using namespace mlir::masformer;

namespace {

/// AMX's register file: 8 tiles of at most 16 rows of 64 bytes.
constexpr int64_t kRegisters = 8, kMaxRows = 16, kRowBytes = 64;

bool isTileOp(Operation *op) {
  return isa<amx::TileZeroOp, amx::TileLoadOp, amx::TileStoreOp,
             amx::TileMulFOp, amx::TileMulIOp>(op);
}

/// The emulation of one block's tile operations.
class BlockEmulator {
public:
  using Files = DenseMap<std::pair<Block *, Type>, Value>;
  /// What the blocks share: their register files and the module's symbols
  /// (looked up by name in a table: a module's linear lookup, once per
  /// tile operation, took seconds on a small model).
  struct Shared {
    explicit Shared(ModuleOp module) : symbols(module) {}
    Files files;
    SymbolTable symbols;
  };
  BlockEmulator(RewriterBase &rw, Block &block, Block &anchor, Shared &shared)
      : rw(rw), block(block), anchor(anchor), files(shared.files),
        symbols(shared.symbols) {}

  LogicalResult run();

private:
  /// The register file of tiles of `elt`: memref<8 x 16 x (64 / bytes)>,
  /// allocated once at the start of the anchor block. Each block of tile
  /// operations has its own files: its tile values are LLVM's virtual
  /// registers, which a block nested in another's loop must not clobber.
  Value file(Type elt);
  Value c(Location loc, int64_t v) {
    return arith::ConstantIndexOp::create(rw, loc, v);
  }
  /// Stops the program unless the tile at `indices` of `base` (its last two
  /// dimensions `rows` x `cols`) lies inside the buffer; the message names
  /// `opName`, the indices and the buffer's sizes.
  void checkBounds(Location loc, StringRef opName, Value base,
                   ValueRange indices, int64_t rows, int64_t cols);
  /// The external function `name` of type `fnTy`, declared once.
  LLVM::LLVMFuncOp declare(Location loc, StringRef name,
                           LLVM::LLVMFunctionType fnTy);
  /// Copies between a register and memory (`toMemory` for a store).
  void copy(Location loc, Value base, ValueRange indices, Value reg,
            Value regIndex, int64_t rows, int64_t cols, bool toMemory);
  /// A call of the function that checks the tile's bounds and copies it
  /// between memory of `base`'s type and a register (made once per type,
  /// shape and direction).
  void emitCopy(Operation *op, Value base, ValueRange indices, Value reg,
                int64_t regIndex, int64_t rows, int64_t cols, bool toMemory);
  void emitZero(amx::TileZeroOp op, int64_t out);
  /// Loops over the rows x cols elements of a tile, `body(i, j)` inside.
  void forEachElement(Location loc, int64_t rows, int64_t cols,
                      llvm::function_ref<void(Value, Value)> body);
  /// A private, never inlined function `name` of type `fnTy` at the end of
  /// the module, its body a return; the rewriter left before that return.
  func::FuncOp createHelper(Location loc, StringRef name, FunctionType fnTy);
  /// The function that emulates `op`'s product (amx.tile_mulf or
  /// amx.tile_muli) on register files.
  func::FuncOp productFunction(Operation *op);
  void emitMul(Operation *op, int64_t lhs, int64_t rhs, int64_t acc,
               int64_t out);

  RewriterBase &rw;
  Block &block;
  Block &anchor;
  /// The register files of each block, by element type.
  Files &files;
  SymbolTable &symbols;
};

Value BlockEmulator::file(Type elt) {
  if (Value f = files.lookup({&block, elt}))
    return f;
  OpBuilder::InsertionGuard g(rw);
  rw.setInsertionPointToStart(&anchor);
  int64_t bytes = elt.getIntOrFloatBitWidth() / 8;
  auto ty = MemRefType::get({kRegisters, kMaxRows, kRowBytes / bytes}, elt);
  Value f = memref::AllocaOp::create(rw, anchor.getParentOp()->getLoc(), ty);
  files[{&block, elt}] = f;
  return f;
}

LLVM::LLVMFuncOp BlockEmulator::declare(Location loc, StringRef name,
                                        LLVM::LLVMFunctionType fnTy) {
  if (auto fn = symbols.lookup<LLVM::LLVMFuncOp>(name))
    return fn;
  OpBuilder::InsertionGuard g(rw);
  rw.setInsertionPointToStart(&symbols.getOp()->getRegion(0).front());
  auto fn = LLVM::LLVMFuncOp::create(rw, loc, name, fnTy);
  symbols.insert(fn);
  return fn;
}

/// Unless every index plus the tile's extent is within its dimension: the
/// operation, the indices and the sizes to stderr with dprintf(2)
/// (unbuffered: a printf would be lost in the abort when stdout is a
/// pipe), then abort.
void BlockEmulator::checkBounds(Location loc, StringRef opName, Value base,
                                ValueRange indices, int64_t rows,
                                int64_t cols) {
  MLIRContext *ctx = rw.getContext();
  auto ptrTy = LLVM::LLVMPointerType::get(ctx);
  Type i32 = rw.getI32Type(), i64 = rw.getI64Type();
  auto rank = static_cast<int64_t>(indices.size());
  Value ok;
  SmallVector<Value> at, sizes;
  for (int64_t d = 0; d < rank; ++d) {
    Value dim = memref::DimOp::create(rw, loc, base, d);
    int64_t extent = d == rank - 2 ? rows : d == rank - 1 ? cols : 1;
    Value end = arith::AddIOp::create(rw, loc, indices[d], c(loc, extent));
    Value in =
        arith::CmpIOp::create(rw, loc, arith::CmpIPredicate::ule, end, dim);
    ok = ok ? arith::AndIOp::create(rw, loc, ok, in).getResult() : in;
    at.push_back(arith::IndexCastOp::create(rw, loc, i64, indices[d]));
    sizes.push_back(arith::IndexCastOp::create(rw, loc, i64, dim));
  }
  std::string msg;
  llvm::raw_string_ostream os(msg);
  os << "masformer AMX emulator: " << opName << " of " << rows << " x " << cols
     << " at [";
  for (int64_t d = 0; d < rank; ++d)
    os << (d ? ", " : "") << "%ld";
  os << "] outside its buffer of ";
  for (int64_t d = 0; d < rank; ++d)
    os << (d ? " x " : "") << "%ld";
  os << '\n';
  msg.push_back('\0');
  // One global per text (the helpers of one operation, tile and rank share
  // it): the first free name, or the global that holds this text.
  std::string name;
  for (int64_t i = 0;; ++i) {
    name = ("__masformer_amx_emulator_message_" + Twine(i)).str();
    Operation *symbol = symbols.lookup(name);
    if (!symbol)
      break;
    auto global = dyn_cast<LLVM::GlobalOp>(symbol);
    auto text = global ? dyn_cast_or_null<StringAttr>(global.getValueOrNull())
                       : nullptr;
    if (text && text.getValue() == msg)
      break;
  }
  if (!symbols.lookup(name)) {
    OpBuilder::InsertionGuard g(rw);
    rw.setInsertionPointToStart(&symbols.getOp()->getRegion(0).front());
    auto strTy = LLVM::LLVMArrayType::get(rw.getI8Type(), msg.size());
    symbols.insert(LLVM::GlobalOp::create(rw, loc, strTy, /*isConstant=*/true,
                                          LLVM::Linkage::Private, name,
                                          rw.getStringAttr(msg)));
  }
  LLVM::LLVMFuncOp dprintf = declare(
      loc, "dprintf",
      LLVM::LLVMFunctionType::get(i32, {i32, ptrTy}, /*isVarArg=*/true));
  LLVM::LLVMFuncOp abort =
      declare(loc, "abort",
              LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), {}));
  Value failed = arith::XOrIOp::create(
      rw, loc, ok, arith::ConstantIntOp::create(rw, loc, 1, 1));
  auto ifOp = scf::IfOp::create(rw, loc, failed, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard g(rw);
  rw.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  SmallVector<Value> args = {LLVM::ConstantOp::create(rw, loc, i32, 2),
                             LLVM::AddressOfOp::create(rw, loc, ptrTy, name)};
  args.append(at);
  args.append(sizes);
  LLVM::CallOp::create(rw, loc, dprintf, args);
  LLVM::CallOp::create(rw, loc, abort, ValueRange{});
}

void BlockEmulator::copy(Location loc, Value base, ValueRange indices,
                         Value reg, Value r, int64_t rows, int64_t cols,
                         bool toMemory) {
  auto rank = static_cast<int64_t>(indices.size());
  forEachElement(loc, rows, cols, [&](Value i, Value j) {
    SmallVector<Value> at(indices.begin(), indices.end());
    at[rank - 2] = arith::AddIOp::create(rw, loc, at[rank - 2], i);
    at[rank - 1] = arith::AddIOp::create(rw, loc, at[rank - 1], j);
    SmallVector<Value> regAt = {r, i, j};
    if (toMemory) {
      Value v = memref::LoadOp::create(rw, loc, reg, regAt);
      memref::StoreOp::create(rw, loc, v, base, at);
    } else {
      Value v = memref::LoadOp::create(rw, loc, base, at);
      memref::StoreOp::create(rw, loc, v, reg, regAt);
    }
  });
}

void BlockEmulator::forEachElement(
    Location loc, int64_t rows, int64_t cols,
    llvm::function_ref<void(Value, Value)> body) {
  Value zero = c(loc, 0), one = c(loc, 1);
  auto rowLoop = scf::ForOp::create(rw, loc, zero, c(loc, rows), one);
  OpBuilder::InsertionGuard g(rw);
  rw.setInsertionPoint(rowLoop.getBody()->getTerminator());
  auto colLoop = scf::ForOp::create(rw, loc, zero, c(loc, cols), one);
  rw.setInsertionPoint(colLoop.getBody()->getTerminator());
  body(rowLoop.getInductionVar(), colLoop.getInductionVar());
}

func::FuncOp BlockEmulator::createHelper(Location loc, StringRef name,
                                         FunctionType fnTy) {
  rw.setInsertionPointToEnd(&symbols.getOp()->getRegion(0).front());
  auto fn = func::FuncOp::create(rw, loc, name, fnTy);
  symbols.insert(fn);
  fn.setPrivate();
  fn->setAttr("passthrough", rw.getArrayAttr({rw.getStringAttr("noinline")}));
  Block *body = fn.addEntryBlock();
  rw.setInsertionPointToStart(body);
  auto ret = func::ReturnOp::create(rw, loc);
  rw.setInsertionPoint(ret);
  return fn;
}

void BlockEmulator::emitCopy(Operation *op, Value base, ValueRange indices,
                             Value reg, int64_t regIndex, int64_t rows,
                             int64_t cols, bool toMemory) {
  // The helper's location is the module's: no operation's own, so that the
  // same helper comes out of every model alike.
  Location loc = symbols.getOp()->getLoc();
  Type index = rw.getIndexType();
  SmallVector<Type> args = {base.getType(), reg.getType(), index};
  args.append(indices.size(), index);
  auto fnTy = rw.getFunctionType(args, {});
  // One function per type, shape and direction: the first free name, or
  // the one that already has this type.
  func::FuncOp fn;
  std::string name;
  for (int64_t i = 0;; ++i) {
    name = (Twine("__masformer_amx_emulator_") +
            (toMemory ? "tilestored" : "tileloadd") + "_" + Twine(rows) + "x" +
            Twine(cols) + "_" + Twine(i))
               .str();
    fn = symbols.lookup<func::FuncOp>(name);
    if (!fn || fn.getFunctionType() == fnTy)
      break;
  }
  if (!fn) {
    OpBuilder::InsertionGuard g(rw);
    fn = createHelper(loc, name, fnTy);
    Block *body = &fn.getBody().front();
    ValueRange at = body->getArguments().drop_front(3);
    checkBounds(loc, op->getName().getStringRef(), body->getArgument(0), at,
                rows, cols);
    copy(loc, body->getArgument(0), at, body->getArgument(1),
         body->getArgument(2), rows, cols, toMemory);
  }
  SmallVector<Value> operands = {base, reg, c(op->getLoc(), regIndex)};
  operands.append(indices.begin(), indices.end());
  func::CallOp::create(rw, op->getLoc(), fn, operands);
}

void BlockEmulator::emitZero(amx::TileZeroOp op, int64_t out) {
  Location loc = op.getLoc();
  amx::TileType ty = op.getRes().getType();
  Value reg = file(ty.getElementType());
  Value r = c(loc, out);
  Value v =
      arith::ConstantOp::create(rw, loc, rw.getZeroAttr(ty.getElementType()));
  forEachElement(
      loc, ty.getShape()[0], ty.getShape()[1], [&](Value i, Value j) {
        memref::StoreOp::create(rw, loc, v, reg, ValueRange{r, i, j});
      });
}

// TDPBF16PS (TDPFP16PS for f16 tiles), as Intel's reference defines it:
//   for m, for k < K / 2, for n:
//     dst[m][n] += f32(a[m][2 k]) * f32(b[k][2 n])
//     dst[m][n] += f32(a[m][2 k + 1]) * f32(b[k][2 n + 1])
// with a [M x K], b [K / 2 x 2 N] (pairs of k), dst [M x N]; and TDPBSSD,
// TDPBSUD, TDPBUSD and TDPBUUD (amx.tile_muli, each operand sign- or
// zero-extended as its attribute says):
//   for m, for k < K / 4, for n:
//     dst[m][n] += ext(a[m][4 k + i]) * ext(b[k][4 n + i])   for i < 4
// in i32 arithmetic that wraps: one private function per element type,
// extension and shape, called for each product (inlined, the hundreds of
// products of a model take minutes to compile).
func::FuncOp BlockEmulator::productFunction(Operation *op) {
  auto lhs = cast<TypedValue<amx::TileType>>(op->getOperand(0));
  auto accV = cast<TypedValue<amx::TileType>>(op->getOperand(2));
  amx::TileType aTy = lhs.getType(), cTy = accV.getType();
  Type in = aTy.getElementType(), acc = cTy.getElementType();
  auto muli = dyn_cast<amx::TileMulIOp>(op);
  int64_t group = muli ? 4 : 2;
  int64_t rows = cTy.getShape()[0], cols = cTy.getShape()[1],
          groups = aTy.getShape()[1] / group;
  std::string name;
  llvm::raw_string_ostream os(name);
  os << "__masformer_amx_emulator_";
  if (muli)
    os << "tdpb" << (muli.getIsZextLhs() ? 'u' : 's')
       << (muli.getIsZextRhs() ? 'u' : 's') << "d_";
  else
    os << "tdp" << in << "ps_";
  os << rows << "x" << groups << "x" << cols;
  if (auto fn = symbols.lookup<func::FuncOp>(name))
    return fn;
  Value aFile = file(in), cFile = file(acc);
  Type index = rw.getIndexType();
  auto fnTy = rw.getFunctionType(
      {aFile.getType(), cFile.getType(), index, index, index, index}, {});
  OpBuilder::InsertionGuard g(rw);
  Location loc = symbols.getOp()->getLoc();
  func::FuncOp fn = createHelper(loc, name, fnTy);
  Block *body = &fn.getBody().front();
  Value a = body->getArgument(0), cf = body->getArgument(1);
  Value ra = body->getArgument(2), rb = body->getArgument(3),
        rc = body->getArgument(4), ro = body->getArgument(5);
  Value zero = c(loc, 0), one = c(loc, 1), groupSize = c(loc, group);
  auto extend = [&](OpBuilder &b, Location loc, Value x, bool zext) -> Value {
    if (!muli)
      return arith::ExtFOp::create(b, loc, acc, x);
    if (zext)
      return arith::ExtUIOp::create(b, loc, acc, x);
    return arith::ExtSIOp::create(b, loc, acc, x);
  };
  forEachElement(loc, rows, cols, [&](Value m, Value n) {
    Value init = memref::LoadOp::create(rw, loc, cf, ValueRange{rc, m, n});
    auto kLoop = scf::ForOp::create(
        rw, loc, zero, c(loc, groups), one, ValueRange{init},
        [&](OpBuilder &b, Location loc, Value k, ValueRange iter) {
          Value sum = iter[0];
          Value kg = arith::MulIOp::create(b, loc, k, groupSize);
          Value ng = arith::MulIOp::create(b, loc, n, groupSize);
          for (int64_t kk = 0; kk < group; ++kk) {
            Value off = arith::ConstantIndexOp::create(b, loc, kk);
            Value ak = arith::AddIOp::create(b, loc, kg, off);
            Value bn = arith::AddIOp::create(b, loc, ng, off);
            Value x = memref::LoadOp::create(b, loc, a, ValueRange{ra, m, ak});
            Value y = memref::LoadOp::create(b, loc, a, ValueRange{rb, k, bn});
            Value xe = extend(b, loc, x, muli && muli.getIsZextLhs());
            Value ye = extend(b, loc, y, muli && muli.getIsZextRhs());
            if (muli) {
              Value p = arith::MulIOp::create(b, loc, xe, ye);
              sum = arith::AddIOp::create(b, loc, sum, p);
            } else {
              Value p = arith::MulFOp::create(b, loc, xe, ye);
              sum = arith::AddFOp::create(b, loc, sum, p);
            }
          }
          scf::YieldOp::create(b, loc, sum);
        });
    memref::StoreOp::create(rw, loc, kLoop.getResult(0), cf,
                            ValueRange{ro, m, n});
  });
  return fn;
}

void BlockEmulator::emitMul(Operation *op, int64_t lhs, int64_t rhs,
                            int64_t acc, int64_t out) {
  Location loc = op->getLoc();
  func::FuncOp fn = productFunction(op);
  auto elt = [&](unsigned i) {
    return cast<amx::TileType>(op->getOperand(i).getType()).getElementType();
  };
  Value aFile = file(elt(0));
  Value cFile = file(elt(2));
  func::CallOp::create(rw, loc, fn,
                       ValueRange{aFile, cFile, c(loc, lhs), c(loc, rhs),
                                  c(loc, acc), c(loc, out)});
}

LogicalResult BlockEmulator::run() {
  SmallVector<Operation *> ops;
  for (Operation &op : block)
    if (isTileOp(&op))
      ops.push_back(&op);
  // The last use of each tile value; every use must be a tile op of this
  // block (as on the hardware path: no tile value crosses a block).
  DenseMap<Operation *, int64_t> position;
  for (auto [i, op] : llvm::enumerate(ops))
    position[op] = static_cast<int64_t>(i);
  DenseMap<Value, int64_t> lastUse;
  for (Operation *op : ops) {
    for (Value res : op->getResults()) {
      auto ty = cast<amx::TileType>(res.getType());
      int64_t bytes = ty.getElementType().getIntOrFloatBitWidth() / 8;
      ArrayRef<int64_t> shape = ty.getShape();
      if (shape.size() != 2 || shape[0] > kMaxRows ||
          shape[1] * bytes > kRowBytes)
        return op->emitError() << "--masformer-emulate-amx: a tile of " << ty
                               << " does not fit AMX's 16 rows of 64 bytes";
      int64_t last = position[op];
      for (Operation *user : res.getUsers()) {
        auto it = position.find(user);
        if (user->getBlock() != &block || it == position.end())
          return user->emitError()
                 << "--masformer-emulate-amx: a tile value used outside the "
                    "block of tile operations that defines it";
        last = std::max(last, it->second);
      }
      lastUse[res] = last;
    }
  }
  // Registers by a linear scan; a product accumulates in place when its
  // accumulator dies there.
  DenseMap<Value, int64_t> reg;
  SmallVector<bool> busy(kRegisters, false);
  auto allocate = [&](Operation *op) -> FailureOr<int64_t> {
    for (int64_t r = 0; r < kRegisters; ++r)
      if (!busy[r]) {
        busy[r] = true;
        return r;
      }
    return op->emitError() << "--masformer-emulate-amx: more than "
                           << kRegisters
                           << " tile values live at once (AMX has 8 tile "
                              "registers)";
  };
  for (Operation *op : ops) {
    int64_t at = position[op];
    for (Value v : op->getOperands())
      if (isa<amx::TileType>(v.getType()) && !reg.count(v))
        return op->emitError() << "--masformer-emulate-amx: a tile operand "
                                  "not defined by a tile operation before it";
    rw.setInsertionPoint(op);
    if (auto load = dyn_cast<amx::TileLoadOp>(op)) {
      if (load.getStride())
        return op->emitError()
               << "--masformer-emulate-amx: loads with an explicit stride "
                  "are not emulated";
      FailureOr<int64_t> out = allocate(op);
      if (failed(out))
        return failure();
      reg[load.getRes()] = *out;
      amx::TileType ty = load.getRes().getType();
      emitCopy(op, load.getBase(), load.getIndices(), file(ty.getElementType()),
               *out, ty.getShape()[0], ty.getShape()[1], /*toMemory=*/false);
    } else if (auto store = dyn_cast<amx::TileStoreOp>(op)) {
      if (store.getStride())
        return op->emitError()
               << "--masformer-emulate-amx: stores with an explicit stride "
                  "are not emulated";
      amx::TileType ty = store.getVal().getType();
      emitCopy(op, store.getBase(), store.getIndices(),
               file(ty.getElementType()), reg[store.getVal()], ty.getShape()[0],
               ty.getShape()[1], /*toMemory=*/true);
    } else if (auto zero = dyn_cast<amx::TileZeroOp>(op)) {
      FailureOr<int64_t> out = allocate(op);
      if (failed(out))
        return failure();
      reg[zero.getRes()] = *out;
      emitZero(zero, *out);
    } else if (isa<amx::TileMulFOp, amx::TileMulIOp>(op)) {
      // (lhs, rhs, acc) -> res, for both.
      Value lhs = op->getOperand(0), rhs = op->getOperand(1),
            accV = op->getOperand(2);
      int64_t acc = reg[accV];
      int64_t out;
      if (lastUse[accV] == at) {
        out = acc;
        lastUse.erase(accV);
      } else {
        FailureOr<int64_t> r = allocate(op);
        if (failed(r))
          return failure();
        out = *r;
      }
      reg[op->getResult(0)] = out;
      emitMul(op, reg[lhs], reg[rhs], acc, out);
    } else {
      return op->emitError() << "--masformer-emulate-amx: " << op->getName()
                             << " is not emulated";
    }
    // Operands whose last use this was free their registers.
    for (Value v : op->getOperands()) {
      auto it = lastUse.find(v);
      if (it != lastUse.end() && it->second == at) {
        busy[reg[v]] = false;
        lastUse.erase(it);
      }
    }
    // A result nothing uses is dead at once.
    for (Value res : op->getResults())
      if (res.use_empty())
        busy[reg[res]] = false;
  }
  for (Operation *op : llvm::reverse(ops)) {
    op->dropAllUses();
    rw.eraseOp(op);
  }
  return success();
}

/// The block that holds a register file for `block`'s tile operations: the
/// body of the closest parallel loop or function around it, so that every
/// thread has its own and none is allocated per iteration of a sequential
/// loop.
Block *anchorOf(Block *block) {
  Operation *op = block->getParentOp();
  while (op && !isa<scf::ForallOp, scf::ParallelOp, FunctionOpInterface>(op))
    op = op->getParentOp();
  if (!op || op->getNumRegions() == 0 || op->getRegion(0).empty())
    return nullptr;
  return &op->getRegion(0).front();
}

struct EmulateAMXPass final : masformer::impl::EmulateAMXBase<EmulateAMXPass> {
  void runOnOperation() override {
    llvm::SetVector<Block *> blocks;
    getOperation()->walk([&](Operation *op) {
      if (isTileOp(op))
        blocks.insert(op->getBlock());
    });
    IRRewriter rw(&getContext());
    BlockEmulator::Shared shared(getOperation());
    for (Block *block : blocks) {
      Block *anchor = anchorOf(block);
      if (!anchor) {
        block->getParentOp()->emitError()
            << "--masformer-emulate-amx: tile operations outside a function";
        return signalPassFailure();
      }
      BlockEmulator emulator(rw, *block, *anchor, shared);
      if (failed(emulator.run()))
        return signalPassFailure();
    }
  }
};

} // namespace
