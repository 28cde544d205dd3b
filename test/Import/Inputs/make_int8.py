#!/usr/bin/env python3
"""Small models of ONNX's 8-bit quantization ops, as onnxruntime's
quantizers write them (test/Import/int8-ops.test), into OUTDIR:

  dql.onnx      DynamicQuantizeLinear of x, of 0 * x (an empty range: scale
                1), |x| (min 0) and -|x| (max 0): y, y_scale, y_zero_point
                of each as outputs.
  mmi.onnx      quantize_dynamic's chain: DynamicQuantizeLinear,
                MatMulInteger against int8 weights with a zero point per
                column (per_channel) and against uint8 weights with one zero
                point, Cast, Mul by the scales; and MatMulInteger of two
                run-time operands (int32 out).
  mmi-exact.onnx MatMulInteger with k = 4096 and int32 sums past 2^24
                (beyond f32's integers): uint8 A by int8 and by uint8
                weights, int8 A by int8 weights, zero points per column;
                80 columns (a whole tile of 64 and a part).
  mmi-inputs.onnx MatMulInteger of uint8 and int8 graph inputs (a
                constant zero point) by int8 and uint8 weights.
  mmi-rows.onnx MatMulInteger with a zero point per row of A;
  mmi-rows-ref.onnx the same product in float ops (the reference:
                onnxruntime's MatMulInteger takes one zero point for A).
  dq.onnx       DequantizeLinear: run-time uint8 per tensor, a constant int8
                weight per output channel (axis 0) feeding a MatMul, per
                axis 1 of run-time int8 values, an int8 embedding table
                gathered then dequantized, an f16 scale.
  q.onnx        QuantizeLinear: uint8 without a zero point, int8 with one,
                per axis, halves (rounded to even), saturation.
  cast-u8.onnx  a uint8 constant above 127 cast to float.
  bad-*.onnx    one refused node each (named 'bad').
"""

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

out_dir = sys.argv[1]
os.makedirs(out_dir, exist_ok=True)
rng = np.random.default_rng(11)


def init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def save(name, nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(out_dir, name + ".onnx"))


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


N = helper.make_node

# --- DynamicQuantizeLinear -------------------------------------------------
nodes = [N("Constant", [], ["zero"], value=init("zero", np.float32(0))),
         N("Mul", ["x", "zero"], ["x0"]), N("Abs", ["x"], ["xa"]),
         N("Neg", ["xa"], ["xn"])]
outs = []
for tag, src in [("x", "x"), ("zeros", "x0"), ("pos", "xa"), ("neg", "xn")]:
    nodes.append(N("DynamicQuantizeLinear", [src],
                   [f"y_{tag}", f"s_{tag}", f"z_{tag}"], name=f"dql_{tag}"))
    outs += [vi(f"y_{tag}", TP.UINT8, ["b", 37]), vi(f"s_{tag}", TP.FLOAT, []),
             vi(f"z_{tag}", TP.UINT8, [])]
save("dql", nodes, [vi("x", TP.FLOAT, ["b", 37])], outs)

# --- MatMulInteger ---------------------------------------------------------
K, Nn = 40, 24
w8 = rng.integers(-128, 128, size=(K, Nn), dtype=np.int8)
w8_zp = rng.integers(-5, 6, size=(Nn,), dtype=np.int8)
w8_scale = (rng.random(Nn, dtype=np.float32) * 0.02 + 0.005).astype(np.float32)
wu = rng.integers(0, 256, size=(K, Nn), dtype=np.uint8)
wu_zp = np.uint8(131)
wu_scale = np.float32(0.013)
nodes = [
    N("DynamicQuantizeLinear", ["a"], ["aq", "a_s", "a_z"], name="dql_a"),
    # int8 weights, a zero point and scale per column.
    N("MatMulInteger", ["aq", "w8", "a_z", "w8_zp"], ["p8"], name="mmi_w8"),
    N("Cast", ["p8"], ["p8f"], to=TP.FLOAT),
    N("Mul", ["a_s", "w8_scale"], ["s8"]),
    N("Mul", ["p8f", "s8"], ["y8"]),
    # uint8 weights, one zero point.
    N("MatMulInteger", ["aq", "wu", "a_z", "wu_zp"], ["pu"], name="mmi_wu"),
    N("Cast", ["pu"], ["puf"], to=TP.FLOAT),
    N("Mul", ["a_s", "wu_scale"], ["su"]),
    N("Mul", ["puf", "su"], ["yu"]),
    # Two run-time operands, int32 out, no zero point for B.
    N("DynamicQuantizeLinear", ["m"], ["mq", "m_s", "m_z"], name="dql_m"),
    N("DynamicQuantizeLinear", ["n"], ["nq", "n_s", "n_z"], name="dql_n"),
    N("MatMulInteger", ["mq", "nq", "m_z"], ["pmn"], name="mmi_rt"),
]
save("mmi", nodes,
     [vi("a", TP.FLOAT, ["b", "s", K]), vi("m", TP.FLOAT, [9, 33]),
      vi("n", TP.FLOAT, [33, 17])],
     [vi("y8", TP.FLOAT, ["b", "s", Nn]), vi("yu", TP.FLOAT, ["b", "s", Nn]),
      vi("pmn", TP.INT32, [9, 17])],
     [init("w8", w8), init("w8_zp", w8_zp), init("w8_scale", w8_scale),
      init("wu", wu), init("wu_zp", wu_zp), init("wu_scale", wu_scale)])

# A zero point per row of A (uint8 from QuantizeLinear), B int8 per column.
M = 6
rows_zp = rng.integers(100, 156, size=(M,), dtype=np.uint8)
q_scale = np.float32(0.02)
q_zp = np.uint8(128)
common = [init("q_scale", q_scale), init("q_zp", q_zp), init("w8", w8)]
save("mmi-rows",
     [N("QuantizeLinear", ["a", "q_scale", "q_zp"], ["aq"], name="q"),
      N("MatMulInteger", ["aq", "w8", "rows_zp", "w8_zp"], ["p"], name="mmi")],
     [vi("a", TP.FLOAT, [M, K])], [vi("p", TP.INT32, [M, Nn])],
     common + [init("rows_zp", rows_zp), init("w8_zp", w8_zp)])
# The reference: the same integers in float ops (exact: small integers).
save("mmi-rows-ref",
     [N("QuantizeLinear", ["a", "q_scale", "q_zp"], ["aq"], name="q"),
      N("Cast", ["aq"], ["af"], to=TP.FLOAT),
      N("Sub", ["af", "rows_zp_f"], ["ac"]),
      N("Cast", ["w8"], ["wf"], to=TP.FLOAT),
      N("Sub", ["wf", "w8_zp_f"], ["wc"]),
      N("MatMul", ["ac", "wc"], ["pf"]),
      N("Cast", ["pf"], ["p"], to=TP.INT32)],
     [vi("a", TP.FLOAT, [M, K])], [vi("p", TP.INT32, [M, Nn])],
     common + [init("rows_zp_f", rows_zp.astype(np.float32).reshape(M, 1)),
               init("w8_zp_f", w8_zp.astype(np.float32))])

# Exactness: int32 sums past 2^24, which f32 sums cannot hold (k = 4096,
# operands near the ends of their ranges, zero points per column): uint8
# A from DynamicQuantizeLinear by int8 and by uint8 weights, and int8 A
# (QuantizeLinear with a zero point) by int8 weights.
KB, NB = 4096, 80
wbig = rng.integers(-128, -100, size=(KB, NB), dtype=np.int8)
wbig_zp = rng.integers(0, 20, size=(NB,), dtype=np.int8)
wubig = rng.integers(0, 30, size=(KB, NB), dtype=np.uint8)
wubig_zp = rng.integers(220, 256, size=(NB,), dtype=np.uint8)
save("mmi-exact",
     # |x| + 1: every product of one sign, the sums of 1e8.
     [N("Abs", ["x"], ["xabs"]), N("Add", ["xabs", "one"], ["xp"]),
      N("DynamicQuantizeLinear", ["xp"], ["xq", "x_s", "x_z"], name="dql"),
      N("MatMulInteger", ["xq", "wbig", "x_z", "wbig_zp"], ["p_s8"],
        name="mmi_s8"),
      N("MatMulInteger", ["xq", "wubig", "x_z", "wubig_zp"], ["p_u8"],
        name="mmi_u8"),
      N("QuantizeLinear", ["xp", "qa_scale", "qa_zp"], ["xa"], name="qa"),
      N("MatMulInteger", ["xa", "wbig", "qa_zp", "wbig_zp"], ["p_a8"],
        name="mmi_a8")],
     [vi("x", TP.FLOAT, ["b", KB])],
     [vi("p_s8", TP.INT32, ["b", NB]), vi("p_u8", TP.INT32, ["b", NB]),
      vi("p_a8", TP.INT32, ["b", NB])],
     [init("wbig", wbig), init("wbig_zp", wbig_zp), init("wubig", wubig),
      init("wubig_zp", wubig_zp), init("one", np.float32(1)),
      init("qa_scale", np.float32(0.01)),
      init("qa_zp", np.int8(-120))])

# 8-bit graph inputs over their whole ranges (ort_inputs), A's zero point
# a constant: uint8 A by int8 and by uint8 weights, int8 A by int8 weights.
KI, NI = 48, 40
wi8 = rng.integers(-128, 128, size=(KI, NI), dtype=np.int8)
wi8_zp = rng.integers(-9, 10, size=(NI,), dtype=np.int8)
wiu = rng.integers(0, 256, size=(KI, NI), dtype=np.uint8)
wiu_zp = rng.integers(100, 156, size=(NI,), dtype=np.uint8)
save("mmi-inputs",
     [N("MatMulInteger", ["au", "wi8", "au_zp", "wi8_zp"], ["p_us"],
        name="mmi_us"),
      N("MatMulInteger", ["au", "wiu", "au_zp", "wiu_zp"], ["p_uu"],
        name="mmi_uu"),
      N("MatMulInteger", ["as", "wi8", "as_zp", "wi8_zp"], ["p_ss"],
        name="mmi_ss")],
     [vi("au", TP.UINT8, ["b", "s", KI]), vi("as", TP.INT8, ["b", "s", KI])],
     [vi("p_us", TP.INT32, ["b", "s", NI]), vi("p_uu", TP.INT32, ["b", "s", NI]),
      vi("p_ss", TP.INT32, ["b", "s", NI])],
     [init("wi8", wi8), init("wi8_zp", wi8_zp), init("wiu", wiu),
      init("wiu_zp", wiu_zp), init("au_zp", np.uint8(131)),
      init("as_zp", np.int8(-7))])

# --- DequantizeLinear ------------------------------------------------------
V, D = 128, 16
table = rng.integers(-128, 128, size=(V, D), dtype=np.int8)
wc = rng.integers(-128, 128, size=(Nn, K), dtype=np.int8)  # [out, in]
wc_scale = (rng.random(Nn, dtype=np.float32) * 0.01 + 0.001).astype(np.float32)
wc_zp = rng.integers(-3, 4, size=(Nn,), dtype=np.int8)
ax1_scale = (rng.random(K, dtype=np.float32) * 0.05 + 0.01).astype(np.float32)
ax1_zp = rng.integers(-20, 21, size=(K,), dtype=np.int8)
nodes = [
    # Run-time uint8, per tensor.
    N("QuantizeLinear", ["x", "s1", "z1"], ["xq"], name="q1"),
    N("DequantizeLinear", ["xq", "s1", "z1"], ["xd"], name="dq1"),
    # A constant weight per output channel (axis 0), transposed into a MatMul.
    N("DequantizeLinear", ["wc", "wc_scale", "wc_zp"], ["wd"], name="dqw",
      axis=0),
    N("Transpose", ["wd"], ["wdt"], perm=[1, 0]),
    N("MatMul", ["x", "wdt"], ["xw"]),
    # Run-time int8 per axis 1 (the last), quantized with the same.
    N("QuantizeLinear", ["x", "ax1_scale", "ax1_zp"], ["xq2"], name="q2",
      axis=1),
    N("DequantizeLinear", ["xq2", "ax1_scale", "ax1_zp"], ["xd2"], name="dq2",
      axis=1),
    # quantize_dynamic's embedding: Gather from the int8 table, then DQ.
    N("Gather", ["table", "ids"], ["rows"]),
    N("DequantizeLinear", ["rows", "t_scale", "t_zp"], ["emb"], name="dqe"),
    # f16 scale: f16 out.
    N("DequantizeLinear", ["xq", "s16"], ["xd16"], name="dq16"),
]
save("dq", nodes,
     [vi("x", TP.FLOAT, ["b", K]), vi("ids", TP.INT64, ["b", 3])],
     [vi("xd", TP.FLOAT, ["b", K]), vi("xw", TP.FLOAT, ["b", Nn]),
      vi("xd2", TP.FLOAT, ["b", K]), vi("emb", TP.FLOAT, ["b", 3, D]),
      vi("xd16", TP.FLOAT16, ["b", K])],
     [init("s1", np.float32(0.03)), init("z1", np.uint8(120)),
      init("wc", wc), init("wc_scale", wc_scale), init("wc_zp", wc_zp),
      init("ax1_scale", ax1_scale), init("ax1_zp", ax1_zp),
      init("table", table), init("t_scale", np.float32(0.004)),
      init("t_zp", np.int8(-2)), init("s16", np.float16(0.25))], opset=19)

# --- QuantizeLinear --------------------------------------------------------
# Halves: x * 0 + h, h / 0.5 = k + 0.5 for k = -6..6, and saturating ones.
halves = (np.arange(-6, 7, dtype=np.float32) + 0.5) * 0.5
big = np.array([-1000, -200, 200, 1000], np.float32)
consts = np.concatenate([halves, big, np.zeros(K - len(halves) - len(big),
                                               np.float32)])
nodes = [
    N("Constant", [], ["zero"], value=init("zero", np.float32(0))),
    N("Mul", ["x", "zero"], ["x0"]),
    N("Add", ["x0", "consts"], ["h"]),
    N("QuantizeLinear", ["h", "half"], ["hu"], name="q_halves_u8"),
    N("QuantizeLinear", ["h", "half", "z8"], ["hi"], name="q_halves_i8"),
    N("QuantizeLinear", ["x", "s1"], ["xu"], name="q_u8"),
    N("QuantizeLinear", ["x", "s1", "z8"], ["xi"], name="q_i8"),
    N("QuantizeLinear", ["x", "ax1_scale", "ax1_zp"], ["xa"], name="q_axis",
      axis=1),
]
save("q", nodes, [vi("x", TP.FLOAT, ["b", K])],
     [vi("hu", TP.UINT8, ["b", K]), vi("hi", TP.INT8, ["b", K]),
      vi("xu", TP.UINT8, ["b", K]), vi("xi", TP.INT8, ["b", K]),
      vi("xa", TP.INT8, ["b", K])],
     [init("consts", consts), init("half", np.float32(0.5)),
      init("z8", np.int8(3)), init("s1", np.float32(0.01)),
      init("ax1_scale", ax1_scale), init("ax1_zp", ax1_zp)])

# --- Cast from uint8 -------------------------------------------------------
# Larger than the importer folds on the host: a run-time Cast.
u8 = rng.integers(0, 256, size=(80, 64), dtype=np.uint8)
save("cast-u8",
     [N("Cast", ["u8"], ["u8f"], to=TP.FLOAT), N("Add", ["x", "u8f"], ["y"])],
     [vi("x", TP.FLOAT, [80, 64])], [vi("y", TP.FLOAT, [80, 64])],
     [init("u8", u8)])

# --- Refused ---------------------------------------------------------------
x_in = [vi("x", TP.FLOAT, [4, K])]
save("bad-block",
     [N("QuantizeLinear", ["x", "s1", "z1"], ["xq"], name="q"),
      N("DequantizeLinear", ["xq", "bs", "bz"], ["y"], name="bad", axis=1,
        block_size=8)],
     x_in, [vi("y", TP.FLOAT, [4, K])],
     [init("s1", np.float32(0.03)), init("z1", np.uint8(120)),
      init("bs", np.ones((4, K // 8), np.float32)),
      init("bz", np.zeros((4, K // 8), np.uint8))], opset=21)
save("bad-zp-type",
     [N("QuantizeLinear", ["x", "s1", "z1"], ["xq"], name="q"),
      N("Cast", ["xq"], ["xi"], to=TP.INT8),
      N("DequantizeLinear", ["xi", "s1", "z1"], ["y"], name="bad")],
     x_in, [vi("y", TP.FLOAT, [4, K])],
     [init("s1", np.float32(0.03)), init("z1", np.uint8(120))])
save("bad-zp-shape",
     [N("QuantizeLinear", ["x", "ax1_scale", "z1"], ["y"], name="bad", axis=1)],
     x_in, [vi("y", TP.UINT8, [4, K])],
     [init("ax1_scale", ax1_scale), init("z1", np.uint8(120))])
save("bad-scale-size",
     [N("QuantizeLinear", ["x", "s3"], ["y"], name="bad", axis=1)],
     x_in, [vi("y", TP.UINT8, [4, K])],
     [init("s3", np.ones(3, np.float32))])
bad = helper.make_graph(
    [N("MatMulInteger", ["x", "w8"], ["y"], name="bad")], "bad-mmi-float",
    x_in, [vi("y", TP.INT32, [4, Nn])], [init("w8", w8)])
m = helper.make_model(bad, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 8
onnx.save(m, os.path.join(out_dir, "bad-mmi-float.onnx"))  # (not valid ONNX)
