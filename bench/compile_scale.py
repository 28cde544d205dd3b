#!/usr/bin/env python3
"""Compiling and running models whose weights pass what a library can hold
(docs/compile.md, "Weights"), in one run:

  - GPT-2 small (12 layers, d_model 768, 497 MiB of inline f32 weights):
    the library's size and its weights file's, compile time and peak
    resident memory, logits against onnxruntime at --small-seq;
  - the 1.3B GPT-style model of bench/import_scale.py (24 layers, d_model
    2048, 4.95 GiB of weights in ONNX external data), compiled with a
    MASFormer rewrite (--spans): compile time and peak resident memory
    against the weights' bytes; masformer-run at --seq tokens: time, peak
    resident memory, and logits against onnxruntime on the original model
    (block 512 at S <= 512 computes the same attention as full).

  python3 bench/compile_scale.py [--work /tmp/masformer-scale] [--seq 512]
      [--small-seq 128] [--skip-small] [--skip-ort]

Peak resident memory is /usr/bin/time's maximum RSS (mapped weight pages
that were touched count). Models are made by bench/make_gpt_model.py, not
committed. Needs a build (build/bin), numpy, onnx, onnxruntime.
"""

import argparse
import os
import subprocess
import sys

import numpy as np

from machine import describe
from timed import timed

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "build", "bin")
GiB = 2.0 ** 30

ORT_SCRIPT = """
import sys, numpy as np, onnxruntime as ort
o = ort.SessionOptions(); o.log_severity_level = 3
s = ort.InferenceSession(sys.argv[1], o, providers=["CPUExecutionProvider"])
np.save(sys.argv[3], s.run(None, {"input_ids": np.load(sys.argv[2])})[0])
"""


def make(path, *args):
    if not os.path.exists(path):
        subprocess.run([sys.executable,
                        os.path.join(ROOT, "bench", "make_gpt_model.py"),
                        "--out", path, *args], check=True)


def weight_bytes(model):
    data = model + ".data"
    if os.path.exists(data):
        return os.path.getsize(data)
    import onnx
    m = onnx.load(model)
    return sum(np.prod(t.dims, dtype=np.int64) * 4
               for t in m.graph.initializer)


def run_and_compare(lib, model, seq, work, skip_ort):
    ids = np.random.default_rng(0).integers(0, 50257, (1, seq)).astype(
        np.int64)
    ids_path = os.path.join(work, f"ids-{seq}.npy")
    np.save(ids_path, ids)
    out = os.path.join(work, "out")
    _, t_run, rss_run = timed([os.path.join(BIN, "masformer-run"), lib,
                               "--input", f"input_ids={ids_path}",
                               "--output-dir", out])
    got = np.load(os.path.join(out, "logits.npy"))
    if skip_ort:
        return t_run, rss_run, None, None, None
    want_path = os.path.join(work, "ort-logits.npy")
    _, t_ort, rss_ort = timed([sys.executable, "-c", ORT_SCRIPT, model,
                               ids_path, want_path])
    want = np.load(want_path)
    rel = float(np.abs(got - want).max() / np.abs(want).max())
    return t_run, rss_run, t_ort, rss_ort, rel


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default="/tmp/masformer-scale")
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--small-seq", type=int, default=128)
    ap.add_argument("--spans", default="span=block:512 policy=top num-full=4")
    ap.add_argument("--skip-small", action="store_true")
    ap.add_argument("--skip-ort", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    print(f"machine: {describe()}\n")
    print("| model | weights | compile | compile peak RSS | library | "
          "weights file | run S | run | run peak RSS | onnxruntime run | "
          "onnxruntime peak RSS | max rel diff |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | "
          "--- | --- |")
    cases = []
    if not a.skip_small:
        small = os.path.join(a.work, "gpt2-small.onnx")
        make(small)
        cases.append(("GPT-2 small (inline)", small, [], a.small_seq))
    big = os.path.join(a.work, "gpt-1.3b.onnx")
    make(big, "--layers", "24", "--d-model", "2048", "--heads", "16",
         "--external-data")
    cases.append((f"1.3B (external data), {a.spans}", big,
                  [f"--spans={a.spans}"], a.seq))
    for name, model, opts, seq in cases:
        w = weight_bytes(model)
        lib = os.path.splitext(model)[0] + ".so"
        _, t_c, rss_c = timed([os.path.join(BIN, "masformer-compile"), model,
                               *opts, "-o", lib])
        own = os.path.splitext(lib)[0] + ".weights"
        own_size = os.path.getsize(own) if os.path.exists(own) else 0
        t_run, rss_run, t_ort, rss_ort, rel = run_and_compare(
            lib, model, seq, a.work, a.skip_ort)
        ort_cols = ("| - | - | - |" if rel is None else
                    f"| {t_ort:.1f} s | {rss_ort / GiB:.2f} GiB | {rel:.1e} |")
        print(f"| {name} | {w / GiB:.2f} GiB | {t_c:.0f} s | "
              f"{rss_c / GiB:.2f} GiB ({rss_c / w:.2f}x) | "
              f"{os.path.getsize(lib) / 2**20:.1f} MiB | "
              f"{own_size / 2**20:.0f} MiB | {seq} | {t_run:.1f} s | "
              f"{rss_run / GiB:.2f} GiB ({rss_run / (w + own_size):.2f}x "
              f"mapped) {ort_cols}", flush=True)


if __name__ == "__main__":
    main()
