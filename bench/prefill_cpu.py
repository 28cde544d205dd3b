#!/usr/bin/env python3
"""A generation's prefill on the CPU: the decode entry asked for every
prompt position's logits (Session.prefill(ids), what a prefill returned
until 2026-12-06) against only the last one's (prefill(ids,
logits_rows=1), what generate and masformer-run --generate ask for now),
with the same library in one run. The second skips the LM head's work on
the other rows (2 * length * hidden * vocab FLOP: for GPT-2 small at 8192
tokens 632 GFLOP of the prefill's ~3.4 TFLOP) and its [batch, length,
vocab] f32 output (1.6 GB there).

Per (model, prompt): the median of --rounds prefills of each kind,
alternating (ABBA), the ratio, the logits bytes each returns, and the
largest difference between the last row of the two (they must agree: the
same kernels on fewer rows).

  python3 bench/prefill_cpu.py --models /tmp/masformer-gen/gpt2 \\
      /tmp/masformer-gen/llama [--prompts 2048 8192] [--rounds 3] \\
      [--precision bf16] [--spans "span=block:512 policy=top num-full=3"]

Each model directory holds model.onnx (bench/make_hf_decoder.py); the
library is the full model's, or with --spans the rewrite's, compiled when
missing or older than the compiler. With --libs, the given libraries
instead (of the same model, e.g. compiled by two versions of the
compiler), timed in turn in every round (the order reversed every other
round). Prints a markdown table.
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np

from compile_cpu import BIN, ROOT, run
from generate_cpu import stale
from machine import describe

sys.path.insert(0, os.path.join(ROOT, "build", "python_packages"))
import masformer  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--models", nargs="+")
    g.add_argument("--libs", nargs="+")
    p.add_argument("--prompts", nargs="+", type=int, default=[2048, 8192])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--precision", choices=["f32", "bf16"], default="f32")
    p.add_argument("--spans", default=None)
    a = p.parse_args()
    print(describe())
    print(f"precision {a.precision}, spans {a.spans or 'full'}, "
          f"{a.rounds} rounds (ABBA)\n")
    print("| model | prompt | every row (s) | last row (s) | every / last "
          "| logits bytes (every / last) | last row max diff |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    rng = np.random.default_rng(0)
    entries = []  # (name, library)
    for d in a.models or []:
        model = os.path.join(d, "model.onnx")
        tag = ("masformer" if a.spans else "full") + (
            "" if a.precision == "f32" else "-" + a.precision)
        lib = os.path.join(d, f"{tag}.so")
        if stale(lib, model):
            cmd = [os.path.join(BIN, "masformer-compile"), model, "-o", lib,
                   f"--precision={a.precision}"]
            if a.spans:
                cmd.append(f"--spans={a.spans}")
            run(cmd)
        entries.append((os.path.basename(os.path.normpath(d)), lib))
    for lib in a.libs or []:
        entries.append((lib, lib))
    # One set of prompts for every library (--libs compares them).
    groups = [entries] if a.libs else [[e] for e in entries]
    for group in groups:
        sessions = [(name, masformer.Session(lib)) for name, lib in group]
        for length in a.prompts:
            ids = rng.integers(0, 1000, (1, length)).astype(np.int64)
            times = {}
            out = {}
            for r in range(a.rounds):
                order = sessions if r % 2 == 0 else sessions[::-1]
                kinds = ["every", "last"] if r % 2 == 0 else ["last", "every"]
                for name, sess in order:
                    for kind in kinds:
                        rows = None if kind == "every" else 1
                        t = time.perf_counter()
                        logits = sess.prefill(ids, logits_rows=rows)
                        times.setdefault((name, kind), []).append(
                            time.perf_counter() - t)
                        out[name, kind] = (logits.nbytes,
                                           logits[:, -1].copy())
                        del logits
            for name, _ in sessions:
                every = statistics.median(times[name, "every"])
                last = statistics.median(times[name, "last"])
                diff = np.abs(out[name, "every"][1] -
                              out[name, "last"][1]).max()
                print(f"| {name} | {length} | {every:.2f} | {last:.2f} | "
                      f"{every / last:.2f}x | {out[name, 'every'][0]} / "
                      f"{out[name, 'last'][0]} | {diff:.2g} |", flush=True)
                print(f"  {name} rounds (s): every " +
                      " ".join(f"{t:.2f}" for t in times[name, "every"]) +
                      "; last " +
                      " ".join(f"{t:.2f}" for t in times[name, "last"]),
                      file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
