#!/usr/bin/env python3
"""Replays models that once crashed a tool (test/fuzz/model-crashers, found
by the structure-aware fuzzer) through every entry point the fuzzer drives:
the import with dynamic and with static shapes, the raise, the rewrite and
the export. Each run must end in success or one error line naming the
problem, with exit status 1: never a signal, an abort or an LLVM crash
report, and never an output file left behind by a failed run.

  replay_models.py BIN_DIR OUT_DIR MODEL...
"""

import os
import subprocess
import sys

import onnx

SPANS = ["", "span=block:4 full-layers=0", "span=window:3 sink=1 num-full=0"]


def static_shapes(path):
    """--input-shape for each input, its dynamic dimensions as 2."""
    try:
        model = onnx.load(path, load_external_data=False)
    except Exception:  # Not a model at all: the tools say so.
        return []
    args = []
    for inp in model.graph.input:
        tt = inp.type.tensor_type
        if not tt.HasField("shape") or not inp.name.isprintable():
            continue
        dims = [d.dim_value if 0 < d.dim_value < 64 else 2
                for d in tt.shape.dim]
        if dims:
            args += ["--input-shape", inp.name + "=" + "x".join(map(str, dims))]
    return args


def main():
    bin_dir, out_dir, models = sys.argv[1], sys.argv[2], sys.argv[3:]
    os.makedirs(out_dir, exist_ok=True)
    failures = []
    runs = 0
    for model in models:
        for shapes in ([], static_shapes(model)):
            for spans in SPANS:
                out = os.path.join(out_dir, "out.onnx")
                cmd = [os.path.join(bin_dir, "masformer-opt"), model] + shapes
                if spans:
                    cmd += ["--masformer-rewrite-spans=" + spans]
                cmd += ["-o", out]
                runs += 1
                p = subprocess.run(cmd, capture_output=True, text=True,
                                   timeout=120)
                errors = [l for l in p.stderr.splitlines() if "error:" in l]
                if p.returncode == 0:
                    os.remove(out)
                    continue
                if (p.returncode != 1 or not errors or
                        "PLEASE submit" in p.stderr or
                        "Stack dump" in p.stderr or os.path.exists(out)):
                    failures.append((cmd, p.returncode, p.stderr[-2000:]))
    for cmd, rc, err in failures:
        print("FAILED (exit %d): %s\n%s" % (rc, " ".join(cmd), err))
    print("%d runs over %d models, %d failed" % (runs, len(models),
                                                  len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
