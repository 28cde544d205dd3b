// --masformer-check-in-place run before bufferization: one error.
// RUN: masformer-opt %s --masformer-check-in-place -verify-diagnostics

// expected-error @+1 {{--masformer-check-in-place: @tensors's argument 0 is not a buffer: run it after bufferization}}
func.func @tensors(%cache: tensor<4xf32> {masformer.in_place}) {
  return
}
