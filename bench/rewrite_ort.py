#!/usr/bin/env python3
"""onnxruntime CPU time of a GPT-2-small-shaped model (12 layers, d_model
768, 12 heads, random weights) against its MASFormer rewrites (2 full
layers, blocks of 256 and 512), at S = 2048, 4096, 8192, batch 1, in one
run. Reports the measured time ratio next to the ideal attention-cost ratio
from --masformer-span-report.

  python3 bench/rewrite_ort.py [--seqs 2048 4096 8192] [--work /tmp/masformer-bench]

Needs a build (build/bin/masformer-opt), numpy, onnx, onnxruntime.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np
import onnxruntime as ort

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stderr[-3000:]}")
    return r.stdout


def model_ratio(s, b, layers=12, full=2, d=768, vocab=50257):
    """FLOPs of the rewritten model over the original's, as onnxruntime
    computes them: every score of the S x S matrix (it does not skip the
    causal half), projections and MLP (24 S d^2 per layer), the LM head."""
    dense = 24 * s * d * d
    attn_full = 4 * s * s * d
    attn_block = 4 * s * b * d
    head = 2 * s * d * vocab
    before = layers * (dense + attn_full) + head
    after = (layers * dense + full * attn_full + (layers - full) * attn_block
             + head)
    return after / before


def time_model(path, seq, reps, threads):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.log_severity_level = 3
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    ids = np.random.default_rng(0).integers(0, 50000, (1, seq)).astype(np.int64)
    sess.run(None, {"input_ids": ids})  # warm-up: allocations, first touch
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        sess.run(None, {"input_ids": ids})
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seqs", type=int, nargs="+", default=[2048, 4096, 8192])
    ap.add_argument("--blocks", type=int, nargs="+", default=[256, 512])
    ap.add_argument("--work", default="/tmp/masformer-bench")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    a = ap.parse_args()
    opt = os.path.join(ROOT, "build", "bin", "masformer-opt")
    os.makedirs(a.work, exist_ok=True)
    model = os.path.join(a.work, "gpt2-small.onnx")
    if not os.path.exists(model):
        run([sys.executable, os.path.join(ROOT, "bench", "make_gpt_model.py"),
             "--layers", "12", "--d-model", "768", "--heads", "12",
             "--out", model])
    variants = {"original": model}
    ideal = {}
    for b in a.blocks:
        out = os.path.join(a.work, f"gpt2-small-block{b}.onnx")
        spans = f"span=block:{b} full-layers=0,1"
        t0 = time.perf_counter()
        run([opt, model, "--input-shape", "input_ids=1x2048",
             f"--masformer-rewrite-spans={spans}", "-o", out])
        print(f"rewrite block {b}: {time.perf_counter() - t0:.1f} s",
              flush=True)
        variants[f"block {b}"] = out
        for s in a.seqs:
            rep = os.path.join(a.work, f"report-{b}-{s}.json")
            run([opt, model, "--input-shape", "input_ids=1x2048",
                 f"--masformer-rewrite-spans={spans}",
                 f"--masformer-span-report=seq-len={s} json={rep}",
                 "--mlir-elide-resource-strings-if-larger=16",
                 "-o", os.devnull])
            ideal[(b, s)] = json.load(open(rep))["fraction_of_full"]
    rows = []
    for s in a.seqs:
        reps = 3 if s <= 4096 else 1
        base = time_model(model, s, reps, a.threads)
        print(f"S={s} original: {base:.2f} s", flush=True)
        for b in a.blocks:
            t = time_model(variants[f"block {b}"], s, reps, a.threads)
            print(f"S={s} block {b}: {t:.2f} s", flush=True)
            rows.append((s, b, base, t, t / base, ideal[(b, s)]))
    print()
    print(f"machine: {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, onnxruntime {ort.__version__}, "
          f"{a.threads} threads")
    print("| S | B | original (s) | rewritten (s) | time ratio | ideal attention ratio | ideal model ratio |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for s, b, base, t, r, i in rows:
        print(f"| {s} | {b} | {base:.2f} | {t:.2f} | {r:.3f} | {i:.3f} | "
              f"{model_ratio(s, b):.3f} |")


if __name__ == "__main__":
    main()
