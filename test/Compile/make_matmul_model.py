#!/usr/bin/env python3
"""Writes an ONNX model of matrix products whose sizes give full and partial
tiles of --masformer-tile-contractions (64 x 64 by default):

  y1 = MatMul(x[batch, m, 96], w1[96, 136])           weights broadcast
  y2 = Gemm(x2[70, 96], w2[136, 96], transB=1) + c2    transposed weights
  y3 = MatMul(a[2, 3, 70, 32], b[2, 3, 32, 80])        batched both sides
  y4 = MatMul(h[batch, m, 96] f16, w4[96, 64] f16)     f16 (stays loops)
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
     h.make_tensor_value_info("y4", T.FLOAT16, ["batch", "m", 64])],
    [w("w1", (96, 136)), w("w2", (136, 96)), w("c2", (136,)),
     w("w4", (96, 64), np.float16)])
model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
