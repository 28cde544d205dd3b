#!/usr/bin/env python3
"""Writes an ONNX model of reductions whose reduced lengths are not
multiples of a warp (70, 45, 7), to check the GPU pipeline's one warp per
output element (--masformer-loops-to-gpu) and its other reductions:

  mx = ReduceMax(x[batch, s, 70], axes=[-1], keepdims=1)
  sq = ReduceSum(x * x, axes=[-1], keepdims=0)
  ln = LayerNormalization(x, scale[70], bias[70])
  sm = Softmax(y[batch, s, 45], axis=-1)
  mn = ReduceMean(x, axes=[1], keepdims=0)        (not the innermost axis)
  tiny = ReduceSum(z[batch, 7], axes=[-1], keepdims=1)
  total = ReduceSum(z, keepdims=0)                 (to a scalar: one thread)

  make_reduction_model.py OUT.onnx
"""

import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

rng = np.random.default_rng(5)
axes_last = nh.from_array(np.array([-1], np.int64), "axes_last")
axes_one = nh.from_array(np.array([1], np.int64), "axes_one")
nodes = [
    h.make_node("ReduceMax", ["x", "axes_last"], ["mx"], name="max",
                keepdims=1),
    h.make_node("Mul", ["x", "x"], ["x2"], name="square"),
    h.make_node("ReduceSum", ["x2", "axes_last"], ["sq"], name="sumsq",
                keepdims=0),
    h.make_node("LayerNormalization", ["x", "scale", "bias"], ["ln"],
                name="ln", axis=-1, epsilon=1e-5),
    h.make_node("Softmax", ["y"], ["sm"], name="softmax", axis=-1),
    h.make_node("ReduceMean", ["x", "axes_one"], ["mn"], name="mean",
                keepdims=0),
    h.make_node("ReduceSum", ["z", "axes_last"], ["tiny"], name="tiny",
                keepdims=1),
    h.make_node("ReduceSum", ["z"], ["total"], name="total", keepdims=0),
]
graph = h.make_graph(
    nodes, "reductions",
    [h.make_tensor_value_info("x", T.FLOAT, ["batch", "s", 70]),
     h.make_tensor_value_info("y", T.FLOAT, ["batch", "s", 45]),
     h.make_tensor_value_info("z", T.FLOAT, ["batch", 7])],
    [h.make_tensor_value_info("mx", T.FLOAT, ["batch", "s", 1]),
     h.make_tensor_value_info("sq", T.FLOAT, ["batch", "s"]),
     h.make_tensor_value_info("ln", T.FLOAT, ["batch", "s", 70]),
     h.make_tensor_value_info("sm", T.FLOAT, ["batch", "s", 45]),
     h.make_tensor_value_info("mn", T.FLOAT, ["batch", 70]),
     h.make_tensor_value_info("tiny", T.FLOAT, ["batch", 1]),
     h.make_tensor_value_info("total", T.FLOAT, [])],
    [nh.from_array(rng.standard_normal(70).astype(np.float32), "scale"),
     nh.from_array(rng.standard_normal(70).astype(np.float32), "bias"),
     axes_last, axes_one])
model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)])
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
