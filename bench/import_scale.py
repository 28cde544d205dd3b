#!/usr/bin/env python3
"""Import time and peak memory of a 1.3B-parameter GPT-style model with
external data (24 layers, d_model 2048, 16 heads, vocab 50257; made by
bench/make_gpt_model.py, not committed), against the weight bytes.

  python3 bench/import_scale.py [--work /tmp/masformer-scale] [--seq 2048]

Measures, with /usr/bin/time -v: masformer-opt with the import, the raise,
the MASFormer rewrite and the ONNX export written next to the model (with
the sequence fixed by --input-shape, and left dynamic); and
masformer-translate --import-onnx printing the module (resources elided) to
/dev/null. Goal: import under 60 s, peak memory under 1.2x the weight bytes.
"""

import argparse
import os
import subprocess
import sys

from machine import describe
from timed import timed

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def measure(cmd):
    _, wall, rss = timed(cmd)
    return wall, rss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default="/tmp/masformer-scale")
    ap.add_argument("--seq", type=int, default=2048)
    a = ap.parse_args()
    model = os.path.join(a.work, "gpt-1.3b.onnx")
    if not os.path.exists(model):
        subprocess.run([sys.executable,
                        os.path.join(ROOT, "bench", "make_gpt_model.py"),
                        "--layers", "24", "--d-model", "2048", "--heads", "16",
                        "--out", model, "--external-data"], check=True)
    weights = os.path.getsize(model + ".data")
    bin_dir = os.path.join(ROOT, "build", "bin")
    shape = f"input_ids=1x{a.seq}"
    t_imp, m_imp = measure([
        os.path.join(bin_dir, "masformer-translate"), "--import-onnx", model,
        "--input-shape", shape, "--mlir-elide-resource-strings-if-larger=16",
        "-o", os.devnull])
    out = os.path.join(a.work, "gpt-1.3b-block512.onnx")
    t_rw, m_rw = measure([
        os.path.join(bin_dir, "masformer-opt"), model, "--input-shape", shape,
        "--masformer-rewrite-spans=span=block:512 num-full=4", "-o", out])
    # The same with batch and sequence left dynamic.
    t_dyn, m_dyn = measure([
        os.path.join(bin_dir, "masformer-opt"), model,
        "--masformer-rewrite-spans=span=block:512 num-full=4", "-o", out])
    gib = 2 ** 30
    print(f"machine: {describe()}")
    print(f"weights: {weights / gib:.2f} GiB (external data)")
    print("| step | wall (s) | peak RSS (GiB) | peak / weights |")
    print("| --- | --- | --- | --- |")
    print(f"| import + raise + rewrite + ONNX export (masformer-opt) | "
          f"{t_rw:.1f} | {m_rw / gib:.2f} | {m_rw / weights:.2f} |")
    print(f"| the same, batch and sequence dynamic (no --input-shape) | "
          f"{t_dyn:.1f} | {m_dyn / gib:.2f} | {m_dyn / weights:.2f} |")
    print(f"| import + print MLIR, resources elided (masformer-translate) | "
          f"{t_imp:.1f} | {m_imp / gib:.2f} | {m_imp / weights:.2f} |")


if __name__ == "__main__":
    main()
