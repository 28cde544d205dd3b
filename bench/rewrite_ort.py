#!/usr/bin/env python3
"""onnxruntime CPU time of a GPT-2-small-shaped model (12 layers, d_model
768, 12 heads, random weights) against its MASFormer rewrites (2 full
layers, blocks of 256 and 512; any --spans: windows with sinks, per-head
plans), at S = 2048, 4096, 8192, batch 1, in one run. Reports the measured
time ratio next to the ideal model-time ratio: the model's FLOPs as
onnxruntime computes them, with each rewritten layer's attention at the
pairs its exported form computes (blocks: B + K keys per query, windows:
2W + K, two-sided windows 3W + K, full heads: S; the span report's cost is
printed too). With --encoder, the same model without its causal mask
(bidirectional attention: windows are two-sided).

  python3 bench/rewrite_ort.py [--seqs 2048 4096 8192] [--work /tmp/masformer-bench]
      [--spans "span=window:512 sink=64 full-layers=0,1" "plan=per-head" ...]
      [--encoder]

"plan=per-head" is a built-in per-head plan: in every layer but 0 and 1,
2 of the 12 heads full, 4 with window 1024 + 64 sinks, 6 with window 256 +
64 sinks.

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

from machine import describe

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stderr[-3000:]}")
    return r.stdout


def computed_fraction(span, size, sink, s, encoder=False):
    """Keys per query the exported form computes for one head, over S."""
    if span == "full":
        return 1.0
    if span == "block":
        per = size + sink
    else:
        per = (3 if encoder else 2) * size + sink
    return min(1.0, per / s)


def layer_heads(layer):
    """The span of each head of a span report's layer (one entry for all
    heads when the layer has a single span): dicts of span, size, sink."""
    return layer.get("head_spans") or [dict(span=layer["span"],
                                            size=layer["span_size"],
                                            sink=layer["sink"])]


def model_ratio(report, s, d=768, vocab=50257, encoder=False):
    """FLOPs of the rewritten model over the original's, as onnxruntime
    computes them: every score of the S x S matrix for dense attention (it
    does not skip the causal half), the exported form's pairs for rewritten
    layers, projections and MLP (24 S d^2 per layer), the LM head."""
    dense = 24 * s * d * d
    attn_full = 4 * s * s * d
    head = 2 * s * d * vocab
    layers = report["layers"]
    before = len(layers) * (dense + attn_full) + head
    after = head
    for c in layers:
        heads = layer_heads(c)
        frac = sum(computed_fraction(h["span"], h["size"], h["sink"], s,
                                     encoder)
                   for h in heads) / len(heads)
        after += dense + frac * attn_full
    return after / before


def per_head_plan(path, layers=12):
    heads = ([{"span": "full"}] * 2
             + [{"span": "window", "size": 1024, "sink": 64}] * 4
             + [{"span": "window", "size": 256, "sink": 64}] * 6)
    plan = {"format": "masformer-span-plan", "version": 2,
            "layers": [{"layer": l, "heads": heads}
                       for l in range(2, layers)]}
    with open(path, "w") as f:
        json.dump(plan, f)


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
    ap.add_argument("--spans", nargs="*", default=[],
                    help="more rewrites: --masformer-rewrite-spans options, "
                         "or plan=per-head (the built-in per-head plan)")
    ap.add_argument("--work", default="/tmp/masformer-bench")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--encoder", action="store_true",
                    help="the model without its causal mask (bidirectional)")
    a = ap.parse_args()
    opt = os.path.join(ROOT, "build", "bin", "masformer-opt")
    os.makedirs(a.work, exist_ok=True)
    kind = "encoder" if a.encoder else "gpt2"
    model = os.path.join(a.work, f"{kind}-small.onnx")
    if not os.path.exists(model):
        run([sys.executable, os.path.join(ROOT, "bench", "make_gpt_model.py"),
             "--layers", "12", "--d-model", "768", "--heads", "12",
             "--out", model] + (["--encoder"] if a.encoder else []))
    specs = [(f"block {b}", f"span=block:{b} full-layers=0,1")
             for b in a.blocks]
    for spec in a.spans:
        if spec == "plan=per-head":
            plan = os.path.join(a.work, "per-head-plan.json")
            per_head_plan(plan)
            specs.append(("per-head plan", f"plan={plan}"))
        else:
            specs.append((spec, spec))
    variants = {"original": model}
    reports = {}
    for i, (name, spans) in enumerate(specs):
        out = os.path.join(a.work, f"{kind}-small-variant{i}.onnx")
        t0 = time.perf_counter()
        run([opt, model, "--input-shape", "input_ids=1x2048",
             f"--masformer-rewrite-spans={spans}", "-o", out])
        print(f"rewrite {name}: {time.perf_counter() - t0:.1f} s",
              flush=True)
        variants[name] = out
        for s in a.seqs:
            rep = os.path.join(a.work, f"report-{kind}-{i}-{s}.json")
            run([opt, model, "--input-shape", "input_ids=1x2048",
                 f"--masformer-rewrite-spans={spans}",
                 f"--masformer-span-report=seq-len={s} json={rep}",
                 "--mlir-elide-resource-strings-if-larger=16",
                 "-o", os.devnull])
            reports[(name, s)] = json.load(open(rep))
    rows = []
    for s in a.seqs:
        reps = 3 if s <= 4096 else 1
        base = time_model(model, s, reps, a.threads)
        print(f"S={s} original: {base:.2f} s", flush=True)
        for name, _ in specs:
            t = time_model(variants[name], s, reps, a.threads)
            print(f"S={s} {name}: {t:.2f} s", flush=True)
            rep = reports[(name, s)]
            rows.append((s, name, base, t, t / base,
                         rep["fraction_of_full"],
                         model_ratio(rep, s, encoder=a.encoder)))
    print()
    print(f"machine: {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, onnxruntime {ort.__version__}, "
          f"{a.threads} threads")
    print(f"CPU: {describe()}")
    print("| S | rewrite | original (s) | rewritten (s) | time ratio | "
          "attention cost (span report) | ideal model ratio (export) | "
          "of ideal |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for s, name, base, t, r, cost, ideal in rows:
        print(f"| {s} | {name} | {base:.2f} | {t:.2f} | {r:.3f} | "
              f"{cost:.3f} | {ideal:.3f} | {(1 / r) / (1 / ideal):.2f} |")


if __name__ == "__main__":
    main()
