#!/usr/bin/env python3
"""Compiles an ONNX fixture with masformer-compile, runs the library with
masformer-run on .npy inputs, and compares every output with onnxruntime on
the original model (or on --ort-model: the exported rewrite of the same
spans, so that the compiled block-sparse kernels meet the ONNX export's
blocked standard ops).

Inputs come from ort_inputs.make_inputs (token ids, padding masks, standard
normal floats; fixed seed), sized by --shape.
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

from ort_inputs import mismatch, reference


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--shape", action="append", default=[],
                    help="name=d0xd1: the size of an input in the run")
    ap.add_argument("--static", action="store_true",
                    help="compile with --input-shape for every --shape")
    ap.add_argument("--spans", default="",
                    help="masformer-compile --spans (the rewrite)")
    ap.add_argument("--no-padding", action="store_true",
                    help="masks of all ones (a prompt of rows of one length: "
                    "a padded query's output is each runtime's own)")
    ap.add_argument("--ort-model",
                    help="run this model in onnxruntime instead of MODEL")
    ap.add_argument("--lib", help="an already compiled library (no compile)")
    ap.add_argument("--cpu", default="",
                    help="masformer-compile --cpu (code for that CPU; it "
                         "must run on this one)")
    ap.add_argument("--precision", default="",
                    help="masformer-compile --precision (bf16: compare with "
                         "onnxruntime's f32 within --atol/--rtol)")
    ap.add_argument("--emulate-amx", action="store_true",
                    help="masformer-compile --emulate-amx (the AMX path in "
                         "its emulator, on any CPU)")
    ap.add_argument("--compile", default="masformer-compile")
    ap.add_argument("--run", default="masformer-run")
    ap.add_argument("--argmax-agree", type=float, default=None,
                    help="also require the argmax over the last axis (the "
                         "next token, for logits) to equal onnxruntime's at "
                         "this share of positions at least")
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--f16-tol", type=float, nargs=2, default=[0.25, 2e-2],
                    metavar=("ATOL", "RTOL"),
                    help="tolerance of float16 outputs: the compiled model "
                         "accumulates products in f16 as ONNX's MatMul says, "
                         "onnxruntime in f32")
    a = ap.parse_args()

    sess, feeds, want = reference(a.ort_model or a.model, a.shape,
                                  pad=not a.no_padding)

    with tempfile.TemporaryDirectory() as tmp:
        lib = a.lib or os.path.join(tmp, "model.so")
        if not a.lib:
            cmd = [a.compile, a.model, "-o", lib]
            if a.spans:
                cmd.append(f"--spans={a.spans}")
            if a.precision:
                cmd.append(f"--precision={a.precision}")
            if a.cpu:
                cmd.append(f"--cpu={a.cpu}")
            if a.emulate_amx:
                cmd.append("--emulate-amx")
            for spec in a.shape if a.static else []:
                cmd += ["--input-shape", spec]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode:
                sys.exit(f"masformer-compile failed:\n{r.stderr}")
        cmd = [a.run, lib, "--output-dir", tmp]
        for name, x in feeds.items():
            path = os.path.join(tmp, f"in-{name}.npy")
            np.save(path, x)
            cmd += ["--input", f"{name}={path}"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            sys.exit(f"masformer-run failed:\n{r.stderr}")
        worst = 0.0
        for out, w in zip(sess.get_outputs(), want):
            g = np.load(os.path.join(tmp, f"{out.name}.npy"))
            atol, rtol = (a.f16_tol if w.dtype == np.float16
                          else (a.atol, a.rtol))
            msg = mismatch(out.name, g, w, atol, rtol, what="compiled")
            if msg:
                sys.exit(msg)
            if a.argmax_agree is not None and w.ndim >= 2:
                agree = float((g.argmax(-1) == w.argmax(-1)).mean())
                if agree < a.argmax_agree:
                    sys.exit(f"{out.name}: the argmax agrees with "
                             f"onnxruntime's at {agree:.3f} of the "
                             f"positions, below {a.argmax_agree}")
            worst = max(worst, float(np.abs(g.astype(np.float64) - w).max()))
    print(f"OK: {len(want)} output(s) match onnxruntime, max abs diff "
          f"{worst:.3g}")


if __name__ == "__main__":
    main()
