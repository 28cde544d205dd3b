#!/usr/bin/env python3
"""The model zoo: small random-weight exports of the transformer families
people run, each put through the whole masformer flow, with a coverage
table (docs/import.md "Model families").

For each architecture (a real Hugging Face class, transformers 4.46.3, tiny
config, fixed seeds) and exporter (TorchScript opset 17; dynamo opset 18;
eager attention, and SDPA where the export differs), it

 1. exports the model with dynamic batch (and sequence, where the model has
    one) and checks onnxruntime against torch;
 2. imports it with dynamic sizes (`masformer-translate --import-onnx`),
    and with the test sizes fixed (`--input-shape`) when that fails;
 3. raises attention strictly and counts one `masformer.attention` per
    layer;
 4. compiles the whole model (`masformer-compile`) and runs it at two sizes
    against onnxruntime on the original;
 5. rewrites it (`span=block:4 full-layers=0`) and compares, at the first
    size, both the ONNX export in onnxruntime and the compiled rewrite
    (`masformer-compile --spans`) with a torch reference that applies the
    block span inside the model: the eager model run with
    torch.nn.functional.softmax wrapped, so that from the second attention
    softmax on the scores outside the query's block (and, for causal
    models, the triangle) are -inf (independent of masformer's export).
    Encoder-decoders (BART, mBART, Marian, T5, Whisper) run with the
    decoder at another length than the encoder; their reference masks
    only scores with as many queries as keys, leaving the decoder's
    cross-attention full, as the rewrite must.

Errors are relative to the largest |reference| output and pass at 1e-4.
Needs torch and transformers (not in CI): run it with the fixtures venv
(test/fixtures/make_fixtures.py says how to make it) and the build on
PATH / PYTHONPATH:

    PATH=$PWD/build/bin:$PATH PYTHONPATH=$PWD/build/python_packages \\
        /work/venv-fixtures/bin/python test/zoo/zoo.py [--out DIR] \\
        [--only NAME ...] [--table table.md]

Prints one line per model and the markdown table (also written to
--table); exit status 1 when some check failed.
"""

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

VOCAB, MAX_POS = 128, 128
HIDDEN, HEADS, KV_HEADS = 32, 4, 2
INIT = 0.2
BLOCK = 4
TOL = 1e-4

# (batch, seq) of the two runs; row 1 of the first has padding at the end.
SIZES = [(2, 16), (3, 9)]
# An encoder-decoder's decoder length at each run's (encoder) length.
DECODER_LEN = {16: 7, 9: 13}


# ---------------------------------------------------------------------------
# The architectures
# ---------------------------------------------------------------------------

def _decoder(cls, cfg):
    return dict(cls=cls, cfg=cfg, kind="decoder")


def architectures():
    import transformers as tf

    dec = dict(vocab_size=VOCAB, max_position_embeddings=MAX_POS,
               initializer_range=INIT, bos_token_id=0, eos_token_id=0)
    llama_like = dict(dec, hidden_size=HIDDEN, intermediate_size=2 * HIDDEN,
                      num_hidden_layers=3, num_attention_heads=HEADS,
                      num_key_value_heads=KV_HEADS, pad_token_id=None)
    enc = dict(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=2,
               num_attention_heads=HEADS, intermediate_size=2 * HIDDEN,
               max_position_embeddings=MAX_POS, initializer_range=INIT)
    a = {}
    a["gpt2"] = _decoder(tf.GPT2LMHeadModel, tf.GPT2Config(
        vocab_size=VOCAB, n_positions=MAX_POS, n_embd=HIDDEN, n_layer=3,
        n_head=HEADS, initializer_range=INIT, bos_token_id=0, eos_token_id=0))
    a["gptneox"] = _decoder(tf.GPTNeoXForCausalLM, tf.GPTNeoXConfig(
        **dec, hidden_size=HIDDEN, num_hidden_layers=3,
        num_attention_heads=HEADS, intermediate_size=2 * HIDDEN))
    a["gptj"] = _decoder(tf.GPTJForCausalLM, tf.GPTJConfig(
        vocab_size=VOCAB, n_positions=MAX_POS, n_embd=HIDDEN, n_layer=3,
        n_head=HEADS, rotary_dim=4, initializer_range=INIT, bos_token_id=0,
        eos_token_id=0))
    a["opt"] = _decoder(tf.OPTForCausalLM, tf.OPTConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=3,
        ffn_dim=2 * HIDDEN, max_position_embeddings=MAX_POS,
        word_embed_proj_dim=HIDDEN, num_attention_heads=HEADS,
        init_std=INIT, pad_token_id=1, bos_token_id=0, eos_token_id=0))
    a["bloom"] = _decoder(tf.BloomForCausalLM, tf.BloomConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, n_layer=3, n_head=HEADS,
        initializer_range=INIT, bos_token_id=0, eos_token_id=0))
    a["falcon-mqa"] = _decoder(tf.FalconForCausalLM, tf.FalconConfig(
        **dec, hidden_size=HIDDEN, num_hidden_layers=3,
        num_attention_heads=HEADS, multi_query=True,
        new_decoder_architecture=False, parallel_attn=True, alibi=False,
        bias=False))
    a["falcon-mha"] = _decoder(tf.FalconForCausalLM, tf.FalconConfig(
        **dec, hidden_size=HIDDEN, num_hidden_layers=3,
        num_attention_heads=HEADS, multi_query=False,
        new_decoder_architecture=False, parallel_attn=False, alibi=False,
        bias=True))
    a["llama"] = _decoder(tf.LlamaForCausalLM, tf.LlamaConfig(**llama_like))
    a["mistral"] = _decoder(tf.MistralForCausalLM, tf.MistralConfig(
        **llama_like, sliding_window=6))
    a["qwen2"] = _decoder(tf.Qwen2ForCausalLM, tf.Qwen2Config(
        **llama_like, use_sliding_window=False))
    a["phi"] = _decoder(tf.PhiForCausalLM, tf.PhiConfig(
        **dict(llama_like, num_key_value_heads=HEADS),
        partial_rotary_factor=0.5))
    a["phi3"] = _decoder(tf.Phi3ForCausalLM, tf.Phi3Config(
        **llama_like, sliding_window=6))
    a["gemma"] = _decoder(tf.GemmaForCausalLM, tf.GemmaConfig(
        **llama_like, head_dim=HIDDEN // HEADS))
    a["gemma2"] = _decoder(tf.Gemma2ForCausalLM, tf.Gemma2Config(
        **llama_like, head_dim=HIDDEN // HEADS,
        query_pre_attn_scalar=HIDDEN // HEADS, attn_logit_softcapping=2.0,
        final_logit_softcapping=30.0, sliding_window=6,
        cache_implementation=None))
    # A sparse mixture of experts in place of the MLP: TopK routing,
    # NonZero's run-time token counts, scatters back (docs/import.md).
    a["mixtral"] = _decoder(tf.MixtralForCausalLM, tf.MixtralConfig(
        **llama_like, num_local_experts=4, num_experts_per_tok=2,
        sliding_window=None))
    a["qwen2-moe"] = _decoder(tf.Qwen2MoeForCausalLM, tf.Qwen2MoeConfig(
        **llama_like, num_experts=4, num_experts_per_tok=2,
        moe_intermediate_size=HIDDEN, shared_expert_intermediate_size=HIDDEN,
        use_sliding_window=False))
    a["olmoe"] = _decoder(tf.OlmoeForCausalLM, tf.OlmoeConfig(
        **llama_like, num_experts=4, num_experts_per_tok=2))
    a["phimoe"] = _decoder(tf.PhimoeForCausalLM, tf.PhimoeConfig(
        **llama_like, num_local_experts=4, num_experts_per_tok=2,
        sliding_window=None))
    a["stablelm"] = _decoder(tf.StableLmForCausalLM, tf.StableLmConfig(
        **llama_like, partial_rotary_factor=0.25))
    a["starcoder2"] = _decoder(tf.Starcoder2ForCausalLM, tf.Starcoder2Config(
        **llama_like, sliding_window=None))
    a["olmo"] = _decoder(tf.OlmoForCausalLM, tf.OlmoConfig(**llama_like))
    a["cohere"] = _decoder(tf.CohereForCausalLM, tf.CohereConfig(
        **llama_like))
    a["granite"] = _decoder(tf.GraniteForCausalLM, tf.GraniteConfig(
        **llama_like, attention_multiplier=0.3, residual_multiplier=0.5,
        embedding_multiplier=2.0, logits_scaling=4.0))
    a["nemotron"] = _decoder(tf.NemotronForCausalLM, tf.NemotronConfig(
        **llama_like, head_dim=HIDDEN // HEADS))
    a["gpt-bigcode"] = _decoder(tf.GPTBigCodeForCausalLM, tf.GPTBigCodeConfig(
        vocab_size=VOCAB, n_positions=MAX_POS, n_embd=HIDDEN, n_layer=3,
        n_head=HEADS, multi_query=True, initializer_range=INIT,
        bos_token_id=0, eos_token_id=0))
    # Its eager multi-query attention lays the scores out [B, S, H, T]
    # before transformers 5 (which shares Llama's eager attention).
    if int(tf.__version__.split(".")[0]) < 5:
        a["gpt-bigcode"]["query_dim"] = 1
    a["codegen"] = _decoder(tf.CodeGenForCausalLM, tf.CodeGenConfig(
        vocab_size=VOCAB, n_positions=MAX_POS, n_ctx=MAX_POS, n_embd=HIDDEN,
        n_layer=3, n_head=HEADS, rotary_dim=4, initializer_range=INIT,
        bos_token_id=0, eos_token_id=0))
    a["xglm"] = _decoder(tf.XGLMForCausalLM, tf.XGLMConfig(
        vocab_size=VOCAB, d_model=HIDDEN, num_layers=3, attention_heads=HEADS,
        ffn_dim=2 * HIDDEN, max_position_embeddings=MAX_POS, init_std=INIT,
        bos_token_id=0, eos_token_id=0, pad_token_id=1))
    a["bert"] = dict(cls=tf.BertModel, cfg=tf.BertConfig(**enc),
                     kind="encoder")
    a["roberta"] = dict(cls=tf.RobertaModel, cfg=tf.RobertaConfig(
        **dict(enc, max_position_embeddings=MAX_POS + 2), pad_token_id=1),
        kind="encoder")
    a["distilbert"] = dict(cls=tf.DistilBertModel, cfg=tf.DistilBertConfig(
        vocab_size=VOCAB, max_position_embeddings=MAX_POS, n_layers=2,
        n_heads=HEADS, dim=HIDDEN, hidden_dim=2 * HIDDEN,
        initializer_range=INIT), kind="encoder")
    a["electra"] = dict(cls=tf.ElectraModel, cfg=tf.ElectraConfig(
        **enc, embedding_size=16), kind="encoder")
    a["t5-encoder"] = dict(cls=tf.T5EncoderModel, cfg=tf.T5Config(
        vocab_size=VOCAB, d_model=HIDDEN, d_kv=HIDDEN // HEADS,
        d_ff=2 * HIDDEN, num_layers=2, num_heads=HEADS,
        relative_attention_num_buckets=8, relative_attention_max_distance=16,
        initializer_factor=1.0), kind="encoder")
    a["vit"] = dict(cls=tf.ViTModel, cfg=tf.ViTConfig(
        hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=HEADS,
        intermediate_size=2 * HIDDEN, image_size=16, patch_size=4,
        num_channels=3, initializer_range=INIT), kind="vision",
        inputs=("pixel_values", (3, 16, 16)), layers=2)
    a["whisper-encoder"] = dict(cls=tf.WhisperModel, cfg=tf.WhisperConfig(
        vocab_size=VOCAB, num_mel_bins=8, encoder_layers=2,
        encoder_attention_heads=HEADS, decoder_layers=1,
        decoder_attention_heads=HEADS, d_model=HIDDEN,
        encoder_ffn_dim=2 * HIDDEN, decoder_ffn_dim=2 * HIDDEN,
        max_source_positions=16, max_target_positions=16,
        pad_token_id=0, bos_token_id=0, eos_token_id=0,
        decoder_start_token_id=0, init_std=INIT), kind="audio",
        inputs=("input_features", (8, 32)),
        layers=2)
    # Families of transformers 5 (absent from 4.46): Qwen3 and OLMo 2 (norms
    # on Q and K), Gemma 3 (sliding windows on five layers of six; here
    # every other one), SmolLM3 (no rotary on some layers), ModernBERT (an
    # encoder alternating global attention with a local two-sided window).
    if hasattr(tf, "Qwen3Config"):
        a["qwen3"] = _decoder(tf.Qwen3ForCausalLM, tf.Qwen3Config(
            **llama_like, head_dim=HIDDEN // HEADS))
        a["olmo2"] = _decoder(tf.Olmo2ForCausalLM, tf.Olmo2Config(
            **llama_like))
        a["gemma3"] = _decoder(tf.Gemma3ForCausalLM, tf.Gemma3TextConfig(
            **llama_like, head_dim=HIDDEN // HEADS,
            query_pre_attn_scalar=HIDDEN // HEADS, sliding_window=6,
            layer_types=["sliding_attention", "full_attention",
                         "sliding_attention"]))
        a["smollm3"] = _decoder(tf.SmolLM3ForCausalLM, tf.SmolLM3Config(
            **llama_like, no_rope_layers=[1, 0, 1]))
        a["modernbert"] = dict(cls=tf.ModernBertModel, cfg=tf.ModernBertConfig(
            vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=3,
            num_attention_heads=HEADS, intermediate_size=2 * HIDDEN,
            max_position_embeddings=MAX_POS, local_attention=6,
            global_attn_every_n_layers=2, initializer_range=INIT,
            pad_token_id=0), kind="encoder", layers=3)
    # Encoder-decoders: the decoder's cross-attention reads the encoder's
    # states and stays full in the rewrite (masformer.cross_attention).
    # Layers: the encoder's, then per decoder layer self- and
    # cross-attention.
    s2s = dict(vocab_size=VOCAB, d_model=HIDDEN, encoder_layers=2,
               decoder_layers=2, encoder_attention_heads=HEADS,
               decoder_attention_heads=HEADS, encoder_ffn_dim=2 * HIDDEN,
               decoder_ffn_dim=2 * HIDDEN, max_position_embeddings=MAX_POS,
               init_std=INIT, pad_token_id=0, bos_token_id=0, eos_token_id=0,
               decoder_start_token_id=0)
    a["bart"] = dict(cls=tf.BartForConditionalGeneration,
                     cfg=tf.BartConfig(**s2s), kind="seq2seq", layers=6)
    a["mbart"] = dict(cls=tf.MBartForConditionalGeneration,
                      cfg=tf.MBartConfig(**s2s), kind="seq2seq", layers=6)
    a["marian"] = dict(cls=tf.MarianMTModel, cfg=tf.MarianConfig(**s2s),
                       kind="seq2seq", layers=6)
    a["t5"] = dict(cls=tf.T5ForConditionalGeneration, cfg=tf.T5Config(
        vocab_size=VOCAB, d_model=HIDDEN, d_kv=HIDDEN // HEADS,
        d_ff=2 * HIDDEN, num_layers=2, num_decoder_layers=2,
        num_heads=HEADS, relative_attention_num_buckets=8,
        relative_attention_max_distance=16, initializer_factor=1.0,
        decoder_start_token_id=0), kind="seq2seq", layers=6)
    a["whisper"] = dict(cls=tf.WhisperForConditionalGeneration,
                        cfg=tf.WhisperConfig(**dict(
                            a["whisper-encoder"]["cfg"].to_dict(),
                            decoder_layers=2)),
                        kind="seq2seq", inputs=("input_features", (8, 32)),
                        layers=6)
    return a


# name -> (architecture, attention implementation, exporter)
MODELS = {}
for _arch in ["gpt2", "gptneox", "gptj", "opt", "bloom", "falcon-mqa",
              "falcon-mha", "llama", "mistral", "qwen2", "phi", "phi3",
              "gemma", "gemma2", "mixtral", "qwen2-moe", "olmoe", "phimoe",
              "stablelm", "starcoder2", "olmo",
              "cohere", "granite", "nemotron", "gpt-bigcode", "codegen",
              "xglm", "bert", "roberta", "distilbert", "electra",
              "t5-encoder", "vit", "whisper-encoder", "bart", "mbart",
              "marian", "t5", "whisper", "qwen3", "olmo2", "gemma3",
              "smollm3", "modernbert"]:
    # Cohere's TorchScript export does not run in onnxruntime itself (its
    # rotary table's Expand gets an invalid shape): dynamo only. PhiMoE's
    # router does not pass torch.export: TorchScript only.
    if _arch != "cohere":
        MODELS[f"{_arch}"] = (_arch, "eager", "torchscript")
    if _arch != "phimoe":
        MODELS[f"{_arch}-dynamo"] = (_arch, "eager", "dynamo")
for _arch in ["gpt2", "llama", "opt", "bert", "qwen2", "gpt-bigcode"]:
    MODELS[f"{_arch}-sdpa"] = (_arch, "sdpa", "torchscript")


# ---------------------------------------------------------------------------
# torch side
# ---------------------------------------------------------------------------

def build(arch, attn):
    import torch

    spec = architectures()[arch]
    torch.manual_seed(0)
    model = spec["cls"]._from_config(spec["cfg"], attn_implementation=attn)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for _, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn(p.shape, generator=gen))
    model.eval()
    kind = spec["kind"]

    class Wrapper(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x, mask=None, dec=None):
            if kind == "seq2seq":
                if dec is None:  # Whisper: features, decoder tokens
                    return self.inner(input_features=x,
                                      decoder_input_ids=mask,
                                      use_cache=False, return_dict=False)[0]
                return self.inner(input_ids=x, attention_mask=mask,
                                  decoder_input_ids=dec, use_cache=False,
                                  return_dict=False)[0]
            if kind == "decoder":
                return self.inner(input_ids=x, attention_mask=mask,
                                  use_cache=False, return_dict=False)[0]
            if kind == "encoder":
                return self.inner(input_ids=x, attention_mask=mask,
                                  return_dict=False)[0]
            if kind == "vision":
                return self.inner(pixel_values=x, return_dict=False)[0]
            return self.inner.get_encoder()(input_features=x,
                                            return_dict=False)[0]

    layers = spec.get("layers") or getattr(
        spec["cfg"], "num_hidden_layers", None) or spec["cfg"].num_layers
    return Wrapper(model).eval(), spec, layers


def inputs(spec, batch, seq, seed):
    rng = np.random.default_rng(seed)
    if spec["kind"] == "seq2seq":
        # The decoder's length differs from the encoder's (DECODER_LEN).
        dec = rng.integers(2, VOCAB, size=(batch, DECODER_LEN[seq]),
                           dtype=np.int64)
        if "inputs" in spec:
            name, shape = spec["inputs"]
            return {name: rng.standard_normal((batch,) + shape).astype(
                np.float32), "decoder_input_ids": dec}
        feeds = inputs(dict(spec, kind="encoder"), batch, seq, seed)
        return dict(feeds, decoder_input_ids=dec)
    if spec["kind"] in ("decoder", "encoder"):
        ids = rng.integers(2, VOCAB, size=(batch, seq), dtype=np.int64)
        mask = np.ones((batch, seq), np.int64)
        mask[-1, seq - 3:] = 0
        return {"input_ids": ids, "attention_mask": mask}
    name, shape = spec["inputs"]
    return {name: rng.standard_normal((batch,) + shape).astype(np.float32)}


@contextlib.contextmanager
def block_softmax(block, causal, query_dim=-2, self_only=False):
    """torch.nn.functional.softmax with a block span from the second
    attention softmax on: scores of pairs outside the query's block (and,
    when causal, after the query) are -inf before the softmax. Queries
    align to the end of the keys; they are dimension `query_dim` of the
    scores (-2, or 1 for GPTBigCode's multi-query [B, S, H, T] scores).
    `self_only`: scores with as many queries as keys only (an
    encoder-decoder run without a cache, whose encoder and decoder lengths
    differ: its cross-attention keeps every pair)."""
    import torch
    import torch.nn.functional as F

    orig = F.softmax
    calls = [0]

    def softmax(x, dim=None, *args, **kwargs):
        if x.dim() in (3, 4) and dim in (-1, x.dim() - 1):
            layer = calls[0]
            calls[0] += 1
            if layer > 0 and not (self_only and
                                  x.shape[query_dim] != x.shape[-1]):
                q, k = x.shape[query_dim], x.shape[-1]
                pos = torch.arange(q)[:, None] + (k - q)
                key = torch.arange(k)[None, :]
                ok = (pos // block) == (key // block)
                if causal:
                    ok &= key <= pos
                if query_dim != -2:
                    # [q, k] -> [q, 1, ..., 1, k] along the scores' axes.
                    between = x.dim() - 1 - (query_dim % x.dim()) - 1
                    ok = ok.reshape((q,) + (1,) * between + (k,))
                x = x.masked_fill(~ok, float("-inf"))
        return orig(x, dim, *args, **kwargs)

    F.softmax = softmax
    try:
        yield calls
    finally:
        F.softmax = orig


def torch_run(model, feeds, block=None, causal=False, query_dim=-2,
              self_only=False):
    import torch

    args = [torch.from_numpy(v) for v in feeds.values()]
    with torch.no_grad():
        if block is None:
            return model(*args).numpy()
        with block_softmax(block, causal, query_dim, self_only) as calls:
            out = model(*args).numpy()
        if calls[0] == 0:
            raise RuntimeError("no attention softmax was called")
        return out


def export(model, spec, exporter, path):
    import torch

    feeds = inputs(spec, *SIZES[0], seed=1)
    names = list(feeds)
    args = tuple(torch.from_numpy(v) for v in feeds.values())
    seq_dynamic = spec["kind"] in ("decoder", "encoder") or (
        spec["kind"] == "seq2seq" and "inputs" not in spec)
    # An encoder-decoder's decoder tokens and output have their own length.
    own_len = {"decoder_input_ids"} if spec["kind"] == "seq2seq" else set()
    out_len = "decoder_sequence" if own_len else "sequence"
    with torch.no_grad():
        if exporter == "dynamo":
            batch = torch.export.Dim("batch", min=1, max=1024)
            seq = torch.export.Dim("sequence", min=2, max=MAX_POS)
            dseq = torch.export.Dim("decoder_sequence", min=2, max=MAX_POS)
            shapes = tuple({0: batch, 1: dseq} if n in own_len else
                           {0: batch, 1: seq} if seq_dynamic else {0: batch}
                           for n in names)
            prog = torch.onnx.export(model, args, dynamo=True,
                                     opset_version=18, input_names=names,
                                     output_names=["output"],
                                     dynamic_shapes=shapes,
                                     external_data=False, optimize=True,
                                     verify=False)
            prog.save(path, external_data=False)
        else:
            axes = {n: ({0: "batch", 1: "decoder_sequence"} if n in own_len
                        else {0: "batch", 1: "sequence"} if seq_dynamic
                        else {0: "batch"}) for n in names}
            axes["output"] = {0: "batch", 1: out_len} \
                if seq_dynamic or own_len else {0: "batch"}
            torch.onnx.export(model, args, path, dynamo=False,
                              opset_version=17, input_names=names,
                              output_names=["output"], dynamic_axes=axes,
                              do_constant_folding=True)
    import onnx
    m = onnx.load(path, load_external_data=True)
    for node in m.graph.node:
        node.doc_string = ""
    onnx.save(m, path, save_as_external_data=False)
    if os.path.exists(path + ".data"):
        os.remove(path + ".data")


# ---------------------------------------------------------------------------
# masformer and onnxruntime side
# ---------------------------------------------------------------------------

def run(cmd, timeout=600):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode:
        lines = [l for l in (r.stderr or r.stdout).splitlines() if l.strip()]
        err = next((l for l in lines if "error" in l), lines[0] if lines
                   else f"exit {r.returncode}")
        raise RuntimeError(err.strip())
    return r.stdout


def ort_run(path, feeds):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)[0]


def lib_run(lib, feeds):
    import masformer

    return masformer.Session(lib).run(feeds)["output"]


def rel_err(got, want):
    if got.shape != want.shape:
        raise RuntimeError(f"shape {got.shape}, expected {want.shape}")
    return float(np.max(np.abs(got.astype(np.float64) - want)) /
                 max(float(np.max(np.abs(want))), 1e-30))


def shape_flags(feeds):
    flags = []
    for n, v in feeds.items():
        flags += ["--input-shape", f"{n}={'x'.join(map(str, v.shape))}"]
    return flags


def check(name, arch, attn, exporter, out):
    """One model through the flow; returns the row of the table."""
    row = dict(model=name, arch=arch, attn=attn, exporter=exporter)
    path = os.path.join(out, name + ".onnx")
    model, spec, layers = build(arch, attn)
    # The block-span reference needs the softmax of eager attention: the
    # same weights (same seeds) with attn_implementation="eager".
    eager = model if attn == "eager" else build(arch, "eager")[0]
    causal = spec["kind"] == "decoder"
    row["layers"] = layers
    runs = [inputs(spec, b, s, seed=10 + i) for i, (b, s) in
            enumerate(SIZES)]
    try:
        export(model, spec, exporter, path)
        e = rel_err(ort_run(path, runs[0]), torch_run(model, runs[0]))
        if e > TOL:
            raise RuntimeError(f"onnxruntime differs from torch by {e:.2g}")
        row["export"] = "ok"
    except Exception as ex:  # noqa: BLE001 (reported in the table)
        row["export"] = f"export failed: {str(ex).splitlines()[0][:160]}"
        return row

    # 2. import: dynamic, else fixed at the first run's sizes.
    mlir = os.path.join(out, name + ".mlir")
    static = []
    try:
        run(["masformer-translate", "--import-onnx", path, "-o", mlir])
        row["import"] = "dynamic"
    except Exception as ex:  # noqa: BLE001
        row["import_error"] = str(ex)
        static = shape_flags(runs[0])
        runs = runs[:1]
        try:
            run(["masformer-translate", "--import-onnx", path, "-o", mlir]
                + static)
            row["import"] = "static only"
        except Exception as ex2:  # noqa: BLE001
            row["import"] = "fails"
            row["import_error"] = str(ex2)
            return row

    # 3. raise.
    try:
        raised = run(["masformer-opt", mlir,
                      "--masformer-raise-attention=strict"])
        ops = re.findall(r"masformer\.attention .*", raised)
        spans = sorted({m for o in ops for m in re.findall(
            r"span = #masformer\.span<([^>]*)>", o)})
        extras = []
        if any("softcap" in o for o in ops):
            extras.append("softcap")
        if any("mask(" in o for o in ops):
            extras.append("mask")
        row["raise"] = f"{len(ops)}/{layers}"
        row["spans"] = ",".join(spans + extras)
        if len(ops) != layers:
            raise RuntimeError(f"{len(ops)} attention ops for {layers} "
                               "layers")
    except Exception as ex:  # noqa: BLE001
        row["raise"] = row.get("raise", "fails")
        row["raise_error"] = str(ex)
        return row

    # 4. the compiled model against onnxruntime.
    lib = os.path.join(out, name + ".so")
    try:
        run(["masformer-compile", path, "-o", lib] + static)
        errs = [rel_err(lib_run(lib, f), ort_run(path, f)) for f in runs]
        row["compile"] = max(errs)
    except Exception as ex:  # noqa: BLE001
        row["compile"] = "fails"
        row["compile_error"] = str(ex)

    # 5. the rewrite against torch with the block span inside the model.
    spans = f"span=block:{BLOCK} full-layers=0"
    # An encoder-decoder's decoder self-attention is causal through the
    # model's own mask: the block mask alone gives the same pairs.
    want = torch_run(eager, runs[0], block=BLOCK, causal=causal,
                     query_dim=spec.get("query_dim", -2),
                     self_only=spec["kind"] == "seq2seq")
    full = torch_run(model, runs[0])
    if rel_err(torch_run(eager, runs[0]), full) > TOL:
        row["export_rewrite"] = "eager and SDPA models differ"
        return row
    if rel_err(want, full) < 100 * TOL:
        row["export_rewrite"] = "the block span changes nothing"
        return row
    rw = os.path.join(out, name + "-block.onnx")
    try:
        run(["masformer-opt", path, f"--masformer-rewrite-spans={spans}",
             "-o", rw] + static)
        row["export_rewrite"] = rel_err(ort_run(rw, runs[0]), want)
    except Exception as ex:  # noqa: BLE001
        row["export_rewrite"] = "fails"
        row["export_rewrite_error"] = str(ex)
    rwlib = os.path.join(out, name + "-block.so")
    try:
        run(["masformer-compile", path, f"--spans={spans}", "-o", rwlib]
            + static)
        row["compile_rewrite"] = rel_err(lib_run(rwlib, runs[0]), want)
    except Exception as ex:  # noqa: BLE001
        row["compile_rewrite"] = "fails"
        row["compile_rewrite_error"] = str(ex)
    return row


def passed(row):
    nums = [row.get(k) for k in ("compile", "export_rewrite",
                                 "compile_rewrite")]
    return (row.get("export") == "ok" and row.get("import") == "dynamic"
            and row.get("raise") == f"{row['layers']}/{row['layers']}"
            and all(isinstance(x, float) and x <= TOL for x in nums))


def cell(x):
    if isinstance(x, float):
        return f"{x:.1e}" + ("" if x <= TOL else " ✗")
    return "-" if x is None else str(x)


def table(rows):
    head = ("| model | exporter | attention | import | raised | spans "
            "| compiled vs ort | rewrite export vs torch "
            "| compiled rewrite vs torch | status |")
    lines = [head, "|" + " --- |" * 10]
    for r in rows:
        status = "pass" if passed(r) else "fail"
        lines.append("| " + " | ".join([
            r["arch"], r["exporter"], r["attn"],
            cell(r.get("import", r.get("export"))), cell(r.get("raise")),
            cell(r.get("spans")), cell(r.get("compile")),
            cell(r.get("export_rewrite")), cell(r.get("compile_rewrite")),
            status]) + " |")
    notes = []
    for r in rows:
        for k in ("export", "import_error", "raise_error", "compile_error",
                  "export_rewrite_error", "compile_rewrite_error"):
            v = r.get(k)
            if v and v != "ok" and not (k == "import_error" and
                                         r.get("import") == "dynamic"):
                notes.append(f"- {r['model']}: {k.replace('_error', '')}: "
                             f"{v[:300]}")
    return "\n".join(lines) + ("\n\nFailures:\n\n" + "\n".join(notes)
                               if notes else "") + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(tempfile.gettempdir(),
                                                  "masformer-zoo"))
    ap.add_argument("--only", nargs="*", metavar="NAME",
                    help="models to run: " + ", ".join(MODELS))
    ap.add_argument("--table", help="also write the markdown table here")
    ap.add_argument("--json", help="also write the rows as JSON here")
    a = ap.parse_args()
    names = a.only or list(MODELS)
    for n in names:
        if n not in MODELS:
            ap.error(f"unknown model {n!r}")
    os.makedirs(a.out, exist_ok=True)
    import torch
    import transformers
    torch.set_num_threads(1)
    import warnings
    warnings.filterwarnings("ignore")
    print(f"torch {torch.__version__}, transformers "
          f"{transformers.__version__}; models in {a.out}", flush=True)
    available = architectures()
    missing = [n for n in names if MODELS[n][0] not in available]
    if missing:
        print(f"skipped, not in transformers {transformers.__version__}: "
              f"{', '.join(missing)}", flush=True)
    names = [n for n in names if n not in missing]
    rows = []
    for n in names:
        t = time.time()
        try:
            row = check(n, *MODELS[n], a.out)
        except Exception as ex:  # noqa: BLE001
            arch, attn, exporter = MODELS[n]
            row = dict(model=n, arch=arch, attn=attn, exporter=exporter,
                       layers=0, export=f"failed: {ex}")
        rows.append(row)
        print(f"{n:24s} {'pass' if passed(row) else 'FAIL'} "
              f"({time.time() - t:.0f} s) "
              + json.dumps({k: v for k, v in row.items()
                            if k not in ("model", "arch", "attn",
                                         "exporter")}), flush=True)
    text = table(rows)
    print(text)
    if a.table:
        open(a.table, "w").write(text)
    if a.json:
        json.dump(rows, open(a.json, "w"), indent=1)
    return 0 if all(passed(r) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
