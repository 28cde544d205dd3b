#!/usr/bin/env python3
"""GPT-2 small compiled here for another x86 machine's CPU, timed there
against onnxruntime: the way to measure a CPU kind that only a borrowed
machine has (an Intel Xeon with AMX, say: the GPU machine's host).

Here (MLIR; no need for the other CPU):

    python3 bench/cpu_model.py prepare OUT --cpu sapphirerapids
        [--spans "span=block:512 policy=top num-full=3"]

writes the model of bench/make_gpt_model.py with `--repeat-rows 16` (so
that its 0.5 GB of weights compress, lzma, to a few MB; the work is that of
random weights), compiles it with `masformer-compile --cpu=NAME` all spans
full and rewritten in f32 and all full with --precision=bf16, exports the
rewrite to ONNX for onnxruntime, and puts into OUT the libraries, their
weights and both ONNX models compressed, the runtime and libomp (the only
library a compiled CPU library needs): about 30 MB.

On the other machine (python3 with numpy and onnxruntime; no MLIR):

    python3 bench/cpu_model.py run OUT [--seqs 2048] [--threads 16 2]
        [--reps 3] [--rounds 1]

unpacks OUT, checks each library against onnxruntime on the same input
(f32: within 1e-3 + 1e-3 |onnxruntime|; bf16: finite, with its largest
error and how often the next token agrees printed), and prints, for each thread count (our
OpenMP threads and onnxruntime's intra-op threads alike) and length, the
median time of --reps runs of ours (the runtime's mf_model_run: input_ids
in, logits into the library's buffer) and of onnxruntime (original model
for full and bf16, our export for the rewrite; its idle threads sleep
rather than spin), the best of --rounds rounds that time each in turn,
and the speed ratio.
"""
import argparse
import ctypes
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "build", "bin")
LIB = os.path.join(ROOT, "build", "lib")
sys.path.insert(0, os.path.join(ROOT, "bench"))
from gpu_model import compress, unpack  # noqa: E402
from machine import describe  # noqa: E402

LIBS = {"full": [], "rewritten": None, "full-bf16": ["--precision=bf16"]}


def prepare(a):
    os.makedirs(a.out, exist_ok=True)
    os.makedirs(a.work, exist_ok=True)
    model = os.path.join(a.work, "gpt2-small-r16.onnx")
    if not os.path.exists(model):
        subprocess.run([sys.executable,
                        os.path.join(ROOT, "bench", "make_gpt_model.py"),
                        "--repeat-rows", "16", "--out", model], check=True)
    rewritten = os.path.join(a.work, "gpt2-small-r16-rewritten.onnx")
    subprocess.run([os.path.join(BIN, "masformer-opt"), model,
                    f"--masformer-rewrite-spans={a.spans}", "-o", rewritten],
                   check=True)
    for name, extra in LIBS.items():
        extra = [f"--spans={a.spans}"] if extra is None else extra
        so = os.path.join(a.work, f"{name}-{a.cpu}.so")
        t = time.perf_counter()
        subprocess.run([os.path.join(BIN, "masformer-compile"), model,
                        f"--cpu={a.cpu}", "-o", so] + extra, check=True)
        print(f"compiled {name} in {time.perf_counter() - t:.1f} s",
              flush=True)
        shutil.copy(so, os.path.join(a.out, name + ".so"))
        # The library looks for its weights by the name it was compiled
        # with, next to itself.
        weights = os.path.basename(so)[:-3] + ".weights"
        compress(os.path.join(a.work, weights),
                 os.path.join(a.out, weights + ".xz"))
    compress(model, os.path.join(a.out, "model.onnx.xz"))
    compress(rewritten, os.path.join(a.out, "rewritten.onnx.xz"))
    shutil.copy(os.path.join(LIB, "libMASFormerRuntime.so"), a.out)
    # The compiled libraries find libomp next to themselves ($ORIGIN).
    omp = os.path.realpath("/usr/lib/llvm-22/lib/libomp.so.5")
    shutil.copy(omp, os.path.join(a.out, "libomp.so.5"))
    with open(os.path.join(a.out, "manifest.json"), "w") as f:
        json.dump({"cpu": a.cpu, "spans": a.spans, "libs": list(LIBS)}, f)
    for name in sorted(os.listdir(a.out)):
        size = os.path.getsize(os.path.join(a.out, name)) / 2**20
        print(f"  {name}: {size:.1f} MiB")
    return 0


def run(a):
    sys.path.insert(0, os.path.join(ROOT, "test", "gpu"))
    from run_models import Model, RuntimeError_, load_runtime
    from timing import median_time
    import onnxruntime as ort

    d = a.unpack
    manifest = unpack(a.out, d)
    print(f"machine: {describe()}; onnxruntime {ort.__version__}")
    print(f"ours: masformer-compile --cpu={manifest['cpu']}; rewrite: "
          f"{manifest['spans']}")
    # One libomp in the process: the libraries' own (same soname), whose
    # thread count omp_set_num_threads sets for each row.
    omp = ctypes.CDLL(os.path.join(d, "libomp.so.5"), mode=ctypes.RTLD_GLOBAL)
    rt = load_runtime(os.path.join(d, "libMASFormerRuntime.so"))
    models = {}
    for n in manifest["libs"]:
        try:
            models[n] = Model(rt, os.path.join(d, n + ".so"))
        except RuntimeError_ as e:
            print(f"{n}: not loaded: {e}")
    rng = np.random.default_rng(0)
    failed = False

    def check(rc):
        if rc:
            raise RuntimeError_(rt.mf_last_error().decode())
    print("\n| threads | S | ours | onnxruntime | ours (ms) | onnxruntime "
          "(ms) | speed vs onnxruntime | max error / max | next token "
          "agrees |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for threads in a.threads:
        omp.omp_set_num_threads(threads)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.log_severity_level = 3
        # Its idle threads sleep between runs instead of spinning on the
        # cores our threads then run on (its own runs are not slowed).
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        sess = {k: ort.InferenceSession(os.path.join(d, k + ".onnx"), opts,
                                        providers=["CPUExecutionProvider"])
                for k in ("model", "rewritten")}
        for s in a.seqs:
            feeds = {"input_ids": rng.integers(0, 50257, (1, s),
                                               dtype=np.int64)}
            want = {k: v.run(None, feeds)[0] for k, v in sess.items()}
            # Each library's logits (this also sets its input for the
            # timed runs).
            got_all = {n: m.run(feeds)[0] for n, m in models.items()}
            # Every library and session --rounds times, each time the
            # median of --reps runs, in turn; the best round counts.
            t_ort = {k: float("inf") for k in sess}
            t_ours = {n: float("inf") for n in models}
            for _ in range(a.rounds):
                for n, m in models.items():
                    t_ours[n] = min(t_ours[n], median_time(
                        lambda: check(rt.mf_model_run(m.m)), a.reps,
                        warmups=1))
                for k, v in sess.items():
                    t_ort[k] = min(t_ort[k], median_time(
                        lambda: v.run(None, feeds), a.reps, warmups=0))
            for n, m in models.items():
                peer = "rewritten" if n == "rewritten" else "model"
                got = got_all[n]
                ref = want[peer]
                diff = np.abs(got.astype(np.float64) - ref)
                err = float(diff.max() / max(np.abs(ref).max(), 1e-30))
                agree = float((got.argmax(-1) == ref.argmax(-1)).mean())
                if n.endswith("bf16"):
                    # Reported, not judged: this model's random weights
                    # leave near ties between logits.
                    ok = bool(np.isfinite(got).all())
                else:
                    ok = np.isfinite(got).all() and bool(
                        (diff <= 1e-3 + 1e-3 * np.abs(ref)).all())
                if not ok:
                    failed = True
                    print(f"FAIL: {n} at S = {s}: error {err:.2e}, next "
                          f"token agrees at {agree:.3f}")
                t = t_ours[n]
                what = {"full": "f32 full", "rewritten": "f32 rewritten",
                        "full-bf16": "bf16 full"}.get(n, n)
                peer_what = ("f32 our export" if peer == "rewritten"
                             else "f32 original")
                print(f"| {threads} | {s} | {what} | {peer_what} | "
                      f"{t * 1e3:.0f} | {t_ort[peer] * 1e3:.0f} | "
                      f"{t_ort[peer] / t:.2f}x | {err:.1e} | {agree:.3f} |",
                      flush=True)
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("out")
    p.add_argument("--cpu", required=True,
                   help="the LLVM CPU of the machine it will run on")
    p.add_argument("--spans", default="span=block:512 policy=top num-full=3")
    p.add_argument("--work", default="/tmp/masformer-cpu-model")
    r = sub.add_parser("run")
    r.add_argument("out")
    r.add_argument("--seqs", type=int, nargs="+", default=[2048])
    r.add_argument("--threads", type=int, nargs="+", default=[16, 2])
    r.add_argument("--reps", type=int, default=3)
    r.add_argument("--rounds", type=int, default=1)
    r.add_argument("--unpack", default="/tmp/masformer-cpu-model-run")
    a = ap.parse_args()
    return prepare(a) if a.cmd == "prepare" else run(a)


if __name__ == "__main__":
    sys.exit(main())
