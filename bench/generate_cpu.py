#!/usr/bin/env python3
"""Generation on the CPU: greedy decoding of --new tokens after a random
prompt, with the library masformer-compile derives a decode entry for
(docs/generate.md), against onnxruntime running the transformers
use_cache=True export of the same model (fed its own presents), in one run:

  - masformer, full attention (every layer's cache keeps every position);
  - masformer, MASFormer rewrite (--spans; block/window layers keep only
    their span);
  - onnxruntime with-cache.

Per (model, prompt, batch): prefill time, decode tokens/s (the --new - 1
steps after the prefill), the cache bytes at most, and whether the
full-attention tokens equal onnxruntime's. Each generator runs --rounds
times (default 3), the three in turn, in reversed order every other
round; the table gives the medians, and the decode tokens/s of every
round are printed below it: a decode of 64 tokens lasts about a second
on 2 cores, and one run moved with the machine's bursts (a rewritten
library decoding slower than the full one in one run, faster in each
of six runs after it).

  python3 bench/generate_cpu.py --models /tmp/masformer-gen/gpt2 \\
      /tmp/masformer-gen/llama [--prompts 2048 8192] [--new 128] \\
      [--batches 1 8] [--batch8-max-prompt 2048] \\
      [--spans "span=block:512 policy=top num-full=3"] [--precision bf16] \\
      [--rounds 3]

With --precision bf16 our libraries are compiled with --precision=bf16
(products and attention on bf16 operands, bf16 caches where the
attention is bf16); onnxruntime stays f32, and the tokens of our full
model are not expected to equal its own (the table says whether they do).

Each model directory holds model.onnx and model-cache.onnx, made by
bench/make_hf_decoder.py (needs the torch venv once; this script needs only
numpy and onnxruntime and a build). Prints a markdown table.
"""

import argparse
import os
import statistics
import tempfile
import time

import numpy as np
import onnxruntime as ort

from compile_cpu import BIN, run
from machine import describe


def stale(lib, model):
    """Whether `lib` must be compiled again: missing, or older than the
    model or than the compiler that would build it (a library of an older
    build would measure old code)."""
    if not os.path.exists(lib):
        return True
    t = os.path.getmtime(lib)
    return (t < os.path.getmtime(model) or
            t < os.path.getmtime(os.path.join(BIN, "masformer-compile")))


def ours(lib, prompt, new, work):
    """masformer-run --generate: (prefill s, decode tokens/s, peak cache
    bytes, generated ids)."""
    path = os.path.join(work, "prompt.npy")
    np.save(path, prompt)
    out = os.path.join(work, "out")
    stdout, _ = run([os.path.join(BIN, "masformer-run"), lib, "--input",
                     f"input_ids={path}", "--generate", str(new),
                     "--output-dir", out])
    prefill = float(stdout.split("tokens in ")[1].split(" s")[0])
    decode = float(stdout.split("decode:")[1].split("(")[1].split(" tok")[0])
    peak = int(stdout.split("bytes now, ")[1].split(" at most")[0])
    ids = np.load(os.path.join(out, "ids.npy"))[:, prompt.shape[1]:]
    return prefill, decode, peak, ids


def onnxruntime(sess, prompt, new):
    """Greedy with the with-cache export: (prefill s, decode tokens/s,
    cache bytes at the end, generated ids)."""
    batch, length = prompt.shape
    kv = [i for i in sess.get_inputs() if i.name.startswith("past_key")]
    feeds = {"input_ids": prompt,
             "attention_mask": np.ones((batch, length), np.int64)}
    for i in kv:
        feeds[i.name] = np.zeros((batch, i.shape[1], 0, i.shape[3]),
                                 np.float32)
    names = [o.name for o in sess.get_outputs()]
    out_ids = np.zeros((batch, new), np.int64)
    t0 = time.perf_counter()
    outs = sess.run(None, feeds)
    t1 = time.perf_counter()
    total = length
    for t in range(new):
        nxt = outs[0][:, -1].argmax(-1)
        out_ids[:, t] = nxt
        if t + 1 == new:
            break
        total += 1
        feeds = {"input_ids": nxt[:, None].astype(np.int64),
                 "attention_mask": np.ones((batch, total), np.int64)}
        for name, value in zip(names[1:], outs[1:]):
            feeds[name.replace("present", "past_key_values")] = value
        outs = sess.run(None, feeds)
    t2 = time.perf_counter()
    cache = sum(o.nbytes for o in outs[1:])
    return t1 - t0, batch * (new - 1) / (t2 - t1), cache, out_ids


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="+", required=True)
    ap.add_argument("--prompts", type=int, nargs="+", default=[2048, 8192])
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--batch8-max-prompt", type=int, default=2048,
                    help="larger batches only up to this prompt (the "
                    "prefill's logits are batch x prompt x vocabulary)")
    ap.add_argument("--spans", default="span=block:512 policy=top num-full=3")
    ap.add_argument("--precision", choices=["f32", "bf16"], default="f32")
    ap.add_argument("--rounds", type=int, default=3,
                    help="runs of each generator; the table has medians")
    a = ap.parse_args()
    if a.rounds < 1:
        ap.error("--rounds must be at least 1")
    print(f"machine: {describe()}; onnxruntime {ort.__version__}")
    print(f"MASFormer: {a.spans}; {a.new} new tokens, greedy; ours in "
          f"{a.precision}, onnxruntime in f32; medians of {a.rounds} "
          "rounds\n")
    print("| model | prompt | batch | what | prefill (s) | decode tokens/s "
          "| cache bytes (peak) | decode vs onnxruntime | cache vs "
          "onnxruntime |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    rng = np.random.default_rng(0)
    rounds = []
    for d in a.models:
        name = os.path.basename(os.path.normpath(d))
        model = os.path.join(d, "model.onnx")
        tag = "" if a.precision == "f32" else "-" + a.precision
        full = os.path.join(d, f"full{tag}.so")
        ms = os.path.join(d, f"masformer{tag}.so")
        precision = [f"--precision={a.precision}"]
        if stale(full, model):
            run([os.path.join(BIN, "masformer-compile"), model, "-o", full] +
                precision)
        if stale(ms, model):
            run([os.path.join(BIN, "masformer-compile"), model,
                 f"--spans={a.spans}", "-o", ms] + precision)
        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        sess = ort.InferenceSession(os.path.join(d, "model-cache.onnx"), opts,
                                    providers=["CPUExecutionProvider"])
        vocab = sess.get_outputs()[0].shape[2]
        for length in a.prompts:
            for batch in a.batches:
                if batch > 1 and length > a.batch8_max_prompt:
                    continue
                prompt = rng.integers(0, vocab, (batch, length)).astype(
                    np.int64)
                runs = {}  # what -> [(prefill, tokens/s, cache, ids)]
                gens = [("onnxruntime with-cache", None),
                        ("masformer full", full),
                        ("masformer " + a.spans, ms)]
                with tempfile.TemporaryDirectory() as work:
                    for r in range(a.rounds):
                        for what, lib in (gens if r % 2 == 0 else
                                          gens[::-1]):
                            got = (onnxruntime(sess, prompt, a.new)
                                   if lib is None else
                                   ours(lib, prompt, a.new, work))
                            runs.setdefault(what, []).append(got)
                r_ids = runs[gens[0][0]][0][3]
                med = {what: (statistics.median(g[0] for g in got),
                              statistics.median(g[1] for g in got),
                              max(g[2] for g in got))
                       for what, got in runs.items()}
                r_tps, r_cache = med[gens[0][0]][1], med[gens[0][0]][2]
                for what, _ in gens[1:] + gens[:1]:
                    label = what
                    if what == "masformer full":
                        same = all(np.array_equal(g[3], r_ids)
                                   for g in runs[what])
                        label += (" (tokens = onnxruntime's)" if same else
                                  " (tokens differ from onnxruntime's)")
                    pre, tps, cache = med[what]
                    print(f"| {name} | {length} | {batch} | {label} | "
                          f"{pre:.2f} | {tps:.1f} | {cache} | "
                          f"{tps / r_tps:.2f}x | {cache / r_cache:.2f}x |",
                          flush=True)
                for what, _ in gens[1:] + gens[:1]:
                    rounds.append(f"{name} {length} x {batch}, {what}: " +
                                  " ".join(f"{g[1]:.1f}"
                                           for g in runs[what]))
    print("\ndecode tokens/s of each round:")
    for line in rounds:
        print(line)


if __name__ == "__main__":
    main()
