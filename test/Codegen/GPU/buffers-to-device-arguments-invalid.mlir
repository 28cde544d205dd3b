// RUN: masformer-opt %s --masformer-buffers-to-device="constants=arguments" --verify-diagnostics
// RUN: not masformer-opt %s --masformer-buffers-to-device="constants=bogus" 2>&1 | FileCheck %s --check-prefix=OPTION
// OPTION: error: masformer-buffers-to-device: constants=bogus: expected copy or arguments

// constants=arguments changes the signature: not for a called function.
memref.global "private" constant @c : memref<2xf32> = dense<1.0>
// expected-error @+1 {{constants=arguments changes the signature of @callee, which has callers}}
func.func private @callee() -> memref<2xf32> {
  %g = memref.get_global @c : memref<2xf32>
  return %g : memref<2xf32>
}
func.func @caller() {
  %r = call @callee() : () -> memref<2xf32>
  return
}
