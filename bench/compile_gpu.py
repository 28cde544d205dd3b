#!/usr/bin/env python3
"""masformer-compile --target=cuda on the GPT-2-small-shaped model of
bench/make_gpt_model.py (12 layers, d_model 768, 12 heads, vocabulary
50257, random weights): compile time and peak memory, all spans full and
with a MASFormer rewrite, for each chip and --precision, and what the
library holds (its
size, the embedded cubins, the kernels and launches of @main).

  python3 bench/compile_gpu.py [--chips sm_90 sm_80] [--precisions f32 bf16]
      [--spans "span=block:512 policy=top num-full=3"]
      [--work /tmp/masformer-bench]

No GPU is needed (ptxas compiles the kernels); running the libraries and
their timings are test/gpu/run_checks.sh's. Prints a markdown table.
Needs a build (build/bin), numpy and onnx.
"""

import argparse
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "build", "bin")
sys.path.insert(0, os.path.join(ROOT, "test", "gpu"))
from check_library import cubins  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import describe  # noqa: E402


def timed(cmd):
    """Wall time (s) and peak resident memory (GiB) of `cmd`."""
    t = time.perf_counter()
    r = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd,
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stderr[-3000:]}")
    peak_kib = int(r.stderr.strip().splitlines()[-1])
    return time.perf_counter() - t, peak_kib / 2**20


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chips", nargs="+", default=["sm_90"])
    ap.add_argument("--precisions", nargs="+", default=["f32"],
                    choices=["f32", "bf16"])
    ap.add_argument("--spans", default="span=block:512 policy=top num-full=3")
    ap.add_argument("--work", default="/tmp/masformer-bench")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    model = os.path.join(a.work, "gpt2-small.onnx")
    if not os.path.exists(model):
        subprocess.run([sys.executable,
                        os.path.join(ROOT, "bench", "make_gpt_model.py"),
                        "--layers", "12", "--d-model", "768", "--heads", "12",
                        "--out", model], check=True)
    compile_ = os.path.join(BIN, "masformer-compile")
    print(f"compiled on: {describe()}")
    print("| chip | precision | attention | compile (s) | peak memory (GiB) | "
          "library (MB) | cubins | kernels | launches per run |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    runs = [(c, p, s) for c in a.chips for p in a.precisions
            for s in (("full", ""), ("rewritten", a.spans))]
    for chip, precision, (label, spans) in runs:
        lib = os.path.join(a.work, f"gpt2-small-{chip}-{label}.so")
        cmd = [compile_, model, "--target=cuda", f"--chip={chip}",
               f"--precision={precision}", "-o", lib]
        if spans:
            cmd.append(f"--spans={spans}")
        seconds, peak = timed(cmd)
        with open(lib, "rb") as f:
            data = f.read()
        # The kernels and launches, from the module before NVVM.
        ir = subprocess.run(
            [os.path.join(BIN, "masformer-opt"), model,
             *([f"--masformer-rewrite-spans={spans}"] if spans else []),
             "--masformer-model-to-nvvm=lower-kernels=false "
             f"precision={precision}",
             "--mlir-elide-elementsattrs-if-larger=1",
             "--mlir-elide-resource-strings-if-larger=1"],
            capture_output=True, text=True, check=True).stdout
        kernels = len(re.findall(r"gpu\.func @", ir))
        launches = len(re.findall(r"gpu\.launch_func", ir))
        print(f"| {chip} | {precision} | {label if not spans else spans} | "
              f"{seconds:.1f} | {peak:.1f} | {len(data) / 1e6:.0f} | "
              f"{len(cubins(data))} | {kernels} | {launches} |",
              flush=True)
        os.remove(lib)


if __name__ == "__main__":
    main()
