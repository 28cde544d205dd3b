#!/usr/bin/env python3
"""Writes a one-layer attention with softcapped scores, as Gemma 2 computes
them: s = (Q K^T) * scale, then c * tanh(s / c), then the additive mask
(padding over the keys, from an input) and a causal Where, softmax, P V.
Batch and sequence are dynamic.

  make_softcap.py OUT.onnx [--softcap C] [--mask-first]

--mask-first adds the padding mask before the tanh instead (a different
function, which the raise must refuse rather than misread as a softcap).
"""

import argparse

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--softcap", type=float, default=1.5)
    ap.add_argument("--mask-first", action="store_true")
    a = ap.parse_args()

    heads, d = 2, 8
    inits = [
        nh.from_array(np.array(1.0 / np.sqrt(d), np.float32), "scale"),
        nh.from_array(np.array(a.softcap, np.float32), "cap"),
        nh.from_array(np.array(np.finfo(np.float32).min, np.float32), "drop"),
        nh.from_array(np.array([1, 2], np.int64), "pad_axes"),
        nh.from_array(np.array(0, np.int64), "zero"),
        nh.from_array(np.array(1, np.int64), "one"),
        nh.from_array(np.array([2], np.int64), "seq_axis"),
        nh.from_array(np.array([1], np.int64), "ax1"),
        nh.from_array(np.array([0], np.int64), "ax0"),
        nh.from_array(np.array(0.0, np.float32), "zero_f"),
    ]
    nodes = [
        h.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2], name="kt"),
        h.make_node("MatMul", ["q", "kt"], ["qk"], name="qk"),
        h.make_node("Mul", ["qk", "scale"], ["scaled"], name="scale"),
        # padding mask [B, 1, 1, S]: 0 where kept, float-min where padded
        h.make_node("Cast", ["attention_mask"], ["keep"], to=T.BOOL,
                    name="keep"),
        h.make_node("Unsqueeze", ["keep", "pad_axes"], ["keep4"],
                    name="keep4"),
        h.make_node("Where", ["keep4", "zero_f", "drop"], ["pad_mask"],
                    name="pad_mask"),
        # causal condition from the sizes
        h.make_node("Shape", ["q"], ["q_shape"], name="shape"),
        h.make_node("Gather", ["q_shape", "seq_axis"], ["s1"], name="seq_len",
                    axis=0),
        h.make_node("Squeeze", ["s1"], ["s"], name="seq_scalar"),
        h.make_node("Range", ["zero", "s", "one"], ["pos"], name="positions"),
        h.make_node("Unsqueeze", ["pos", "ax1"], ["qi"], name="query_pos"),
        h.make_node("Unsqueeze", ["pos", "ax0"], ["kj"], name="key_pos"),
        h.make_node("LessOrEqual", ["kj", "qi"], ["past"], name="causal"),
    ]
    if a.mask_first:
        nodes += [
            h.make_node("Add", ["scaled", "pad_mask"], ["masked"],
                        name="pad_add"),
            h.make_node("Div", ["masked", "cap"], ["div"], name="cap_div"),
            h.make_node("Tanh", ["div"], ["tanh"], name="cap_tanh"),
            h.make_node("Mul", ["tanh", "cap"], ["capped"], name="cap_mul"),
            h.make_node("Identity", ["capped"], ["with_pad"], name="pad_id"),
        ]
    else:
        nodes += [
            h.make_node("Div", ["scaled", "cap"], ["div"], name="cap_div"),
            h.make_node("Tanh", ["div"], ["tanh"], name="cap_tanh"),
            h.make_node("Mul", ["tanh", "cap"], ["capped"], name="cap_mul"),
            h.make_node("Add", ["capped", "pad_mask"], ["with_pad"],
                        name="pad_add"),
        ]
    nodes += [
        h.make_node("Where", ["past", "with_pad", "drop"], ["logits"],
                    name="causal_where"),
        h.make_node("Softmax", ["logits"], ["p"], axis=-1, name="softmax"),
        h.make_node("MatMul", ["p", "v"], ["out"], name="pv"),
    ]
    qkv = lambda n: h.make_tensor_value_info(n, T.FLOAT,
                                             ["batch", heads, "seq", d])
    graph = h.make_graph(
        nodes, "softcap",
        [qkv("q"), qkv("k"), qkv("v"),
         h.make_tensor_value_info("attention_mask", T.INT64,
                                  ["batch", "seq"])],
        [h.make_tensor_value_info("out", T.FLOAT, ["batch", heads, "seq", d])],
        inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, a.out)


if __name__ == "__main__":
    main()
