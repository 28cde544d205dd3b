#!/usr/bin/env python3
"""Writes valid but unusual models into a folder, for unusual.test:

  reshape-batch.onnx  Reshape [batch, 2, 2] -> [-1, 1] (a group of nothing
                      for the trailing 1 once the batch is folded in)
  int-wrap.onnx       int64 constants folded at import: INT64_MIN / -1,
                      INT64_MAX + 1, 3 * 2^62, 2^(4 * 10^18) (wrap, as numpy)
  div-zero.onnx       an int64 constant divided by a constant zero
  dup-init.onnx       two initializers named 'w'
  ext-decimal.onnx    external data at offset "0200" (decimal 200, as ONNX
                      reads it; octal would be 128, where other bytes lie)
  ext-hex.onnx        external data at offset "0x10" (not a number)

  make_unusual.py OUT_DIR
"""

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh


def save(out_dir, name, nodes, inputs, outputs, inits=(), check=True):
    g = h.make_graph(nodes, name, inputs, outputs, list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    if check:
        onnx.checker.check_model(m)
    onnx.save(m, os.path.join(out_dir, name + ".onnx"))


def i64(name, values):
    return nh.from_array(np.array(values, np.int64), name)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    save(out, "reshape-batch",
         [h.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")],
         [h.make_tensor_value_info("x", T.FLOAT, ["batch", 2, 2])],
         [h.make_tensor_value_info("y", T.FLOAT, ["rows", 1])],
         [i64("shape", [-1, 1])])
    lo, hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    save(out, "int-wrap",
         [h.make_node("Div", ["lo", "minus1"], ["q"], name="div"),
          h.make_node("Add", ["hi", "one"], ["s"], name="add"),
          h.make_node("Mul", ["three", "p62"], ["p"], name="mul"),
          h.make_node("Pow", ["two", "huge"], ["e"], name="pow"),
          h.make_node("Concat", ["q", "s", "p", "e"], ["c"], name="concat",
                      axis=0),
          h.make_node("Add", ["c", "x"], ["y"], name="use")],
         [h.make_tensor_value_info("x", T.INT64, [4])],
         [h.make_tensor_value_info("y", T.INT64, [4])],
         [i64("lo", [lo]), i64("minus1", [-1]), i64("hi", [hi]),
          i64("one", [1]), i64("three", [3]), i64("p62", [2 ** 62]),
          i64("two", [2]), i64("huge", [4 * 10 ** 18])])
    save(out, "div-zero",
         [h.make_node("Div", ["a", "b"], ["q"], name="div_by_zero"),
          h.make_node("Add", ["q", "x"], ["y"], name="use")],
         [h.make_tensor_value_info("x", T.INT64, [2])],
         [h.make_tensor_value_info("y", T.INT64, [2])],
         [i64("a", [7, 8]), i64("b", [1, 0])])

    w = h.make_tensor_value_info("y", T.FLOAT, [2])
    save(out, "dup-init",
         [h.make_node("Add", ["x", "w"], ["y"], name="add")],
         [h.make_tensor_value_info("x", T.FLOAT, [2])], [w],
         [nh.from_array(np.array([1, 2], np.float32), "w"),
          nh.from_array(np.array([3, 4], np.float32), "w")], check=False)
    # 128 bytes of 1.0, 72 of 0, then [5, 6, 7, 8] at byte 200.
    data = (np.ones(32, np.float32).tobytes() + bytes(72) +
            np.array([5, 6, 7, 8], np.float32).tobytes())
    with open(os.path.join(out, "ext.data"), "wb") as f:
        f.write(data)
    for name, offset in (("ext-decimal", "0200"), ("ext-hex", "0x10")):
        t = onnx.TensorProto(name="w", data_type=T.FLOAT, dims=[4])
        t.data_location = onnx.TensorProto.EXTERNAL
        for k, v in (("location", "ext.data"), ("offset", offset),
                     ("length", "16")):
            e = t.external_data.add()
            e.key, e.value = k, v
        g = h.make_graph(
            [h.make_node("Add", ["x", "w"], ["y"], name="add")], name,
            [h.make_tensor_value_info("x", T.FLOAT, [4])],
            [h.make_tensor_value_info("y", T.FLOAT, [4])], [t])
        m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)],
                         ir_version=8)
        onnx.save(m, os.path.join(out, name + ".onnx"))


if __name__ == "__main__":
    main()
