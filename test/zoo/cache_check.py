#!/usr/bin/env python3
"""The rewrite of a decoder exported with a KV cache, against torch.

test/fixtures/llama-cache.onnx is llama.onnx (same weights) exported with
past_key_values inputs and present outputs. This exports its rewrite
(`masformer-opt --masformer-rewrite-spans=SPANS`), runs it in onnxruntime
the way generation does (a prefix with an empty cache, then the next tokens
with the presents it returned), and compares the logits of the next tokens
with torch running the whole sequence through the same model with the span
inside its attention (test/zoo/zoo.py's wrapped softmax, block spans).

Needs torch (not in CI); run with the fixtures venv and the build on PATH:

    PATH=$PWD/build/bin:$PATH /work/venv-fixtures/bin/python \\
        test/zoo/cache_check.py [--block 4] [--past 9] [--new 4]

Exit status 1 when the error exceeds 1e-4 (relative to the largest logit),
or when the span changes nothing (the check could not fail).
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "fixtures"))
sys.path.insert(0, HERE)

import make_fixtures  # noqa: E402
import zoo  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--block", type=int, default=4)
    ap.add_argument("--past", type=int, default=9)
    ap.add_argument("--new", type=int, default=4)
    ap.add_argument("--batch", type=int, default=2)
    a = ap.parse_args()
    fixture = os.path.join(HERE, "..", "fixtures", "llama-cache.onnx")
    with tempfile.TemporaryDirectory() as tmp:
        rewritten = os.path.join(tmp, "rewrite.onnx")
        subprocess.run(["masformer-opt", fixture,
                        f"--masformer-rewrite-spans=span=block:{a.block} "
                        "full-layers=0", "-o", rewritten], check=True)
        sess = ort.InferenceSession(rewritten,
                                    providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(3)
        b, p, s = a.batch, a.past, a.new
        ids = rng.integers(0, make_fixtures.VOCAB, (b, p + s), np.int64)
        mask = np.ones((b, p + s), np.int64)
        caches = [i.name for i in sess.get_inputs()][2:]
        feeds = {"input_ids": ids[:, :p], "attention_mask": mask[:, :p]}
        feeds.update({n: np.zeros((b, make_fixtures.KV_HEADS, 0,
                                   make_fixtures.HIDDEN // make_fixtures.HEADS),
                                  np.float32) for n in caches})
        presents = sess.run(None, feeds)[1:]
        feeds = {"input_ids": ids[:, p:], "attention_mask": mask}
        feeds.update(dict(zip(caches, presents)))
        got = sess.run(None, feeds)[0]
    model = make_fixtures.torch_model("llama", "eager")
    run = {"input_ids": ids, "attention_mask": mask}
    want = zoo.torch_run(model, run, block=a.block, causal=True)[:, p:]
    full = zoo.torch_run(model, run)[:, p:]
    err = zoo.rel_err(got, want)
    change = zoo.rel_err(full, want)
    print(f"block {a.block}, {p} cached + {s} new tokens: rewrite through "
          f"the cache vs torch with the span: {err:.2g} (the span changes "
          f"the logits by {change:.2g})")
    return 0 if err <= zoo.TOL and change > 100 * zoo.TOL else 1


if __name__ == "__main__":
    sys.exit(main())
