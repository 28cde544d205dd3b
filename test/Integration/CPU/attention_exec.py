#!/usr/bin/env python3
"""Runs masformer.attention on the CPU through a masformer-opt pipeline to the
LLVM dialect (by default the reference decomposition,
--masformer-reference-to-llvm) and mlir-runner, and compares the result with
the independent numpy reference.

Usage: attention_exec.py --case NAME --lib-dir DIR [--pipeline="..."]
Each case fixes shapes, element type, span, causal flag, mask and scale.
Exits non-zero with a message naming the case and the worst element when the
result is off.
"""

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile

import numpy as np

import masformer_ref as ref

# name: dict(b, hq, hkv, sq, skv, d, dtype, span, causal, mask, scale, dynamic)
CASES = {
    "full": dict(span=("full", 0), causal=False),
    "full-causal": dict(span=("full", 0), causal=True),
    "block-causal": dict(span=("block", 4), causal=True, sq=16, skv=16),
    "block-ragged": dict(span=("block", 5), causal=False, sq=13, skv=13),
    "block-ragged-causal": dict(span=("block", 5), causal=True, sq=13, skv=13),
    "window-causal": dict(span=("window", 4), causal=True),
    "window-bidirectional": dict(span=("window", 3), causal=False),
    "gqa-block-causal": dict(hq=6, hkv=2, span=("block", 4), causal=True,
                             sq=12, skv=12),
    "mqa-full": dict(hq=4, hkv=1, span=("full", 0), causal=False),
    "padding-mask": dict(span=("full", 0), causal=False, mask="padding"),
    "padding-mask-block-causal": dict(span=("block", 4), causal=True,
                                      mask="padding-min"),
    "head-mask-window": dict(span=("window", 5), causal=False, mask="full4d"),
    "decode-kv-cache": dict(sq=3, skv=17, span=("block", 4), causal=True),
    "empty-rows": dict(span=("block", 4), causal=False, mask="neginf-batch1"),
    "dynamic-gqa-window": dict(hq=4, hkv=2, span=("window", 3), causal=True,
                               dynamic=True),
    "explicit-scale": dict(span=("block", 6), causal=True, scale=0.5),
    "f16-block-causal": dict(dtype="f16", span=("block", 4), causal=True),
    "bf16-window-causal": dict(dtype="bf16", span=("window", 4), causal=True,
                               hq=4, hkv=2),
    # head_dim 32 and 40 tokens: with tiles of 8 x 16, full tiles take the
    # vector micro-kernels of --masformer-lower-to-cpu and the last key tile
    # (8 keys) the linalg path.
    # Attention sinks: the first keys stay visible to every query.
    "window-sink-causal": dict(span=("window", 4, 3), causal=True, sq=24,
                               skv=24),
    "window-sink-bidirectional": dict(span=("window", 3, 5), causal=False,
                                      sq=20, skv=20),
    "block-sink-causal": dict(span=("block", 4, 6), causal=True, sq=24,
                              skv=24),
    "block-sink-ragged": dict(span=("block", 5, 2), causal=False, sq=13,
                              skv=13),
    "gqa-window-sink-decode": dict(hq=4, hkv=2, sq=5, skv=29,
                                   span=("window", 6, 4), causal=True,
                                   mask="padding"),
    "dynamic-window-sink": dict(span=("window", 5, 2), causal=True, sq=17,
                                skv=17, dynamic=True),
    "kernel-window-sink": dict(span=("window", 16, 4), causal=True, sq=72,
                               skv=72, d=32),
    "kernel-block-sink-f16": dict(dtype="f16", span=("block", 16, 8),
                                  causal=True, sq=64, skv=64, d=32),
    # Boundary tiles of the micro-kernel path mask in the softmax rows:
    # two-sided windows and blocks with sinks that end inside a tile,
    # queries aligned to the end of longer keys.
    "kernel-window-sink-bidirectional": dict(span=("window", 20, 8),
                                             causal=False, sq=56, skv=72,
                                             d=32),
    "kernel-block-sink-bidirectional": dict(span=("block", 24, 5),
                                            causal=False, sq=64, skv=64,
                                            d=32),
    "kernel-full-causal-offset": dict(span=("full", 0), causal=True, sq=40,
                                      skv=56, d=32),
    # Per-head spans (head_spans): one span per key/value head.
    "heads-mixed": dict(hkv=3, span=[("full", 0), ("window", 4, 2),
                                     ("block", 5)], causal=True, sq=22,
                        skv=22),
    "gqa-heads-window-sink": dict(hq=6, hkv=3, span=[("window", 3, 2),
                                                     ("window", 3, 2),
                                                     ("full", 0)],
                                  causal=True, sq=20, skv=20,
                                  mask="full4d"),
    "heads-bidirectional-decode": dict(hq=4, hkv=2, span=[("window", 5),
                                                          ("block", 4, 3)],
                                       causal=False, sq=6, skv=19,
                                       mask="padding"),
    "dynamic-heads": dict(hq=4, hkv=2, span=[("window", 3, 1), ("full", 0)],
                          causal=True, sq=13, skv=13, dynamic="query"),
    "kernel-heads": dict(hq=4, hkv=2, span=[("window", 16, 4), ("full", 0)],
                         causal=True, sq=72, skv=72, d=32),
    "kernel-full": dict(span=("full", 0), causal=False, sq=40, skv=40, d=32),
    # Softcapped scores (Gemma 2): c * tanh(scale * QK^T / c) before the
    # mask, in the linalg path and in the micro-kernels' epilogue.
    "softcap-padding-block": dict(span=("block", 4), causal=True,
                                  mask="padding-min", softcap=0.5),
    "kernel-softcap-window-mask": dict(hq=4, hkv=2, span=("window", 12),
                                       causal=True, sq=40, skv=40, d=32,
                                       mask="full4d", softcap=1.5),
    "kernel-block-causal-mask": dict(span=("block", 8), causal=True, sq=40,
                                     skv=40, d=32, mask="padding-min"),
    "kernel-bf16-gqa-window": dict(dtype="bf16", hq=4, hkv=2,
                                   span=("window", 12), causal=True, sq=40,
                                   skv=40, d=32),
    "kernel-f16-head-mask": dict(dtype="f16", span=("block", 16),
                                 causal=False, sq=40, skv=40, d=32,
                                 mask="full4d"),
    "kernel-decode": dict(sq=24, skv=40, d=32, span=("block", 16),
                          causal=True),
    # The softmax's exp on full tiles (2^k 2^f, 0 below 2^-125.5): rows whose
    # every key is masked (-inf) stay zero; a scale of 4 spreads the logits
    # over about +-100, so that exp(logit - max) runs through the whole
    # range down to its underflow.
    "kernel-empty-rows": dict(span=("full", 0), causal=False, sq=40, skv=40,
                              d=32, mask="neginf-batch1"),
    "kernel-wide-logits": dict(span=("block", 16), causal=True, sq=40,
                               skv=40, d=32, scale=4.0),
    # NaN in a query row and in one key: the softmax's maxima (vmaxps, which
    # may drop a NaN) must still leave NaN exactly in the rows that see it
    # (the query's row; the rows whose span reaches the key) and nothing
    # else.
    "kernel-nan": dict(span=("block", 16), causal=True, sq=40, skv=40, d=32,
                       nan=True),
    # head_dim 80 (Phi-2, GPT-J): not a multiple of the micro-kernels'
    # blocks of 4 vectors; the last columns take a narrower block.
    "kernel-head-dim-80": dict(span=("window", 16, 4), causal=True, sq=40,
                               skv=40, d=80),
    # Sizes for the AMX tiles (--masformer-lower-to-cpu amx=1, tiles of
    # 64 x 64): products of multiples of 32, several query tiles, edge
    # tiles in halves of 32, a short last tile on the linalg path.
    "amx-window-sink": dict(span=("window", 48, 8), causal=True, sq=200,
                            skv=200, d=64),
    "amx-full-causal-offset": dict(span=("full", 0), causal=True, sq=136,
                                   skv=200, d=32),
    "amx-block-sink-bidirectional-mask": dict(span=("block", 64, 5),
                                              causal=False, sq=192,
                                              skv=192, d=64,
                                              mask="padding-min"),
    "amx-heads-gqa-softcap": dict(hq=4, hkv=2, span=[("window", 40, 4),
                                                     ("full", 0)],
                                  causal=True, sq=160, skv=160, d=32,
                                  mask="full4d", softcap=1.5),
    "amx-empty-rows-wide-logits": dict(span=("full", 0), causal=False,
                                       sq=128, skv=128, d=32, scale=4.0,
                                       mask="neginf-batch1"),
    "amx-nan": dict(span=("block", 64), causal=True, sq=128, skv=128, d=32,
                    nan=True),
    "amx-dynamic-gqa": dict(hq=4, hkv=2, span=("window", 40), causal=True,
                            sq=150, skv=150, d=32, dynamic=True),
    # Row offsets (row_offset): each batch row's positions start at its own
    # key, as in a batch of sequences of different lengths right-aligned in
    # one cache (a batched decode step). Blocks and sinks count from each
    # row's start; all-zero offsets take the block-sparse op as it is.
    "offsets-block-causal": dict(b=3, span=("block", 4), causal=True, sq=5,
                                 skv=16, offsets=[0, 3, 7]),
    "offsets-zero-block-sink": dict(b=2, span=("block", 4, 2), causal=True,
                                    sq=6, skv=14, offsets=[0, 0]),
    "offsets-window-sink-decode": dict(b=3, hq=4, hkv=2, sq=1, skv=19,
                                       span=("window", 4, 2), causal=True,
                                       mask="padding", offsets=[0, 5, 12]),
    "offsets-window": dict(b=2, span=("window", 3), causal=True, sq=4,
                           skv=12, offsets=[2, 6]),
    "offsets-heads-mask": dict(b=2, hq=4, hkv=2, span=[("block", 4, 1),
                                                       ("window", 3)],
                               causal=True, sq=3, skv=15, mask="full4d",
                               offsets=[4, 1]),
    "offsets-dynamic-bidirectional": dict(b=2, span=("block", 5, 3),
                                          causal=False, sq=7, skv=17,
                                          offsets=[0, 9], dynamic=True),
    "kernel-offsets-block-sink": dict(b=2, hq=4, hkv=2, span=("block", 16, 4),
                                      causal=True, sq=24, skv=72, d=32,
                                      mask="padding-min", offsets=[0, 21]),
    # head_dim 128 (Llama) with one key/value head for two query heads.
    "amx-head-dim-128-mqa": dict(b=1, hq=2, hkv=1, span=("full", 0),
                                 causal=True, sq=140, skv=140, d=128),
}

DEFAULTS = dict(b=2, hq=3, hkv=3, sq=11, skv=11, d=8, dtype="f32",
                mask=None, scale=None, softcap=None, dynamic=False, nan=False,
                offsets=None)

# Tolerances on |got - want|: f32 accumulates in f32; f16/bf16 round the
# output to their own precision (values are O(1)).
ATOL = {"f32": 2e-5, "f16": 2e-3, "bf16": 1.6e-2}  # bf16: see main()


def make_mask(kind, b, hq, sq, skv, rng):
    if kind is None:
        return None
    if kind == "padding":  # HF-style (1 - m) * -10000 over [B, 1, 1, S].
        keep = np.ones((b, 1, 1, skv), np.float32)
        keep[0, ..., skv - 3:] = 0
        return (1.0 - keep) * -10000.0
    if kind == "padding-min":  # float-min on padded keys.
        mask = np.zeros((b, 1, 1, skv), np.float32)
        mask[1, ..., :2] = np.finfo(np.float32).min
        return mask
    if kind == "full4d":
        return rng.standard_normal((b, hq, sq, skv)).astype(np.float32)
    if kind == "neginf-batch1":  # Every key of batch 1 masked: zero rows.
        mask = np.zeros((b, 1, sq, skv), np.float32)
        mask[1] = -np.inf
        return mask
    raise ValueError(kind)


def mlir_type(shape, dtype, dynamic=False):
    dims = "x".join("?" if dynamic else str(s) for s in shape)
    return f"tensor<{dims}x{dtype}>"


def mlir_dense(x, dtype):
    """The exact bits of `x` (already rounded to dtype) as an MLIR hex dense
    literal, little-endian."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    if dtype == "f16":
        raw = x.astype("<f2").tobytes()
    elif dtype == "bf16":
        raw = (x.view("<u4") >> 16).astype("<u2").tobytes()
    else:
        raw = x.astype("<f4").tobytes()
    return f'dense<"0x{raw.hex().upper()}">'


def attention_attrs(c):
    """The masformer.attention attributes of case `c`: its span (or its
    per-head spans), causal flag, scale and softcap."""
    def span_attr(span):
        return (f"#masformer.span<{span[0]}"
                + (f" {span[1]}" if span[0] != "full" else "")
                + (f", sink {span[2]}" if len(span) > 2 else "") + ">")
    span = c["span"]
    if isinstance(span, list):
        attrs = ["span = #masformer.span<full>",
                 "head_spans = [" + ", ".join(map(span_attr, span)) + "]"]
    else:
        attrs = [f"span = {span_attr(span)}"]
    if c["causal"]:
        attrs.append("causal = true")
    if c["scale"] is not None:
        attrs.append(f"scale = {c['scale']} : f32")
    if c["softcap"] is not None:
        attrs.append(f"softcap = {c['softcap']} : f32")
    return attrs


def build_seq_major_module(c, q, k, v, mask):
    """The attention between a model's head splits and merge: the query
    [b, sq, hq * d] and the keys and values side by side in one tensor
    [b, skv, 2 hkv d] (a fused projection's columns), each split into heads
    by a slice, a reshape and a transpose to [b, h, s, d]; the result
    transposed back to [b, sq, hq, d]. Static shapes. What the CPU tiling
    reads and writes through with AMX (docs/cpu.md)."""
    dt = c["dtype"]
    b, hq, hkv, sq, skv, d = (c[x] for x in ("b", "hq", "hkv", "sq", "skv",
                                              "d"))
    qin = mlir_type((b, sq, hq * d), dt)
    kvin = mlir_type((b, skv, 2 * hkv * d), dt)
    out = mlir_type((b, sq, hq, d), dt)
    attrs = attention_attrs(c)
    args = [f"%q: {qin}", f"%kv: {kvin}"]
    mask_clause = ""
    if mask is not None:
        mt = mlir_type(mask.shape, "f32")
        args.append(f"%m: {mt}")
        mask_clause = f" mask(%m : {mt})"
    lines = [f"func.func @attn({', '.join(args)}) -> {out} {{"]

    def split(name, src, srcty, s, h, col):
        flat = mlir_type((b, s, h * d), dt)
        rows = mlir_type((b, s, h, d), dt)
        heads = mlir_type((b, h, s, d), dt)
        if col is None:
            lines.append(f"  %{name}s = tensor.expand_shape {src} "
                         f"[[0], [1], [2, 3]] output_shape [{b}, {s}, {h}, "
                         f"{d}] : {flat} into {rows}")
        else:
            lines.append(f"  %{name}c = tensor.extract_slice {src}[0, 0, "
                         f"{col}] [{b}, {s}, {h * d}] [1, 1, 1] : {srcty} to "
                         f"{flat}")
            lines.append(f"  %{name}s = tensor.expand_shape %{name}c "
                         f"[[0], [1], [2, 3]] output_shape [{b}, {s}, {h}, "
                         f"{d}] : {flat} into {rows}")
        lines.append(f"  %{name}e = tensor.empty() : {heads}")
        lines.append(f"  %{name}t = linalg.transpose ins(%{name}s : {rows}) "
                     f"outs(%{name}e : {heads}) permutation = [0, 2, 1, 3]")
        return heads

    qh = split("q", "%q", qin, sq, hq, None)
    kh = split("k", "%kv", kvin, skv, hkv, 0)
    split("v", "%kv", kvin, skv, hkv, hkv * d)
    lines.append(f"  %o = masformer.attention %qt, %kt, %vt{mask_clause} "
                 f"{{{', '.join(attrs)}}} : {qh}, {kh}, {kh} -> {qh}")
    lines.append(f"  %oe = tensor.empty() : {out}")
    lines.append(f"  %ot = linalg.transpose ins(%o : {qh}) outs(%oe : {out}) "
                 f"permutation = [0, 2, 1, 3]")
    lines.append(f"  return %ot : {out}\n}}")
    lines.append("func.func private @printMemrefF32(memref<*xf32>)")
    lines.append("func.func @main() {")
    qrows = q.transpose(0, 2, 1, 3).reshape(b, sq, hq * d)
    kvrows = np.concatenate([k.transpose(0, 2, 1, 3).reshape(b, skv, -1),
                             v.transpose(0, 2, 1, 3).reshape(b, skv, -1)],
                            axis=2)
    lines.append(f"  %q0 = arith.constant {mlir_dense(qrows, dt)} : {qin}")
    lines.append(f"  %kv0 = arith.constant {mlir_dense(kvrows, dt)} : {kvin}")
    call_args, argtypes = ["%q0", "%kv0"], [qin, kvin]
    if mask is not None:
        mt = mlir_type(mask.shape, "f32")
        lines.append(f"  %m0 = arith.constant {mlir_dense(mask, 'f32')} : "
                     f"{mt}")
        call_args.append("%m0")
        argtypes.append(mt)
    lines.append(f"  %r0 = call @attn({', '.join(call_args)}) : "
                 f"({', '.join(argtypes)}) -> {out}")
    res = "%r0"
    ft = mlir_type((b, sq, hq, d), "f32")
    if dt != "f32":
        lines.append(f"  %r2 = arith.extf %r0 : {out} to {ft}")
        res = "%r2"
    mt = f"memref<{b}x{sq}x{hq}x{d}xf32>"
    lines.append(f"  %buf = bufferization.to_buffer {res} : {ft} to {mt}")
    lines.append(f"  %u = memref.cast %buf : {mt} to memref<*xf32>")
    lines.append("  call @printMemrefF32(%u) : (memref<*xf32>) -> ()")
    lines.append("  return\n}")
    return "\n".join(lines) + "\n"


def build_module(c, q, k, v, mask):
    dt = c["dtype"]
    qt, kt = mlir_type(q.shape, dt), mlir_type(k.shape, dt)
    dq = mlir_type(q.shape, dt, c["dynamic"])
    # dynamic="query": only the query (and result) are dynamic, as per-head
    # spans need a static number of key/value heads.
    dk = mlir_type(k.shape, dt, c["dynamic"] is True)
    attrs = attention_attrs(c)
    lines = []
    args = [f"%q: {dq}", f"%k: {dk}", f"%v: {dk}"]
    mask_clause = ""
    if mask is not None:
        mt = mlir_type(mask.shape, "f32")
        args.append(f"%m: {mt}")
        mask_clause = f" mask(%m : {mt})"
    if c["offsets"] is not None:
        ot = f"tensor<{'?' if c['dynamic'] is True else len(c['offsets'])}" \
             "xindex>"
        args.append(f"%off: {ot}")
        mask_clause += f" row_offset(%off : {ot})"
    lines.append(f"func.func @attn({', '.join(args)}) -> {dq} {{")
    lines.append(f"  %o = masformer.attention %q, %k, %v{mask_clause} "
                 f"{{{', '.join(attrs)}}} : {dq}, {dk}, {dk} -> {dq}")
    lines.append(f"  return %o : {dq}\n}}")
    lines.append("func.func private @printMemrefF32(memref<*xf32>)")
    lines.append("func.func @main() {")
    names = ["q", "k", "v"] + (["m"] if mask is not None else [])
    values = [q, k, v] + ([mask] if mask is not None else [])
    call_args = []
    for name, x in zip(names, values):
        xt = dt if name != "m" else "f32"
        t = mlir_type(x.shape, xt)
        lines.append(f"  %{name}0 = arith.constant {mlir_dense(x, xt)} : {t}")
        if c["dynamic"] and name != "m" and (name == "q"
                                              or c["dynamic"] is True):
            lines.append(f"  %{name}1 = tensor.cast %{name}0 : {t} to "
                         f"{mlir_type(x.shape, dt, True)}")
            call_args.append(f"%{name}1")
        else:
            call_args.append(f"%{name}0")
    argtypes = [dq, dk, dk] + ([mlir_type(mask.shape, "f32")]
                               if mask is not None else [])
    if c["offsets"] is not None:
        n = len(c["offsets"])
        values = ", ".join(map(str, c["offsets"]))
        lines.append(f"  %off0 = arith.constant dense<[{values}]> : "
                     f"tensor<{n}xindex>")
        if c["dynamic"] is True:
            lines.append(f"  %off1 = tensor.cast %off0 : tensor<{n}xindex> "
                         "to tensor<?xindex>")
            call_args.append("%off1")
            argtypes.append("tensor<?xindex>")
        else:
            call_args.append("%off0")
            argtypes.append(f"tensor<{n}xindex>")
    lines.append(f"  %r0 = call @attn({', '.join(call_args)}) : "
                 f"({', '.join(argtypes)}) -> {dq}")
    res = "%r0"
    if c["dynamic"]:
        lines.append(f"  %r1 = tensor.cast %r0 : {dq} to {qt}")
        res = "%r1"
    ft = mlir_type(q.shape, "f32")
    if dt != "f32":
        lines.append(f"  %r2 = arith.extf {res} : {qt} to {ft}")
        res = "%r2"
    mt = "memref<" + "x".join(str(s) for s in q.shape) + "xf32>"
    lines.append(f"  %buf = bufferization.to_buffer {res} : {ft} to {mt}")
    lines.append(f"  %u = memref.cast %buf : {mt} to memref<*xf32>")
    lines.append("  call @printMemrefF32(%u) : (memref<*xf32>) -> ()")
    lines.append("  return\n}")
    return "\n".join(lines) + "\n"


NUMBER = re.compile(r"-?(?:nan|inf|\d+(?:\.\d*)?(?:e[-+]?\d+)?)")


def parse_memref(text, shape):
    if "data =" not in text:
        raise RuntimeError(f"no memref printed:\n{text}")
    body = text.split("data =", 1)[1]
    vals = [float(x) for x in NUMBER.findall(body)]
    if len(vals) != int(np.prod(shape)):
        raise RuntimeError(f"expected {np.prod(shape)} values, got {len(vals)}")
    return np.array(vals).reshape(shape)


def check_tiles(c, stdout, spec):
    """The key tiles visited per (batch, head, query tile), as printed, must
    be exactly the tiles that the allowed keys of that query tile touch."""
    tq, tk = (int(x) for x in spec.split(","))
    printed = [int(line) for line in
               stdout.split("Unranked Memref")[0].split()]
    nqt = -(-c["sq"] // tq)
    span = c["span"]
    # Per-head spans are tiled one run of heads with the same span at a
    # time (batch, then heads, then query tiles within each run).
    if isinstance(span, list):
        group = c["hq"] // c["hkv"]
        runs = []
        for h, s in enumerate(span):
            if runs and runs[-1][1] == s:
                runs[-1][0].extend(range(h * group, (h + 1) * group))
            else:
                runs.append((list(range(h * group, (h + 1) * group)), s))
    else:
        runs = [(list(range(c["hq"])), span)]
    want = []
    for heads, s in runs:
        allowed = ref.span_allowed(c["sq"], c["skv"], s, c["causal"])
        for _ in range(c["b"] * len(heads)):
            for t in range(nqt):
                cols = np.nonzero(allowed[t * tq:(t + 1) * tq].any(axis=0))[0]
                want.append(len(set(cols // tk)))
    if printed != want:
        sys.exit(f"{c['span']} causal={c['causal']}: visited key tiles "
                 f"{printed[:12]}..., expected {want[:12]}...")
    dense = len(want) * -(-c["skv"] // tk)
    print(f"tiles: visited {sum(printed)} of {dense} key tiles "
          f"({sum(printed) / dense:.3f}), the smallest cover of the span")


# Linux hands AMX's tile registers only to a process that asks
# (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)); without it the first
# tile instruction is SIGILL. The permission does not survive exec, so the
# runner asks itself: a library whose constructor asks, loaded with the
# runner utils.
AMX_PERMIT_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
__attribute__((constructor)) static void permit(void) {
  if (syscall(SYS_arch_prctl, 0x1023, 18) != 0) {
    perror("arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)");
    exit(1);
  }
}
"""


def amx_permit_library(tmp):
    src = os.path.join(tmp, "amx_permit.c")
    lib = os.path.join(tmp, "libamx_permit.so")
    with open(src, "w") as f:
        f.write(AMX_PERMIT_C)
    cc = subprocess.run(["cc", "-shared", "-fPIC", "-o", lib, src],
                        capture_output=True, text=True)
    if cc.returncode:
        sys.exit(f"--amx: cannot build the permission library:\n{cc.stderr}")
    return lib


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", required=True, choices=sorted(CASES))
    ap.add_argument("--opt", default="masformer-opt")
    ap.add_argument("--runner", default="mlir-runner")
    ap.add_argument("--pipeline", default="--masformer-reference-to-llvm",
                    help="masformer-opt flags lowering to the LLVM dialect")
    ap.add_argument("--lib-dir", required=True,
                    help="directory of libmlir_runner_utils.so")
    ap.add_argument("--dtype", choices=sorted(ATOL),
                    help="run the case in this element type instead of its "
                         "own")
    ap.add_argument("--dump", help="write the generated module here")
    ap.add_argument("--amx", action="store_true",
                    help="the pipeline emits AMX tile instructions: the "
                         "runner process asks Linux for them first "
                         "(amx_permit_library)")
    ap.add_argument("--seq-major", action="store_true",
                    help="Q, K and V reach the attention through head "
                         "splits of [batch, seq, heads * head_dim] "
                         "tensors, and the result leaves through a head "
                         "merge (build_seq_major_module); static shapes, "
                         "one span for all heads")
    ap.add_argument("--expect-tiles", metavar="TQ,TK",
                    help="the pipeline prints the key tiles each query tile "
                         "visits (--masformer-test-tile-counts): check them against the "
                         "smallest cover of the span")
    a = ap.parse_args()

    c = dict(DEFAULTS)
    c.update(CASES[a.case])
    if a.dtype:
        c["dtype"] = a.dtype
    rng = np.random.default_rng(sum(map(ord, a.case)))
    q = ref.round_to(rng.standard_normal((c["b"], c["hq"], c["sq"], c["d"])),
                     c["dtype"])
    k = ref.round_to(rng.standard_normal((c["b"], c["hkv"], c["skv"], c["d"])),
                     c["dtype"])
    v = ref.round_to(rng.standard_normal((c["b"], c["hkv"], c["skv"], c["d"])),
                     c["dtype"])
    mask = make_mask(c["mask"], c["b"], c["hq"], c["sq"], c["skv"], rng)
    if c["nan"]:
        q[0, 1, 21, 3] = np.nan
        k[1, 2, 35, 5] = np.nan

    if a.seq_major:
        if c["dynamic"] or isinstance(c["span"], list) or c["offsets"]:
            sys.exit(f"{a.case}: --seq-major needs static shapes, one span "
                     "and no row offsets")
        module = build_seq_major_module(c, q, k, v, mask)
    else:
        module = build_module(c, q, k, v, mask)
    if a.dump:
        open(a.dump, "w").write(module)
    opt = subprocess.run(
        [a.opt, "-"] + shlex.split(a.pipeline),
        input=module, capture_output=True, text=True)
    if opt.returncode:
        sys.exit(f"{a.case}: masformer-opt failed:\n{opt.stderr}")
    libs = [f"{a.lib_dir}/libmlir_runner_utils.so",
            f"{a.lib_dir}/libmlir_c_runner_utils.so"]
    # --masformer-lower-to-cpu runs its loops with OpenMP.
    if os.path.exists(f"{a.lib_dir}/libomp.so"):
        libs.append(f"{a.lib_dir}/libomp.so")
    with tempfile.TemporaryDirectory(prefix="attention-exec-") as tmp:
        if a.amx:
            libs.append(amx_permit_library(tmp))
        run = subprocess.run(
            [a.runner, "-e", "main", "-entry-point-result=void",
             "-shared-libs=" + ",".join(libs)],
            input=opt.stdout, capture_output=True, text=True)
    if run.returncode:
        sys.exit(f"{a.case}: mlir-runner failed:\n{run.stderr}")
    if a.seq_major:
        b, hq, sq, d = q.shape
        got = parse_memref(run.stdout, (b, sq, hq, d)).transpose(0, 2, 1, 3)
    else:
        got = parse_memref(run.stdout, q.shape)
    if a.expect_tiles:
        check_tiles(c, run.stdout, a.expect_tiles)

    exact = ref.attention(q, k, v, mask, c["span"], c["causal"], c["scale"],
                          c["softcap"], c["offsets"])
    want = ref.round_to(exact, c["dtype"])
    tol = ATOL[c["dtype"]]
    limit = tol
    if c["dtype"] == "bf16":
        # Per output: its rounding to bf16 (an ulp, for margin), and what
        # rounding the probabilities to bf16 may add (the bf16 dot,
        # docs/cpu.md): each weight within 2^-8 of itself, so after the
        # normalization within 2^-7 of sum_k p_k |v_k|.
        mag = ref.attention(q, k, np.abs(v), mask, c["span"], c["causal"],
                            c["scale"], c["softcap"], c["offsets"])
        e = np.floor(np.log2(np.maximum(np.abs(np.nan_to_num(exact)),
                                        2.0 ** -100)))
        limit = 2.0 ** (e - 7) + 2.0 ** -7 * np.nan_to_num(mag)
        want = exact
    nan = np.isnan(want)
    if c["nan"]:
        # The NaN reaches whole rows, and only the rows that see it.
        assert nan.any() and not nan.all()
        if not np.array_equal(np.isnan(got), nan):
            sys.exit(f"{a.case}: NaN in {np.isnan(got).sum()} outputs, "
                     f"expected {nan.sum()}")
        got, want = np.where(nan, 0.0, got), np.where(nan, 0.0, want)
    err = np.abs(got - want)
    worst = np.unravel_index(np.argmax(err / limit), err.shape)
    if not np.all(np.isfinite(got)) or np.any(err > limit):
        sys.exit(f"{a.case}: |got - want| = {err[worst]:.3g} > "
                 f"{np.broadcast_to(limit, err.shape)[worst]:.3g} at "
                 f"{worst}: got {got[worst]}, want {want[worst]}")
    # The case must exercise its span: the result must differ from what full
    # attention would give, or the test could not catch an ignored span.
    if isinstance(c["span"], list) or c["span"][0] != "full":
        full = ref.round_to(
            ref.attention(q, k, v, mask, ("full", 0), c["causal"], c["scale"],
                          c["softcap"]),
            c["dtype"])
        assert np.nanmax(np.abs(full - want)) > 10 * tol, \
            "span has no effect"
    # Likewise the softcap.
    if c["softcap"] is not None:
        uncapped = ref.round_to(
            ref.attention(q, k, v, mask, c["span"], c["causal"], c["scale"]),
            c["dtype"])
        assert np.abs(uncapped - want).max() > 10 * tol, \
            "softcap has no effect"
    if c["dtype"] == "bf16":
        print(f"{a.case}: OK, max |got - want| = {err.max():.3g}, at most "
              f"{(err / limit).max():.2f} of its bound ({got.size} values)")
    else:
        print(f"{a.case}: OK, max |got - want| = {err.max():.3g} "
              f"(tolerance {tol}, {got.size} values)")


if __name__ == "__main__":
    main()
