#!/usr/bin/env python3
"""Copies an ONNX model for onnxruntime to run as a reference for
masformer's MatMulNBits: every MatMulNBits node's accuracy_level set to 0.
onnxruntime's default CPU kernels take level 4 (what onnxruntime-genai's
builder and the quantizer write) as leave to quantize the activations to
int8 per block, an error of about 1e-2 on a product; at level 0 it
computes A times the dequantized weights in float, what masformer
computes. Weights and everything else are copied as they are.

    ort_exact_nbits.py MODEL OUT
"""
import sys

import onnx


def main():
    src, out = sys.argv[1:3]
    model = onnx.load(src)
    n = 0
    for node in model.graph.node:
        if node.op_type != "MatMulNBits":
            continue
        for a in node.attribute:
            if a.name == "accuracy_level":
                a.i = 0
        n += 1
    if not n:
        sys.exit(f"ort_exact_nbits.py: {src} has no MatMulNBits node")
    onnx.save(model, out)


if __name__ == "__main__":
    main()
