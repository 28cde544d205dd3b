#!/usr/bin/env python3
"""The MASFormer rewrite of a model in onnxruntime-genai's format, run by
onnxruntime: a decoder whose layers are com.microsoft.GroupQueryAttention
nodes (Q, K, V packed, rotary inside, a KV cache in and out; random
weights, 8 layers, d_model 1024, 16 query heads and 4 key/value heads of
64), against its rewrite by `masformer-opt --masformer-rewrite-spans`
(windows exported as the node's local_window_size; by default 2 layers full
and windows of 512 elsewhere), in one run, batch 1:

  - the prompt: S tokens with an empty cache;
  - a decode step: 1 token after a cache of S - 1.

Reports both times and their ratio next to the ideal ratio of the
attention's work (pairs of the causal triangle, or per decode step keys
read) and of the whole model's FLOPs.

The same two models compiled by masformer-compile (the rewrite by
`--spans`) and run by masformer-run in the same run are the second pair of
columns: the compiler's window kernels against its full ones, and both
against onnxruntime.

  python3 bench/gqa_window_ort.py [--seqs 2048 4096 8192] [--spans "span=window:512 num-full=2"]
      [--work /tmp/masformer-bench-gqa] [--threads N] [--no-compiled] [--int4]
      [--precision bf16] [--runs prompt step]

With --int4 the model's MatMuls are quantized first, as onnxruntime-genai's
`-p int4` does: onnxruntime runs its int4 kernels, the compiled model the
weights dequantized in f32 (docs/import.md, "Quantized weights").

Needs a build (build/bin/masformer-opt, masformer-compile, masformer-run),
numpy, onnx, onnxruntime.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from machine import describe

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYERS, HIDDEN, HQ, HKV, D, FFN, VOCAB, MAXPOS = 8, 1024, 16, 4, 64, 2816, 32000, 16384


def make_model(path):
    rng = np.random.default_rng(0)

    def w(name, *shape):
        return nh.from_array(
            (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(
                np.float32), name)

    inits = [w("embed", VOCAB, HIDDEN), w("lm_head", HIDDEN, VOCAB),
             nh.from_array(np.ones(HIDDEN, np.float32), "norm"),
             nh.from_array(np.array([1], np.int64), "axis1"),
             nh.from_array(np.array(1, np.int64), "one"),
             nh.from_array(np.array(1, np.int64), "idx1")]
    inv = 1.0 / (10000 ** (np.arange(0, D, 2) / D))
    ang = np.outer(np.arange(MAXPOS), inv)
    inits += [nh.from_array(np.cos(ang).astype(np.float32), "cos"),
              nh.from_array(np.sin(ang).astype(np.float32), "sin")]
    nodes = [
        h.make_node("ReduceSum", ["attention_mask", "axis1"], ["sum"],
                    keepdims=0),
        h.make_node("Sub", ["sum", "one"], ["last"]),
        h.make_node("Cast", ["last"], ["seqlens_k"], to=T.INT32),
        h.make_node("Shape", ["attention_mask"], ["mshape"]),
        h.make_node("Gather", ["mshape", "idx1"], ["total64"], axis=0),
        h.make_node("Cast", ["total64"], ["total"], to=T.INT32),
        h.make_node("Gather", ["embed", "input_ids"], ["x0"]),
    ]
    inputs = [h.make_tensor_value_info("input_ids", T.INT64,
                                       ["batch", "sequence"]),
              h.make_tensor_value_info("attention_mask", T.INT64,
                                       ["batch", "total_sequence"])]
    outputs = [h.make_tensor_value_info("logits", T.FLOAT,
                                        ["batch", "sequence", VOCAB])]
    x = "x0"
    for i in range(LAYERS):
        p = f"l{i}_"
        inits += [w(p + "qkv", HIDDEN, (HQ + 2 * HKV) * D),
                  w(p + "o", HQ * D, HIDDEN), w(p + "gate", HIDDEN, FFN),
                  w(p + "up", HIDDEN, FFN), w(p + "down", FFN, HIDDEN)]
        past = [f"past_key_values.{i}.key", f"past_key_values.{i}.value"]
        present = [f"present.{i}.key", f"present.{i}.value"]
        for n in past:
            inputs.append(h.make_tensor_value_info(
                n, T.FLOAT, ["batch", HKV, "past_sequence", D]))
        for n in present:
            outputs.append(h.make_tensor_value_info(
                n, T.FLOAT, ["batch", HKV, "total_sequence", D]))
        nodes += [
            h.make_node("SimplifiedLayerNormalization", [x, "norm"],
                        [p + "n1"], epsilon=1e-5),
            h.make_node("MatMul", [p + "n1", p + "qkv"], [p + "qkv_out"]),
            h.make_node("GroupQueryAttention",
                        [p + "qkv_out", "", ""] + past +
                        ["seqlens_k", "total", "cos", "sin"],
                        [p + "att"] + present, domain="com.microsoft",
                        num_heads=HQ, kv_num_heads=HKV, do_rotary=1,
                        local_window_size=-1),
            h.make_node("MatMul", [p + "att", p + "o"], [p + "att_o"]),
            h.make_node("SkipSimplifiedLayerNormalization",
                        [p + "att_o", x, "norm"], [p + "n2", "", "",
                                                   p + "res"],
                        domain="com.microsoft", epsilon=1e-5),
            h.make_node("MatMul", [p + "n2", p + "gate"], [p + "g"]),
            h.make_node("Sigmoid", [p + "g"], [p + "gs"]),
            h.make_node("Mul", [p + "g", p + "gs"], [p + "silu"]),
            h.make_node("MatMul", [p + "n2", p + "up"], [p + "u"]),
            h.make_node("Mul", [p + "silu", p + "u"], [p + "gu"]),
            h.make_node("MatMul", [p + "gu", p + "down"], [p + "ffn"]),
            h.make_node("Add", [p + "res", p + "ffn"], [p + "out"]),
        ]
        x = p + "out"
    nodes += [h.make_node("SimplifiedLayerNormalization", [x, "norm"],
                          ["final"], epsilon=1e-5),
              h.make_node("MatMul", ["final", "lm_head"], ["logits"])]
    model = h.make_model(h.make_graph(nodes, "gqa", inputs, outputs, inits),
                         opset_imports=[h.make_opsetid("", 17),
                                        h.make_opsetid("com.microsoft", 1)])
    model.ir_version = 9
    onnx.save(model, path)


def feeds(s, past):
    f = {"input_ids": np.arange(s, dtype=np.int64)[None] % VOCAB,
         "attention_mask": np.ones((1, past + s), np.int64)}
    rng = np.random.default_rng(1)
    for i in range(LAYERS):
        for t in ("key", "value"):
            f[f"past_key_values.{i}.{t}"] = rng.standard_normal(
                (1, HKV, past, D)).astype(np.float32)
    return f


def timed(sess, f, reps):
    sess.run(None, f)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        sess.run(None, f)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def compiled_time(lib, f, reps, work):
    """masformer-run's median time (s) of `lib` on feeds `f`."""
    args = [os.path.join(ROOT, "build", "bin", "masformer-run"), lib]
    for name, x in f.items():
        path = os.path.join(work, name + ".npy")
        np.save(path, x)
        args += ["--input", f"{name}={path}"]
    args += ["--output-dir", os.path.join(work, "out"), "--bench", str(reps)]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode:
        sys.exit(r.stderr)
    line = next(x for x in r.stdout.splitlines() if x.startswith("median"))
    return float(line.split(":")[1].split()[0]) / 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seqs", type=int, nargs="+", default=[2048, 4096, 8192])
    ap.add_argument("--spans", default="span=window:512 num-full=2")
    ap.add_argument("--work", default="/tmp/masformer-bench-gqa")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--no-compiled", action="store_true",
                    help="onnxruntime only")
    ap.add_argument("--runs", nargs="+", choices=["prompt", "step"],
                    default=["prompt", "step"])
    ap.add_argument("--precision", default="",
                    help="masformer-compile --precision (bf16: products on "
                         "bf16 weights, half the bytes a decode step reads)")
    ap.add_argument("--int4", action="store_true",
                    help="the model's MatMuls quantized as onnxruntime-genai's "
                         "-p int4 does (MatMulNBits, 4-bit symmetric blocks of "
                         "32, accuracy_level 4): onnxruntime runs its int4 "
                         "kernels, masformer the dequantized weights")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    print(describe())
    print(f"onnxruntime {ort.__version__}; {LAYERS} layers, d_model {HIDDEN}, "
          f"{HQ} query / {HKV} key-value heads of {D}; spans: {a.spans}"
          + (f"; compiled --precision={a.precision}" if a.precision else ""))
    full = os.path.join(a.work, "gqa.onnx")
    make_model(full)
    if a.int4:
        import logging

        from onnxruntime.quantization import matmul_nbits_quantizer as mnq
        logging.disable(logging.INFO)
        config = mnq.DefaultWeightOnlyQuantConfig(
            block_size=32, is_symmetric=True, accuracy_level=4)
        q = mnq.MatMulNBitsQuantizer(onnx.load(full), algo_config=config)
        q.process()
        full = os.path.join(a.work, "gqa-int4.onnx")
        onnx.save(q.model.model, full)
        n = sum(x.op_type == "MatMulNBits" for x in onnx.load(full).graph.node)
        print(f"int4: {n} MatMulNBits (4-bit symmetric blocks of 32, "
              "accuracy_level 4)")
    rewritten = full.replace(".onnx", "-rewritten.onnx")
    r = subprocess.run([os.path.join(ROOT, "build", "bin", "masformer-opt"),
                        full, f"--masformer-rewrite-spans={a.spans}", "-o",
                        rewritten], capture_output=True, text=True)
    if r.returncode:
        sys.exit(r.stderr)
    windows = []
    for node in onnx.load(rewritten).graph.node:
        if node.op_type == "GroupQueryAttention":
            windows.append(next(x.i for x in node.attribute
                                if x.name == "local_window_size"))
    print("local_window_size per layer:", windows)
    libs = {}
    if not a.no_compiled:
        for name, spans in (("full", None), ("rewritten", a.spans)):
            lib = full.replace(".onnx", f"-{name}.so")
            cmd = [os.path.join(ROOT, "build", "bin", "masformer-compile"),
                   full, "-o", lib]
            if spans:
                cmd.append(f"--spans={spans}")
            if a.precision:
                cmd.append(f"--precision={a.precision}")
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode:
                sys.exit(r.stderr)
            libs[name] = lib
    so = ort.SessionOptions()
    so.log_severity_level = 3
    if a.threads:
        so.intra_op_num_threads = a.threads
    sessions = {name: ort.InferenceSession(path, so,
                                           providers=["CPUExecutionProvider"])
                for name, path in (("full", full), ("rewritten", rewritten))}
    print()
    print("| S | run | ort full (ms) | ort rewritten (ms) | ort rewritten / "
          "full | ours full (ms) | ours rewritten (ms) | ours rewritten / "
          "full | ort / ours (rewritten) | ideal (attention) | "
          "ideal (model) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | "
          "--- |")
    for s in a.seqs:
        for run, (new, past) in (("prompt", (s, 0)), ("step", (1, s - 1))):
            if run not in a.runs:
                continue
            f = feeds(new, past)
            t = {n: timed(sess, f, a.reps) for n, sess in sessions.items()}
            c = {n: compiled_time(lib, f, a.reps, a.work)
                 for n, lib in libs.items()}
            total = past + new
            # Attention pairs per layer: the causal triangle, or the window.
            def pairs(w):
                return sum(min(past + i + 1, w if w > 0 else total)
                           for i in range(new))
            att_full = LAYERS * pairs(-1)
            att_rw = sum(pairs(w) for w in windows)
            per_pair = 4 * HQ * D  # QK^T and PV, multiply-adds x 2
            dense = new * LAYERS * 2 * (HIDDEN * (HQ + 2 * HKV) * D
                                        + HQ * D * HIDDEN + 3 * HIDDEN * FFN)
            dense += new * 2 * HIDDEN * VOCAB
            ideal_att = att_rw / att_full
            ideal_model = ((dense + per_pair * att_rw)
                           / (dense + per_pair * att_full))
            ours = ("| - | - | - | - " if not c else
                    f"| {1e3 * c['full']:.1f} | {1e3 * c['rewritten']:.1f} | "
                    f"{c['rewritten'] / c['full']:.3f} | "
                    f"{t['rewritten'] / c['rewritten']:.2f}x ")
            print(f"| {s} | {run} | {1e3 * t['full']:.1f} | "
                  f"{1e3 * t['rewritten']:.1f} | "
                  f"{t['rewritten'] / t['full']:.3f} {ours}| "
                  f"{ideal_att:.3f} | {ideal_model:.3f} |", flush=True)


if __name__ == "__main__":
    main()
