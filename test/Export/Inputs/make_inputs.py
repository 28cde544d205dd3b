#!/usr/bin/env python3
"""Makes the small ONNX inputs of the export tests (onnx.helper only). Run
from this directory; the outputs are committed."""

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

# An opset-23 Attention node on 3-D [batch, seq, heads*dim] inputs, not
# causal (an encoder): 4 query heads, 2 key/value heads, head_dim 8.
rng = np.random.default_rng(3)
E, KV = 32, 16
inits = [nh.from_array((rng.standard_normal((E, n)) * 0.3).astype(np.float32),
                       name) for name, n in (("wq", E), ("wk", KV), ("wv", KV),
                                             ("wo", E))]
nodes = [
    h.make_node("MatMul", ["x", "wq"], ["q"], name="q_proj"),
    h.make_node("MatMul", ["x", "wk"], ["k"], name="k_proj"),
    h.make_node("MatMul", ["x", "wv"], ["v"], name="v_proj"),
    h.make_node("Attention", ["q", "k", "v"], ["a"], name="attention",
                q_num_heads=4, kv_num_heads=2),
    h.make_node("MatMul", ["a", "wo"], ["y"], name="o_proj"),
]
graph = h.make_graph(nodes, "encoder3d",
                     [h.make_tensor_value_info("x", T.FLOAT,
                                               ["batch", "seq", E])],
                     [h.make_tensor_value_info("y", T.FLOAT,
                                               ["batch", "seq", E])], inits)
model = h.make_model(graph, opset_imports=[h.make_opsetid("", 23)])
model.ir_version = 10  # what onnxruntime 1.23 reads
onnx.checker.check_model(model, full_check=True)
onnx.save(model, "attention23-3d.onnx")

# The same encoder with an attn_mask input [batch, 1, seq, seq]: bool (true:
# attend) and float (added), which a window or sink export combines with
# the span's mask.
for name, elem in (("attention23-mask-bool.onnx", T.BOOL),
                   ("attention23-mask-float.onnx", T.FLOAT)):
    masked = [n if n.op_type != "Attention" else
              h.make_node("Attention", ["q", "k", "v", "m"], ["a"],
                          name="attention", q_num_heads=4, kv_num_heads=2)
              for n in nodes]
    graph = h.make_graph(
        masked, "encoder3d_mask",
        [h.make_tensor_value_info("x", T.FLOAT, ["batch", "seq", E]),
         h.make_tensor_value_info("m", elem, ["batch", 1, "seq", "seq"])],
        [h.make_tensor_value_info("y", T.FLOAT, ["batch", "seq", E])], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 23)])
    model.ir_version = 10
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, name)
