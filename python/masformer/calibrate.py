"""Chooses a span plan for a model from calibration data, under a budget on
the attention cost: a causal LM by its perplexity on a text, an encoder by
the similarity of its embeddings on a set of sequences.

    python -m masformer.calibrate model.onnx --tokens calib.npy \\
        --seq-len 4096 --budget 0.3 -o plan.json
    python -m masformer.calibrate encoder.onnx --sequences calib.npz \\
        --budget 0.3 -o plan.json

1. Measurements, in onnxruntime on the calibration inputs (--seq-len tokens
   of the text; or the --sequences, padded to one length, with their
   attention_mask), of the original model with a mask input added before
   each attention layer's Softmax (the layers masformer finds: the nodes
   the span report names) and, as extra outputs, the attention
   probabilities of --rows query rows spread over the sequence and the
   values:
   - one run with every layer intact: the original loss, and for every
     layer, key/value head and candidate span (full, and window W with
     --sink K sinks for every --windows W below the length; a window is
     causal in a causal LM, two-sided in an encoder) the error that span
     alone makes in that head's attention output on those rows
     (probabilities outside the span dropped and the rest renormalized,
     which is what the rewritten layer computes from the same inputs;
     an encoder's padded query rows left out);
   - one run per layer with that layer alone given the reference span
     (window --ref-window with the sinks): how much the loss really rises.
   The loss is the mean negative log-likelihood of the text for a causal
   LM, and 1 - the mean cosine similarity of the embeddings (the first
   output, mean-pooled over the unmasked positions if it has a sequence
   axis) to the original's for an encoder.
   A head's predicted loss for a candidate is its layer's measured rise
   shared out in proportion to the heads' output errors:
   rise(l) * err(h, c) / sum over the layer's heads of err(h', ref).
2. The plan: one candidate per key/value head (or per layer, with
   --per-layer), the least total predicted loss whose attention cost (the
   span report's: pairs kept / pairs of full attention, at the length) is
   within --budget. A Lagrangian relaxation of this multiple-choice
   knapsack, then greedy upgrades into the budget left.
3. A check: the model rewritten with the plan (masformer.rewrite), on the
   same inputs; its perplexity ratio (or embedding similarity) to the
   original goes into the plan ("calibration").

--save-measurements m.npz keeps step 1's results; --measurements m.npz
reuses them (same model, inputs and options) to choose plans at other
budgets in seconds. --rises-from m.npz takes the layers' loss rises from
measurements at another length (one run per layer saved at long lengths;
an approximation: the heads' errors are still measured at --seq-len).

The plan (masformer-span-plan version 2, docs/rewrite.md) is applied with
masformer-opt --masformer-rewrite-spans="plan=plan.json", masformer-compile
--spans="plan=plan.json" or masformer.rewrite(plan=...). Calibrate on the
user's own data; report quality on other data (docs/EVALUATION.md). Needs
onnxruntime; the model's inputs are input_ids and optionally
attention_mask and token_type_ids, its first output the logits (causal LM)
or the embeddings or hidden states (encoder).
"""

import argparse
import json
import os
import sys
import time

import numpy as np

from . import rewrite, span_report

DEFAULT_WINDOWS = (64, 128, 256, 512, 1024, 2048)
ENCODER_WINDOWS = (8, 16, 32, 64, 128)


class CalibrationError(Exception):
    """A model, text or option calibration cannot work with."""


def _session(path, threads):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    # Priority order runs each probe right after its Softmax, so that the
    # layer's probabilities are freed once used (the default order keeps
    # every layer's until the probes at the end: gigabytes at 4096).
    opts.execution_order = ort.ExecutionOrder.PRIORITY_BASED
    # Without the arena, freed attention matrices go back to the system:
    # the probe and three layer runs of SmolLM2 peak at 3.7 GB instead of
    # 4.7 at 2048 tokens (8.4 GB at 4096), and at 8192 the arena's growth
    # ran out of 24 GB.
    opts.enable_cpu_mem_arena = False
    if threads:
        opts.intra_op_num_threads = threads
    return ort.InferenceSession(path, opts,
                                providers=["CPUExecutionProvider"])


def _nll(logits, ids):
    """Mean negative log-likelihood of ids[1:] given their prefixes."""
    logits = logits[:-1].astype(np.float64)
    m = logits.max(-1, keepdims=True)
    logz = np.log(np.exp(logits - m).sum(-1)) + m[:, 0]
    return float((logz - logits[np.arange(len(ids) - 1), ids[1:]]).mean())


class _Text:
    """The calibration inputs, in batches, and what a run is judged by: the
    mean negative log-likelihood of the tokens for a causal LM (one
    sequence), 1 - the mean cosine similarity of the embeddings (the first
    output, mean-pooled over the unmasked positions when it has a sequence
    axis) to the original model's for an encoder (sequences padded to one
    length, with their attention_mask)."""

    def __init__(self, ids, mask, causal, batch=8):
        self.ids = np.ascontiguousarray(ids, np.int64)
        self.mask = np.ascontiguousarray(mask, np.int64)
        self.causal = causal
        n = len(self.ids)
        self.batches = [slice(i, min(i + batch, n))
                        for i in range(0, n, batch)]
        self.lengths = self.mask.sum(1)
        self.reference = None

    @property
    def seq_len(self):
        return self.ids.shape[1]

    def feeds(self, sess, batch):
        """The model's token inputs for one batch."""
        feeds = {}
        for i in sess.get_inputs():
            if i.name == "input_ids":
                feeds[i.name] = self.ids[batch]
            elif i.name == "attention_mask":
                feeds[i.name] = self.mask[batch]
            elif i.name == "token_type_ids":
                feeds[i.name] = np.zeros_like(self.ids[batch])
        return feeds

    def run(self, sess, extra=None):
        """The first output of every batch (`extra`: more feeds)."""
        firsts = []
        name = sess.get_outputs()[0].name
        for b in self.batches:
            feeds = self.feeds(sess, b)
            feeds.update(extra or {})
            firsts.append(sess.run([name], feeds)[0])
        return firsts

    def loss(self, firsts):
        """The run's loss; the first run an encoder is judged on is its
        reference (loss 0)."""
        if self.causal:
            return _nll(firsts[0][0], self.ids[0])
        emb = []
        for out, b in zip(firsts, self.batches):
            e = np.asarray(out, np.float64)
            if e.ndim == 3:
                m = self.mask[b][:, :, None].astype(np.float64)
                e = (e * m).sum(1) / np.maximum(m.sum(1), 1e-9)
            elif e.ndim != 2:
                raise CalibrationError(
                    f"the encoder's first output has rank {e.ndim}: "
                    f"expected embeddings [batch, dim] or hidden states "
                    f"[batch, seq, dim]")
            emb.append(e / np.maximum(
                np.linalg.norm(e, axis=1, keepdims=True), 1e-30))
        emb = np.concatenate(emb)
        if self.reference is None:
            self.reference = emb
        return float(1.0 - (emb * self.reference).sum(1).mean())


def _token_inputs(model):
    """Which token inputs the model takes (input_ids, and optionally
    attention_mask and token_type_ids); any other input is an error."""
    import onnx
    try:
        graph = onnx.load(model, load_external_data=False).graph
    except Exception as e:  # noqa: BLE001 - any reason it cannot be read
        raise CalibrationError(f"cannot read the model: {e}")
    init = {t.name for t in graph.initializer}
    names = [i.name for i in graph.input if i.name not in init]
    known = ("input_ids", "attention_mask", "token_type_ids")
    if "input_ids" not in names or any(n not in known for n in names):
        raise CalibrationError(
            f"the model's inputs must be input_ids and optionally "
            f"attention_mask and token_type_ids; it has {names}")
    return [n for n in known if n in names]


def _tmp_path(model, tag):
    """Next to the model, so that its external data is found."""
    stem = os.path.splitext(os.path.basename(model))[0]
    return os.path.join(os.path.dirname(os.path.abspath(model)),
                        f".{stem}-masformer-{tag}-{os.getpid()}.onnx")


def _remove(path):
    for p in (path, path + ".data"):
        if os.path.exists(p):
            os.remove(p)


def _probe_model(model, layers, rows, out):
    """`model` with, per layer, a float mask input of rank 3 (heads, queries,
    keys; broadcast) added to the Softmax input, and as f32 outputs the
    Softmax output at query rows `rows` (axis 2) and the output MatMul's
    values. Returns [(mask input, probabilities, values)] per layer."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    m = onnx.load(model, load_external_data=False)
    names = {n.name: n for n in m.graph.node}
    idx = "masformer_calibrate_rows"
    m.graph.initializer.append(
        numpy_helper.from_array(np.asarray(rows, np.int64), idx))
    opset = max((o.version for o in m.opset_import
                 if o.domain in ("", "ai.onnx")), default=0)
    probes = []
    for c in layers:
        if len(c.nodes) != 3 or any(n not in names for n in c.nodes):
            raise CalibrationError(
                f"layer {c.layer}: calibration needs attention written as "
                f"MatMul, Softmax, MatMul (the layer's nodes: "
                f"{list(c.nodes)})")
        softmax, pv = names[c.nodes[1]], names[c.nodes[2]]
        if softmax.op_type != "Softmax" or pv.op_type != "MatMul":
            raise CalibrationError(
                f"layer {c.layer}: expected nodes Softmax and MatMul, got "
                f"{softmax.op_type} '{softmax.name}' and {pv.op_type} "
                f"'{pv.name}'")
        tag = f"masformer_calibrate_{c.layer}"
        mask, p, v = tag + "_mask", tag + "_p", tag + "_v"
        m.graph.input.append(helper.make_tensor_value_info(
            mask, TensorProto.FLOAT, [f"{tag}_{d}" for d in "hqk"]))
        added = mask
        if opset >= 15:
            added = tag + "_mask_typed"
            before = [helper.make_node("CastLike", [mask, softmax.input[0]],
                                       [added], name=added)]
        else:
            before = []
        scores = tag + "_scores"
        before.append(helper.make_node("Add", [softmax.input[0], added],
                                       [scores], name=scores))
        at = list(m.graph.node).index(softmax)
        for k, node in enumerate(before):
            m.graph.node.insert(at + k, node)
        softmax.input[0] = scores
        # Right after the Softmax (and with the priority order of
        # _session): each layer's probabilities are freed once used.
        gathered = p + "_rows"
        at = list(m.graph.node).index(softmax) + 1
        for k, node in enumerate([
                helper.make_node("Gather", [softmax.output[0], idx],
                                 [gathered], axis=2, name=gathered),
                helper.make_node("Cast", [gathered], [p],
                                 to=TensorProto.FLOAT, name=p)]):
            m.graph.node.insert(at + k, node)
        at = list(m.graph.node).index(pv) + 1
        m.graph.node.insert(at, helper.make_node(
            "Cast", [pv.input[1]], [v], to=TensorProto.FLOAT, name=v))
        for name in (p, v):
            m.graph.output.append(
                helper.make_tensor_value_info(name, TensorProto.FLOAT, None))
        probes.append((mask, p, v))
    onnx.save(m, out)
    return probes


def head_errors(p, v, rows, seq, kv_heads, candidates, causal):
    """Relative output error of each candidate span per key/value head.

    p: [q_heads, R, S] probabilities of query rows `rows`; v: [heads, S, D]
    values, heads either q_heads, kv_heads or 1. Returns the relative
    errors [kv_heads, C] (sum |o_span - o|^2 / sum |o|^2 over the rows and
    the group's query heads) and the absolute ones (the numerators).
    """
    q_heads = p.shape[0]
    group = q_heads // kv_heads
    if v.shape[0] not in (q_heads, kv_heads, 1):
        raise CalibrationError(f"values have {v.shape[0]} heads for "
                               f"{q_heads} query heads")
    num = np.zeros((kv_heads, len(candidates)))
    den = np.zeros(kv_heads)
    masks = [_allowed(rows, seq, c, causal) for c in candidates]
    for h in range(q_heads):
        vh = v[h if v.shape[0] == q_heads else
               (h // group if v.shape[0] == kv_heads else 0)]
        ph = p[h].astype(np.float32)
        full = ph @ vh
        den[h // group] += float((full.astype(np.float64) ** 2).sum())
        for ci, mask in enumerate(masks):
            if mask is None:
                continue
            kept = np.where(mask, ph, 0.0)
            mass = kept.sum(-1, keepdims=True)
            o = (kept @ vh) / np.maximum(mass, 1e-30)
            num[h // group, ci] += float(((o - full).astype(np.float64)
                                          ** 2).sum())
    return num / np.maximum(den, 1e-30)[:, None], num


def _allowed(rows, seq, cand, causal):
    """[R, S] keys allowed by a candidate (kind, size, sink) for query rows
    at positions `rows` (None: every key)."""
    kind, size, sink = cand
    if kind == "full":
        return None
    i = np.asarray(rows)[:, None]
    j = np.arange(seq)[None, :]
    d = i - j
    rule = ((d >= 0) & (d < size)) if causal else (np.abs(d) < size)
    return rule | (j < sink)


def choose(errors, costs, weights, budget):
    """One candidate per head: least sum of errors with
    sum(weights * costs[choice]) <= budget * sum(weights).

    errors [H, C], costs [C] (fractions of full; the full candidate costs
    1), weights [H]. Candidates that cost more must not err more (full errs
    0). Returns the choice per head.
    """
    errors = np.asarray(errors, np.float64)
    costs = np.asarray(costs, np.float64)
    weights = np.asarray(weights, np.float64)
    limit = budget * weights.sum()

    def pick(lam):
        return np.argmin(errors + lam * weights[:, None] * costs[None, :],
                         axis=1)

    def spent(choice):
        return float((weights * costs[choice]).sum())

    cheapest = np.full(len(errors), int(np.argmin(costs)))
    if spent(cheapest) > limit:
        raise CalibrationError(
            f"the budget {budget} is below the cost of the cheapest "
            f"candidate everywhere ({spent(cheapest) / weights.sum():.3f})")
    lo, hi = 0.0, 1.0
    while spent(pick(hi)) > limit:
        hi *= 2
    for _ in range(100):
        mid = (lo + hi) / 2
        if spent(pick(mid)) > limit:
            lo = mid
        else:
            hi = mid
    choice = pick(hi)
    # Greedy upgrades into the budget left: the best error saved per cost.
    while True:
        left = limit - spent(choice)
        best, gain = None, 0.0
        for h in range(len(errors)):
            for c in range(len(costs)):
                extra = weights[h] * (costs[c] - costs[choice[h]])
                saved = errors[h, choice[h]] - errors[h, c]
                if extra <= 0 or extra > left or saved <= 0:
                    continue
                if saved / extra > gain:
                    best, gain = (h, c), saved / extra
        if best is None:
            return choice
        choice[best[0]] = best[1]


def _span_entry(cand):
    kind, size, sink = cand
    if kind == "full":
        return {"span": "full"}
    entry = {"span": kind, "size": size}
    if sink:
        entry["sink"] = sink
    return entry


def _plan_layers(layers, choice, candidates):
    out, k = [], 0
    for c in layers:
        heads = [_span_entry(candidates[i])
                 for i in choice[k:k + c.kv_heads]]
        k += c.kv_heads
        if all(h == heads[0] for h in heads):
            out.append(dict(layer=c.layer, **heads[0]))
        else:
            out.append(dict(layer=c.layer, heads=heads))
    return out


def _hash(ids):
    import hashlib
    return hashlib.sha256(np.ascontiguousarray(ids, np.int64).tobytes()) \
        .hexdigest()[:16]


def _measure(model, layers, text, sample, cands, refs, threads, log,
             rises=None):
    """Step 1: the original loss, the heads' absolute output errors [heads,
    candidates] and each layer's loss rise [refs, layers] at each reference
    candidate in `refs` (or `rises`, measured elsewhere)."""
    seq = text.seq_len
    probe = _tmp_path(model, "calibrate")
    t0 = time.time()
    try:
        probes = _probe_model(model, layers, sample, probe)
        sess = _session(probe, threads)
        none = np.zeros((1, 1, 1), np.float32)
        masks = {mask: none for mask, _, _ in probes}
        names = [o.name for o in sess.get_outputs()]
        num = np.zeros((sum(c.kv_heads for c in layers), len(cands)))
        firsts = []
        for b in text.batches:
            feeds = text.feeds(sess, b)
            feeds.update(masks)
            outs = dict(zip(names, sess.run(None, feeds)))
            firsts.append(outs[names[0]])
            k = 0
            for c, (_, p, v) in zip(layers, probes):
                for item in range(outs[p].shape[0]):
                    # An encoder's padded query rows do not matter.
                    rows = sample < text.lengths[b][item]
                    num[k:k + c.kv_heads] += head_errors(
                        outs[p][item][:, rows], outs[v][item], sample[rows],
                        seq, c.kv_heads, cands, text.causal)[1]
                k += c.kv_heads
            del outs
        base = text.loss(firsts)
        what = (f"original perplexity {np.exp(base):.3f}" if text.causal
                else f"{len(text.ids)} sequences")
        log(f"calibration: {len(layers)} layers, {seq} tokens, {what} "
            f"({time.time() - t0:.0f} s)")
        if rises is not None:
            return base, num, np.asarray(rises, np.float64)
        unit = "nats" if text.causal else "(1 - cosine)"
        rise = np.zeros((len(refs), len(layers)))
        for k, ref in enumerate(refs):
            allowed = _allowed(np.arange(seq), seq, cands[ref], text.causal)
            span_mask = np.where(allowed, 0.0,
                                 -np.inf).astype(np.float32)[None]
            for li, (c, (mask, _, _)) in enumerate(zip(layers, probes)):
                t1 = time.time()
                firsts = text.run(sess, dict(masks, **{mask: span_mask}))
                rise[k, li] = text.loss(firsts) - base
                log(f"  layer {c.layer} alone with window {cands[ref][1]} + "
                    f"{cands[ref][2]} sinks: loss {rise[k, li]:+.4f} {unit} "
                    f"({time.time() - t1:.0f} s)")
    finally:
        _remove(probe)
    return base, num, rise


def _saved_rises(meas, saved):
    """{reference window: rises per layer} of saved measurements (one
    reference window saved as an int and rises [layers], several as a list
    and [refs, layers])."""
    refs = saved["ref_window"]
    rise = np.asarray(meas["rise"], np.float64)
    if isinstance(refs, int):
        return {refs: rise.reshape(-1)}
    return dict(zip(refs, rise.reshape(len(refs), -1)))


def _rises_from(paths, key, log):
    """The layer loss rises [refs, layers] at the reference windows of
    `key`, from measurements taken at another length (same model and
    sinks), several files together covering every reference window."""
    found = {}
    for path in paths:
        try:
            meas = dict(np.load(path, allow_pickle=False))
            saved = json.loads(str(meas["key"]))
            got = _saved_rises(meas, saved)
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise CalibrationError(f"--rises-from {path}: {e}")
        for k in ("layers", "sink"):
            if saved.get(k) != key[k]:
                raise CalibrationError(
                    f"--rises-from {path}: taken with {k} {saved.get(k)}, "
                    f"not {key[k]}")
        log(f"calibration: layer loss rises at window(s) {list(got)} from "
            f"{path} (measured at {saved['seq_len']} tokens)")
        found.update(got)
    refs = _as_list(key["ref_window"])
    missing = [r for r in refs if r not in found]
    if missing:
        raise CalibrationError(
            f"--rises-from has no layer loss rises at --ref-window "
            f"{missing} (it has {sorted(found)})")
    return np.stack([found[r] for r in refs])


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def calibrate(model, tokens, seq_len, budget, *, windows=None, sink=None,
              rows=256, offset=0, count=None, check=True, threads=0,
              ref_window=None, measurements=None, save_measurements=None,
              per_layer=False, rises_from=None, import_len=1024,
              log=print):
    """Returns the plan (a dict, masformer-span-plan version 2) for `model`.

    A causal LM is calibrated on `tokens[offset:offset + seq_len]` (token
    ids) by its perplexity; an encoder on `count` sequences from `offset` of
    `tokens` = {"input_ids": [N, S], "attention_mask": [N, S]} (seq_len None
    or S) by the cosine similarity of its embeddings to the original's.
    Defaults by kind: windows 64..2048 with 64 sinks and a reference
    window of 256 for a causal LM; windows 8..128 (each side) with 8 sinks,
    reference 32, for an encoder."""
    if not 0 < budget <= 1:
        raise CalibrationError(f"--budget must be in (0, 1], got {budget}")
    names = _token_inputs(model)
    if isinstance(tokens, dict):
        try:
            ids, mask = (np.asarray(tokens[k]) for k in
                         ("input_ids", "attention_mask"))
        except KeyError as e:
            raise CalibrationError(f"the sequences have no {e} array")
        if ids.ndim != 2 or mask.shape != ids.shape or ids.shape[1] < 2:
            raise CalibrationError(
                f"input_ids {list(ids.shape)} and attention_mask "
                f"{list(mask.shape)} must both be [sequences, length >= 2]")
        if seq_len not in (None, ids.shape[1]):
            raise CalibrationError(f"--seq-len {seq_len} is not the "
                                   f"sequences' length {ids.shape[1]}")
        seq_len = ids.shape[1]
        stop = len(ids) if count is None else offset + count
        if not 0 <= offset < stop <= len(ids):
            raise CalibrationError(
                f"{len(ids)} sequences: none or too few from offset "
                f"{offset}" + (f" for --count {count}" if count else ""))
        ids, mask = ids[offset:stop], mask[offset:stop]
        if (mask.sum(1) == 0).any():
            raise CalibrationError("a sequence's attention_mask is all 0")
        sequences = True
    else:
        tokens = np.asarray(tokens).astype(np.int64).ravel()
        if seq_len is None or len(tokens) < offset + seq_len:
            raise CalibrationError(
                f"the calibration text has {len(tokens)} tokens: too few "
                f"for --seq-len {seq_len} from offset {offset}")
        ids = tokens[offset:offset + seq_len][None]
        mask = np.ones_like(ids)
        sequences = False
    shapes = {name: [1, min(seq_len, import_len)] for name in names}
    layers = span_report(model, seq_len=seq_len, input_shapes=shapes).layers
    if not layers:
        raise CalibrationError("masformer finds no attention layer in it")
    causal = all(c.causal for c in layers)
    if any(c.causal for c in layers) != causal:
        raise CalibrationError("the model mixes causal and bidirectional "
                               "attention layers")
    if causal and sequences:
        raise CalibrationError("a causal LM is calibrated on a text "
                               "(--tokens), not on sequences")
    if not causal and not sequences:
        raise CalibrationError(
            "the model is not a causal LM (its attention is bidirectional): "
            "an encoder is calibrated on sequences (--sequences .npz of "
            "input_ids and attention_mask), not on --tokens")
    text = _Text(ids, mask, causal)
    if windows is None:
        windows = DEFAULT_WINDOWS if causal else ENCODER_WINDOWS
    if sink is None:
        sink = 64 if causal else 8
    if ref_window is None:
        ref_window = 256 if causal else 32
    ref_windows = sorted(set(_as_list(ref_window)))
    cands = [("full", 0, 0)] + [("window", w, sink) for w in sorted(windows)
                                if 0 < w < seq_len]
    if len(cands) == 1:
        raise CalibrationError(f"no window below --seq-len {seq_len}")

    # The cost of each candidate per layer: the span report's, with every
    # layer given that span.
    costs = np.ones((len(layers), len(cands)))
    for ci, cand in enumerate(cands[1:], 1):
        rep = rewrite(model, None, plan={
            "format": "masformer-span-plan", "version": 2,
            "layers": [dict(layer=c.layer, **_span_entry(cand))
                       for c in layers]},
            seq_len=seq_len, input_shapes=shapes)
        costs[:, ci] = [c.fraction_of_full for c in rep.layers]
    if np.ptp(costs, axis=0).max() > 1e-9:
        raise CalibrationError("layers of different lengths are not "
                               "supported")
    cost = costs[0]

    sample = np.unique(np.linspace(0, seq_len - 1, rows).round()
                       .astype(np.int64))
    windows_used = [c[1] for c in cands[1:]]
    for r in ref_windows:
        if r not in windows_used:
            raise CalibrationError(f"--ref-window {r} is not one of the "
                                   f"candidate windows {windows_used}")
    refs = [windows_used.index(r) + 1 for r in ref_windows]
    # One reference window is saved as a number (as before several were
    # allowed).
    ref_window = ref_windows[0] if len(ref_windows) == 1 else ref_windows
    key = dict(seq_len=seq_len, offset=offset, sink=sink,
               windows=windows_used, rows=len(sample), ref_window=ref_window,
               layers=len(layers), tokens_hash=_hash(ids),
               rises_from=(",".join(os.path.basename(p) for p in
                                    _as_list(rises_from))
                           if rises_from else None))
    if sequences:
        key.update(sequences=len(ids), mask_hash=_hash(mask))
    if measurements is not None:
        try:
            meas = dict(np.load(measurements, allow_pickle=False))
            saved = json.loads(str(meas["key"]))
            if not isinstance(saved, dict):
                raise ValueError("its key is not a JSON object")
        except (OSError, ValueError, KeyError) as e:
            raise CalibrationError(f"--measurements {measurements}: {e}")
        # Measurements saved before --rises-from existed took none.
        saved.setdefault("rises_from", None)
        if saved != key:
            raise CalibrationError(
                f"--measurements {measurements} were taken with other "
                f"options or tokens: {saved}, not {key}")
        base, num = float(meas["base"]), meas["num"]
        rise = np.asarray(meas["rise"], np.float64).reshape(len(refs), -1)
        log(f"calibration: measurements from {measurements}")
    else:
        rises = None
        if rises_from is not None:
            rises = _rises_from(_as_list(rises_from), key, log)
        base, num, rise = _measure(model, layers, text, sample, cands, refs,
                                   threads, log, rises)
        if save_measurements:
            np.savez(save_measurements, key=json.dumps(key), base=base,
                     num=num, rise=rise if len(refs) > 1 else rise[0])
    # Predicted loss of each head and candidate: its layer's measured rise
    # at the reference span, shared out by the heads' output errors.
    weights, heads_of = [], []
    for li, c in enumerate(layers):
        group = c.heads // c.kv_heads
        weights.extend([group * c.head_dim] * c.kv_heads)
        heads_of.extend([li] * c.kv_heads)
    heads_of = np.array(heads_of)
    # Each window candidate is scaled by the reference window nearest to
    # it (in log size; the narrower one on a tie), so that the prediction
    # matches every measured rise for its own window.
    logs = np.log([cands[r][1] for r in refs])
    nearest = [0] + [int(np.argmin(np.abs(logs - np.log(c[1])) + 1e-9 *
                                   np.arange(len(refs))))
                     for c in cands[1:]]
    errors = np.zeros_like(num)
    for li in range(len(layers)):
        sel = heads_of == li
        for ci in range(1, len(cands)):
            k = nearest[ci]
            total = num[sel, refs[k]].sum()
            if total > 0:
                errors[sel, ci] = max(rise[k, li], 0.0) * num[sel, ci] / total
    # A wider window errs less: keep the windows' errors (ascending after
    # full, which errs 0) monotone, as sampling could wobble them.
    errors[:, 1:] = np.minimum.accumulate(errors[:, 1:], axis=1)
    weights = np.array(weights, np.float64)
    if per_layer:
        # One span per layer: the layer's heads chosen together.
        layer_err = np.stack([errors[heads_of == li].sum(0)
                              for li in range(len(layers))])
        layer_w = np.array([weights[heads_of == li].sum()
                            for li in range(len(layers))])
        choice = choose(layer_err, cost, layer_w, budget)[heads_of]
    else:
        choice = choose(errors, cost, weights, budget)
    plan_layers = _plan_layers(layers, choice, cands)
    predicted = float(errors[np.arange(len(choice)), choice].sum())
    plan = {"format": "masformer-span-plan", "version": 2,
            "layers": plan_layers}
    rep = rewrite(model, None, plan=plan, seq_len=seq_len,
                  input_shapes=shapes)
    counts = {}
    for i in choice:
        t = _span_entry(cands[i])
        key = t["span"] + (f" {t['size']}" if "size" in t else "")
        counts[key] = counts.get(key, 0) + 1
    log(f"plan: attention cost {rep.fraction_of_full:.3f} (budget "
        f"{budget}), heads: " + ", ".join(f"{k} x{n}" for k, n in
                                          sorted(counts.items())))
    info = {"model": os.path.basename(model), "seq_len": seq_len,
            "offset": offset, "budget": budget,
            "cost": rep.fraction_of_full, "sink": sink,
            "windows": windows_used, "rows": len(sample),
            "ref_window": ref_window,
            "granularity": "layer" if per_layer else "head",
            "predicted_loss_rise": predicted,
            "layer_loss_rise": ([float(r) for r in rise[0]]
                                if len(refs) == 1 else
                                {str(w): [float(r) for r in rise[k]]
                                 for k, w in enumerate(ref_windows)}),
            "objective": "perplexity" if causal else "cosine"}
    if causal:
        info["original_perplexity"] = float(np.exp(base))
    else:
        info["sequences"] = [offset, offset + len(ids)]
    if check:
        if text.reference is None and not causal:
            # Measurements came from a file: the original's embeddings.
            text.loss(text.run(_session(model, threads)))
        tmp = _tmp_path(model, "check")
        try:
            rewrite(model, tmp, plan=plan, seq_len=seq_len,
                    input_shapes=shapes)
            loss = text.loss(text.run(_session(tmp, threads)))
        finally:
            _remove(tmp)
        if causal:
            info["perplexity"] = float(np.exp(loss))
            info["perplexity_ratio"] = float(np.exp(loss - base))
            log(f"check: perplexity {np.exp(loss):.3f} "
                f"(x{np.exp(loss - base):.4f} of the original) on the "
                f"calibration tokens")
        else:
            info["cosine"] = 1.0 - loss
            log(f"check: cosine similarity {1.0 - loss:.4f} to the "
                f"original's embeddings on the calibration sequences")
    plan["calibration"] = info
    return plan


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m masformer.calibrate",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="the ONNX model (a causal LM or an "
                                  "encoder)")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--tokens",
                     help="a causal LM's calibration text: .npy of token ids")
    src.add_argument("--sequences",
                     help="an encoder's calibration sequences: .npz of "
                          "input_ids and attention_mask [N, S]")
    ap.add_argument("--seq-len", type=int,
                    help="tokens per run (needed with --tokens; with "
                         "--sequences, their length)")
    ap.add_argument("--count", type=int,
                    help="sequences to calibrate on, from --offset "
                         "(default: all)")
    ap.add_argument("--budget", type=float, required=True,
                    help="attention cost allowed, a fraction of full "
                         "attention at --seq-len (0.3: 30%%)")
    ap.add_argument("-o", "--output", required=True, help="the plan (.json)")
    ap.add_argument("--windows", type=int, nargs="+",
                    help="candidate window sizes (with --sink sinks; "
                         "default 64 to 2048 for a causal LM, 8 to 128 for "
                         "an encoder)")
    ap.add_argument("--sink", type=int,
                    help="attention sinks of every window (default 64 for "
                         "a causal LM, 8 for an encoder)")
    ap.add_argument("--rows", type=int, default=256,
                    help="query rows sampled per layer (default 256)")
    ap.add_argument("--offset", type=int, default=0,
                    help="first calibration token in --tokens (first "
                         "sequence in --sequences)")
    ap.add_argument("--ref-window", type=int, nargs="+",
                    help="the window(s) (with the sinks) each layer alone "
                         "gets to measure its loss rise, one run per layer "
                         "and window; each candidate is predicted from the "
                         "nearest (default 256 for a causal LM, 32 for an "
                         "encoder)")
    ap.add_argument("--save-measurements", metavar="NPZ",
                    help="keep the measurements for other budgets")
    ap.add_argument("--measurements", metavar="NPZ",
                    help="reuse saved measurements (same model, tokens and "
                         "options) instead of running them")
    ap.add_argument("--rises-from", metavar="NPZ", nargs="+",
                    help="take the layers' loss rises from measurements "
                         "saved at another (shorter) length instead of "
                         "running them: an approximation that saves one "
                         "run per layer")
    ap.add_argument("--per-layer", action="store_true",
                    help="one span per layer (all its heads alike) instead "
                         "of one per key/value head")
    ap.add_argument("--no-check", action="store_true",
                    help="skip the run of the rewritten model")
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args(argv)
    if a.tokens is not None and a.seq_len is None:
        ap.error("--tokens needs --seq-len")
    if a.seq_len is not None and a.seq_len <= 1:
        ap.error("--seq-len must be at least 2")
    if a.count is not None and (a.tokens is not None or a.count <= 0):
        ap.error("--count is a positive number of --sequences")
    if a.rows <= 0 or (a.sink or 0) < 0 or \
            any(w <= 0 for w in a.windows or ()):
        ap.error("--rows and --windows must be positive, --sink >= 0")
    if not a.output.endswith(".json"):
        ap.error(f"-o must be a .json path, got {a.output!r}")
    source = a.tokens or a.sequences
    flag = "--tokens" if a.tokens else "--sequences"
    try:
        if a.tokens:
            data = np.load(a.tokens, allow_pickle=False)
            if not isinstance(data, np.ndarray) or \
                    not np.issubdtype(data.dtype, np.integer):
                raise ValueError("expected an .npy array of integer token "
                                 "ids")
        else:
            with np.load(a.sequences, allow_pickle=False) as z:
                data = {k: z[k] for k in ("input_ids", "attention_mask")
                        if k in z}
    except (OSError, ValueError) as e:
        sys.exit(f"masformer.calibrate: {flag} {source}: {e}")
    try:
        plan = calibrate(a.model, data, a.seq_len, a.budget,
                         windows=a.windows, sink=a.sink, rows=a.rows,
                         offset=a.offset, count=a.count,
                         check=not a.no_check,
                         threads=a.threads, ref_window=a.ref_window,
                         measurements=a.measurements,
                         save_measurements=a.save_measurements,
                         per_layer=a.per_layer, rises_from=a.rises_from)
    except CalibrationError as e:
        sys.exit(f"masformer.calibrate: {a.model}: {e}")
    plan["calibration"]["tokens" if a.tokens else "sequences_file"] = \
        os.path.basename(source)
    with open(a.output, "w") as f:
        json.dump(plan, f, indent=1)
    print(f"wrote {a.output}")


if __name__ == "__main__":
    main()
