#!/usr/bin/env python3
"""Perplexity of onnxruntime-genai models (fp32 and int4), original and
rewritten by masformer, on real text (docs/EVALUATION.md, "int4 models of
onnxruntime-genai"). Not run in CI: it needs onnxruntime >= 1.24 (whose
GroupQueryAttention reads local_window_size W as W keys, what masformer
exports), onnxruntime-genai's builder to make the models, and a built
masformer (masformer-opt, masformer-compile and masformer-run on PATH).

    python -m onnxruntime_genai.models.builder -i HF_DIR -o fp32-dir -p fp32 \\
        -e cpu --extra_options windowed_kv_cache=false      # and -p int4
    python scripts/eval/genai_quantized.py --model fp32=fp32-dir \\
        --model int4=int4-dir --tokens smollm2-tokens.npy --seq 4096 \\
        --spans "span=window:512 sink=64 num-full=0" --compile int4

For each model: the perplexity of the first --seq tokens in onnxruntime
(as it is; at accuracy_level 4, onnxruntime's default for int4 on the CPU,
the activations are quantized to int8), of each rewrite's export in
onnxruntime, and for the models named by --compile of the model compiled
by masformer-compile (the products in f32 on the dequantized weights),
original and rewritten. Each rewrite's export (written as
model-rewritten.onnx into the model's folder, whose external data it
shares) is checked to keep every MatMulNBits node and its weights.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort


def feeds_for(folder, ids):
    """A prompt of `ids` with an empty cache, for a genai decoder (the
    cache's shape from genai_config.json)."""
    with open(os.path.join(folder, "genai_config.json")) as f:
        decoder = json.load(f)["model"]["decoder"]
    feeds = {"input_ids": ids[None, :].astype(np.int64),
             "attention_mask": np.ones((1, ids.size), np.int64)}
    empty = np.zeros((1, decoder["num_key_value_heads"], 0,
                      decoder["head_size"]), np.float32)
    for layer in range(decoder["num_hidden_layers"]):
        for t in ("key", "value"):
            feeds[f"past_key_values.{layer}.{t}"] = empty
    return feeds


def perplexity(logits, ids):
    logits = logits[0, :-1].astype(np.float64)
    logits -= logits.max(axis=-1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
    nll = -logp[np.arange(ids.size - 1), ids[1:]]
    return float(np.exp(nll.mean()))


def run_ort(path, feeds):
    """The logits, and the time of a second run (as masformer-run --bench
    times its second)."""
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    logits = sess.run(["logits"], feeds)[0]
    t = time.perf_counter()
    sess.run(["logits"], feeds)
    return logits, time.perf_counter() - t


def run_compiled(model, spans, feeds, work):
    lib = os.path.join(work, "model.so")
    cmd = ["masformer-compile", model, "-o", lib]
    if spans:
        cmd.append(f"--spans={spans}")
    subprocess.run(cmd, check=True)
    args = ["masformer-run", lib, "--output-dir", os.path.join(work, "out"),
            "--bench", "1"]
    for name, value in feeds.items():
        f = os.path.join(work, name + ".npy")
        np.save(f, value)
        args += ["--input", f"{name}={f}"]
    # The time of a run in the process (--bench), as onnxruntime's is of
    # sess.run: not the loading, nor the writing of the logits.
    r = subprocess.run(args, check=True, capture_output=True, text=True)
    m = re.search(r"median of \d+ runs: ([0-9.]+) ms", r.stdout)
    return (np.load(os.path.join(work, "out", "logits.npy")),
            float(m.group(1)) / 1000)


def kept_quantized(original, rewritten):
    """Whether the export kept every MatMulNBits node as it was."""
    here = os.path.dirname(os.path.abspath(__file__))
    check = os.path.join(here, "..", "..", "test", "python_utils",
                         "same_nodes.py")
    r = subprocess.run([sys.executable, check, original, rewritten,
                        "--op-type", "MatMulNBits"], capture_output=True,
                       text=True)
    return r.returncode == 0, (r.stdout or r.stderr).strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", action="append", required=True,
                    help="NAME=DIR of a genai model folder (model.onnx)")
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--spans", action="append", default=[])
    ap.add_argument("--compile", action="append", default=[],
                    help="a model NAME to compile with masformer too")
    a = ap.parse_args()
    ids = np.load(a.tokens)[:a.seq].astype(np.int64)
    cpu = next((line.split(":", 1)[1].strip() for line in open(
        "/proc/cpuinfo") if line.startswith("model name")), "?")
    print(f"onnxruntime {ort.__version__}; {ids.size} tokens; CPU {cpu}, "
          f"{os.cpu_count()} cores")
    print("| model | attention | run by | perplexity | x fp32 original |"
          " prompt s |")
    print("| --- | --- | --- | --- | --- | --- |")
    base = None
    for spec in a.model:
        name, folder = spec.split("=", 1)
        path = os.path.join(folder, "model.onnx")
        feeds = feeds_for(folder, ids)
        rows = []
        logits, secs = run_ort(path, feeds)
        rows.append(("full", "onnxruntime", perplexity(logits, ids), secs))
        del logits
        for spans in a.spans:
            out = os.path.join(folder, "model-rewritten.onnx")
            subprocess.run(["masformer-opt", path,
                            f"--masformer-rewrite-spans={spans}", "-o", out],
                           check=True)
            note = ""
            if any(n.op_type == "MatMulNBits" for n in onnx.load(
                    path, load_external_data=False).graph.node):
                ok, msg = kept_quantized(path, out)
                if not ok:
                    sys.exit(f"the export changed quantized nodes: {msg}")
                note = " (MatMulNBits kept)"
            logits, secs = run_ort(out, feeds)
            rows.append((spans + note, "onnxruntime",
                         perplexity(logits, ids), secs))
            del logits
        if name in a.compile:
            for spans in [""] + a.spans:
                with tempfile.TemporaryDirectory() as work:
                    logits, secs = run_compiled(path, spans, feeds, work)
                rows.append((spans or "full", "masformer-compile",
                             perplexity(logits, ids), secs))
                del logits
        for what, by, ppl, secs in rows:
            if base is None:
                base = ppl
            print(f"| {name} | {what} | {by} | {ppl:.3f} | {ppl / base:.3f} |"
                  f" {secs:.1f} |", flush=True)


if __name__ == "__main__":
    main()
