#!/usr/bin/env python3
"""Writes an ONNX model that is one causal Attention (opset 23) on its
inputs q, k, v [batch, heads, sequence, head_dim] (dynamic batch and
sequence): attention and nothing else, so that what a compile does with
attention shows alone (no product of the model reads or writes bf16).

  make_attention_model.py OUT.onnx [--heads 2] [--head-dim 32]
"""

import argparse

import onnx
from onnx import TensorProto, helper


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=32)
    a = ap.parse_args()
    shape = ["batch", a.heads, "sequence", a.head_dim]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape)
              for n in ("q", "k", "v")]
    output = helper.make_tensor_value_info("output", TensorProto.FLOAT, shape)
    node = helper.make_node("Attention", ["q", "k", "v"], ["output"],
                            is_causal=1, name="attention")
    graph = helper.make_graph([node], "attention", inputs, [output])
    model = helper.make_model(graph, producer_name="make_attention_model.py",
                              opset_imports=[helper.make_opsetid("", 23)])
    model.ir_version = 10  # onnxruntime 1.23 reads IR <= 11
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, a.out)


if __name__ == "__main__":
    main()
