#!/usr/bin/env python3
"""Writes small ONNX models, each built around ops that exporters emit for
model families beyond the fixtures (issue 18), into DIR:

  cumsum.onnx   OPT/BLOOM/RoBERTa position ids: CumSum of the padding mask
                along the sequence (times the mask, minus one), and a float
                CumSum, exclusive and reversed;
  conv.onnx     ViT's patch embedding, Whisper's Conv1d front end, a
                dilated and a SAME_LOWER Conv2d;
  gptj.onnx     GPT-J's rotary table: Tile by the batch size (a size known
                only at run time in a dynamic import), Tile by constants, and
                GatherElements of the table at the positions; T5's relative
                positions: Abs of an int64 difference of Ranges;
  cross.onnx    an encoder-decoder's decoder: self-attention after a cache,
                cross-attention to the encoder's states and to cached
                encoder keys and values;
  sdpa-guard.onnx  torch's SDPA export with a boolean mask: -inf masks and
                Where(IsNaN(p), 0, p) after the Softmax; IsNaN, IsInf;
  empty-parts.onnx  Slice and Split parts of size 0;
  mod.onnx      Mod on integers (fmod 0 and 1) and floats;
  bias-window.onnx  a causal Where mask over a bias clipped at 16 (no window);
  flat-views.onnx  flat probabilities viewed 4-D and flat again before P V;
  sdpa-half.onnx  torch's SDPA export of an f16 model (f32 softmax and P V);
  and models with a bad Tile, GatherElements or CumSum, each an error.

    make_ops.py DIR

Batch and sequence are dynamic ("batch", "sequence"); onnxruntime is the
reference (test/Import/ops.test).
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh


def i64(name, values):
    return nh.from_array(np.array(values, np.int64), name)


def save(graph, path):
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)


def cumsum(path):
    nodes = [
        h.make_node("CumSum", ["attention_mask", "axis1"], ["cs"]),
        h.make_node("Mul", ["cs", "attention_mask"], ["csm"]),
        h.make_node("Sub", ["csm", "one"], ["position_ids"]),
        h.make_node("CumSum", ["x", "axis1"], ["y"], exclusive=1, reverse=1),
        h.make_node("CumSum", ["x", "axis_neg"], ["z"]),
    ]
    graph = h.make_graph(
        nodes, "cumsum",
        [h.make_tensor_value_info("attention_mask", T.INT64,
                                  ["batch", "sequence"]),
         h.make_tensor_value_info("x", T.FLOAT, ["batch", "sequence", 4])],
        [h.make_tensor_value_info("position_ids", T.INT64,
                                  ["batch", "sequence"]),
         h.make_tensor_value_info("y", T.FLOAT, ["batch", "sequence", 4]),
         h.make_tensor_value_info("z", T.FLOAT, ["batch", "sequence", 4])],
        [i64("axis1", 1), i64("one", 1), i64("axis_neg", -1)])
    save(graph, path)


def gptj(path):
    table = np.random.default_rng(0).standard_normal((1, 64, 8)).astype(
        np.float32)
    nodes = [
        h.make_node("Shape", ["input_ids"], ["shape"]),
        h.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
        h.make_node("Gather", ["shape", "one"], ["seq"], axis=0),
        h.make_node("Range", ["zero", "seq", "one"], ["pos"]),
        # The table, once per sequence of the batch.
        h.make_node("Unsqueeze", ["batch", "zero_1d"], ["batch_1d"]),
        h.make_node("Concat", ["batch_1d", "ones_2"], ["rep_table"], axis=0),
        h.make_node("Tile", ["table", "rep_table"], ["tables"]),
        # Positions [batch, sequence, 8].
        h.make_node("Unsqueeze", ["pos", "zero_1d"], ["pos2"]),
        h.make_node("Concat", ["batch_1d", "one_1d"], ["rep_pos"], axis=0),
        h.make_node("Tile", ["pos2", "rep_pos"], ["pos_b"]),
        h.make_node("Unsqueeze", ["pos_b", "minus_1d"], ["pos3"]),
        h.make_node("Tile", ["pos3", "rep_last"], ["idx"]),
        h.make_node("GatherElements", ["tables", "idx"], ["sincos"], axis=1),
        h.make_node("Mul", ["x", "sincos"], ["y"]),
        # T5: |j - i| over the positions.
        h.make_node("Unsqueeze", ["pos", "one_1d"], ["col"]),
        h.make_node("Sub", ["pos2", "col"], ["rel"]),
        h.make_node("Abs", ["rel"], ["relative"]),
    ]
    graph = h.make_graph(
        nodes, "gptj",
        [h.make_tensor_value_info("input_ids", T.INT64,
                                  ["batch", "sequence"]),
         h.make_tensor_value_info("x", T.FLOAT, ["batch", "sequence", 8])],
        [h.make_tensor_value_info("y", T.FLOAT, ["batch", "sequence", 8]),
         h.make_tensor_value_info("relative", T.INT64,
                                  ["sequence", "sequence"])],
        [nh.from_array(table, "table"), i64("zero", 0), i64("one", 1),
         i64("zero_1d", [0]), i64("one_1d", [1]), i64("minus_1d", [-1]),
         i64("ones_2", [1, 1]), i64("rep_last", [1, 1, 8])])
    save(graph, path)


def conv(path):
    """ViT's patch embedding (Conv2d, kernel = stride = 4, dynamic batch),
    Whisper's front end (Conv1d, kernel 3, pad 1, strides 1 then 2, GELU
    between; dynamic length), a dilated Conv2d with uneven pads and a
    strided SAME_LOWER one, both without bias."""
    rng = np.random.default_rng(1)
    w = lambda *s: nh.from_array(rng.standard_normal(s).astype(np.float32),
                                 None)
    inits = []
    for name, shape in (("patch_w", (8, 3, 4, 4)), ("patch_b", (8,)),
                        ("c1_w", (6, 5, 3)), ("c1_b", (6,)),
                        ("c2_w", (6, 6, 3)), ("c2_b", (6,)),
                        ("d_w", (2, 3, 3, 3))):
        t = w(*shape)
        t.name = name
        inits.append(t)
    nodes = [
        h.make_node("Conv", ["pixels", "patch_w", "patch_b"], ["patches"],
                    kernel_shape=[4, 4], strides=[4, 4]),
        h.make_node("Conv", ["audio", "c1_w", "c1_b"], ["a1"], pads=[1, 1]),
        h.make_node("Tanh", ["a1"], ["a1t"]),
        h.make_node("Conv", ["a1t", "c2_w", "c2_b"], ["a2"], pads=[1, 1],
                    strides=[2]),
        h.make_node("Conv", ["pixels", "d_w"], ["dilated"],
                    dilations=[2, 2], pads=[2, 1, 2, 1]),
        h.make_node("Conv", ["pixels", "d_w"], ["same"],
                    auto_pad="SAME_LOWER", strides=[2, 2]),
    ]
    graph = h.make_graph(
        nodes, "conv",
        [h.make_tensor_value_info("pixels", T.FLOAT, ["batch", 3, 16, 16]),
         h.make_tensor_value_info("audio", T.FLOAT, ["batch", 5, "frames"])],
        [h.make_tensor_value_info("patches", T.FLOAT, ["batch", 8, 4, 4]),
         h.make_tensor_value_info("a2", T.FLOAT, ["batch", 6, None]),
         h.make_tensor_value_info("dilated", T.FLOAT, ["batch", 2, 16, 14]),
         h.make_tensor_value_info("same", T.FLOAT, ["batch", 2, 8, 8])],
        inits)
    save(graph, path)


def gathernd(path):
    """GatherND as the dynamo exporter writes `qkv[:, :, -2]` on a fused
    projection (constant [[-2]] on a [heads, batch, seq, d] transpose), and
    with run-time indices picking (row, column) pairs: `pair_mask` (0/1 from
    ort_inputs.py, a padding mask) minus [0, 2], so that columns count
    from the end."""
    nodes = [
        h.make_node("Transpose", ["qkv"], ["t"], perm=[2, 0, 1, 3]),
        h.make_node("GatherND", ["t", "minus2"], ["k"]),
        h.make_node("Sub", ["pair_mask", "shift"], ["pairs"]),
        h.make_node("GatherND", ["table", "pairs"], ["picked"]),
    ]
    graph = h.make_graph(
        nodes, "gathernd",
        [h.make_tensor_value_info("qkv", T.FLOAT, ["batch", "seq", 6, 8]),
         h.make_tensor_value_info("table", T.FLOAT, [5, 4, "width"]),
         h.make_tensor_value_info("pair_mask", T.INT64, ["n", 2])],
        [h.make_tensor_value_info("k", T.FLOAT, [1, "batch", "seq", 8]),
         h.make_tensor_value_info("picked", T.FLOAT, ["n", "width"])],
        [i64("minus2", [[-2]]), i64("shift", [0, 2])])
    save(graph, path)


def moe(path):
    """A mixture of experts' routing, as the exporters write it (Mixtral,
    Qwen-MoE): TopK picks each token's 2 of 8 experts, OneHot and NonZero
    give the tokens that picked expert 3 (a size known only at run time),
    GatherND takes their rows, and ScatterND / ScatterElements add the
    expert's output back (dynamo's and TorchScript's index_add_). Also TopK
    smallest with ties, along a dynamic axis, NonZero of a float compare,
    and the scatters' other reductions over repeated indices."""
    f = lambda name, dims: h.make_tensor_value_info(name, T.FLOAT, dims)
    i = lambda name, dims: h.make_tensor_value_info(name, T.INT64, dims)
    nodes = [
        h.make_node("Reshape", ["x", "rows_shape"], ["r"]),
        h.make_node("Softmax", ["r"], ["probs"], axis=-1),
        h.make_node("TopK", ["probs", "two"], ["top_v", "top_i"], axis=-1),
        # Ties: values in steps of 0.5, the smallest 3 of each row.
        h.make_node("Mul", ["r", "two_f"], ["r2"]),
        h.make_node("Floor", ["r2"], ["stepped"]),
        h.make_node("TopK", ["stepped", "three"], ["low_v", "low_i"],
                    axis=1, largest=0),
        # Along the dynamic axis: the largest row value of each column.
        h.make_node("TopK", ["r", "one"], ["col_v", "col_i"], axis=0),
        h.make_node("OneHot", ["top_i", "eight", "off_on"], ["onehot"]),
        h.make_node("Transpose", ["onehot"], ["by_expert"], perm=[2, 1, 0]),
        h.make_node("Gather", ["by_expert", "three_s"], ["picked"], axis=0),
        h.make_node("Cast", ["picked"], ["picked_i"], to=T.INT64),
        h.make_node("NonZero", ["picked_i"], ["nz"]),
        h.make_node("Transpose", ["nz"], ["pairs"], perm=[1, 0]),
        h.make_node("Slice", ["pairs", "one_1d", "two_1d", "one_1d"],
                    ["tok"]),
        h.make_node("GatherND", ["r", "tok"], ["rows"]),
        h.make_node("Mul", ["rows", "two_f"], ["expert"]),
        h.make_node("Shape", ["r"], ["r_shape"]),
        h.make_node("ConstantOfShape", ["r_shape"], ["zeros"]),
        h.make_node("ScatterND", ["zeros", "tok", "expert"], ["nd_add"],
                    reduction="add"),
        # Every token index twice: the reductions meet repeated indices.
        h.make_node("Concat", ["tok", "tok"], ["tok2"], axis=0),
        h.make_node("Concat", ["expert", "rows"], ["upd2"], axis=0),
        h.make_node("ScatterND", ["r", "tok2", "upd2"], ["nd_mul"],
                    reduction="mul"),
        h.make_node("ScatterND", ["r", "tok2", "upd2"], ["nd_max"],
                    reduction="max"),
        h.make_node("ScatterND", ["r", "tok", "expert"], ["nd_none"]),
        # TorchScript: ScatterElements of the rows expanded over the
        # columns, into zeros; then with reduction add and min.
        h.make_node("Shape", ["expert"], ["e_shape"]),
        h.make_node("Expand", ["tok", "e_shape"], ["tok_cols"]),
        h.make_node("ScatterElements", ["zeros", "tok_cols", "expert"],
                    ["el_none"], axis=0),
        h.make_node("Shape", ["upd2"], ["u2_shape"]),
        h.make_node("Expand", ["tok2", "u2_shape"], ["tok2_cols"]),
        h.make_node("ScatterElements", ["r", "tok2_cols", "upd2"],
                    ["el_add"], axis=0, reduction="add"),
        h.make_node("ScatterElements", ["r", "tok2_cols", "upd2"],
                    ["el_min"], axis=0, reduction="min"),
        # Index tuples as long as the data's rank: single elements, each
        # (slot, token) pair of the picks added to itself.
        h.make_node("Transpose", ["top_v"], ["top_vt"], perm=[1, 0]),
        h.make_node("GatherND", ["top_vt", "pairs"], ["pair_v"]),
        h.make_node("ScatterND", ["top_vt", "pairs", "pair_v"], ["nd_pairs"],
                    reduction="add"),
        # NonZero of a 3-D float compare.
        h.make_node("Greater", ["x", "half"], ["big"]),
        h.make_node("NonZero", ["big"], ["big_at"]),
    ]
    for n in nodes:
        n.name = n.output[-1]
    graph = h.make_graph(
        nodes, "moe",
        [f("x", ["batch", "sequence", 8])],
        [f("top_v", ["tokens", 2]), i("top_i", ["tokens", 2]),
         f("low_v", ["tokens", 3]), i("low_i", ["tokens", 3]),
         f("col_v", [1, 8]), i("col_i", [1, 8]),
         f("onehot", ["tokens", 2, 8]), i("nz", [2, "picks"]),
         f("nd_add", ["tokens", 8]), f("nd_mul", ["tokens", 8]),
         f("nd_max", ["tokens", 8]), f("nd_none", ["tokens", 8]),
         f("el_none", ["tokens", 8]), f("el_add", ["tokens", 8]),
         f("el_min", ["tokens", 8]), i("big_at", [3, "count"]),
         f("nd_pairs", [2, "tokens"])],
        [i64("rows_shape", [-1, 8]), i64("two", [2]), i64("three", [3]),
         i64("one", [1]), i64("eight", 8), i64("three_s", 3),
         i64("one_1d", [1]), i64("two_1d", [2]),
         nh.from_array(np.array([0, 1], np.float32), "off_on"),
         nh.from_array(np.array(2, np.float32), "two_f"),
         nh.from_array(np.array(0.5, np.float32), "half")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)


def bigcode_eager(path):
    """GPTBigCode's eager multi-query attention: Q reshaped to
    [B, S * H, D] against the one key head's K^T [B, D, T], the scores
    viewed as [B, S, H, T] for the causal Where and the Softmax, then
    [B, S * H, T] again against V. Not raised (an error naming the layout)."""
    heads, dim = 4, 8
    nodes = [
        h.make_node("Reshape", ["q", "q_flat"], ["q3"]),
        h.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        h.make_node("MatMul", ["q3", "kt"], ["s3"]),
        h.make_node("Mul", ["s3", "scale"], ["s3s"]),
        h.make_node("Reshape", ["s3s", "s_shape"], ["s4"]),
        h.make_node("Where", ["causal", "s4", "neg"], ["s4m"]),
        h.make_node("Softmax", ["s4m"], ["p4"], axis=-1),
        h.make_node("Reshape", ["p4", "p_shape"], ["p3"]),
        h.make_node("MatMul", ["p3", "v"], ["o3"]),
        h.make_node("Reshape", ["o3", "o_shape"], ["out"]),
    ]
    for n in nodes:
        n.name = n.output[0]
    seq = 6
    causal = np.tril(np.ones((seq, seq), bool))[None, :, None, :]
    graph = h.make_graph(
        nodes, "bigcode",
        [h.make_tensor_value_info("q", T.FLOAT, [2, seq, heads * dim]),
         h.make_tensor_value_info("k", T.FLOAT, [2, seq, dim]),
         h.make_tensor_value_info("v", T.FLOAT, [2, seq, dim])],
        [h.make_tensor_value_info("out", T.FLOAT, [2, seq, heads * dim])],
        [i64("q_flat", [2, seq * heads, dim]),
         i64("s_shape", [2, seq, heads, seq]),
         i64("p_shape", [2, seq * heads, seq]),
         i64("o_shape", [2, seq, heads * dim]),
         nh.from_array(causal, "causal"),
         nh.from_array(np.array(dim ** -0.5, np.float32), "scale"),
         nh.from_array(np.array(-3.4e38, np.float32), "neg")])
    save(graph, path)


def reductions(path):
    """The other reductions (DBRX's router normalizes by ReduceL1), ArgMax
    and ArgMin (PhiMoE's router) with ties and select_last_index, and Sign
    (GraniteMoE's dynamo export), on floats and integers; opset 18 (axes
    as inputs)."""
    f = lambda name, dims: h.make_tensor_value_info(name, T.FLOAT, dims)
    i = lambda name, dims: h.make_tensor_value_info(name, T.INT64, dims)
    nodes = [
        h.make_node("ReduceMin", ["x", "last"], ["min"], keepdims=0),
        h.make_node("ReduceProd", ["x", "last"], ["prod"]),
        h.make_node("ReduceL1", ["x", "last"], ["l1"]),
        h.make_node("ReduceL2", ["x", "seq"], ["l2"], keepdims=0),
        h.make_node("ReduceSumSquare", ["x", "last"], ["sumsq"]),
        h.make_node("ReduceLogSumExp", ["x", "last"], ["lse"], keepdims=0),
        h.make_node("ReduceLogSumExp", ["x", "seq"], ["lse_seq"]),
        # Ties: steps of 0.5.
        h.make_node("Mul", ["x", "two"], ["x2"]),
        h.make_node("Floor", ["x2"], ["stepped"]),
        h.make_node("ArgMax", ["stepped"], ["amax"], axis=-1),
        h.make_node("ArgMax", ["stepped"], ["amax_last"], axis=-1,
                    keepdims=0, select_last_index=1),
        h.make_node("ArgMin", ["stepped"], ["amin"], axis=1, keepdims=0),
        h.make_node("ArgMin", ["stepped"], ["amin_last"], axis=2,
                    select_last_index=1),
        h.make_node("Sign", ["stepped"], ["sign"]),
        h.make_node("Cast", ["stepped"], ["ints"], to=T.INT64),
        h.make_node("Sign", ["ints"], ["isign"]),
        h.make_node("ReduceL1", ["ints", "last"], ["il1"], keepdims=0),
        h.make_node("ReduceMin", ["ints", "seq"], ["imin"]),
        h.make_node("ReduceProd", ["ints", "last"], ["iprod"], keepdims=0),
        h.make_node("ArgMax", ["ints"], ["iamax"], axis=1),
    ]
    for n in nodes:
        n.name = n.output[0]
    graph = h.make_graph(
        nodes, "reductions", [f("x", ["batch", "sequence", 8])],
        [f("min", ["batch", "sequence"]), f("prod", ["batch", "sequence", 1]),
         f("l1", ["batch", "sequence", 1]), f("l2", ["batch", 8]),
         f("sumsq", ["batch", "sequence", 1]), f("lse", ["batch", "sequence"]),
         f("lse_seq", ["batch", 1, 8]), i("amax", ["batch", "sequence", 1]),
         i("amax_last", ["batch", "sequence"]), i("amin", ["batch", 8]),
         i("amin_last", ["batch", "sequence", 1]),
         f("sign", ["batch", "sequence", 8]),
         i("isign", ["batch", "sequence", 8]), i("il1", ["batch", "sequence"]),
         i("imin", ["batch", 1, 8]), i("iprod", ["batch", "sequence"]),
         i("iamax", ["batch", 1, 8])],
        [i64("last", [-1]), i64("seq", [1]),
         nh.from_array(np.array(2, np.float32), "two")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)


def rotary_length(path):
    """PhiMoE's rotary table length, as its TorchScript export computes it:
    the last of Range(0, sequence) + 1, cast to float, as the limit of a
    float Range (a size the importer follows through the Gather and the
    Cast), and a bad float start."""
    nodes = [
        h.make_node("Shape", ["input_ids"], ["shape"]),
        h.make_node("Gather", ["shape", "one"], ["seq"], axis=0),
        h.make_node("Range", ["zero", "seq", "one"], ["positions"]),
        h.make_node("Gather", ["positions", "minus_one"], ["last"], axis=0),
        h.make_node("Add", ["last", "one"], ["length"]),
        h.make_node("Cast", ["length"], ["length_f"], to=T.FLOAT),
        h.make_node("Range", ["zero_f", "length_f", "one_f"], ["t"]),
        h.make_node("Mul", ["t", "freq"], ["angles"]),
        h.make_node("Cos", ["angles"], ["cos"]),
    ]
    for n in nodes:
        n.name = n.output[0]
    graph = h.make_graph(
        nodes, "rotary_length",
        [h.make_tensor_value_info("input_ids", T.INT64,
                                  ["batch", "sequence"])],
        [h.make_tensor_value_info("cos", T.FLOAT, ["sequence"])],
        [i64("zero", 0), i64("one", 1), i64("minus_one", -1),
         nh.from_array(np.array(0, np.float32), "zero_f"),
         nh.from_array(np.array(1, np.float32), "one_f"),
         nh.from_array(np.array(0.25, np.float32), "freq")])
    save(graph, path)
    graph.node[6].input[0] = "half_f"
    graph.initializer.append(nh.from_array(np.array(0.5, np.float32),
                                           "half_f"))
    save(graph, path.replace(".onnx", "-bad-start.onnx"))


def bad(out):
    """Models the importer must refuse, each with one error."""
    x = h.make_tensor_value_info("x", T.FLOAT, ["batch", 4])
    y = h.make_tensor_value_info("y", T.FLOAT, None)
    reps = h.make_tensor_value_info("reps", T.INT64, [2])
    ax = h.make_tensor_value_info("ax", T.INT64, [])
    ind = h.make_tensor_value_info("ind", T.INT64, ["batch"])
    cases = {
        # Repeats that only the run knows.
        "tile-runtime.onnx": ([h.make_node("Tile", ["x", "reps"], ["y"],
                                           name="tile")], [x, reps], []),
        "tile-count.onnx": ([h.make_node("Tile", ["x", "three"], ["y"],
                                         name="tile")], [x],
                            [i64("three", [1, 1, 1])]),
        "tile-negative.onnx": ([h.make_node("Tile", ["x", "neg"], ["y"],
                                            name="tile")], [x],
                               [i64("neg", [1, -2])]),
        "gather-elements-rank.onnx": (
            [h.make_node("GatherElements", ["x", "ind"], ["y"], axis=1,
                         name="ge")], [x, ind], []),
        "gather-elements-range.onnx": (
            [h.make_node("GatherElements", ["x", "big"], ["y"], axis=1,
                         name="ge")], [x], [i64("big", [[0, 4]])]),
        "gathernd-batch-dims.onnx": (
            [h.make_node("GatherND", ["x", "pair"], ["y"], batch_dims=1,
                         name="gnd")], [x], [i64("pair", [[0], [1]])]),
        "gathernd-range.onnx": (
            [h.make_node("GatherND", ["img", "far"], ["y"], name="gnd")],
            [h.make_tensor_value_info("img", T.FLOAT, [1, 4, 8, 8])],
            [i64("far", [[0, 4]])]),
        "cumsum-axis.onnx": ([h.make_node("CumSum", ["x", "ax"], ["y"],
                                          name="cs")], [x, ax], []),
        "conv-group.onnx": (
            [h.make_node("Conv", ["img", "gw"], ["y"], group=2,
                         name="conv")],
            [h.make_tensor_value_info("img", T.FLOAT, [1, 4, 8, 8])],
            [nh.from_array(np.ones((4, 2, 3, 3), np.float32), "gw")]),
        "conv-same-dynamic.onnx": (
            [h.make_node("Conv", ["sig", "sw"], ["y"], auto_pad="SAME_UPPER",
                         name="conv")],
            [h.make_tensor_value_info("sig", T.FLOAT, [1, 2, "frames"])],
            [nh.from_array(np.ones((2, 2, 3), np.float32), "sw")]),
        "topk-large.onnx": (
            [h.make_node("TopK", ["x", "five"], ["y", "yi"], name="topk")],
            [x], [i64("five", [5])]),
        "topk-runtime.onnx": (
            [h.make_node("TopK", ["x", "kin"], ["y", "yi"], name="topk")],
            [x, h.make_tensor_value_info("kin", T.INT64, [1])], []),
        "onehot-values.onnx": (
            [h.make_node("OneHot", ["ind", "four", "three_f"], ["y"],
                         name="oh")],
            [ind], [i64("four", 4),
                    nh.from_array(np.zeros(3, np.float32), "three_f")]),
        "scatternd-updates.onnx": (
            [h.make_node("ScatterND", ["x", "rows", "x"], ["y"],
                         reduction="add", name="snd")],
            [x], [i64("rows", [[0], [1], [2]])]),
        "scatternd-range.onnx": (
            [h.make_node("ScatterND", ["img", "far", "upd"], ["y"],
                         name="snd")],
            [h.make_tensor_value_info("img", T.FLOAT, [4, 2])],
            [i64("far", [[4]]),
             nh.from_array(np.zeros((1, 2), np.float32), "upd")]),
        "mod-float-fmod0.onnx": (
            [h.make_node("Mod", ["x", "x"], ["y"], name="mod")], [x], []),
        "mod-zero.onnx": (
            [h.make_node("Mod", ["three", "zeros"], ["y"], name="mod")], [],
            [i64("three", [3, 4]), i64("zeros", [1, 0])]),
        "isinf-int.onnx": (
            [h.make_node("IsInf", ["ind"], ["y"], name="isinf")], [ind], []),
        "nonzero-scalar.onnx": (
            [h.make_node("NonZero", ["s"], ["y"], name="nz")],
            [h.make_tensor_value_info("s", T.FLOAT, [])], []),
    }
    for name, (nodes, inputs, inits) in cases.items():
        graph = h.make_graph(nodes, "bad", inputs, [y], inits)
        opset = 16 if name.startswith("scatternd") else 17
        model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
        model.ir_version = 8
        onnx.save(model, os.path.join(out, name))


def cross(path):
    """Self- and cross-attention as an encoder-decoder's decoder has them
    (4 heads of 8, no masks): layer 0 attends to its own states after a
    cache (Concat of past_k and the new keys), layer 1 to the encoder's
    states `enc` (keys and values projected from them), layer 2 to cached
    encoder keys and values given as inputs (cache_k, cache_v). Layers 1
    and 2 are cross-attention: raised with masformer.cross_attention."""
    rng = np.random.default_rng(5)
    heads, dim, hidden = 4, 8, 32
    nodes, inits = [], [i64("split", [0, 0, heads, dim]),
                        i64("merge", [0, 0, hidden]),
                        nh.from_array(np.array(dim ** -0.5, np.float32),
                                      "scale")]

    def node(op, ins, out, **attrs):
        nodes.append(h.make_node(op, ins, [out], name=out, **attrs))
        return out

    def proj(x, tag):
        w = f"w_{tag}"
        inits.append(nh.from_array(
            rng.normal(0, 0.3, (hidden, hidden)).astype(np.float32), w))
        y = node("MatMul", [x, w], f"{tag}_mm")
        y = node("Reshape", [y, "split"], f"{tag}_4d")
        return node("Transpose", [y], f"{tag}_t", perm=[0, 2, 1, 3])

    def attend(q, k, v, x, tag):
        kt = node("Transpose", [k], f"{tag}_kt", perm=[0, 1, 3, 2])
        s = node("MatMul", [q, kt], f"{tag}_qk")
        s = node("Mul", [s, "scale"], f"{tag}_scaled")
        p = node("Softmax", [s], f"{tag}_softmax", axis=-1)
        o = node("MatMul", [p, v], f"{tag}_pv")
        o = node("Transpose", [o], f"{tag}_o", perm=[0, 2, 1, 3])
        o = node("Reshape", [o, "merge"], f"{tag}_merged")
        return node("Add", [x, o], f"{tag}_out")

    k0 = node("Concat", ["past_k", proj("x", "k0")], "k0_all", axis=2)
    v0 = node("Concat", ["past_v", proj("x", "v0")], "v0_all", axis=2)
    h0 = attend(proj("x", "q0"), k0, v0, "x", "self")
    h1 = attend(proj(h0, "q1"), proj("enc", "k1"), proj("enc", "v1"), h0,
                "cross")
    h2 = attend(proj(h1, "q2"), "cache_k", "cache_v", h1, "cached")
    node("Identity", [h2], "out")
    f = T.FLOAT
    graph = h.make_graph(
        nodes, "cross",
        [h.make_tensor_value_info("x", f, ["batch", "sequence", hidden]),
         h.make_tensor_value_info("enc", f, ["batch", "enc_sequence",
                                             hidden]),
         h.make_tensor_value_info("past_k", f, ["batch", heads, "past", dim]),
         h.make_tensor_value_info("past_v", f, ["batch", heads, "past", dim]),
         h.make_tensor_value_info("cache_k", f, ["batch", heads, "cached",
                                                 dim]),
         h.make_tensor_value_info("cache_v", f, ["batch", heads, "cached",
                                                 dim])],
        [h.make_tensor_value_info("out", f, ["batch", "sequence", hidden])],
        inits)
    save(graph, path)


def sdpa_guard(path):
    """Attention as torch's SDPA export writes it with a boolean mask
    (transformers 5's default): the mask as Where(allowed, 0, -inf) added
    to the scores, then Where(IsNaN(p), 0, p) after the Softmax, zeros for
    queries whose every key is masked. Here padded positions are masked as
    queries too, so their rows are all -inf. Also IsNaN of Log(q) (NaN
    where q < 0) and IsInf of the additive mask, as outputs."""
    heads, dim = 4, 8
    f, b = T.FLOAT, T.BOOL
    nodes = [
        h.make_node("Cast", ["attention_mask"], ["m"], to=b),
        h.make_node("Unsqueeze", ["m", "ax13"], ["m_q"]),
        h.make_node("Unsqueeze", ["m", "ax12"], ["m_k"]),
        h.make_node("And", ["m_q", "m_k"], ["pad_ok"]),
        h.make_node("Shape", ["q"], ["q_shape"]),
        h.make_node("Slice", ["q_shape", "two", "three"], ["s"]),
        h.make_node("Concat", ["s", "s"], ["ss"], axis=0),
        h.make_node("ConstantOfShape", ["ss"], ["ones"],
                    value=nh.from_array(np.array([1], np.int64))),
        h.make_node("Trilu", ["ones"], ["tril"], upper=0),
        h.make_node("Cast", ["tril"], ["causal"], to=b),
        h.make_node("And", ["pad_ok", "causal"], ["allowed"]),
        h.make_node("Where", ["allowed", "zero", "ninf"], ["additive"]),
        h.make_node("Mul", ["q", "sqrt_scale"], ["qs"]),
        h.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
        h.make_node("Mul", ["kt", "sqrt_scale"], ["kts"]),
        h.make_node("MatMul", ["qs", "kts"], ["qk"]),
        h.make_node("Add", ["qk", "additive"], ["scores"]),
        h.make_node("Softmax", ["scores"], ["p"], axis=-1),
        h.make_node("IsNaN", ["p"], ["p_nan"]),
        h.make_node("Where", ["p_nan", "zero", "p"], ["p_ok"]),
        h.make_node("MatMul", ["p_ok", "v"], ["out"]),
        h.make_node("Log", ["q"], ["log_q"]),
        h.make_node("IsNaN", ["log_q"], ["nan_b"]),
        h.make_node("Cast", ["nan_b"], ["nan_flags"], to=f),
        h.make_node("IsInf", ["additive"], ["inf_b"], detect_positive=0),
        h.make_node("Cast", ["inf_b"], ["neg_inf_flags"], to=f),
    ]
    for n in nodes:
        n.name = n.output[0]
    x = ["batch", heads, "sequence", dim]
    graph = h.make_graph(
        nodes, "sdpa_guard",
        [h.make_tensor_value_info(n, f, x) for n in ("q", "k", "v")]
        + [h.make_tensor_value_info("attention_mask", T.INT64,
                                    ["batch", "sequence"])],
        [h.make_tensor_value_info("out", f, x),
         h.make_tensor_value_info("nan_flags", f, x),
         h.make_tensor_value_info("neg_inf_flags", f,
                                  ["batch", 1, "sequence", "sequence"])],
        [i64("ax13", [1, 3]), i64("ax12", [1, 2]), i64("two", [2]),
         i64("three", [3]),
         nh.from_array(np.array(0.0, np.float32), "zero"),
         nh.from_array(np.array(-np.inf, np.float32), "ninf"),
         nh.from_array(np.array(dim ** -0.25, np.float32), "sqrt_scale")])
    save(graph, path)


def empty_parts(path):
    """Slices and Split parts of size 0 that start at the dimension's end
    (Phi-3's q[..., rotary_dim:] when the rotary dimension is the head's),
    concatenated with the rest."""
    nodes = [
        h.make_node("Slice", ["x", "eight", "big", "two"], ["none"]),
        h.make_node("Slice", ["x", "zero_i", "eight", "two"], ["all"]),
        h.make_node("Mul", ["all", "half"], ["scaled"]),
        h.make_node("Concat", ["scaled", "none"], ["y"], axis=2),
        h.make_node("Split", ["x", "split"], ["p0", "p1"], axis=2),
        h.make_node("Concat", ["p1", "p0"], ["z"], axis=2),
    ]
    for n in nodes:
        n.name = n.output[0]
    x = ["batch", "sequence", 8]
    graph = h.make_graph(
        nodes, "empty_parts", [h.make_tensor_value_info("x", T.FLOAT, x)],
        [h.make_tensor_value_info("y", T.FLOAT, x),
         h.make_tensor_value_info("z", T.FLOAT, x)],
        [i64("eight", [8]), i64("big", [2 ** 62]), i64("two", [2]),
         i64("zero_i", [0]), i64("split", [8, 0]),
         nh.from_array(np.array(0.5, np.float32), "half")])
    save(graph, path)


def mod(path):
    """Mod: integers with fmod = 0 (the divisor's sign) and fmod = 1 (the
    dividend's), negative values on both sides; floats (fmod = 1); and
    constants folded on the host (Falcon's export under transformers 5)."""
    nodes = [
        h.make_node("Sub", ["n", "fifty"], ["signed"]),
        h.make_node("Mod", ["signed", "divisors"], ["floor_mod"]),
        h.make_node("Mod", ["signed", "divisors"], ["trunc_mod"], fmod=1),
        h.make_node("Mod", ["x", "fdiv"], ["float_mod"], fmod=1),
        h.make_node("Mod", ["c7", "cm3"], ["host_mod"]),
        h.make_node("Add", ["floor_mod", "host_mod"], ["floor_plus"]),
    ]
    for n in nodes:
        n.name = n.output[0]
    graph = h.make_graph(
        nodes, "mod",
        [h.make_tensor_value_info("n", T.INT64, ["batch", 5]),
         h.make_tensor_value_info("x", T.FLOAT, ["batch", 5])],
        [h.make_tensor_value_info("floor_plus", T.INT64, ["batch", 5]),
         h.make_tensor_value_info("trunc_mod", T.INT64, ["batch", 5]),
         h.make_tensor_value_info("float_mod", T.FLOAT, ["batch", 5])],
        [i64("fifty", [50]), i64("divisors", [3, -3, 4, -5, 7]),
         i64("c7", [-7]), i64("cm3", [3]),
         nh.from_array(np.array([0.7, -0.7, 0.3, 1.5, -0.2], np.float32),
                       "fdiv")])
    save(graph, path)


def bias_window(path):
    """A decoder's mask as transformers 5 writes T5's: Where(causal, bias,
    -inf), the bias a table gathered at min(|pos - key|, 16) (T5's
    buckets). The 16 of the bias is no window: the mask must be raised
    causal with a full span, though at probe sizes up to 16 no pair is 16
    apart."""
    heads, dim = 2, 4
    rng = np.random.default_rng(3)
    nodes = [
        h.make_node("Shape", ["q"], ["q_shape"]),
        h.make_node("Slice", ["q_shape", "two", "three"], ["s"]),
        h.make_node("Squeeze", ["s"], ["s0"]),
        h.make_node("Range", ["zero_s", "s0", "one_s"], ["r"]),
        h.make_node("Unsqueeze", ["r", "ax1"], ["pos"]),
        h.make_node("Unsqueeze", ["r", "ax0"], ["key"]),
        h.make_node("LessOrEqual", ["key", "pos"], ["causal"]),
        h.make_node("Sub", ["pos", "key"], ["dist"]),
        h.make_node("Abs", ["dist"], ["adist"]),
        h.make_node("Min", ["adist", "sixteen"], ["bucket"]),
        h.make_node("Gather", ["table", "bucket"], ["bias_skh"]),
        h.make_node("Transpose", ["bias_skh"], ["bias"], perm=[2, 0, 1]),
        h.make_node("Where", ["causal", "bias", "ninf"], ["mask"]),
        h.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
        h.make_node("MatMul", ["q", "kt"], ["qk"]),
        h.make_node("Add", ["qk", "mask"], ["scores"]),
        h.make_node("Softmax", ["scores"], ["p"], axis=-1),
        h.make_node("MatMul", ["p", "v"], ["out"]),
    ]
    for n in nodes:
        n.name = n.output[0]
    x = ["batch", heads, "sequence", dim]
    graph = h.make_graph(
        nodes, "bias_window",
        [h.make_tensor_value_info(n, T.FLOAT, x) for n in ("q", "k", "v")],
        [h.make_tensor_value_info("out", T.FLOAT, x)],
        [i64("two", [2]), i64("three", [3]), i64("zero_s", 0),
         i64("one_s", 1), i64("ax0", [0]), i64("ax1", [1]),
         i64("sixteen", 16),
         nh.from_array(rng.normal(0, 1, (17, heads)).astype(np.float32),
                       "table"),
         nh.from_array(np.array(-np.inf, np.float32), "ninf")])
    save(graph, path)


def flat_views(path):
    """Attention on heads flattened into the batch whose probabilities are
    viewed [B, H, S, T] and flattened again before P V (XGLM's export under
    transformers 5): scores [B*H, S, S], a causal mask added on the 4-D
    view, Softmax on the flat scores."""
    b, heads, seq, dim = 2, 4, 6, 8
    flat = [b * heads, seq, seq]
    causal = np.triu(np.full((seq, seq), -np.inf, np.float32), 1)
    nodes = [
        h.make_node("Reshape", ["q", "flat_qkv"], ["qf"]),
        h.make_node("Reshape", ["k", "flat_qkv"], ["kf"]),
        h.make_node("Reshape", ["v", "flat_qkv"], ["vf"]),
        h.make_node("Transpose", ["kf"], ["kft"], perm=[0, 2, 1]),
        h.make_node("MatMul", ["qf", "kft"], ["s3"]),
        h.make_node("Mul", ["s3", "scale"], ["s3s"]),
        h.make_node("Reshape", ["s3s", "four_d"], ["s4"]),
        h.make_node("Add", ["s4", "causal"], ["s4m"]),
        h.make_node("Reshape", ["s4m", "three_d"], ["s3m"]),
        h.make_node("Softmax", ["s3m"], ["p3"], axis=-1),
        h.make_node("Reshape", ["p3", "four_d"], ["p4"]),
        h.make_node("Reshape", ["p4", "three_d"], ["p3b"]),
        h.make_node("MatMul", ["p3b", "vf"], ["o3"]),
        h.make_node("Reshape", ["o3", "out_shape"], ["out"]),
    ]
    for n in nodes:
        n.name = n.output[0]
    x = [b, heads, seq, dim]
    graph = h.make_graph(
        nodes, "flat_views",
        [h.make_tensor_value_info(n, T.FLOAT, x) for n in ("q", "k", "v")],
        [h.make_tensor_value_info("out", T.FLOAT, x)],
        [i64("flat_qkv", [b * heads, seq, dim]), i64("four_d", x[:3] + [seq]),
         i64("three_d", flat), i64("out_shape", x),
         nh.from_array(causal, "causal"),
         nh.from_array(np.array(dim ** -0.5, np.float32), "scale")])
    save(graph, path)


def sdpa_half(path):
    """torch's SDPA export of a float16 model: Q K^T in f16, the scores cast
    to f32 for the mask, the Softmax and the NaN guard, V cast to f32 and
    P V in f32, the output f32. The raise takes Q, K and V extended to f32
    (the model never rounds P V to f16)."""
    heads, dim = 4, 8
    f, f16 = T.FLOAT, T.FLOAT16
    nodes = [
        h.make_node("Mul", ["q", "sqrt_scale"], ["qs"]),
        h.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
        h.make_node("Mul", ["kt", "sqrt_scale"], ["kts"]),
        h.make_node("MatMul", ["qs", "kts"], ["qk16"]),
        h.make_node("Cast", ["qk16"], ["qk"], to=f),
        h.make_node("Add", ["qk", "causal"], ["scores"]),
        h.make_node("Softmax", ["scores"], ["p"], axis=-1),
        h.make_node("IsNaN", ["p"], ["p_nan"]),
        h.make_node("Where", ["p_nan", "zero", "p"], ["p_ok"]),
        h.make_node("Cast", ["v"], ["v32"], to=f),
        h.make_node("MatMul", ["p_ok", "v32"], ["out"]),
    ]
    for n in nodes:
        n.name = n.output[0]
    seq = 8
    x = ["batch", heads, seq, dim]
    causal = np.triu(np.full((seq, seq), -np.inf, np.float32), 1)
    graph = h.make_graph(
        nodes, "sdpa_half",
        [h.make_tensor_value_info(n, f16, x) for n in ("q", "k", "v")],
        [h.make_tensor_value_info("out", f, x)],
        [nh.from_array(causal, "causal"),
         nh.from_array(np.array(0.0, np.float32), "zero"),
         nh.from_array(np.array(dim ** -0.25, np.float16), "sqrt_scale")])
    save(graph, path)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    cumsum(os.path.join(out, "cumsum.onnx"))
    gptj(os.path.join(out, "gptj.onnx"))
    conv(os.path.join(out, "conv.onnx"))
    gathernd(os.path.join(out, "gathernd.onnx"))
    moe(os.path.join(out, "moe.onnx"))
    bigcode_eager(os.path.join(out, "bigcode-eager.onnx"))
    reductions(os.path.join(out, "reductions.onnx"))
    rotary_length(os.path.join(out, "rotary-length.onnx"))
    cross(os.path.join(out, "cross.onnx"))
    sdpa_guard(os.path.join(out, "sdpa-guard.onnx"))
    empty_parts(os.path.join(out, "empty-parts.onnx"))
    mod(os.path.join(out, "mod.onnx"))
    bias_window(os.path.join(out, "bias-window.onnx"))
    flat_views(os.path.join(out, "flat-views.onnx"))
    sdpa_half(os.path.join(out, "sdpa-half.onnx"))
    bad(out)


if __name__ == "__main__":
    main()
