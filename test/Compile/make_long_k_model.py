#!/usr/bin/env python3
"""Writes an ONNX model of one product, y = MatMul(x[1, 512, 1024], w[1024,
256]) f32: 8 row tiles of 64 whose rows of x take 256 KiB each, so that
whether they run in groups depends on the target's L2 (half of it holds at
most 4 of them: 2 MiB, 2: 1 MiB, none: 512 KiB)."""

import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

rng = np.random.default_rng(5)
graph = h.make_graph(
    [h.make_node("MatMul", ["x", "w"], ["y"], name="long_k")], "long_k",
    [h.make_tensor_value_info("x", T.FLOAT, [1, 512, 1024])],
    [h.make_tensor_value_info("y", T.FLOAT, [1, 512, 256])],
    [nh.from_array(rng.standard_normal((1024, 256)).astype(np.float32),
                   "w")])
model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
