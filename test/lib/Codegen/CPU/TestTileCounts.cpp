//===- TestTileCounts.cpp - Tiled attention that counts its tiles -*- C++ -*-===//
//
// --masformer-test-tile-counts: --masformer-tile-attention whose query tiles
// print how many key tiles they visit (printI64 of the MLIR runner utils),
// so that test/Integration/CPU/tile-counts.test can prove that tiles outside
// the span are never visited. Test-only: users never see the printing.
//
//===----------------------------------------------------------------------===//

#include "TestPasses.h"
#include "masformer/Codegen/CPU/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

using namespace mlir;
using namespace mlir::masformer;

namespace {

struct TestTileCountsPass final
    : PassWrapper<TestTileCountsPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TestTileCountsPass)

  TestTileCountsPass() = default;
  TestTileCountsPass(const TestTileCountsPass &other) : PassWrapper(other) {}

  StringRef getArgument() const final { return "masformer-test-tile-counts"; }
  StringRef getDescription() const final {
    return "Tile masformer.attention as --masformer-tile-attention does and "
           "print, per query tile, how many key tiles it visits";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<func::FuncDialect>();
  }

  Option<int64_t> tileQ{*this, "tile-q", llvm::cl::desc("Query rows per tile"),
                        llvm::cl::init(64)};
  Option<int64_t> tileKV{*this, "tile-kv", llvm::cl::desc("Keys per tile"),
                         llvm::cl::init(64)};

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (tileQ <= 0 || tileKV <= 0) {
      module.emitError("--masformer-test-tile-counts: tile-q and tile-kv "
                       "must be positive");
      return signalPassFailure();
    }
    OpBuilder b(module.getBodyRegion());
    auto declare = [&](StringRef name, TypeRange args) {
      if (module.lookupSymbol(name))
        return;
      auto f = func::FuncOp::create(
          b, module.getLoc(), name,
          FunctionType::get(module.getContext(), args, {}));
      f.setPrivate();
    };
    declare("printI64", {b.getI64Type()});
    declare("printNewline", {});
    RewritePatternSet patterns(module.getContext());
    TileAttentionPatternOptions options;
    options.tileQ = tileQ;
    options.tileKV = tileKV;
    options.printTileCountsForTesting = true;
    populateTileAttentionPatterns(patterns, options);
    walkAndApplyPatterns(module, std::move(patterns));
  }
};

} // namespace

void mlir::masformer::test::registerTestTileCountsPass() {
  PassRegistration<TestTileCountsPass>();
}
