#!/usr/bin/env python3
"""Copies an ONNX model for the installed onnxruntime to run as a
reference: onnxruntime 1.23 and earlier read GroupQueryAttention's
local_window_size W as W + 1 keys (fixed in 1.24, microsoft/onnxruntime
#25927, to W keys: transformers' sliding_window, ONNX Attention-25's
local_window_size, what masformer imports and exports). With such an
onnxruntime every positive local_window_size is lowered by one, so that
it computes the windows the model means; otherwise the copy is exact.

    ort_window_compat.py MODEL OUT
"""
import sys

import onnx
import onnxruntime


def main():
    src, out = sys.argv[1:3]
    model = onnx.load(src)
    major, minor = (int(x) for x in onnxruntime.__version__.split(".")[:2])
    if (major, minor) < (1, 24):
        for node in model.graph.node:
            if node.op_type != "GroupQueryAttention":
                continue
            for a in node.attribute:
                if a.name == "local_window_size" and a.i > 0:
                    a.i -= 1
    onnx.save(model, out)


if __name__ == "__main__":
    main()
