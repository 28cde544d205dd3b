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
    # IR version 10: loadable by onnxruntime 1.23 (onnx 1.19 defaults to 12).
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)],
                         ir_version=10)
    onnx.save(model, name)


# Two ops the importer does not know, and one known op between them.
save(h.make_graph(
    [h.make_node("Hardmax", ["x"], ["a"], name="hardmax_0"),
     h.make_node("Relu", ["a"], ["b"], name="relu_0"),
     h.make_node("LpNormalization", ["b"], ["y"], name="lpnorm_0")],
    "unsupported", [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
    [h.make_tensor_value_info("y", T.FLOAT, [2, 3])]), "unsupported.onnx")

# A dynamic input dimension.
save(h.make_graph(
    [h.make_node("Relu", ["x"], ["y"], name="relu_0")], "dynamic",
    [h.make_tensor_value_info("x", T.FLOAT, ["batch", 4])],
    [h.make_tensor_value_info("y", T.FLOAT, ["batch", 4])]), "dynamic.onnx")

# Two dynamic dimensions the importer cannot prove equal, broadcast together.
save(h.make_graph(
    [h.make_node("Add", ["a", "b"], ["y"], name="add_0")], "dynamic_mismatch",
    [h.make_tensor_value_info("a", T.FLOAT, ["n", 4]),
     h.make_tensor_value_info("b", T.FLOAT, ["m", 4])],
    [h.make_tensor_value_info("y", T.FLOAT, ["n", 4])]),
    "dynamic-mismatch.onnx")

# Clip with both bounds, and with only a lower one (the clamp of a mean
# pooling), on a dynamic batch.
save(h.make_graph(
    [h.make_node("Clip", ["x", "lo", "hi"], ["c"], name="clip_0"),
     h.make_node("Clip", ["c", "lo2"], ["y"], name="clip_1")], "clip",
    [h.make_tensor_value_info("x", T.FLOAT, ["batch", 6])],
    [h.make_tensor_value_info("y", T.FLOAT, ["batch", 6])],
    [nh.from_array(np.array(-0.5, np.float32), "lo"),
     nh.from_array(np.array(0.7, np.float32), "hi"),
     nh.from_array(np.array(-0.25, np.float32), "lo2")]), "clip.onnx")

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
if os.path.exists("external.data"):
    os.remove("external.data")
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


# --- Hostile models (docs/SECURITY.md) -------------------------------------

def relu_graph(nodes, name, inits=(), inputs=None, outputs=None):
    return h.make_graph(
        nodes, name,
        inputs or [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
        outputs or [h.make_tensor_value_info("y", T.FLOAT, [2, 3])],
        list(inits))


def save_unchecked(graph, name, opset=17):
    """Saves without onnx.checker: these models are broken on purpose."""
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    with open(name, "wb") as f:
        f.write(model.SerializeToString())


# A cycle: a consumes b's output, b consumes a's.
save_unchecked(relu_graph(
    [h.make_node("Add", ["x", "b"], ["a"], name="add_a"),
     h.make_node("Relu", ["a"], ["b"], name="relu_b"),
     h.make_node("Relu", ["b"], ["y"], name="relu_y")], "cycle"),
    "cycle.onnx")

# A dangling name (a missing initializer).
save_unchecked(relu_graph(
    [h.make_node("Add", ["x", "bias"], ["y"], name="add_bias")], "dangling"),
    "dangling.onnx")

# Two nodes writing the same output.
save_unchecked(relu_graph(
    [h.make_node("Relu", ["x"], ["y"], name="relu_1"),
     h.make_node("Abs", ["x"], ["y"], name="abs_2")], "duplicate"),
    "duplicate-output.onnx")

# A node with the wrong number of inputs.
save_unchecked(relu_graph(
    [h.make_node("MatMul", ["x"], ["y"], name="matmul_1")], "arity"),
    "wrong-arity.onnx")

# An initializer whose element count overflows int64.
huge = onnx.TensorProto()
huge.name = "w"
huge.data_type = T.FLOAT
huge.dims.extend([1 << 40, 1 << 40])
save_unchecked(relu_graph(
    [h.make_node("Add", ["x", "w"], ["y"], name="add_w")], "huge", [huge]),
    "huge-initializer.onnx")

# A negative dimension.
neg = onnx.TensorProto()
neg.name = "w"
neg.data_type = T.FLOAT
neg.dims.extend([-1, 3])
save_unchecked(relu_graph(
    [h.make_node("Add", ["x", "w"], ["y"], name="add_w")], "neg", [neg]),
    "negative-dim.onnx")

# ConstantOfShape asked for 10^18 elements.
save_unchecked(relu_graph(
    [h.make_node("ConstantOfShape", ["shape"], ["y"], name="fill")], "fill",
    [nh.from_array(np.array([10**9, 10**9], np.int64), "shape")]),
    "absurd-constantofshape.onnx")

# A Reshape whose target overflows int64 when multiplied out.
save_unchecked(relu_graph(
    [h.make_node("Reshape", ["x", "shape"], ["y"], name="reshape_1")],
    "reshape", [nh.from_array(np.array([2**62, 2**62, -1], np.int64),
                              "shape")]), "overflow-reshape.onnx")

# Raw data that does not match the tensor's shape.
short = nh.from_array(np.zeros((2, 3), np.float32), "w")
short.raw_data = short.raw_data[:8]
save_unchecked(relu_graph(
    [h.make_node("Add", ["x", "w"], ["y"], name="add_w")], "short", [short]),
    "short-raw-data.onnx")

# External data: an offset past the end, and a length that disagrees with
# the shape (external.data holds 256 bytes).
for name, offset, length in (("external-offset.onnx", "4096", None),
                             ("external-length.onnx", "0", "128")):
    m = onnx.load("external.onnx", load_external_data=False)
    t = m.graph.initializer[0]
    for kv in list(t.external_data):
        if kv.key in ("offset", "length"):
            t.external_data.remove(kv)
    kv = t.external_data.add()
    kv.key, kv.value = "offset", offset
    if length:
        kv = t.external_data.add()
        kv.key, kv.value = "length", length
    with open(name, "wb") as f:
        f.write(m.SerializeToString())

# Control flow: an If node with nested subgraphs is reported, never imported.
then_g = relu_graph([h.make_node("Relu", ["x"], ["t"], name="then_relu")],
                    "then", outputs=[h.make_tensor_value_info("t", T.FLOAT,
                                                              [2, 3])])
save_unchecked(relu_graph(
    [h.make_node("If", ["cond"], ["y"], name="if_0", then_branch=then_g,
                 else_branch=then_g)], "if",
    inputs=[h.make_tensor_value_info("cond", T.BOOL, [])]), "if.onnx")

# ScatterND on dynamic shapes with indices only the run knows.
save(h.make_graph(
    [h.make_node("ScatterND", ["x", "idx", "upd"], ["y"], name="scatter_0")],
    "scatter_runtime",
    [h.make_tensor_value_info("x", T.FLOAT, ["batch", 4]),
     h.make_tensor_value_info("idx", T.INT64, ["k", 1]),
     h.make_tensor_value_info("upd", T.FLOAT, ["k", 4])],
    [h.make_tensor_value_info("y", T.FLOAT, ["batch", 4])]),
    "scatter-runtime.onnx")
