#!/usr/bin/env python3
"""Writes a two-layer decoder whose attention has head_dim 32, so that
--precision=bf16 runs attention on the bf16 tensor-core kernel inside a
whole model (the fixtures have head_dim 8, where attention stays f32), and
a reference for it that rounds like the compiled model:

  OUT/attn-d32.onnx        hidden [batch, seq, 128] -> out; per layer:
                           LayerNorm, Attention-23 (4 query heads, 2 key/value
                           heads, head_dim 32, causal), residual, LayerNorm,
                           MLP 128 -> 256 -> 128 (Relu), residual.
  OUT/attn-d32-bf16.onnx   the same graph, with every MatMul operand and
                           Attention's Q, K and V rounded to bf16 (Cast to
                           bfloat16 and back): products on bf16 operands with
                           f32 accumulation, as --precision=bf16 computes them.
                           onnxruntime runs it in f32 otherwise; what it does
                           not round like the kernel is P (the kernel rounds
                           the unnormalized probabilities to bf16 before P V).

  make_bf16_model.py OUT_DIR
"""

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

E, HQ, HKV, D, FF, LAYERS = 128, 4, 2, 32, 256, 2


def build(bf16_reference):
    rng = np.random.default_rng(32)
    inits, nodes = [], []

    def w(name, *shape, scale=None):
        s = scale if scale is not None else 1 / np.sqrt(shape[0])
        inits.append(nh.from_array(
            (rng.standard_normal(shape) * s).astype(np.float32), name))
        return name

    done = set()

    def rounded(x):
        """x through bf16 (reference only)."""
        if not bf16_reference:
            return x
        if x in done:
            return x + ".r"
        done.add(x)
        nodes.append(h.make_node("Cast", [x], [x + ".bf16"],
                                 to=T.BFLOAT16))
        nodes.append(h.make_node("Cast", [x + ".bf16"], [x + ".r"],
                                 to=T.FLOAT))
        return x + ".r"

    def matmul(x, wname, out):
        nodes.append(h.make_node("MatMul", [rounded(x), rounded(wname)],
                                 [out], name=out))
        return out

    def ln(x, out):
        g = w(out + ".g", E, scale=0.1)
        b = w(out + ".b", E, scale=0.1)
        nodes.append(h.make_node("LayerNormalization", [x, g, b], [out],
                                 axis=-1, epsilon=1e-5, name=out))
        return out

    inits.append(nh.from_array(np.array([0, 0, HQ, D], np.int64), "q_shape"))
    inits.append(nh.from_array(np.array([0, 0, HKV, D], np.int64),
                               "kv_shape"))
    inits.append(nh.from_array(np.array([0, 0, HQ * D], np.int64),
                               "o_shape"))
    x = "hidden"
    for layer in range(LAYERS):
        p = "l%d." % layer
        a = ln(x, p + "ln1")
        q = matmul(a, w(p + "wq", E, HQ * D), p + "q_flat")
        k = matmul(a, w(p + "wk", E, HKV * D), p + "k_flat")
        v = matmul(a, w(p + "wv", E, HKV * D), p + "v_flat")
        heads = []
        for name, flat, shape in (("q", q, "q_shape"), ("k", k, "kv_shape"),
                                  ("v", v, "kv_shape")):
            nodes.append(h.make_node("Reshape", [flat, shape],
                                     [p + name + "_bshd"]))
            nodes.append(h.make_node("Transpose", [p + name + "_bshd"],
                                     [p + name], perm=[0, 2, 1, 3]))
            heads.append(rounded(p + name))
        nodes.append(h.make_node("Attention", heads, [p + "attn"],
                                 is_causal=1, name=p + "attention"))
        nodes.append(h.make_node("Transpose", [p + "attn"], [p + "attn_bshd"],
                                 perm=[0, 2, 1, 3]))
        nodes.append(h.make_node("Reshape", [p + "attn_bshd", "o_shape"],
                                 [p + "attn_flat"]))
        o = matmul(p + "attn_flat", w(p + "wo", HQ * D, E), p + "o")
        nodes.append(h.make_node("Add", [x, o], [p + "res1"]))
        m = ln(p + "res1", p + "ln2")
        f = matmul(m, w(p + "w1", E, FF), p + "ff1")
        nodes.append(h.make_node("Relu", [f], [p + "relu"]))
        f2 = matmul(p + "relu", w(p + "w2", FF, E), p + "ff2")
        out = "out" if layer == LAYERS - 1 else p + "res2"
        nodes.append(h.make_node("Add", [p + "res1", f2], [out]))
        x = out
    graph = h.make_graph(
        nodes, "attn_d32",
        [h.make_tensor_value_info("hidden", T.FLOAT, ["batch", "seq", E])],
        [h.make_tensor_value_info("out", T.FLOAT, ["batch", "seq", E])],
        inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 23)])
    model.ir_version = 10
    onnx.checker.check_model(model, full_check=True)
    return model


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    onnx.save(build(False), os.path.join(out, "attn-d32.onnx"))
    onnx.save(build(True), os.path.join(out, "attn-d32-bf16.onnx"))


if __name__ == "__main__":
    main()
