// RUN: masformer-opt %s --masformer-derive-decode --split-input-file --verify-diagnostics

// expected-error @below {{no decode entry: layer 0 is not causal: only a causal decoder generates}}
module {
  func.func @main(%ids: tensor<?x?xi64> {onnx.name = "input_ids"}) -> tensor<1x2x?x8xf32> {
    %c1 = arith.constant 1 : index
    %s = tensor.dim %ids, %c1 : tensor<?x?xi64>
    %e = tensor.empty(%s) : tensor<1x2x?x8xf32>
    %one = arith.constant 1.0 : f32
    %q = linalg.fill ins(%one : f32) outs(%e : tensor<1x2x?x8xf32>) -> tensor<1x2x?x8xf32>
    %o = masformer.attention %q, %q, %q {span = #masformer.span<full>, layer = 0 : i64} : tensor<1x2x?x8xf32>, tensor<1x2x?x8xf32>, tensor<1x2x?x8xf32> -> tensor<1x2x?x8xf32>
    return %o : tensor<1x2x?x8xf32>
  }
}

// -----

// expected-error @below {{no decode entry: input 'pixel_values': a decode entry takes input_ids, attention_mask and position_ids}}
module {
  func.func @main(%ids: tensor<?x?xi64> {onnx.name = "input_ids"}, %x: tensor<1x3x8x8xf32> {onnx.name = "pixel_values"}) -> tensor<1x3x8x8xf32> {
    return %x : tensor<1x3x8x8xf32>
  }
}

// -----

// expected-error @below {{no decode entry: input 'input_ids' has a fixed sequence length (16): a decode entry needs it dynamic}}
module {
  func.func @main(%ids: tensor<1x16xi64> {onnx.name = "input_ids"}) -> tensor<1x16xi64> {
    return %ids : tensor<1x16xi64>
  }
}

// -----

// expected-error @below {{no decode entry: the model has no attention layer}}
module {
  func.func @main(%ids: tensor<?x?xi64> {onnx.name = "input_ids"}) -> tensor<?x?xi64> {
    return %ids : tensor<?x?xi64>
  }
}

// -----

// The mask depends on the tokens (not only on positions and
// attention_mask): it cannot be proven to vanish.
// expected-error @below {{no decode entry: layer 0's mask is more than causal}}
module {
  func.func @main(%ids: tensor<?x?xi64> {onnx.name = "input_ids"}) -> tensor<1x2x?x8xf32> {
    %c1 = arith.constant 1 : index
    %s = tensor.dim %ids, %c1 : tensor<?x?xi64>
    %e = tensor.empty(%s) : tensor<1x2x?x8xf32>
    %one = arith.constant 1.0 : f32
    %q = linalg.fill ins(%one : f32) outs(%e : tensor<1x2x?x8xf32>) -> tensor<1x2x?x8xf32>
    %me = tensor.empty(%s, %s) : tensor<?x?xf32>
    %md = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%ids : tensor<?x?xi64>) outs(%me : tensor<?x?xf32>) {
    ^bb0(%in: i64, %out: f32):
      %f = arith.sitofp %in : i64 to f32
      linalg.yield %f : f32
    } -> tensor<?x?xf32>
    %m = tensor.expand_shape %md [[0, 1, 2], [3]] output_shape [1, 1, %s, %s] : tensor<?x?xf32> into tensor<1x1x?x?xf32>
    %o = masformer.attention %q, %q, %q mask(%m : tensor<1x1x?x?xf32>) {span = #masformer.span<full>, causal = true, layer = 0 : i64} : tensor<1x2x?x8xf32>, tensor<1x2x?x8xf32>, tensor<1x2x?x8xf32> -> tensor<1x2x?x8xf32>
    return %o : tensor<1x2x?x8xf32>
  }
}

// -----

// expected-error @below {{no decode entry: input '#1': a decode entry takes input_ids}}
module {
  func.func @main(%ids: tensor<?x?xi64> {onnx.name = "input_ids"}, %x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// -----

// The importer's reason why positions depend on each other outside the
// attention (a DynamicQuantizeLinear's one scale over every position).
// expected-error @below {{no decode entry: node 'q' (DynamicQuantizeLinear) quantizes every position}}
module {
  func.func @main(%ids: tensor<?x?xi64> {onnx.name = "input_ids"}) -> tensor<1x2x?x8xf32> attributes {masformer.cross_position = "node 'q' (DynamicQuantizeLinear) quantizes every position"} {
    %c1 = arith.constant 1 : index
    %s = tensor.dim %ids, %c1 : tensor<?x?xi64>
    %e = tensor.empty(%s) : tensor<1x2x?x8xf32>
    %one = arith.constant 1.0 : f32
    %q = linalg.fill ins(%one : f32) outs(%e : tensor<1x2x?x8xf32>) -> tensor<1x2x?x8xf32>
    %o = masformer.attention %q, %q, %q {span = #masformer.span<full>, causal = true, layer = 0 : i64} : tensor<1x2x?x8xf32>, tensor<1x2x?x8xf32>, tensor<1x2x?x8xf32> -> tensor<1x2x?x8xf32>
    return %o : tensor<1x2x?x8xf32>
  }
}
