#!/usr/bin/env python3
"""Makes the small ONNX inputs of the importer's error tests (onnx.helper
only). Run from this directory; the outputs are committed."""

import os

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh


def save(graph, name, opset=17):
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    onnx.save(model, name)


# Two ops the importer does not know, and one known op between them.
save(h.make_graph(
    [h.make_node("Hardmax", ["x"], ["a"], name="hardmax_0"),
     h.make_node("Relu", ["a"], ["b"], name="relu_0"),
     h.make_node("CumSum", ["b", "axis"], ["y"], name="cumsum_0")],
    "unsupported", [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
    [h.make_tensor_value_info("y", T.FLOAT, [2, 3])],
    [nh.from_array(np.array(1, np.int64), "axis")]), "unsupported.onnx")

# A dynamic input dimension.
save(h.make_graph(
    [h.make_node("Relu", ["x"], ["y"], name="relu_0")], "dynamic",
    [h.make_tensor_value_info("x", T.FLOAT, ["batch", 4])],
    [h.make_tensor_value_info("y", T.FLOAT, ["batch", 4])]), "dynamic.onnx")

# An attribute the importer would otherwise ignore.
save(h.make_graph(
    [h.make_node("Gemm", ["x", "w"], ["y"], name="gemm_0", transA=0,
                 foo=3)], "badattr",
    [h.make_tensor_value_info("x", T.FLOAT, [2, 4])],
    [h.make_tensor_value_info("y", T.FLOAT, [2, 4])],
    [nh.from_array(np.eye(4, dtype=np.float32), "w")]), "bad-attribute.onnx")

# Weights in an external data file next to the model.
w = np.arange(64, dtype=np.float32).reshape(8, 8) / 64
model = h.make_model(h.make_graph(
    [h.make_node("MatMul", ["x", "w"], ["y"], name="matmul_0")], "external",
    [h.make_tensor_value_info("x", T.FLOAT, [2, 8])],
    [h.make_tensor_value_info("y", T.FLOAT, [2, 8])],
    [nh.from_array(w, "w")]), opset_imports=[h.make_opsetid("", 17)])
onnx.save(model, "external.onnx", save_as_external_data=True,
          all_tensors_to_one_file=True, location="external.data",
          size_threshold=0)

# External data that points outside the model's directory.
for t in model.graph.initializer:
    for kv in t.external_data:
        if kv.key == "location":
            kv.value = "../../etc/passwd"
onnx.save(model, "external-escape.onnx")

with open("not-a-model.onnx", "wb") as f:
    f.write(b"this is not a protobuf \xff\xff\xff\xff")
