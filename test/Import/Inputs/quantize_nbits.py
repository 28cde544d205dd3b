#!/usr/bin/env python3
"""Quantizes a model's MatMul weights as onnxruntime's weight-only
quantizer does (onnxruntime.quantization.matmul_nbits_quantizer, what
onnxruntime-genai's builder runs for `-p int4`): each MatMul by a constant
becomes a com.microsoft.MatMulNBits of packed `bits`-bit blocks, with
scales and, when asymmetric, packed zero points. Prints how many nodes it
quantized.

    quantize_nbits.py MODEL OUT [--bits 4|8] [--block-size 32]
                      [--asymmetric] [--accuracy-level 4]
"""
import argparse
import logging

import onnx
from onnxruntime.quantization import matmul_nbits_quantizer as mnq


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("out")
    p.add_argument("--bits", type=int, default=4)
    p.add_argument("--block-size", type=int, default=32)
    p.add_argument("--asymmetric", action="store_true")
    p.add_argument("--accuracy-level", type=int, default=4)
    a = p.parse_args()
    logging.disable(logging.INFO)
    config = mnq.DefaultWeightOnlyQuantConfig(
        block_size=a.block_size, is_symmetric=not a.asymmetric,
        accuracy_level=a.accuracy_level, bits=a.bits)
    q = mnq.MatMulNBitsQuantizer(onnx.load(a.model), algo_config=config)
    q.process()
    model = q.model.model
    onnx.save(model, a.out)
    n = sum(node.op_type == "MatMulNBits" for node in model.graph.node)
    print(f"MatMulNBits: {n}")


if __name__ == "__main__":
    main()
