#!/usr/bin/env python3
"""Imports an ONNX fixture with masformer-translate, optionally runs
masformer-opt passes on it (e.g. --masformer-raise-attention), executes it on
the CPU through the reference pipeline, and compares every output with
onnxruntime on the original model (or on --ort-model, e.g. the ONNX export of
the same rewrite: then two independent implementations of the spans meet).

Inputs: as ort_inputs.make_inputs makes them (token ids, padding masks,
standard normal floats; fixed seed).
"""

import argparse
import shlex
import subprocess
import sys

import numpy as np

import mlir_runner
from ort_inputs import mismatch, reference


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--input-shape", action="append", default=[],
                    help="name=d0xd1 (as masformer-translate takes it)")
    ap.add_argument("--passes", default="",
                    help="masformer-opt flags run after import")
    ap.add_argument("--ort-model",
                    help="run this model in onnxruntime instead of MODEL "
                         "(e.g. the exported rewrite of MODEL)")
    ap.add_argument("--dynamic", action="store_true",
                    help="import without --input-shape (the dynamic "
                         "dimensions stay dynamic); the shapes only size the "
                         "inputs of the run")
    ap.add_argument("--translate", default="masformer-translate")
    ap.add_argument("--opt", default="masformer-opt")
    ap.add_argument("--runner", default="mlir-runner")
    ap.add_argument("--lib-dir", default="/usr/lib/llvm-22/lib")
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("--rtol", type=float, default=1e-4)
    a = ap.parse_args()

    sess, feeds, want = reference(a.ort_model or a.model, a.input_shape)

    cmd = [a.translate, "--import-onnx", a.model]
    for spec in [] if a.dynamic else a.input_shape:
        cmd += ["--input-shape", spec]
    imported = subprocess.run(cmd, capture_output=True, text=True)
    if imported.returncode:
        sys.exit(f"import failed:\n{imported.stderr}")
    text = imported.stdout
    if a.passes:
        r = subprocess.run([a.opt, "-"] + shlex.split(a.passes), input=text,
                           capture_output=True, text=True)
        if r.returncode:
            sys.exit(f"masformer-opt {a.passes} failed:\n{r.stderr}")
        text = r.stdout
    order = [i.name for i in sess.get_inputs()]
    got = mlir_runner.run_module(text, [feeds[n] for n in order], opt=a.opt,
                                 runner=a.runner, lib_dir=a.lib_dir)
    worst = 0.0
    for out, g, w in zip(sess.get_outputs(), got, want):
        msg = mismatch(out.name, g, w, a.atol, a.rtol)
        if msg:
            sys.exit(msg)
        if np.size(w):
            worst = max(worst, float(np.abs(g - w).max()))
    print(f"OK: {len(want)} output(s) match onnxruntime, max abs diff "
          f"{worst:.3g}")


if __name__ == "__main__":
    main()
