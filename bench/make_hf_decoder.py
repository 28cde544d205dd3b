#!/usr/bin/env python3
"""Exports a GPT-2-small-, Llama- or Mixtral-shaped causal LM from transformers
(random weights, fixed seed) twice, as generation benchmarks need it:

  OUT/model.onnx        input_ids, attention_mask -> logits, without a cache
                        (what masformer-compile takes, as for every use);
  OUT/model-cache.onnx  the use_cache=True layout (optimum's):
                        past_key_values.N.key/value in, logits and
                        present.N.key/value out (what onnxruntime runs for
                        generation).

  /work/venv-fixtures/bin/python bench/make_hf_decoder.py --kind gpt2 \\
      --out /tmp/masformer-gen/gpt2
  ... --kind llama ...   # 12 layers, 768 wide, 12 heads, 4 key/value heads
  ... --kind mixtral ... # Llama's attention in 8 layers, each with a sparse
                         # mixture of 8 experts (1536 wide), 2 per token

Needs torch and transformers (the fixtures' venv,
test/fixtures/make_fixtures.py); never run in CI. Both files hold the same
weights (external data beside each, models are ~0.5 GB).
"""

import argparse
import os

import torch
import transformers as tf


def build(kind, max_pos):
    torch.manual_seed(0)
    if kind == "gpt2":
        cfg = tf.GPT2Config(n_positions=max_pos, n_embd=768, n_layer=12,
                            n_head=12, vocab_size=50257)
        return tf.GPT2LMHeadModel._from_config(cfg, attn_implementation="sdpa")
    if kind == "mixtral":
        cfg = tf.MixtralConfig(vocab_size=32000, hidden_size=768,
                               intermediate_size=1536, num_hidden_layers=8,
                               num_attention_heads=12, num_key_value_heads=4,
                               num_local_experts=8, num_experts_per_tok=2,
                               sliding_window=None,
                               max_position_embeddings=max_pos)
        return tf.MixtralForCausalLM._from_config(
            cfg, attn_implementation="eager")
    cfg = tf.LlamaConfig(vocab_size=32000, hidden_size=768,
                         intermediate_size=2048, num_hidden_layers=12,
                         num_attention_heads=12, num_key_value_heads=4,
                         max_position_embeddings=max_pos)
    return tf.LlamaForCausalLM._from_config(cfg, attn_implementation="eager")


class Plain(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids, attention_mask):
        return self.m(input_ids=input_ids, attention_mask=attention_mask,
                      use_cache=False, return_dict=False)[0]


class Cached(torch.nn.Module):
    def __init__(self, m, layers):
        super().__init__()
        self.m = m
        self.layers = layers

    def forward(self, input_ids, attention_mask, *past):
        cache = tf.DynamicCache.from_legacy_cache(tuple(
            (past[2 * i], past[2 * i + 1]) for i in range(self.layers)))
        out = self.m(input_ids=input_ids, attention_mask=attention_mask,
                     past_key_values=cache, use_cache=True, return_dict=True)
        pkv = out.past_key_values
        if hasattr(pkv, "to_legacy_cache"):
            pkv = pkv.to_legacy_cache()
        flat = []
        for k, v in pkv:
            flat += [k, v]
        return (out.logits, *flat)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kind", choices=["gpt2", "llama", "mixtral"],
                    required=True)
    ap.add_argument("--max-positions", type=int, default=8192 + 256)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    model = build(a.kind, a.max_positions).eval()
    cfg = model.config
    layers = cfg.num_hidden_layers
    kv_heads = getattr(cfg, "num_key_value_heads", cfg.num_attention_heads)
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    ids = torch.randint(0, 100, (1, 8))
    mask = torch.ones_like(ids)
    with torch.no_grad():
        torch.onnx.export(
            Plain(model), (ids, mask), os.path.join(a.out, "model.onnx"),
            dynamo=False, opset_version=17,
            input_names=["input_ids", "attention_mask"],
            output_names=["logits"],
            dynamic_axes={"input_ids": {0: "batch", 1: "sequence"},
                          "attention_mask": {0: "batch", 1: "sequence"},
                          "logits": {0: "batch", 1: "sequence"}},
            do_constant_folding=True)
        kv = [f"past_key_values.{i}.{t}" for i in range(layers)
              for t in ("key", "value")]
        present = [f"present.{i}.{t}" for i in range(layers)
                   for t in ("key", "value")]
        past = [torch.zeros(1, kv_heads, 4, head_dim) for _ in kv]
        axes = {"input_ids": {0: "batch", 1: "sequence"},
                "attention_mask": {0: "batch", 1: "total"},
                "logits": {0: "batch", 1: "sequence"}}
        axes.update({n: {0: "batch", 2: "past"} for n in kv})
        axes.update({n: {0: "batch", 2: "total"} for n in present})
        torch.onnx.export(
            Cached(model, layers), (ids, torch.ones(1, 12, dtype=torch.long),
                                    *past),
            os.path.join(a.out, "model-cache.onnx"), dynamo=False,
            opset_version=17, input_names=["input_ids", "attention_mask"] + kv,
            output_names=["logits"] + present, dynamic_axes=axes,
            do_constant_folding=True)
    print(f"wrote {a.out}/model.onnx and model-cache.onnx ({kind_desc(a)})")


def kind_desc(a):
    return {"gpt2": "GPT-2 small: 12 layers, 768 wide, 12 heads, "
                    "vocabulary 50257",
            "llama": "Llama-shaped: 12 layers, 768 wide, 12 heads, 4 "
                     "key/value heads, vocabulary 32000",
            "mixtral": "Mixtral-shaped: 8 layers, 768 wide, 12 heads, 4 "
                       "key/value heads, 8 experts of 1536, 2 per token, "
                       "vocabulary 32000"}[a.kind]


if __name__ == "__main__":
    main()
