#!/usr/bin/env python3
"""Checks ids that masformer-run --generate wrote against the whole-sequence
model in onnxruntime: the original ONNX model, or for a rewritten model the
original with the span's mask added (span_reference.py), both independent of
the compiler.

    generate_check.py REF.onnx --ids out/ids.npy --prompt-len L

For a causal model the logits at position p depend only on the tokens up to
p, so one onnxruntime run on the generated sequence (all but its last
token) gives what rerunning the whole sequence at every step gives: each
generated token must be the argmax of the reference's logits at the
position before it (greedy decoding).
"""

import argparse
import sys

import numpy as np
import onnxruntime as ort


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("reference")
    ap.add_argument("--ids", required=True)
    ap.add_argument("--prompt-len", type=int, required=True)
    a = ap.parse_args()

    ids = np.load(a.ids)
    if ids.dtype != np.int64 or ids.ndim != 2:
        sys.exit(f"{a.ids}: expected int64 [batch, length], got {ids.dtype} "
                 f"{ids.shape}")
    batch, total = ids.shape
    new = total - a.prompt_len
    if new < 2:
        sys.exit(f"{a.ids}: {new} generated tokens; the check needs two or more")
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(a.reference, opts,
                                providers=["CPUExecutionProvider"])
    seq = ids[:, :-1]
    feeds = {}
    for inp in sess.get_inputs():
        if inp.name == "input_ids":
            feeds[inp.name] = seq
        elif inp.name == "attention_mask":
            feeds[inp.name] = np.ones_like(seq)
        elif inp.name == "position_ids":
            feeds[inp.name] = np.broadcast_to(np.arange(seq.shape[1]),
                                              seq.shape).copy()
        else:
            sys.exit(f"{a.reference}: unexpected input {inp.name!r}")
    logits = sess.run(None, feeds)[0]
    want = logits[:, a.prompt_len - 1:].argmax(-1)
    got = ids[:, a.prompt_len:]
    bad = np.argwhere(want != got)
    if bad.size:
        b, t = bad[0]
        sys.exit(f"sequence {b}, generated token {t}: masformer generated "
                 f"{got[b, t]}, the whole-sequence model's argmax is "
                 f"{want[b, t]}")
    print(f"OK: {batch} x {new} generated tokens equal the whole-sequence "
          f"model's greedy tokens")


if __name__ == "__main__":
    main()
