#!/usr/bin/env python3
"""Writes a one-layer attention whose mask is built from the sizes alone, as
Mistral and Gemma 2 exports without an attention_mask input build it:
positions from Range(0, S), kept where 0 <= i - j < W (a causal sliding
window), Where(kept, 0, float-min) added to the scores. Batch and sequence
are dynamic. At fewer than W + 1 tokens the mask equals the causal
triangle; above, it is not.

  make_window_mask.py OUT.onnx [--window W] [--form where|bool]
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
    ap.add_argument("--window", type=int, default=16)
    ap.add_argument("--causal-only", action="store_true",
                    help="the same graph without the window test: a causal "
                         "mask that must still be recognized")
    a = ap.parse_args()

    heads, d = 2, 8
    inits = [
        nh.from_array(np.array(0, np.int64), "zero"),
        nh.from_array(np.array(1, np.int64), "one"),
        nh.from_array(np.array([2], np.int64), "seq_axis"),
        nh.from_array(np.array([1], np.int64), "ax1"),
        nh.from_array(np.array([0], np.int64), "ax0"),
        nh.from_array(np.array(a.window, np.int64), "window"),
        nh.from_array(np.array(0.0, np.float32), "keep"),
        nh.from_array(np.array(np.finfo(np.float32).min, np.float32), "drop"),
        nh.from_array(np.array(1.0 / np.sqrt(d), np.float32), "scale"),
    ]
    nodes = [
        h.make_node("Shape", ["q"], ["q_shape"], name="shape"),
        h.make_node("Gather", ["q_shape", "seq_axis"], ["s1"], name="seq_len",
                    axis=0),
        h.make_node("Squeeze", ["s1"], ["s"], name="seq_scalar"),
        h.make_node("Range", ["zero", "s", "one"], ["pos"], name="positions"),
        h.make_node("Unsqueeze", ["pos", "ax1"], ["qi"], name="query_pos"),
        h.make_node("Unsqueeze", ["pos", "ax0"], ["kj"], name="key_pos"),
        h.make_node("Sub", ["qi", "kj"], ["diff"], name="distance"),
        h.make_node("GreaterOrEqual", ["diff", "zero"], ["past"],
                    name="causal"),
    ]
    if a.causal_only:
        nodes.append(h.make_node("Identity", ["past"], ["kept"], name="kept"))
    else:
        nodes += [
            h.make_node("Less", ["diff", "window"], ["near"], name="window"),
            h.make_node("And", ["past", "near"], ["kept"], name="kept"),
        ]
    nodes += [
        h.make_node("Where", ["kept", "keep", "drop"], ["mask"], name="mask"),
        h.make_node("Transpose", ["k"], ["kt"], name="kt", perm=[0, 1, 3, 2]),
        h.make_node("MatMul", ["q", "kt"], ["qk"], name="qk"),
        h.make_node("Mul", ["qk", "scale"], ["scores"], name="scaled"),
        h.make_node("Add", ["scores", "mask"], ["masked"], name="masked"),
        h.make_node("Softmax", ["masked"], ["probs"], name="softmax", axis=-1),
        h.make_node("MatMul", ["probs", "v"], ["out"], name="pv"),
    ]
    shape = ["batch", heads, "sequence", d]
    graph = h.make_graph(
        nodes, "window_mask",
        [h.make_tensor_value_info(n, T.FLOAT, shape) for n in "qkv"],
        [h.make_tensor_value_info("out", T.FLOAT, shape)], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)],
                         ir_version=8)
    onnx.checker.check_model(model)
    onnx.save(model, a.out)


if __name__ == "__main__":
    main()
