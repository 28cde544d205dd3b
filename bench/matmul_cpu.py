#!/usr/bin/env python3
"""The model's matrix products compiled by masformer-compile, against the
machine's sgemm (numpy's BLAS) and onnxruntime's MatMul, in one run:

  python3 bench/matmul_cpu.py [--seq 2048] [--reps 5] [--rounds 1]
      [--shapes gpt2|llama7b] [--precision f32] [--cpu native] [--int8]
      [--work /tmp/masformer-matmul]

--rounds R times each product R times over, ours, numpy's and onnxruntime's
back to back in each round, and prints each round's ours / the faster of
numpy and onnxruntime; the table's row is the round whose ratio is the
median of the rounds. On a VM whose speed moves in bursts of minutes, the
three timings of a round share a burst, where the best of each over
separate runs need not (bench/RESULTS.md, "Every goal in one run").

--cpu NAME compiles for another CPU (masformer-compile --cpu), which must
run on this one: code for an AVX2 server (znver3, haswell) measured on an
AVX-512 machine. numpy's sgemm then should use the same instructions:
OPENBLAS_CORETYPE=Haswell in the environment makes OpenBLAS run its AVX2
kernel (the header prints the core it ran). onnxruntime's MLAS picks its
kernels from the CPU it runs on, whatever --cpu says.

The shapes are GPT-2 small's products at --seq rows: the QKV projection
(768 -> 2304), the attention output (768 -> 768), the MLP (768 -> 3072 and
3072 -> 768) and the tied LM head (768 -> 50257, weights stored [50257, 768]
and transposed by the model, as exporters write it); with --shapes llama7b,
those of a 7B Llama (4096 -> 3 x 4096, 4096 -> 4096, 4096 -> 11008, 11008 ->
4096), whose weight panels no core's L2 holds. Each product is its own
one-node model (y = MatMul(x, W) with W a constant), compiled without shapes
and timed by `masformer-run --bench` (median of --reps after one), so the
figure includes the library call and the output buffer, as in a model.
numpy's matmul and onnxruntime (2 threads = every core, default
optimizations) time the same product in the same process.

--torch PYTHON adds a peer for bf16: torch.matmul on bf16 operands (oneDNN's
AMX or AVX512-BF16 kernels, every core), run by PYTHON, an interpreter with
torch (a venv; torch is never a dependency of the project), in a process
of its own after each product's other timings. It does less than ours: its
operands are bf16 already and its result is bf16, where our library reads
f32 activations, rounds them and writes f32 results (the model's
interface).

--int8 quantizes each product's model with the pinned onnxruntime's
quantize_dynamic (int8 weights per column: DynamicQuantizeLinear on x,
MatMulInteger, the scales' Mul), as test/python_utils/quantize_model.py
--per-channel does; ours and onnxruntime (its u8s8 kernels) both run the
quantized model, numpy's sgemm the f32 product (the machine's f32 rate, for
scale). The LM head's weights are then stored [k, n] (quantize_dynamic
quantizes a MatMul's initializer, not a Transpose of one), and the error
column is ours against onnxruntime's quantized result.

Prints the CPU model and its ISA extensions, then one markdown table:
GFLOP/s of each, and ours / sgemm and ours / onnxruntime (and ours /
torch).
"""

import argparse
import logging
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
BIN = os.path.join(ROOT, "build", "bin")

# name, k, n, weights stored transposed ([n, k], MatMul(x, Transpose(W)))
SHAPES = {
    "gpt2": [("qkv", 768, 2304, False), ("attn-out", 768, 768, False),
             ("mlp-up", 768, 3072, False), ("mlp-down", 3072, 768, False),
             ("lm-head", 768, 50257, True)],
    # A 7B Llama's products (d_model 4096, MLP 11008): every weight panel of
    # 64 columns is larger than a core's L2 on most servers.
    "llama7b": [("qkv", 4096, 3 * 4096, False), ("attn-out", 4096, 4096, False),
                ("mlp-up", 4096, 11008, False),
                ("mlp-down", 11008, 4096, False)],
}


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stderr[-3000:]}")
    return r.stdout


def make_model(path, k, n, transposed, rng):
    w = rng.standard_normal((n, k) if transposed else (k, n)).astype(
        np.float32) * 0.05
    nodes = []
    if transposed:
        nodes.append(h.make_node("Transpose", ["w"], ["wt"], perm=[1, 0]))
        nodes.append(h.make_node("MatMul", ["x", "wt"], ["y"]))
    else:
        nodes.append(h.make_node("MatMul", ["x", "w"], ["y"]))
    g = h.make_graph(
        nodes, "product",
        [h.make_tensor_value_info("x", T.FLOAT, ["m", k])],
        [h.make_tensor_value_info("y", T.FLOAT, ["m", n])],
        [nh.from_array(w, "w")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return w.T if transposed else w


# Times torch.matmul(x, w) on bf16 operands of the shape given: argv m k n
# reps; prints the median seconds.
TORCH_TIMER = r"""
import os, statistics, sys, timeit
import torch
torch.set_num_threads(os.cpu_count())
m, k, n, reps = (int(v) for v in sys.argv[1:5])
x = torch.randn(m, k).bfloat16()
w = torch.randn(k, n).bfloat16()
torch.matmul(x, w)
print(statistics.median(timeit.repeat(lambda: torch.matmul(x, w),
                                      number=1, repeat=reps)))
"""


def torch_time(python, m, k, n, reps):
    return float(run([python, "-c", TORCH_TIMER, str(m), str(k), str(n),
                      str(reps)]).split()[-1])


def median_time(fn, reps):
    fn()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=1,
                    help="time each product this many times over (ours, "
                         "numpy's, onnxruntime's back to back a round); "
                         "the row is the round of the median ratio")
    ap.add_argument("--shapes", default="gpt2", choices=sorted(SHAPES))
    ap.add_argument("--precision", default="f32")
    ap.add_argument("--cpu", default="native",
                    help="masformer-compile --cpu: code for this LLVM CPU")
    ap.add_argument("--work", default="/tmp/masformer-matmul")
    ap.add_argument("--int8", action="store_true",
                    help="quantize each product with onnxruntime's "
                         "quantize_dynamic (per-column int8 weights); ours "
                         "and onnxruntime run the quantized model")
    ap.add_argument("--torch", metavar="PYTHON",
                    help="also time torch.matmul on bf16 operands (oneDNN) "
                         "with this interpreter")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    rng = np.random.default_rng(0)
    print(describe())
    core = os.environ.get("OPENBLAS_CORETYPE", "chosen by OpenBLAS")
    print(f"\nproducts at {a.seq} rows, masformer-compile "
          f"--precision={a.precision} --cpu={a.cpu}, numpy's OpenBLAS core: "
          f"{core}, median of {a.reps}"
          + (f", the round of the median ratio of {a.rounds}"
             if a.rounds > 1 else "")
          + (", int8 (quantize_dynamic, per-column weights) for ours and "
             "onnxruntime, f32 for sgemm" if a.int8 else "") + "\n")
    peer = (" torch bf16 GFLOP/s | ours / torch |" if a.torch else "")
    rate = "GOP/s" if a.int8 else "GFLOP/s"
    print(f"| product | m x k x n | sgemm GFLOP/s | onnxruntime {rate} | "
          f"ours {rate} | ours / sgemm | ours / onnxruntime | max rel err |"
          + peer)
    print("| --- | --- | --- | --- | --- | --- | --- | --- |" +
          (" --- | --- |" if a.torch else ""))
    tot = {"sgemm": 0.0, "ort": 0.0, "ours": 0.0, "torch": 0.0}
    flops_all = 0.0
    # (Printed after the table, which they would cut.)
    round_lines = []
    for name, k, n, transposed in SHAPES[a.shapes]:
        path = os.path.join(a.work, f"{name}.onnx")
        w = make_model(path, k, n, transposed and not a.int8, rng)
        if a.int8:
            from onnxruntime.quantization import QuantType, quantize_dynamic
            quantized = os.path.join(a.work, f"{name}-int8.onnx")
            logging.getLogger().setLevel(logging.ERROR)  # its advice
            quantize_dynamic(path, quantized, weight_type=QuantType.QInt8,
                             per_channel=True)
            path = quantized
        x = rng.standard_normal((a.seq, k)).astype(np.float32)
        tag = f"{a.precision}-{a.cpu}" + ("-int8" if a.int8 else "")
        lib = os.path.join(a.work, f"{name}-{tag}.so")
        run([os.path.join(BIN, "masformer-compile"), path, "-o", lib,
             f"--precision={a.precision}", f"--cpu={a.cpu}"])
        # The library and its weights just written (tens of MB for the LM
        # head) go to disk now, not while the product is timed: on a 2-core
        # VM the kernel's writeback took a core from the first timing after
        # a compile (qkv at 136 GFLOP/s in one run, 280-330 timed alone).
        os.sync()
        xp = os.path.join(a.work, f"{name}-x.npy")
        np.save(xp, x)
        out_dir = os.path.join(a.work, f"{name}-out")
        wc = np.ascontiguousarray(w)
        ref = x @ wc
        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        sess = ort.InferenceSession(path, opts,
                                    providers=["CPUExecutionProvider"])
        rounds = []
        for _ in range(max(1, a.rounds)):
            out = run([os.path.join(BIN, "masformer-run"), lib, "--input",
                       f"x={xp}", "--output-dir", out_dir, "--bench",
                       str(a.reps)])
            t_ours = float(out.split("runs:")[1].split("ms")[0]) / 1000
            t_sg = median_time(lambda: x @ wc, a.reps)
            t_ort = median_time(lambda: sess.run(None, {"x": x}), a.reps)
            rounds.append((min(t_sg, t_ort) / t_ours, t_ours, t_sg, t_ort))
        if a.rounds > 1:
            round_lines.append(
                f"{name}: ours / the faster of numpy and onnxruntime per "
                "round: " + " ".join(f"{r[0]:.3f}" for r in rounds))
        # The round of the median ratio (the upper median of an even count).
        _, ours, sg, ot = sorted(rounds)[len(rounds) // 2]
        y = np.load(os.path.join(out_dir, "y.npy"))
        if a.int8:  # against onnxruntime on the same quantized model
            ref = sess.run(None, {"x": x})[0]
        err = float(np.max(np.abs(y - ref)) / np.max(np.abs(ref)))
        flops = 2.0 * a.seq * k * n
        flops_all += flops
        tot["sgemm"] += sg
        tot["ort"] += ot
        tot["ours"] += ours
        cells = ""
        if a.torch:
            tt = torch_time(a.torch, a.seq, k, n, a.reps)
            tot["torch"] += tt
            cells = f" {flops / tt / 1e9:.0f} | {tt / ours:.2f} |"
        print(f"| {name} | {a.seq} x {k} x {n} | {flops / sg / 1e9:.0f} | "
              f"{flops / ot / 1e9:.0f} | {flops / ours / 1e9:.0f} | "
              f"{sg / ours:.2f} | {ot / ours:.2f} | {err:.1e} |" + cells,
              flush=True)
    cells = ""
    if a.torch:
        cells = (f" {flops_all / tot['torch'] / 1e9:.0f} | "
                 f"{tot['torch'] / tot['ours']:.2f} |")
    print(f"| all | | {flops_all / tot['sgemm'] / 1e9:.0f} | "
          f"{flops_all / tot['ort'] / 1e9:.0f} | "
          f"{flops_all / tot['ours'] / 1e9:.0f} | "
          f"{tot['sgemm'] / tot['ours']:.2f} | "
          f"{tot['ort'] / tot['ours']:.2f} | |" + cells)
    if round_lines:
        print("\n" + "\n".join(round_lines))


if __name__ == "__main__":
    main()
