#!/usr/bin/env python3
"""What --precision=bf16 (matrix products and attention on bf16 operands,
f32 accumulation; AMX tiles where the CPU has them) costs in accuracy on a
real pretrained causal LM and real text: the perplexity of the first S
tokens, next to the same model compiled in f32 and onnxruntime f32.

  python3 bench/eval_precision.py --model /tmp/masformer-eval/smollm2.onnx \\
      --tokens /tmp/masformer-eval/smollm2-tokens.npy [--seq-lens 2048 4096] \\
      [--work /tmp/masformer-eval/precision]

The model and tokens are those of scripts/eval/prepare_models.py
(SmolLM2-135M-Instruct, the Python reference documentation;
docs/EVALUATION.md). The model is compiled twice, -o <work>/f32.so and
-o <work>/bf16.so, kept and compiled again only when older than the model
or the compiler. Each is run with masformer-run on input_ids [1, S] (the
first S tokens; attention_mask ones and position_ids 0..S-1 where the model
takes them), and onnxruntime (CPUExecutionProvider) runs the original model
on the same input as the f32 reference.

Per S: the perplexity of tokens 1..S-1 (next-token cross entropy from the
logits, in float64) for the three; the bf16 / f32 perplexity ratio; the
largest |logit difference| of bf16 (and of f32) from onnxruntime, and
bf16's relative to the largest |logit|; and the share of the S positions
whose argmax token bf16 and onnxruntime agree on. Prints a markdown table.
Needs a build (build/bin), numpy and onnxruntime.
"""

import argparse
import os
import sys
import time

import numpy as np
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compile_cpu import BIN, run  # noqa: E402
from generate_cpu import stale  # noqa: E402
from machine import describe  # noqa: E402

PRECISIONS = ("f32", "bf16")


def feeds(names, ids):
    """The inputs a causal LM takes, for the token ids [1, S]: input_ids,
    and attention_mask (ones) and position_ids (0..S-1) when it has them."""
    s = ids.shape[1]
    known = {"input_ids": ids,
             "attention_mask": np.ones_like(ids),
             "position_ids": np.arange(s, dtype=np.int64)[None, :]}
    missing = [n for n in names if n not in known]
    if missing:
        sys.exit(f"the model takes inputs this script cannot fill: {missing}")
    return {n: known[n] for n in names}


def library_inputs(lib):
    """The input names of a compiled library (masformer-run --list)."""
    stdout, _ = run([os.path.join(BIN, "masformer-run"), lib, "--list"])
    return [line.split()[1] for line in stdout.splitlines()
            if line.startswith("input ")]


def ours(lib, inputs, work):
    """masformer-run on `inputs` (name -> array): (logits [S, vocab],
    seconds)."""
    args = []
    for name, value in inputs.items():
        path = os.path.join(work, f"{name}.npy")
        np.save(path, value)
        args += ["--input", f"{name}={path}"]
    out = os.path.join(work, "out")
    _, seconds = run([os.path.join(BIN, "masformer-run"), lib, *args,
                      "--output-dir", out])
    logits = np.load(os.path.join(out, "logits.npy"))
    os.remove(os.path.join(out, "logits.npy"))
    return logits[0], seconds


def reference(sess, ids):
    """onnxruntime on the original model: (logits [S, vocab], seconds)."""
    names = [i.name for i in sess.get_inputs()]
    t = time.perf_counter()
    logits = sess.run(["logits"], feeds(names, ids))[0]
    return logits[0], time.perf_counter() - t


def perplexity(logits, tokens, chunk=256):
    """exp of the mean next-token cross entropy of tokens[1:] given
    logits[:-1], in float64, with a max-shifted log-sum-exp (by chunks of
    positions, to bound the float64 copy)."""
    nll = 0.0
    n = len(tokens) - 1
    for i in range(0, n, chunk):
        z = logits[i:min(i + chunk, n)].astype(np.float64)
        z -= z.max(axis=1, keepdims=True)
        lse = np.log(np.exp(z).sum(axis=1))
        target = tokens[i + 1:i + 1 + len(z)]
        nll += float((lse - z[np.arange(len(z)), target]).sum())
    return float(np.exp(nll / n))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, help="the ONNX causal LM")
    ap.add_argument("--tokens", required=True,
                    help=".npy of token ids (1-D int64)")
    ap.add_argument("--seq-lens", type=int, nargs="+", default=[2048])
    ap.add_argument("--work", default="/tmp/masformer-eval/precision")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    tokens = np.load(a.tokens).astype(np.int64)
    if max(a.seq_lens) > len(tokens):
        sys.exit(f"{a.tokens} has only {len(tokens)} tokens")

    libs = {}
    for p in PRECISIONS:
        libs[p] = os.path.join(a.work, f"{p}.so")
        if stale(libs[p], a.model):
            _, seconds = run([os.path.join(BIN, "masformer-compile"), a.model,
                              f"--precision={p}", "-o", libs[p]])
            print(f"compiled {p} in {seconds:.0f} s", file=sys.stderr)
    names = {p: library_inputs(libs[p]) for p in PRECISIONS}
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(a.model, opts,
                                providers=["CPUExecutionProvider"])

    print(f"machine: {describe()}; onnxruntime {ort.__version__}")
    print(f"model: {os.path.basename(a.model)}; text: the first S tokens of "
          f"{os.path.basename(a.tokens)}; perplexity of tokens 1..S-1\n")
    print("| S | perplexity onnxruntime f32 | masformer f32 | masformer bf16 "
          "| bf16 / f32 perplexity | max \\|logit diff\\| bf16 vs "
          "onnxruntime | / max \\|logit\\| | argmax agreement bf16 vs "
          "onnxruntime | max \\|logit diff\\| f32 vs onnxruntime |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for s in a.seq_lens:
        ids = tokens[None, :s].copy()
        text = tokens[:s]
        ref, seconds = reference(sess, ids)
        print(f"S={s}: onnxruntime {seconds:.1f} s", file=sys.stderr)
        ppl = {"ort": perplexity(ref, text)}
        diff = {}
        agree = None
        for p in PRECISIONS:
            logits, seconds = ours(libs[p], feeds(names[p], ids), a.work)
            print(f"S={s}: masformer {p} {seconds:.1f} s", file=sys.stderr)
            ppl[p] = perplexity(logits, text)
            diff[p] = float(np.abs(logits - ref).max())
            if p == "bf16":
                agree = float((logits.argmax(1) == ref.argmax(1)).mean())
            del logits
        scale = float(np.abs(ref).max())
        print(f"| {s} | {ppl['ort']:.4f} | {ppl['f32']:.4f} | "
              f"{ppl['bf16']:.4f} | {ppl['bf16'] / ppl['f32']:.5f} | "
              f"{diff['bf16']:.3f} | {diff['bf16'] / scale:.2e} | "
              f"{agree:.2%} | {diff['f32']:.2e} |", flush=True)


if __name__ == "__main__":
    main()
