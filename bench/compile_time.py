#!/usr/bin/env python3
"""masformer-compile's own time on the test fixtures, option sets side by
side: each (model, options) pair compiled --rounds times, the sets
alternating within a round so that a burst of the machine hits them alike;
the best and median wall time of each, and the ratio to the first set.

  python3 bench/compile_time.py [--models llama gpt2 mistral bert]
      [--set ''] [--set '--verify-each'] [--rounds 3] [--cold]

A set is one string of masformer-compile options. By default the object
cache (docs/compile.md) holds every part after the first compile, so the
times are those of the import, the MLIR lowering and the link: what the
test suite's second compile of a fixture costs; --cold gives every
compile an empty cache (LLVM's optimization and machine code included).
Models are names under test/fixtures/ or paths. Needs a build (build/bin).
"""

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

from machine import describe

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "build", "bin")


def model_path(name):
    if os.path.exists(name):
        return name
    path = os.path.join(ROOT, "test", "fixtures", name + ".onnx")
    if not os.path.exists(path):
        sys.exit(f"compile_time.py: no model '{name}' (not a file, and no "
                 f"{path})")
    return path


def compile_once(model, options, work, cache):
    cmd = [os.path.join(BIN, "masformer-compile"), model, "-o",
           os.path.join(work, "model.so"), *options]
    env = dict(os.environ, MASFORMER_CACHE_DIR=cache)
    start = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - start
    if r.returncode != 0:
        sys.exit(f"compile_time.py: {shlex.join(cmd)} failed:\n{r.stderr}")
    return elapsed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+",
                    default=["llama", "gpt2", "mistral", "bert"])
    ap.add_argument("--set", action="append", dest="sets",
                    help="masformer-compile options (repeatable; default: "
                         "'' and '--verify-each')")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cold", action="store_true",
                    help="an empty object cache for every compile")
    args = ap.parse_args()
    sets = args.sets if args.sets else ["", "--verify-each"]
    print(describe())
    print(f"masformer-compile, {args.rounds} rounds, object cache "
          f"{'empty each time' if args.cold else 'warm'}")
    with tempfile.TemporaryDirectory(prefix="masformer-compile-time-") as work:
        shared = os.path.join(work, "cache")
        times = {}
        for name in args.models:
            model = model_path(name)
            if not args.cold:
                # Fill the cache with every set's parts first.
                for s in sets:
                    compile_once(model, shlex.split(s), work, shared)
            for _ in range(args.rounds):
                for s in sets:
                    cache = (tempfile.mkdtemp(dir=work) if args.cold
                             else shared)
                    times.setdefault((name, s), []).append(
                        compile_once(model, shlex.split(s), work, cache))
        print()
        print("| model | options | best (s) | median (s) | median / first set's |")
        print("| --- | --- | --- | --- | --- |")
        totals = {s: 0.0 for s in sets}
        for name in args.models:
            base = statistics.median(times[(name, sets[0])])
            for s in sets:
                t = times[(name, s)]
                med = statistics.median(t)
                totals[s] += med
                print(f"| {name} | `{s or '(none)'}` | {min(t):.2f} | "
                      f"{med:.2f} | {med / base:.3f} |")
        for s in sets:
            print(f"| all | `{s or '(none)'}` | | {totals[s]:.2f} | "
                  f"{totals[s] / totals[sets[0]]:.3f} |")


if __name__ == "__main__":
    main()
