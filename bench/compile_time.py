#!/usr/bin/env python3
"""masformer-compile's own time on the test fixtures, option sets (and
compilers) side by side: each (model, compiler, options) compiled --rounds
times, alternating within a round so that a burst of the machine hits them
alike; the best and median wall time of each, and the ratio to the first.

  python3 bench/compile_time.py [--models llama gpt2 mistral bert]
      [--set=''] [--set='--verify-each'] [--bin build/bin/masformer-compile]
      [--bin /tmp/old/masformer-compile] [--rounds 3] [--cold]

A set is one string of masformer-compile options; --bin (repeatable) times
other builds of masformer-compile with every set, e.g. the build before a
change against the one after it. By default the object
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


def compile_once(compiler, model, options, work, cache):
    cmd = [compiler, model, "-o",
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
    ap.add_argument("--bin", action="append", dest="bins",
                    help="a masformer-compile to time (repeatable; default: "
                         "build/bin's)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cold", action="store_true",
                    help="an empty object cache for every compile")
    args = ap.parse_args()
    sets = args.sets if args.sets else ["", "--verify-each"]
    bins = args.bins or [os.path.join(BIN, "masformer-compile")]
    # (compiler, options) in the order timed and printed.
    runs = [(b, s) for b in bins for s in sets]

    def label(run):
        b, s = run
        opts = f"`{s}`" if s else "(none)"
        return opts if len(bins) == 1 else f"{b} {opts}"
    print(describe())
    print(f"masformer-compile, {args.rounds} rounds, object cache "
          f"{'empty each time' if args.cold else 'warm'}")
    with tempfile.TemporaryDirectory(prefix="masformer-compile-time-") as work:
        shared = os.path.join(work, "cache")
        times = {}
        for name in args.models:
            model = model_path(name)
            if not args.cold:
                # Fill the cache with every run's parts first.
                for b, s in runs:
                    compile_once(b, model, shlex.split(s), work, shared)
            for _ in range(args.rounds):
                for run in runs:
                    cache = (tempfile.mkdtemp(dir=work) if args.cold
                             else shared)
                    times.setdefault((name, run), []).append(compile_once(
                        run[0], model, shlex.split(run[1]), work, cache))
        print()
        print("| model | compiler and options | best (s) | median (s) | "
              "median / first's |")
        print("| --- | --- | --- | --- | --- |")
        totals = {run: 0.0 for run in runs}
        for name in args.models:
            base = statistics.median(times[(name, runs[0])])
            for run in runs:
                t = times[(name, run)]
                med = statistics.median(t)
                totals[run] += med
                print(f"| {name} | {label(run)} | {min(t):.2f} | "
                      f"{med:.2f} | {med / base:.3f} |")
        for run in runs:
            print(f"| all | {label(run)} | | {totals[run]:.2f} | "
                  f"{totals[run] / totals[runs[0]]:.3f} |")


if __name__ == "__main__":
    main()
