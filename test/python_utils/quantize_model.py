#!/usr/bin/env python3
"""Quantizes an ONNX model with the pinned onnxruntime's quantizer, as a user
would before handing it to masformer (test/Compile/int8-models.test):

  quantize_model.py IN OUT [--weights int8|uint8] [--per-channel]
      quantize_dynamic: DynamicQuantizeLinear on the activations,
      MatMulInteger against 8-bit weights, int8 embedding tables
      dequantized after their Gather.
  quantize_model.py IN OUT --static --shape name=AxB ...
      quantize_static in the QDQ format (QuantizeLinear/DequantizeLinear
      pairs), calibrated on four batches of ort_inputs' inputs.
  quantize_model.py IN OUT --ort-optimize [--no-quantize]
      then (or instead) the model as onnxruntime's graph optimizer saves it
      (level "extended": DynamicQuantizeMatMul, MatMulIntegerToFloat,
      FusedMatMul for a MatMul with a Transpose and a scaling, ...).
"""

import argparse
import logging

from onnxruntime.quantization import (CalibrationDataReader, QuantFormat,
                                      QuantType, quantize_dynamic,
                                      quantize_static)

import onnxruntime as ort

from ort_inputs import make_inputs


def optimize(model, out):
    """`model` as onnxruntime's graph optimizer saves it (level extended)."""
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    opts.optimized_model_filepath = out
    opts.log_severity_level = 3
    ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--weights", choices=["int8", "uint8"], default="int8")
    ap.add_argument("--per-channel", action="store_true")
    ap.add_argument("--static", action="store_true")
    ap.add_argument("--shape", action="append", default=[])
    ap.add_argument("--ort-optimize", action="store_true")
    ap.add_argument("--no-quantize", action="store_true")
    a = ap.parse_args()
    logging.getLogger().setLevel(logging.ERROR)
    wtype = QuantType.QInt8 if a.weights == "int8" else QuantType.QUInt8
    if a.no_quantize:
        optimize(a.model, a.out)
        return
    if not a.static:
        quantize_dynamic(a.model, a.out, weight_type=wtype,
                         per_channel=a.per_channel)
        if a.ort_optimize:
            optimize(a.out, a.out)
        return

    shapes = {n: [int(d) for d in dims.split("x")]
              for n, dims in (s.split("=") for s in a.shape)}
    sess = ort.InferenceSession(a.model, providers=["CPUExecutionProvider"])

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([make_inputs(sess, shapes, seed=seed)
                            for seed in range(4)])

        def get_next(self):
            return next(self.it, None)

    quantize_static(a.model, a.out, Reader(), quant_format=QuantFormat.QDQ,
                    weight_type=wtype, activation_type=QuantType.QUInt8,
                    per_channel=a.per_channel)


if __name__ == "__main__":
    main()
