//===- TestPasses.h - Passes that exist only for the tests --------*- C++ -*-===//
//
// Registered by masformer-opt (as upstream mlir-opt registers its test
// passes), never by the compiler's pipelines or the API.
//
//===----------------------------------------------------------------------===//

#ifndef MASFORMER_TEST_LIB_TESTPASSES_H
#define MASFORMER_TEST_LIB_TESTPASSES_H

namespace mlir::masformer::test {

void registerTestTileCountsPass();

/// Every test pass.
inline void registerTestPasses() { registerTestTileCountsPass(); }

} // namespace mlir::masformer::test

#endif // MASFORMER_TEST_LIB_TESTPASSES_H
