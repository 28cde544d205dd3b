#!/usr/bin/env python3
"""masformer-compile on a GPT-2-small-shaped model (12 layers, d_model 768,
12 heads, vocabulary 50257, random weights; bench/make_gpt_model.py):

  - compile time (dynamic shapes: one library for every batch and length);
  - end-to-end latency of the compiled library (masformer-run --bench)
    against onnxruntime on the CPU, batch 1, at each sequence length:
    full attention (ours vs onnxruntime on the original model), and the
    MASFormer rewrite (ours vs onnxruntime on its ONNX export), in one run.

  python3 bench/compile_cpu.py [--seqs 2048 8192] [--reps 3] [--rounds 1]
      [--pairs 0] [--spans "span=block:512 policy=top num-full=3"]
      [--precision f32] [--cpu native]
      [--work /tmp/masformer-bench]

--precision=bf16 compiles ours with bf16 products and attention (f32
accumulation); onnxruntime stays f32. --int8 quantizes the model first with
onnxruntime's quantize_dynamic (int8 weights per column, DynamicQuantizeLinear
and MatMulInteger: what users run on CPUs) and runs both sides on it:
onnxruntime's 8-bit kernels against ours, which compile each MatMulInteger to
a product of its integers in f32 (bf16 with --precision=bf16, exact there). --cpu NAME compiles ours for another
CPU that this one can run (znver3, haswell: an AVX2 server's code);
onnxruntime runs the kernels it picks for this CPU. Each row prints the time ratio, the
speed ratio (onnxruntime time / ours), and for the rewrite our rewritten /
full time next to two ideal whole-model FLOP ratios:

  - "ort": bench/rewrite_ort.py's, the FLOPs as onnxruntime computes them
    (dense attention scores all S x S pairs, causal or not);
  - "ours": the pairs masformer-compile computes, counted from the span
    definition (test/python_utils/masformer_ref.py): the model is causal,
    and our full attention already skips the upper triangle, so a span
    saves a smaller share of our full model's work than of onnxruntime's
    (at S = 2048, 0.925 against 0.868 for blocks of 512 with 3 full
    layers).

Median of --reps runs after one warm-up, both sides; both use every core
(OpenMP and onnxruntime's intra-op threads). With --rounds N every
time printed is the best of N such medians (round 1 also checks our
logits against onnxruntime's). "ours rewritten / full" is the median of
the ratios of max(N - 1, --pairs) pairs of our two libraries timed back to
back, in alternating order: on a shared VM whose speed moves by 10-25% in
bursts, the best of each library's rounds can fall in different bursts.
Prints a markdown table.
Needs a build (build/bin), numpy, onnx, onnxruntime.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort

from machine import describe
from rewrite_ort import layer_heads, model_ratio

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "build", "bin")

# The span definition, written once (test/python_utils/masformer_ref.py).
sys.path.insert(0, os.path.join(ROOT, "test", "python_utils"))
import masformer_ref  # noqa: E402


def run(cmd):
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stderr[-3000:]}")
    return r.stdout, time.perf_counter() - t


def compiled_ratio(report, s, d=768, vocab=50257):
    """FLOPs of the rewritten model over the original's as masformer-compile
    computes them: per layer the projections and MLP (24 S d^2) and 4 d FLOP
    per (query, key) pair the span and the causal mask keep (counted from
    the span definition), and the LM head."""
    dense = 24 * s * d * d
    head = 2 * s * d * vocab
    pairs = {}

    def layer_pairs(span):
        if span not in pairs:
            pairs[span] = int(masformer_ref.span_allowed(s, s, span,
                                                         True).sum())
        return pairs[span]

    full = layer_pairs(("full", 0))
    layers = report["layers"]
    before = len(layers) * (dense + 4 * d * full) + head
    after = head
    for c in layers:
        heads = layer_heads(c)
        kept = sum(layer_pairs((h["span"], h["size"] or 0, h["sink"] or 0))
                   for h in heads) / len(heads)
        after += dense + 4 * d * kept
    return after / before


def ort_median(path, ids, reps, ours=None):
    """The median time of onnxruntime on `path`, and the largest difference
    of its logits from `ours` (None without). Only the difference leaves the
    function: at S = 8192 the logits take 1.6 GB and the session's arena
    several more, and a copy of each kept across calls ran a 23 GiB machine
    out of memory."""
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(path, opts,
                                providers=["CPUExecutionProvider"])
    feeds = {"input_ids": ids}
    out = sess.run(None, feeds)[0]
    diff = None if ours is None else float(np.abs(ours - out).max())
    del out
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        sess.run(None, feeds)
        times.append(time.perf_counter() - t)
    return statistics.median(times), diff


def ours_median(lib, ids_path, reps, out_dir, load=True):
    stdout, _ = run([os.path.join(BIN, "masformer-run"), lib, "--input",
                     f"input_ids={ids_path}", "--output-dir", out_dir,
                     "--bench", str(reps)])
    # "median of N runs: X ms (...)"
    ms = float(stdout.split("runs:")[1].split("ms")[0])
    return ms / 1000, (np.load(os.path.join(out_dir, "logits.npy"))
                       if load else None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seqs", type=int, nargs="+", default=[2048, 8192])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=1,
                    help="time every library and model this many times (each "
                         "the median of --reps) and keep the best")
    ap.add_argument("--pairs", type=int, default=0,
                    help="time our two libraries back to back this many "
                         "times (at least rounds - 1) for the rewritten / "
                         "full ratio, the median of the pairs' ratios")
    ap.add_argument("--spans", default="span=block:512 policy=top num-full=3")
    ap.add_argument("--precision", default="f32", choices=["f32", "bf16"])
    ap.add_argument("--cpu", default="native",
                    help="masformer-compile --cpu: code for this LLVM CPU")
    ap.add_argument("--int8", action="store_true",
                    help="quantize the model with onnxruntime's "
                         "quantize_dynamic first (both sides run it)")
    ap.add_argument("--work", default="/tmp/masformer-bench")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    model = os.path.join(a.work, "gpt2-small.onnx")
    if not os.path.exists(model):
        run([sys.executable, os.path.join(ROOT, "bench", "make_gpt_model.py"),
             "--out", model])
    stem = "gpt2-small"
    if a.int8:
        stem = "gpt2-small-int8"
        quantized = os.path.join(a.work, stem + ".onnx")
        if not os.path.exists(quantized):
            run([sys.executable, os.path.join(ROOT, "test", "python_utils",
                                              "quantize_model.py"), model,
                 quantized, "--per-channel"])
        model = quantized
    rewritten = os.path.join(a.work, f"{stem}-masformer.onnx")
    run([os.path.join(BIN, "masformer-opt"), model,
         f"--masformer-rewrite-spans={a.spans}", "-o", rewritten])

    tag = a.precision if a.cpu == "native" else f"{a.precision}-{a.cpu}"
    full_lib = os.path.join(a.work, f"{stem}-{tag}.so")
    ms_lib = os.path.join(a.work, f"{stem}-masformer-{tag}.so")
    prec = f"--precision={a.precision}"
    cpu = f"--cpu={a.cpu}"
    _, t_full = run([os.path.join(BIN, "masformer-compile"), model, prec, cpu,
                     "-o", full_lib])
    _, t_ms = run([os.path.join(BIN, "masformer-compile"), model, prec, cpu,
                   f"--spans={a.spans}", "-o", ms_lib])
    print(f"machine: {describe()}; onnxruntime {ort.__version__}")
    print(f"ours: masformer-compile {prec} {cpu}; onnxruntime: "
          + ("int8 (quantize_dynamic, per-column weights; both sides run "
             "the quantized model)" if a.int8 else "f32"))
    print(f"compile time (dynamic shapes, {os.path.getsize(model) / 2**20:.0f}"
          f" MiB model): full {t_full:.1f} s, rewritten ({a.spans}) "
          f"{t_ms:.1f} s\n")
    print("| S | attention | masformer-compile (ms) | onnxruntime (ms) | "
          "ours / onnxruntime (time) | speed vs onnxruntime | "
          "ours rewritten / full (ideal: ort; ours) | max abs diff |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    rng = np.random.default_rng(0)
    spread = []
    with tempfile.TemporaryDirectory() as tmp:
        for s in a.seqs:
            ids = rng.integers(0, 50257, (1, s)).astype(np.int64)
            ids_path = os.path.join(tmp, "ids.npy")
            np.save(ids_path, ids)
            rep = os.path.join(tmp, "report.json")
            run([os.path.join(BIN, "masformer-opt"), model,
                 f"--masformer-rewrite-spans={a.spans}",
                 f"--masformer-span-report=seq-len={s} json={rep}",
                 "--mlir-elide-resource-strings-if-larger=16",
                 "-o", os.devnull])
            report = json.load(open(rep))
            ideal = (f"{model_ratio(report, s):.3f}; "
                     f"{compiled_ratio(report, s):.3f}")
            variants = (("full", full_lib, model),
                        (a.spans, ms_lib, rewritten))
            ours, theirs, diff = {}, {}, {}
            # The first round checks our logits against onnxruntime's.
            for name, lib, onnx_model in variants:
                ours[name], got = ours_median(lib, ids_path, a.reps, tmp)
                theirs[name], diff[name] = ort_median(onnx_model, ids, a.reps,
                                                      got)
                del got
            # Then our two libraries back to back, in alternating order, in
            # each of max(rounds - 1, pairs) steps, and onnxruntime's two
            # models in the first rounds - 1 of them. The rewritten / full
            # ratio is the median of the steps' own ratios: each from
            # neighbouring runs, not from runs minutes apart with
            # onnxruntime's multi-GB runs of the other model between, and
            # not from two bests that a burst of a shared machine's noise
            # can split between rounds.
            paired = []
            for r in range(max(a.rounds - 1, a.pairs)):
                this = {}
                for name, lib, _ in (variants if r % 2 else variants[::-1]):
                    this[name] = ours_median(lib, ids_path, a.reps, tmp,
                                             load=False)[0]
                    ours[name] = min(ours[name], this[name])
                paired.append(this[a.spans] / this["full"])
                if r >= a.rounds - 1:
                    continue
                for name, _, onnx_model in variants:
                    theirs[name] = min(theirs[name],
                                       ort_median(onnx_model, ids, a.reps)[0])
            if paired:
                spread.append(f"S = {s}: " + " ".join(
                    f"{x:.3f}" for x in paired))
            rewrite_ratio = (statistics.median(paired) if paired else
                             ours[a.spans] / ours["full"])
            for name, _, _ in variants:
                ratio = ("1" if name == "full" else
                         f"{rewrite_ratio:.3f} ({ideal})")
                print(f"| {s} | {name} | {ours[name] * 1e3:.0f} | "
                      f"{theirs[name] * 1e3:.0f} | "
                      f"{ours[name] / theirs[name]:.2f} | "
                      f"{theirs[name] / ours[name]:.2f}x | {ratio} | "
                      f"{diff[name]:.1e} |", flush=True)
    if spread:
        print("\nrewritten / full of each back-to-back pair: " +
              "; ".join(spread))


if __name__ == "__main__":
    main()
