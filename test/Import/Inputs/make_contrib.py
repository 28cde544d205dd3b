#!/usr/bin/env python3
"""Writes small ONNX models built around onnxruntime's contrib ops (the
com.microsoft domain, which its transformer optimizer writes) into DIR, each
op in the variants masformer takes:

  norms.onnx      SkipLayerNormalization (bias, beta, the sum as output 3),
                  SkipSimplifiedLayerNormalization (with and without bias),
                  SimplifiedLayerNormalization, FastGelu (with and without
                  bias), BiasGelu, Gelu, QuickGelu and ONNX's Gelu (opset 20,
                  exact and tanh);
  embed.onnx      EmbedLayerNormalization with segments and a mask (all three
                  outputs), and without segments, with position_ids;
  attention.onnx  Attention (packed Q/K/V weights) with a 2-D raw mask, the
                  1-D key lengths, the [2B] ends and starts, a 3-D mask, an
                  attention_bias, qkv_hidden_sizes, a scale and a
                  mask_filter_value, and unidirectional with a mask;
  mha.onnx        MultiHeadAttention: cross-attention (keys and values
                  projected from encoder states of another length) with a
                  bias and a 2-D key_padding_mask, or an attention_bias;
                  self-attention with a mask, and unidirectional;
  and models each of which masformer refuses with one error
  (bad-*.onnx: see test/Import/contrib.test).

    make_contrib.py DIR

Batch and sequences are dynamic; onnxruntime is the reference.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

HIDDEN = 16
HEADS = 2
RNG = np.random.default_rng(3)


def f32(name, *shape, scale=0.5):
    return nh.from_array(
        (RNG.standard_normal(shape) * scale).astype(np.float32), name)


def i64(name, values):
    return nh.from_array(np.array(values, np.int64), name)


def ms(op, inputs, outputs, **attrs):
    return h.make_node(op, inputs, outputs, domain="com.microsoft", **attrs)


def save(graph, path, opset=17):
    model = h.make_model(graph, opset_imports=[
        h.make_opsetid("", opset), h.make_opsetid("com.microsoft", 1)])
    model.ir_version = 9
    onnx.save(model, path)


def floats(name, *dims):
    return h.make_tensor_value_info(name, T.FLOAT, list(dims))


def ints(name, *dims, elem=T.INT32):
    return h.make_tensor_value_info(name, elem, list(dims))


def norms(path):
    B, S = "batch", "sequence"
    nodes = [
        ms("SkipLayerNormalization",
           ["x", "skip", "gamma", "beta", "bias"], ["ln", "", "", "sum"],
           epsilon=1e-5),
        ms("SkipSimplifiedLayerNormalization", ["sum", "x", "gamma"],
           ["rms"], epsilon=1e-6),
        ms("SkipSimplifiedLayerNormalization", ["rms", "skip", "gamma",
                                                "bias"], ["rms_b", "", "",
                                                          "rms_sum"],
           epsilon=1e-6),
        h.make_node("SimplifiedLayerNormalization", ["ln", "gamma"],
                    ["simple"], axis=-1, epsilon=1e-6),
        ms("FastGelu", ["x", "bias"], ["fast_bias"]),
        ms("FastGelu", ["x"], ["fast"]),
        ms("BiasGelu", ["x", "bias"], ["bias_gelu"]),
        ms("Gelu", ["x"], ["gelu"]),
        ms("QuickGelu", ["x"], ["quick"], alpha=1.5),
        h.make_node("Gelu", ["x"], ["onnx_gelu"]),
        h.make_node("Gelu", ["x"], ["onnx_gelu_tanh"], approximate="tanh"),
    ]
    outs = ["ln", "sum", "rms", "rms_b", "rms_sum", "simple", "fast_bias",
            "fast", "bias_gelu", "gelu", "quick", "onnx_gelu",
            "onnx_gelu_tanh"]
    graph = h.make_graph(
        nodes, "norms",
        [floats("x", B, S, HIDDEN), floats("skip", B, S, HIDDEN)],
        [floats(o, B, S, HIDDEN) for o in outs],
        [f32("gamma", HIDDEN, scale=1.0), f32("beta", HIDDEN),
         f32("bias", HIDDEN)])
    save(graph, path, opset=20)


def embed(path):
    B, S = "batch", "sequence"
    nodes = [
        ms("EmbedLayerNormalization",
           ["input_ids", "segment_ids", "word", "position", "segment",
            "gamma", "beta", "attention_mask"],
           ["embedded", "mask_index", "embedding_sum"], epsilon=1e-12),
        ms("EmbedLayerNormalization",
           ["input_ids", "", "word", "position", "", "gamma", "beta"],
           ["plain", "zeros"], epsilon=1e-5),
    ]
    graph = h.make_graph(
        nodes, "embed",
        [ints("input_ids", B, S), ints("segment_ids", B, S),
         ints("attention_mask", B, S)],
        [floats("embedded", B, S, HIDDEN), ints("mask_index", B),
         floats("embedding_sum", B, S, HIDDEN), floats("plain", B, S, HIDDEN),
         ints("zeros", B)],
        [f32("word", 100, HIDDEN), f32("position", 64, HIDDEN),
         f32("segment", 100, HIDDEN), f32("gamma", HIDDEN, scale=1.0),
         f32("beta", HIDDEN)])
    save(graph, path)


def attention(path):
    B, S = "batch", "sequence"
    total = 3 * HIDDEN
    nodes = [
        # The key lengths, their ends and starts, from the padding mask.
        h.make_node("ReduceSum", ["attention_mask", "axis1"], ["lengths64"],
                    keepdims=0),
        h.make_node("Cast", ["lengths64"], ["lengths"], to=T.INT32),
        h.make_node("Div", ["lengths", "three"], ["starts"]),
        h.make_node("Concat", ["lengths", "starts"], ["ends_starts"], axis=0),
        ms("Attention", ["x", "w", "b", "attention_mask"], ["raw2d"],
           num_heads=HEADS),
        ms("Attention", ["x", "w", "b", "lengths"], ["lengths1d"],
           num_heads=HEADS),
        ms("Attention", ["x", "w", "b", "ends_starts"], ["ends_starts1d"],
           num_heads=HEADS),
        ms("Attention", ["x", "w", "b", "pair_mask"], ["raw3d"],
           num_heads=HEADS, mask_filter_value=-50.0),
        ms("Attention", ["x", "w", "b", "", "", "attention_bias"],
           ["biased"], num_heads=HEADS, scale=0.3),
        ms("Attention", ["x", "w_sizes", "b", "attention_mask"],
           ["sizes"], num_heads=HEADS, qkv_hidden_sizes=[16, 16, 16]),
        # (onnxruntime 1.23 crashes on Attention without a bias.)
        ms("Attention", ["x", "w", "b", "attention_mask"], ["causal"],
           num_heads=HEADS, unidirectional=1),
    ]
    outs = [("raw2d", HIDDEN), ("lengths1d", HIDDEN),
            ("ends_starts1d", HIDDEN), ("raw3d", HIDDEN), ("biased", HIDDEN),
            ("sizes", HIDDEN), ("causal", HIDDEN)]
    graph = h.make_graph(
        nodes, "attention",
        [floats("x", B, S, HIDDEN), ints("attention_mask", B, S),
         ints("pair_mask", B, S, S),
         floats("attention_bias", 1, HEADS, S, S)],
        [floats(o, B, S, n) for o, n in outs],
        [f32("w", HIDDEN, total), f32("b", total),
         f32("w_sizes", HIDDEN, total),
         i64("axis1", [1]),
         nh.from_array(np.array(3, np.int32), "three")])
    save(graph, path)


def mha(path):
    B, S, T_ = "batch", "sequence", "keys"
    nodes = [h.make_node("MatMul", [src, w], [out]) for src, w, out in [
        ("x", "wq", "qx"), ("x", "wk", "kx"), ("x", "wv", "vx"),
        ("enc", "wk", "ke"), ("enc", "wv", "ve")]]
    nodes += [
        # Cross-attention: keys and values projected from other states.
        ms("MultiHeadAttention", ["qx", "ke", "ve", "bias", "enc_mask"],
           ["cross"], num_heads=HEADS),
        ms("MultiHeadAttention", ["qx", "ke", "ve", "", "", "attention_bias"],
           ["biased"], num_heads=HEADS, scale=0.25),
        # Self-attention.
        ms("MultiHeadAttention", ["qx", "kx", "vx", "bias", "attention_mask"],
           ["self"], num_heads=HEADS),
        ms("MultiHeadAttention", ["qx", "kx", "vx"], ["causal"],
           num_heads=HEADS, unidirectional=1),
    ]
    graph = h.make_graph(
        nodes, "mha",
        [floats("x", B, S, HIDDEN), floats("enc", B, T_, HIDDEN),
         ints("enc_mask", B, T_), ints("attention_mask", B, S),
         floats("attention_bias", B, HEADS, S, T_)],
        [floats(o, B, S, HIDDEN) for o in ["cross", "biased", "self",
                                           "causal"]],
        [f32("bias", 3 * HIDDEN), f32("wq", HIDDEN, HIDDEN),
         f32("wk", HIDDEN, HIDDEN), f32("wv", HIDDEN, HIDDEN)])
    save(graph, path)


def gqa(path, cache, ragged=True):
    """GroupQueryAttention as onnxruntime-genai writes it (4 query heads, 2
    key/value heads of 16, as onnxruntime requires for its rotary): packed Q/K/V with the rotary embedding on whole
    heads; separate Q, K, V with interleaved rotary on half of each head, a
    local window of 2 and a softcap; (without a cache) no rotary, with an
    attention_bias. With a cache, seqlens_k comes from `attention_mask`
    [B, P + S] (rows shorter than the cache: onnxruntime-genai's batches);
    without one every row is S long."""
    B, S, P, T_ = "batch", "sequence", "past", "total"
    hq, hkv, d = 4, 2, 16
    positions = 32
    inv = 1.0 / (10000 ** (np.arange(0, d, 2) / d))
    ang = np.outer(np.arange(positions), inv)
    cos = nh.from_array(np.cos(ang).astype(np.float32), "cos")
    sin = nh.from_array(np.sin(ang).astype(np.float32), "sin")
    nodes = [
        h.make_node("MatMul", ["x", "w_qkv"], ["qkv"]),
        h.make_node("MatMul", ["x", "w_q"], ["q"]),
        h.make_node("MatMul", ["x", "w_k"], ["k"]),
        h.make_node("MatMul", ["x", "w_v"], ["v"]),
    ]
    if cache and ragged:
        # As onnxruntime-genai: seqlens_k = the mask's row sums - 1, the
        # total length its width.
        nodes += [
            h.make_node("ReduceSum", ["attention_mask", "axis1"], ["sum64"],
                        keepdims=0),
            h.make_node("Sub", ["sum64", "one"], ["lens64"]),
            h.make_node("Shape", ["attention_mask"], ["m_shape"]),
            h.make_node("Gather", ["m_shape", "i1s"], ["total64"], axis=0),
        ]
    else:
        # Rows all P + S long (a prompt's: onnxruntime's outputs for the
        # padding queries of shorter rows are its own).
        nodes += [
            h.make_node("Shape", ["x"], ["x_shape"]),
            h.make_node("Gather", ["x_shape", "i1s"], ["new64"], axis=0),
            h.make_node("Gather", ["x_shape", "i0"], ["rows"], axis=0),
        ] + ([
            h.make_node("Shape", ["past_key"], ["past_shape"]),
            h.make_node("Gather", ["past_shape", "i2s"], ["past64"], axis=0),
            h.make_node("Add", ["past64", "new64"], ["total64"]),
        ] if cache else [
            h.make_node("Identity", ["new64"], ["total64"]),
        ]) + [
            h.make_node("Sub", ["total64", "one"], ["last64"]),
            h.make_node("Expand", ["last64", "rows"], ["lens64"]),
        ]
    nodes += [
        h.make_node("Cast", ["lens64"], ["seqlens_k"], to=T.INT32),
        h.make_node("Cast", ["total64"], ["total_len"], to=T.INT32),
    ]
    past = ["past_key", "past_value"] if cache else ["", ""]
    common = dict(num_heads=hq, kv_num_heads=hkv)
    nodes += [
        ms("GroupQueryAttention",
           ["qkv", "", ""] + past + ["seqlens_k", "total_len", "cos", "sin"],
           ["packed", "present_key", "present_value"], do_rotary=1,
           scale=0.5, **common),
        ms("GroupQueryAttention",
           ["q", "k", "v"] + past + ["seqlens_k", "total_len", "cos",
                                     "sin"],
           ["windowed", "windowed_key", "windowed_value"], do_rotary=1,
           rotary_interleaved=1,
           local_window_size=2, softcap=2.0, **common),
    ]
    if not cache:
        # (With a cache, the bias's key length is the model's own symbol,
        # not past + sequence: a dynamic import cannot match them.)
        nodes.append(ms("GroupQueryAttention",
                        ["q", "k", "v", "", "", "seqlens_k", "total_len", "",
                         "", "", "attention_bias"],
                        ["biased", "biased_key", "biased_value"], **common))
    total = T_ if cache else S
    inputs = [floats("x", B, S, HIDDEN)]
    if not cache:
        inputs.append(floats("attention_bias", 1, hq, S, S))
    if cache and ragged:
        inputs.append(ints("attention_mask", B, total, elem=T.INT64))
    if cache:
        inputs += [floats("past_key", B, hkv, P, d),
                   floats("past_value", B, hkv, P, d)]
    names = ["packed", "windowed"] + ([] if cache else ["biased"])
    outputs = [floats(o, B, S, hq * d) for o in names]
    outputs += [floats(o + suffix, B, hkv, total, d)
                for o in ["present", "windowed", "biased"][:len(names)]
                for suffix in ["_key", "_value"]]
    graph = h.make_graph(
        nodes, "gqa", inputs, outputs,
        [f32("w_qkv", HIDDEN, (hq + 2 * hkv) * d), f32("w_q", HIDDEN, hq * d),
         f32("w_k", HIDDEN, hkv * d), f32("w_v", HIDDEN, hkv * d), cos, sin,
         i64("axis1", [1]), i64("one", 1), i64("i0", [0]),
         nh.from_array(np.array(1, np.int64), "i1s"),
         nh.from_array(np.array(2, np.int64), "i2s")])
    save(graph, path)


def bad(path, node, inputs, initializers=(), outputs=None):
    """A one-node model whose node (named "bad") masformer refuses."""
    node.name = "bad"
    outputs = outputs or [floats(o, "batch", "sequence", HIDDEN)
                          for o in node.output if o]
    graph = h.make_graph([node], "bad", inputs, outputs, list(initializers))
    save(graph, path)


def bad_models(d):
    x = floats("x", "batch", "sequence", HIDDEN)
    w, b = f32("w", HIDDEN, 3 * HIDDEN), f32("b", 3 * HIDDEN)
    bad(os.path.join(d, "bad-attention-past.onnx"),
        ms("Attention", ["x", "w", "b", "", "past"], ["y", "present"],
           num_heads=HEADS),
        [x, floats("past", 2, "batch", HEADS, "past_sequence", 8)], [w, b],
        [floats("y", "batch", "sequence", HIDDEN),
         floats("present", 2, "batch", HEADS, "total", 8)])
    bad(os.path.join(d, "bad-attention-heads.onnx"),
        ms("Attention", ["x", "w", "b"], ["y"], num_heads=3), [x], [w, b])
    bad(os.path.join(d, "bad-attention-value-heads.onnx"),
        ms("Attention", ["x", "w40"], ["y"], num_heads=HEADS,
           qkv_hidden_sizes=[16, 16, 8]), [x], [f32("w40", HIDDEN, 40)],
        [floats("y", "batch", "sequence", 8)])
    bad(os.path.join(d, "bad-attention-rotary.onnx"),
        ms("Attention", ["x", "w", "b"], ["y"], num_heads=HEADS,
           do_rotary=1), [x], [w, b])
    bad(os.path.join(d, "bad-mha-packed.onnx"),
        ms("MultiHeadAttention", ["qkv"], ["y"], num_heads=HEADS),
        [floats("qkv", "batch", "sequence", HEADS, 3, 8)])
    bad(os.path.join(d, "bad-skipln-mean.onnx"),
        ms("SkipLayerNormalization", ["x", "x", "gamma"], ["y", "mean"]),
        [x], [f32("gamma", HIDDEN)],
        [floats("y", "batch", "sequence", HIDDEN),
         floats("mean", "batch", "sequence", 1)])
    bad(os.path.join(d, "bad-embed-segments.onnx"),
        ms("EmbedLayerNormalization",
           ["input_ids", "segment_ids", "word", "position", "", "gamma",
            "beta"], ["y"]),
        [ints("input_ids", "batch", "sequence"),
         ints("segment_ids", "batch", "sequence")],
        [f32("word", 100, HIDDEN), f32("position", 64, HIDDEN),
         f32("gamma", HIDDEN), f32("beta", HIDDEN)])
    bad(os.path.join(d, "bad-gqa-window-cache.onnx"),
        ms("GroupQueryAttention",
           ["qkv", "", "", "past_key", "past_value", "seqlens_k", "total"],
           ["y", "present_key", "present_value"], num_heads=2, kv_num_heads=1,
           local_window_size=4, sliding_window_cache=1),
        [floats("qkv", "batch", "sequence", 64),
         floats("past_key", "batch", 1, "past", 16),
         floats("past_value", "batch", 1, "past", 16),
         ints("seqlens_k", "batch"), ints("total")],
        outputs=[floats("y", "batch", "sequence", 32),
                 floats("present_key", "batch", 1, "total", 16),
                 floats("present_value", "batch", 1, "total", 16)])
    bad(os.path.join(d, "bad-gelu-approximate.onnx"),
        h.make_node("Gelu", ["x"], ["y"], approximate="erf"), [x])


def main():
    d = sys.argv[1]
    os.makedirs(d, exist_ok=True)
    norms(os.path.join(d, "norms.onnx"))
    embed(os.path.join(d, "embed.onnx"))
    attention(os.path.join(d, "attention.onnx"))
    mha(os.path.join(d, "mha.onnx"))
    gqa(os.path.join(d, "gqa.onnx"), cache=False)
    gqa(os.path.join(d, "gqa-cache.onnx"), cache=True)
    gqa(os.path.join(d, "gqa-steps.onnx"), cache=True, ragged=False)
    bad_models(d)


if __name__ == "__main__":
    main()
