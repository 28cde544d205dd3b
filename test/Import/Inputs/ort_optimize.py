#!/usr/bin/env python3
"""Runs onnxruntime's transformer optimizer on an ONNX model, as a user
who deploys with onnxruntime would (graph fusions only: opt_level 0, no
float16), and prints how many nodes of each contrib op (com.microsoft, and
SimplifiedLayerNormalization) the result has, one "op: count" per line in
name order, so that a test can check that the fusions happened.

    ort_optimize.py MODEL OUT --model-type bert --num-heads 4 --hidden-size 32
        [--mha]   (MultiHeadAttention with separate projections instead of
                   Attention with packed ones)
"""
import argparse
import collections

from onnxruntime.transformers import optimizer
from onnxruntime.transformers.fusion_options import FusionOptions


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--model-type", required=True)
    ap.add_argument("--num-heads", type=int, required=True)
    ap.add_argument("--hidden-size", type=int, required=True)
    ap.add_argument("--mha", action="store_true")
    a = ap.parse_args()
    options = FusionOptions(a.model_type)
    options.use_multi_head_attention = a.mha
    opt = optimizer.optimize_model(a.model, model_type=a.model_type,
                                   num_heads=a.num_heads,
                                   hidden_size=a.hidden_size, opt_level=0,
                                   optimization_options=options)
    opt.save_model_to_file(a.out)
    counts = collections.Counter(
        n.op_type for n in opt.model.graph.node
        if n.domain == "com.microsoft"
        or n.op_type == "SimplifiedLayerNormalization")
    for op in sorted(counts):
        print(f"{op}: {counts[op]}")


if __name__ == "__main__":
    main()
