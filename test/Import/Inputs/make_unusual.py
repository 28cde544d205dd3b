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
  nodata-huge.onnx    a float initializer of 2^39 elements with no data
  nodata-int.onnx     an int64 initializer of 2^35 elements with no data
  nodata-const.onnx   a Constant node's float tensor of 2^39 elements, no
                      data
  attn-*.onnx         opset-23 Attention nodes whose K or V does not fit Q:
                      a scalar K, a rank-1 K, a 4-D K of another batch,
                      3 heads for a hidden size of 8
  msg-*.onnx          models whose error messages must name the problem:
                      no graph outputs, a negative Split size, shapes that
                      broadcast to 2^42 elements or not at all, external
                      data whose offset + length overflows int64
  range-huge.onnx     Range of 2^23 constant values (over the 2^22 the
                      importer computes)
  range-empty.onnx    Range whose start is an empty tensor (not a scalar)
  trilu-empty-k.onnx  Trilu whose k is an empty tensor
  trilu-empty.onnx    Trilu of a [0, 3] tensor (valid: an empty result)
  ext-sparse.onnx     a float initializer of 2^38 elements (1 TiB) whose
                      external data is a sparse file of that size

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

    # Sizes declared with nothing behind them: refused before allocation.
    def no_data(name, dtype, n):
        return onnx.TensorProto(name=name, data_type=dtype, dims=[n])
    x = h.make_tensor_value_info("x", T.FLOAT, [1])
    save(out, "nodata-huge", [h.make_node("Add", ["x", "w"], ["y"])], [x],
         [h.make_tensor_value_info("y", T.FLOAT, [2 ** 39])],
         [no_data("w", T.FLOAT, 2 ** 39)], check=False)
    save(out, "nodata-int",
         [h.make_node("Add", ["i", "w"], ["y"])],
         [h.make_tensor_value_info("i", T.INT64, [1])],
         [h.make_tensor_value_info("y", T.INT64, [2 ** 35])],
         [no_data("w", T.INT64, 2 ** 35)], check=False)
    save(out, "nodata-const",
         [h.make_node("Constant", [], ["w"], name="const",
                      value=no_data("v", T.FLOAT, 2 ** 39)),
          h.make_node("Add", ["x", "w"], ["y"])], [x],
         [h.make_tensor_value_info("y", T.FLOAT, [2 ** 39])], check=False)
    # A sparse file: a terabyte that takes no disk, and must not be read.
    with open(os.path.join(out, "sparse.data"), "wb") as f:
        f.truncate(2 ** 40)
    t = onnx.TensorProto(name="w", data_type=T.FLOAT, dims=[2 ** 38])
    t.data_location = onnx.TensorProto.EXTERNAL
    e = t.external_data.add()
    e.key, e.value = "location", "sparse.data"
    save(out, "ext-sparse", [h.make_node("Add", ["x", "w"], ["y"])], [x],
         [h.make_tensor_value_info("y", T.FLOAT, [2 ** 38])], [t],
         check=False)

    # Attention-23 operands that do not fit Q: errors, never shapes read
    # past an operand's rank.
    def attention(name, qshape, kshape, heads):
        ins = [h.make_tensor_value_info("q", T.FLOAT, qshape),
               h.make_tensor_value_info("k", T.FLOAT, kshape),
               h.make_tensor_value_info("v", T.FLOAT, qshape)]
        attrs = dict(q_num_heads=heads, kv_num_heads=heads) if heads else {}
        g = h.make_graph(
            [h.make_node("Attention", ["q", "k", "v"], ["y"], name="attn",
                         **attrs)], name, ins,
            [h.make_tensor_value_info("y", T.FLOAT, None)])
        m = h.make_model(g, opset_imports=[h.make_opsetid("", 23)],
                         ir_version=10)
        onnx.save(m, os.path.join(out, name + ".onnx"))
    attention("attn-scalar-k", [1, 4, 8], [], 2)
    attention("attn-rank1-k", [1, 4, 8], [8], 2)
    attention("attn-batch", [1, 2, 4, 8], [2, 2, 4, 8], 0)
    attention("attn-heads", [1, 4, 8], [1, 4, 8], 3)

    # Errors that must say what is wrong.
    save(out, "msg-no-outputs", [h.make_node("Abs", ["x"], ["y"])], [x], [],
         check=False)
    save(out, "msg-split",
         [h.make_node("Split", ["x", "s"], ["a", "b"], name="split")], [x],
         [h.make_tensor_value_info("a", T.FLOAT, None),
          h.make_tensor_value_info("b", T.FLOAT, None)],
         [i64("s", [-1, 2])], check=False)
    for name, a, b in (("msg-broadcast-huge", [2 ** 21, 1], [1, 2 ** 21]),
                       ("msg-broadcast", [3, 1], [1, 4, 2])):
        save(out, name, [h.make_node("Add", ["a", "b"], ["y"], name="add")],
             [h.make_tensor_value_info("a", T.FLOAT, a),
              h.make_tensor_value_info("b", T.FLOAT, b)],
             [h.make_tensor_value_info("y", T.FLOAT, None)], check=False)
    t = onnx.TensorProto(name="w", data_type=T.FLOAT, dims=[4])
    t.data_location = onnx.TensorProto.EXTERNAL
    for k, v in (("location", "ext.data"), ("offset", "8"),
                 ("length", str(2 ** 63 - 1))):
        e = t.external_data.add()
        e.key, e.value = k, v
    save(out, "msg-ext-overflow", [h.make_node("Add", ["x", "w"], ["y"])],
         [h.make_tensor_value_info("x", T.FLOAT, [4])],
         [h.make_tensor_value_info("y", T.FLOAT, [4])], [t], check=False)

    # Empty tensors where scalars belong, and an empty Trilu.
    save(out, "range-empty",
         [h.make_node("Range", ["s", "l", "d"], ["r"], name="range"),
          h.make_node("Cast", ["r"], ["y"], to=T.FLOAT)], [x],
         [h.make_tensor_value_info("y", T.FLOAT, None)],
         [i64("s", np.zeros([0], np.int64)), i64("l", 4), i64("d", 1)],
         check=False)
    save(out, "range-huge",
         [h.make_node("Range", ["s", "l", "d"], ["r"], name="range"),
          h.make_node("Cast", ["r"], ["y"], to=T.FLOAT)], [x],
         [h.make_tensor_value_info("y", T.FLOAT, None)],
         [i64("s", 0), i64("l", 2 ** 23), i64("d", 1)], check=False)
    m = h.make_tensor_value_info("m", T.FLOAT, [3, 3])
    save(out, "trilu-empty-k",
         [h.make_node("Trilu", ["m", "k"], ["y"], name="trilu")], [m],
         [h.make_tensor_value_info("y", T.FLOAT, [3, 3])],
         [i64("k", np.zeros([0], np.int64))], check=False)
    save(out, "trilu-empty",
         [h.make_node("Trilu", ["e"], ["t"], name="trilu"),
          h.make_node("Add", ["t", "one"], ["y"])],
         [h.make_tensor_value_info("e", T.FLOAT, [0, 3])],
         [h.make_tensor_value_info("y", T.FLOAT, [0, 3])],
         [nh.from_array(np.ones([1], np.float32), "one")])


if __name__ == "__main__":
    main()
