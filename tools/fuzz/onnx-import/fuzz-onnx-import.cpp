//===- fuzz-onnx-import.cpp - libFuzzer harness for the importe -*- C++ -*-===//
//
// Feeds arbitrary bytes to the ONNX importer as a model file, and imported
// modules through --masformer-raise-attention: whatever the bytes, the
// importer must return a module or an error, never crash or read out of
// bounds (the harness is built with AddressSanitizer and UBSan).
//
//===----------------------------------------------------------------------===//

#include "masformer/Frontend/ONNXFrontend.h"

#include "../FuzzShapes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <onnx/onnx_pb.h>

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto model = std::make_unique<onnx::ModelProto>();
  if (size > (1u << 24) || !model->ParseFromArray(data, static_cast<int>(size)))
    return 0;
  mlir::DialectRegistry registry;
  mlir::masformer::registerONNXFrontendDialects(registry);
  mlir::MLIRContext context(registry);
  mlir::ScopedDiagnosticHandler quiet(
      &context, [](mlir::Diagnostic &) { return mlir::success(); });
  mlir::masformer::ONNXFrontendOptions options;
  // As masformer-opt does: patterns that cannot be raised stay as imported.
  options.strictRaise = false;
  // Dynamic dimensions of any input become 2, so that graphs get imported.
  mlir::masformer::fuzz::setStaticInputShapes(*model, options);
  (void)mlir::masformer::runONNXFrontend(std::move(model),
                                         "/nonexistent-fuzz-dir", "fuzz.onnx",
                                         options, &context);
  return 0;
}
