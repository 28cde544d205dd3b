"""Independent numpy reference for masformer.attention.

Written from the span definition in docs/ (DESIGN.md "The span"), not from the
compiler's code, so that tests comparing against it can catch a wrong
lowering. Computes in float64.
"""

import numpy as np


def span_allowed(q_seq, kv_seq, span, causal, offset=0):
    """Boolean [q_seq, kv_seq]: which (query, key) pairs the span and the
    causal flag keep. `span` is ("full", 0), ("block", B) or ("window", W),
    optionally with a third element K, the sink count: the key at position
    j is allowed iff 0 <= j < K or the span rule holds, and causality
    applies on top. Queries align to the end of the keys: query i sits at
    position i + kv_seq - q_seq - offset, key j at j - offset (`offset`: a
    batch row's row_offset, its positions starting that far into its keys).
    """
    kind, size = span[0], span[1]
    sink = span[2] if len(span) > 2 else 0
    i = np.arange(q_seq)[:, None] + (kv_seq - q_seq) - offset
    j = np.arange(kv_seq)[None, :] - offset
    rule = np.ones((q_seq, kv_seq), dtype=bool)
    if kind == "block":
        rule = (i // size) == (j // size)
    elif kind == "window":
        d = i - j
        rule = ((d >= 0) & (d < size)) if causal else (np.abs(d) < size)
    elif kind != "full":
        raise ValueError(f"unknown span kind {kind}")
    allowed = rule | ((j >= 0) & (j < sink))
    if causal:
        allowed &= j <= i
    return allowed


def heads_allowed(q_seq, kv_seq, span, causal, q_heads, offset=0):
    """span_allowed for every query head: `span` is one span for all heads,
    or a list with one span per key/value head (per-head spans), query head
    h reading key/value head h // (q_heads // len(span)). Boolean
    [q_heads, q_seq, kv_seq] for a list, [q_seq, kv_seq] otherwise."""
    if not isinstance(span, list):
        return span_allowed(q_seq, kv_seq, span, causal, offset)
    assert q_heads % len(span) == 0
    group = q_heads // len(span)
    return np.stack([span_allowed(q_seq, kv_seq, span[h // group], causal,
                                  offset)
                     for h in range(q_heads)])


def parse_span(text):
    """The span tuple of span_allowed from the attribute's syntax: "full",
    "block 64", "window 96, sink 8"."""
    rule, _, sink = text.partition(",")
    kind, _, size = rule.strip().partition(" ")
    span = (kind, int(size) if size else 0)
    if sink.strip():
        word, count = sink.split()
        if word != "sink":
            raise ValueError(f"span {text!r}: expected ', sink K'")
        span += (int(count),)
    return span


def attention(q, k, v, mask=None, span=("full", 0), causal=False, scale=None,
              softcap=None, row_offset=None):
    """q [B, Hq, Sq, D], k/v [B, Hkv, Skv, D], mask broadcastable to
    [B, Hq, Sq, Skv] (additive); `span` one span, or a list of one span per
    key/value head; `softcap` c caps the scaled scores to c * tanh(s / c)
    before the mask is added; `row_offset` (one per batch row) where each
    row's positions start. Rows with no allowed key give zeros."""
    q = q.astype(np.float64)
    k = k.astype(np.float64)
    v = v.astype(np.float64)
    b, hq, sq, d = q.shape
    hkv, skv = k.shape[1], k.shape[2]
    assert hq % hkv == 0
    group = hq // hkv
    k = np.repeat(k, group, axis=1)
    v = np.repeat(v, group, axis=1)
    if scale is None:
        scale = 1.0 / np.sqrt(d)
    s = np.einsum("bhid,bhjd->bhij", q, k) * scale
    if softcap is not None:
        s = softcap * np.tanh(s / softcap)
    if mask is not None:
        s = s + mask.astype(np.float64)
    offsets = [0] * b if row_offset is None else list(row_offset)
    allowed = np.stack([np.broadcast_to(
        heads_allowed(sq, skv, span, causal, hq, offsets[r]), s.shape[1:])
        for r in range(b)])
    s = np.where(allowed, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isneginf(m), 0.0, m)
    p = np.exp(s - m)
    z = p.sum(axis=-1, keepdims=True)
    o = np.einsum("bhij,bhjd->bhid", p, v)
    return np.where(z == 0, 0.0, o / np.where(z == 0, 1.0, z))


def round_to(x, dtype):
    """Rounds float data to `dtype` ("f32", "f16" or "bf16", the latter with
    round-to-nearest-even) and returns it as float32."""
    x = np.asarray(x, dtype=np.float32)
    if dtype == "f32":
        return x
    if dtype == "f16":
        return x.astype(np.float16).astype(np.float32)
    if dtype == "bf16":
        bits = x.view(np.uint32).astype(np.uint64)
        rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
        return rounded.astype(np.uint32).view(np.float32)
    raise ValueError(dtype)
