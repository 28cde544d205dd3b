#!/usr/bin/env python3
"""Writes an ONNX model of matrix products whose sizes give full and partial
tiles of --masformer-tile-contractions (64 x 64 by default):

  y1 = MatMul(x[batch, m, 96], w1[96, 136])           weights broadcast
  y2 = Gemm(x2[70, 96], w2[136, 96], transB=1) + c2    transposed weights
  y3 = MatMul(a[2, 3, 70, 32], b[2, 3, 32, 80])        batched both sides
  y4 = MatMul(h[batch, m, 96] f16, w4[96, 64] f16)     f16 (stays loops)
  y5 = Relu(MatMul(x, w5[96, 136]) + c5)               epilogues computed on
  y6 = MatMul(Relu(MatMul(x, w5) + c5), w6) + x         each product tile
                                                        (bias, activation,
                                                        residual)
  y7 = MatMul(x, w7[96, 96]) + x, its product also an output (two uses:
       the epilogue stays a loop of its own)
"""

import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

rng = np.random.default_rng(3)


def w(name, shape, dtype=np.float32):
    return nh.from_array(rng.standard_normal(shape).astype(dtype), name)


nodes = [
    h.make_node("MatMul", ["x", "w1"], ["y1"], name="mm1"),
    h.make_node("Gemm", ["x2", "w2", "c2"], ["y2"], name="gemm", transB=1),
    h.make_node("MatMul", ["a", "b"], ["y3"], name="bmm"),
    h.make_node("MatMul", ["h", "w4"], ["y4"], name="mm16"),
    h.make_node("MatMul", ["x", "w5"], ["p5"], name="mm5"),
    h.make_node("Add", ["p5", "c5"], ["b5"], name="bias5"),
    h.make_node("Relu", ["b5"], ["y5"], name="relu5"),
    h.make_node("MatMul", ["y5", "w6"], ["p6"], name="mm6"),
    h.make_node("Add", ["p6", "x"], ["y6"], name="residual6"),
    h.make_node("MatMul", ["x", "w7"], ["p7"], name="mm7"),
    h.make_node("Add", ["p7", "x"], ["y7"], name="residual7"),
]
graph = h.make_graph(
    nodes, "matmuls",
    [h.make_tensor_value_info("x", T.FLOAT, ["batch", "m", 96]),
     h.make_tensor_value_info("x2", T.FLOAT, [70, 96]),
     h.make_tensor_value_info("a", T.FLOAT, [2, 3, 70, 32]),
     h.make_tensor_value_info("b", T.FLOAT, [2, 3, 32, 80]),
     h.make_tensor_value_info("h", T.FLOAT16, ["batch", "m", 96])],
    [h.make_tensor_value_info("y1", T.FLOAT, ["batch", "m", 136]),
     h.make_tensor_value_info("y2", T.FLOAT, [70, 136]),
     h.make_tensor_value_info("y3", T.FLOAT, [2, 3, 70, 80]),
     h.make_tensor_value_info("y4", T.FLOAT16, ["batch", "m", 64]),
     h.make_tensor_value_info("y5", T.FLOAT, ["batch", "m", 136]),
     h.make_tensor_value_info("y6", T.FLOAT, ["batch", "m", 96]),
     h.make_tensor_value_info("p7", T.FLOAT, ["batch", "m", 96]),
     h.make_tensor_value_info("y7", T.FLOAT, ["batch", "m", 96])],
    [w("w1", (96, 136)), w("w2", (136, 96)), w("c2", (136,)),
     w("w4", (96, 64), np.float16), w("w5", (96, 136)), w("c5", (136,)),
     w("w6", (136, 96)), w("w7", (96, 96))])
model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
