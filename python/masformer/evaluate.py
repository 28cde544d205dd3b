"""How much quality a MASFormer rewrite costs for how much attention compute,
on a pretrained model, without retraining.

    python -m masformer.evaluate lm --model smollm2.onnx \\
        --tokens smollm2-tokens.npy --seq-lens 1024 2048 4096 --out results/
    python -m masformer.evaluate encoder --model minilm.onnx \\
        --paragraphs minilm-paragraphs.npz --out results/

For every combination of span (--spans: "block:512", "window:512", or with
attention sinks "window:512+64": the first 64 keys stay visible), policy
(bottom, top, spread, calibrated) and number of full layers, and for every
span plan (--plans, as python -m masformer.calibrate writes them), the model
is rewritten with masformer.rewrite and run in onnxruntime next to the
original:

- lm: a causal language model (inputs input_ids, attention_mask; output
  logits) on token windows of real text, one row per sequence length:
  perplexity, and its ratio to the original's.
- encoder: a sentence encoder (output: one embedding per input, or hidden
  states, which are mean-pooled) on
  paragraphs: cosine similarity of each embedding to the original's, and
  retrieval (the first half of a paragraph finding its second half among
  all second halves: recall@1 and mean reciprocal rank).

"calibrated" keeps full the layers whose rewrite alone hurts most on a
calibration window (or batch) that is not evaluated. The attention cost is
the span report's fraction of full attention at that sequence length.
Writes results.json, results.md (the table) and a PNG of quality against
attention cost into --out. Needs onnxruntime and matplotlib; not run in CI.
Continual training, which the MASFormer paper uses to recover the quality,
is out of scope: this measures the rewrite alone.
"""

import argparse
import functools
import itertools
import json
import os
import sys
import time

import numpy as np

from . import rewrite, span_report

POLICIES = ("bottom", "top", "spread", "calibrated")


def _session(path, threads):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    if threads:
        opts.intra_op_num_threads = threads
    return ort.InferenceSession(path, opts,
                                providers=["CPUExecutionProvider"])


# --- causal LM ---------------------------------------------------------------


def _nll(sess, window):
    """Mean negative log-likelihood of window[1:] given its prefix."""
    x = window[None, :]
    logits = sess.run(None, {"input_ids": x,
                             "attention_mask": np.ones_like(x)})[0][0, :-1]
    logits = logits.astype(np.float64)
    m = logits.max(-1, keepdims=True)
    logz = np.log(np.exp(logits - m).sum(-1)) + m[:, 0]
    return float((logz - logits[np.arange(len(window) - 1),
                                window[1:]]).mean())


def _lm_loss(path, windows, threads):
    sess = _session(path, threads)
    return float(np.mean([_nll(sess, w) for w in windows]))


def _calibrate(model, tmp, spec, layers, window, base_loss, threads, log):
    """Loss increase when only layer l gets the span, for every layer."""
    span, sink = _parse_span(spec)
    sens = []
    for l in range(layers):
        full = [k for k in range(layers) if k != l]
        rewrite(model, tmp, span=span, sink=sink, full_layers=full,
                seq_len=len(window),
                input_shapes=_shapes(min(len(window), IMPORT_LEN), model))
        sens.append(_lm_loss(tmp, [window], threads) - base_loss)
        log(f"  calibration {spec}: layer {l} +{sens[-1]:.4f} nats")
    return sens


def _parse_span(spec):
    """"window:512+64" -> ("window:512", 64); "block:256" -> (.., 0)."""
    span, _, sink = spec.partition("+")
    kind, _, size = span.partition(":")
    if kind not in ("block", "window") or not size.isdigit() or \
            (sink and not sink.isdigit()):
        raise ValueError(f"span {spec!r}: expected block:B, window:W, or "
                         f"either with +K sinks")
    return span, int(sink or 0)


def _span_text(span, sink):
    kind, size = span.split(":")
    return f"{kind} {size}" + (f", sink {sink}" if sink else "")


def _full_layers(policy, num_full, layers, sensitivity):
    if policy != "calibrated":
        return None
    order = sorted(range(layers), key=lambda l: -sensitivity[l])
    return sorted(order[:num_full])


def evaluate_lm(a, log):
    tokens = np.load(a.tokens).astype(np.int64)
    tmp = _tmp_path(a.model)
    layers = len(span_report(
        a.model, seq_len=a.seq_lens[0],
        input_shapes=_shapes(min(a.seq_lens[0], IMPORT_LEN), a.model)).layers)
    rows = []
    # Calibration on the text's last tokens; evaluation windows from the
    # start, apart from it.
    calib = tokens[-a.calib_len:]
    specs = a.spans + [f"block:{b}" for b in a.blocks]
    sensitivity = {}
    if "calibrated" in a.policies:
        base = _lm_loss(a.model, [calib], a.threads)
        for spec in specs:
            sensitivity[spec] = _calibrate(a.model, tmp, spec, layers, calib,
                                           base, a.threads, log)
    for seq in a.seq_lens:
        windows = [tokens[a.offset + i * seq:a.offset + (i + 1) * seq]
                   for i in range(a.windows)]
        if a.offset + a.windows * seq > len(tokens) - a.calib_len:
            sys.exit(f"the text has {len(tokens)} tokens: too few for "
                     f"{a.windows} windows of {seq} and the calibration")
        t0 = time.time()
        base = _lm_loss(a.model, windows, a.threads)
        rows.append(dict(seq_len=seq, span="full", sink=0, block=0,
                         policy="original", num_full=layers,
                         full_layers=list(range(layers)), cost=1.0, loss=base,
                         ppl=float(np.exp(base)), ppl_ratio=1.0))
        log(f"seq {seq}: original perplexity {np.exp(base):.3f} "
            f"({time.time() - t0:.0f} s)")
        for spec, policy, nf in itertools.product(specs, a.policies,
                                                  a.num_full):
            span, sink = _parse_span(spec)
            if int(span.split(":")[1]) >= seq:
                continue
            full = _full_layers(policy, nf, layers, sensitivity.get(spec))
            kw = dict(full_layers=full) if full is not None else \
                dict(policy=policy, num_full=nf)
            rep = rewrite(a.model, tmp, span=span, sink=sink, seq_len=seq,
                          input_shapes=_shapes(min(seq, IMPORT_LEN), a.model),
                          **kw)
            loss = _lm_loss(tmp, windows, a.threads)
            text = _span_text(span, sink)
            rows.append(dict(seq_len=seq, span=text, sink=sink,
                             block=int(span.split(":")[1])
                             if span.startswith("block") else 0,
                             policy=policy, num_full=nf,
                             full_layers=rep.full_layers,
                             cost=rep.fraction_of_full, loss=loss,
                             ppl=float(np.exp(loss)),
                             ppl_ratio=float(np.exp(loss - base))))
            log(f"seq {seq} {text} {policy} {nf} full "
                f"{rep.full_layers}: cost {rep.fraction_of_full:.3f}, "
                f"perplexity {np.exp(loss):.3f} "
                f"(x{np.exp(loss - base):.3f})")
        for plan_path in a.plans:
            rows.append(_plan_row(a, plan_path, seq, windows, base, tmp, log))
    if os.path.exists(tmp):
        os.remove(tmp)
        if os.path.exists(tmp + ".data"):
            os.remove(tmp + ".data")
    return rows, layers


def _plan_row(a, plan_path, seq, windows, base, tmp, log):
    """A span plan (python -m masformer.calibrate) on the windows."""
    rep = rewrite(a.model, tmp, plan=plan_path, seq_len=seq,
                  input_shapes=_shapes(min(seq, IMPORT_LEN), a.model))
    loss = _lm_loss(tmp, windows, a.threads)
    name = os.path.splitext(os.path.basename(plan_path))[0]
    per_head = sum(1 for c in rep.layers if c.head_spans)
    log(f"seq {seq} plan {name}: cost {rep.fraction_of_full:.3f}, "
        f"perplexity {np.exp(loss):.3f} (x{np.exp(loss - base):.3f})")
    return dict(seq_len=seq, span=f"plan {name}", sink=0, block=0,
                policy="plan", num_full=len(rep.full_layers),
                full_layers=rep.full_layers, per_head_layers=per_head,
                cost=rep.fraction_of_full, loss=loss,
                ppl=float(np.exp(loss)), ppl_ratio=float(np.exp(loss - base)))


def _tmp_path(model):
    """Where the rewritten models go: next to the model (external data is
    found relative to it), one name per model and process."""
    stem = os.path.splitext(os.path.basename(model))[0]
    return os.path.join(os.path.dirname(os.path.abspath(model)),
                        f".{stem}-masformer-eval-{os.getpid()}.onnx")


def _shapes(seq, model):
    """The token inputs' shapes at `seq`, for the inputs the model has (an
    --input-shape for an input it lacks is an error)."""
    names = _input_names(os.path.abspath(model))
    return {n: [1, seq] for n in ("input_ids", "attention_mask")
            if n in names}


@functools.lru_cache(maxsize=None)
def _input_names(model):
    import onnx
    graph = onnx.load(model, load_external_data=False).graph
    init = {t.name for t in graph.initializer}
    return tuple(i.name for i in graph.input if i.name not in init)


# Models whose masks only import with fixed shapes (a ScatterND whose
# indices only the host can check) are imported at this length at most: the rewritten
# model keeps its dynamic axes, and runs at every length.
IMPORT_LEN = 1024


# --- encoder -----------------------------------------------------------------


def _embed(sess, ids, mask, batch=16):
    """L2-normalized embeddings; a [N, S, D] output (hidden states) is
    mean-pooled over the unmasked positions."""
    out = []
    for i in range(0, len(ids), batch):
        out.append(sess.run(None, {"input_ids": ids[i:i + batch],
                                   "attention_mask": mask[i:i + batch]})[0])
    e = np.concatenate(out).astype(np.float64)
    if e.ndim == 3:
        m = mask[:, :, None].astype(np.float64)
        e = (e * m).sum(1) / np.maximum(m.sum(1), 1e-9)
    return e / np.linalg.norm(e, axis=1, keepdims=True)


def _encoder_scores(path, data, ref, threads):
    sess = _session(path, threads)
    emb = _embed(sess, data["input_ids"], data["attention_mask"])
    q = _embed(sess, data["query_ids"], data["query_mask"])
    d = _embed(sess, data["doc_ids"], data["doc_mask"])
    sim = q @ d.T
    rank = (sim > np.diag(sim)[:, None]).sum(1) + 1
    cos = float((emb * ref).sum(1).mean()) if ref is not None else 1.0
    return emb, dict(cosine=cos, recall_at_1=float((rank == 1).mean()),
                     mrr=float((1.0 / rank).mean()))


def evaluate_encoder(a, log):
    data = dict(np.load(a.paragraphs))
    seq = data["input_ids"].shape[1]
    tmp = _tmp_path(a.model)
    layers = len(span_report(a.model, seq_len=seq).layers)
    ref, base = _encoder_scores(a.model, data, None, a.threads)
    rows = [dict(seq_len=seq, span="full", sink=0, block=0,
                 policy="original", num_full=layers,
                 full_layers=list(range(layers)), cost=1.0, **base)]
    log(f"original: {base}")
    # Calibration: the first 16 paragraphs' embeddings.
    calib = {k: v[:16] for k, v in data.items()}
    specs = a.spans + [f"block:{b}" for b in a.blocks]
    sensitivity = {}
    if "calibrated" in a.policies:
        for spec in specs:
            span, sink = _parse_span(spec)
            sens = []
            for l in range(layers):
                rewrite(a.model, tmp, span=span, sink=sink,
                        full_layers=[k for k in range(layers) if k != l],
                        seq_len=seq)
                e = _embed(_session(tmp, a.threads), calib["input_ids"],
                           calib["attention_mask"])
                sens.append(1.0 - float((e * ref[:16]).sum(1).mean()))
            sensitivity[spec] = sens
            log(f"calibration {spec}: {np.round(sens, 4).tolist()}")
    for spec, policy, nf in itertools.product(specs, a.policies, a.num_full):
        if nf > layers:
            continue
        span, sink = _parse_span(spec)
        full = _full_layers(policy, nf, layers, sensitivity.get(spec))
        kw = dict(full_layers=full) if full is not None else \
            dict(policy=policy, num_full=nf)
        rep = rewrite(a.model, tmp, span=span, sink=sink, seq_len=seq, **kw)
        _, s = _encoder_scores(tmp, data, ref, a.threads)
        text = _span_text(span, sink)
        rows.append(dict(seq_len=seq, span=text, sink=sink,
                         block=int(span.split(":")[1])
                         if span.startswith("block") else 0,
                         policy=policy, num_full=nf,
                         full_layers=rep.full_layers,
                         cost=rep.fraction_of_full, **s))
        log(f"{text} {policy} {nf} full {rep.full_layers}: cost "
            f"{rep.fraction_of_full:.3f}, {s}")
    for plan_path in a.plans:
        rep = rewrite(a.model, tmp, plan=plan_path, seq_len=seq)
        _, s = _encoder_scores(tmp, data, ref, a.threads)
        name = os.path.splitext(os.path.basename(plan_path))[0]
        rows.append(dict(seq_len=seq, span=f"plan {name}", sink=0, block=0,
                         policy="plan", num_full=len(rep.full_layers),
                         full_layers=rep.full_layers,
                         per_head_layers=sum(1 for c in rep.layers
                                             if c.head_spans),
                         cost=rep.fraction_of_full, **s))
        log(f"plan {name}: cost {rep.fraction_of_full:.3f}, {s}")
    if os.path.exists(tmp):
        os.remove(tmp)
    return rows, layers


# --- output ------------------------------------------------------------------


def _table(rows, kind):
    if kind == "lm":
        head = ("| seq len | span | policy | full layers | attention cost | "
                "perplexity | x original |\n| --- | --- | --- | --- | --- | "
                "--- | --- |")
        fmt = ("| {seq_len} | {span_col} | {policy} | {fl} | {cost:.3f} | "
               "{ppl:.3f} | {ppl_ratio:.3f} |")
    else:
        head = ("| span | policy | full layers | attention cost | cosine to "
                "original | recall@1 | MRR |\n| --- | --- | --- | --- | --- | "
                "--- | --- |")
        fmt = ("| {span_col} | {policy} | {fl} | {cost:.3f} | {cosine:.4f} | "
               "{recall_at_1:.3f} | {mrr:.3f} |")
    lines = [head]
    for r in rows:
        fl = ("all" if r["policy"] == "original" else
              ",".join(str(l) for l in r["full_layers"]) or "none")
        span_col = "-" if r["policy"] == "original" else r.get("span", "-")
        lines.append(fmt.format(blk=r["block"] or "-", fl=fl,
                                span_col=span_col, **r))
    return "\n".join(lines)


def _plot(rows, kind, path, title):
    """Quality against attention cost: one panel per sequence length, a
    colour per span, a marker per policy."""
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed: no plot")
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    metric = "ppl_ratio" if kind == "lm" else "cosine"
    seqs = sorted({r["seq_len"] for r in rows})
    key = "span"
    spans = sorted({r[key] for r in rows if r["policy"] != "original"},
                   key=str)
    colours = plt.get_cmap("tab10")
    markers = dict(bottom="v", top="^", spread="s", calibrated="o", plan="*")
    fig, axes = plt.subplots(1, len(seqs), figsize=(4.8 * len(seqs), 4.2),
                             sharey=True, squeeze=False)
    for ax, seq in zip(axes[0], seqs):
        for k, span in enumerate(spans):
            for policy in POLICIES + ("plan",):
                pts = sorted((r["cost"], r[metric]) for r in rows
                             if (r["seq_len"], r[key], r["policy"]) ==
                             (seq, span, policy))
                if pts:
                    label = span
                    ax.plot(*zip(*pts), color=colours(k % 10),
                            marker=markers[policy],
                            label=f"{label}, {policy}")
        ax.axhline(1.0, color="gray", lw=0.8, ls="--")
        ax.set_xlabel("attention cost (fraction of full)")
        ax.set_title(f"S = {seq}" if kind == "lm" else f"{seq} tokens")
        if kind == "lm":
            ax.set_yscale("log")
    axes[0][0].set_ylabel("perplexity / original" if kind == "lm"
                          else "cosine similarity to the original")
    axes[0][-1].legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m masformer.evaluate",
                                 description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="kind", required=True)
    lm = sub.add_parser("lm", help="a causal LM: perplexity")
    lm.add_argument("--tokens", required=True,
                    help=".npy of the text's token ids")
    lm.add_argument("--seq-lens", type=int, nargs="+", default=[1024, 2048])
    lm.add_argument("--windows", type=int, default=2,
                    help="evaluation windows per sequence length")
    lm.add_argument("--offset", type=int, default=0)
    lm.add_argument("--calib-len", type=int, default=1024)
    lm.add_argument("--spans", nargs="+", default=[],
                    help="spans of the rewritten layers: block:B, window:W, "
                         "or either with attention sinks, window:W+K")
    lm.add_argument("--blocks", type=int, nargs="*", default=None,
                    help="block sizes (block:B spans; default 256 512 when "
                         "--spans is not given)")
    lm.add_argument("--num-full", type=int, nargs="+", default=[3, 10])
    lm.add_argument("--plans", nargs="+", default=[],
                    help="span plans (python -m masformer.calibrate) to "
                         "evaluate too, one row each per sequence length")
    enc = sub.add_parser("encoder", help="a sentence encoder: similarity "
                                         "and retrieval")
    enc.add_argument("--paragraphs", required=True,
                     help=".npz of input_ids/attention_mask, "
                          "query_ids/query_mask, doc_ids/doc_mask")
    enc.add_argument("--spans", nargs="+", default=[],
                     help="spans of the rewritten layers: block:B, "
                          "window:W, or either with attention sinks, "
                          "window:W+K")
    enc.add_argument("--blocks", type=int, nargs="*", default=None,
                     help="block sizes (default 32 64 128 when --spans is "
                          "not given)")
    enc.add_argument("--num-full", type=int, nargs="+", default=[0, 1, 2])
    enc.add_argument("--plans", nargs="+", default=[],
                     help="span plans (python -m masformer.calibrate) to "
                          "evaluate too, one row each")
    for p in (lm, enc):
        p.add_argument("--model", required=True, help="the ONNX model")
        p.add_argument("--policies", nargs="+", default=list(POLICIES),
                       choices=POLICIES)
        p.add_argument("--threads", type=int, default=0)
        p.add_argument("--out", required=True, help="output directory")
        p.add_argument("--title", default=None)
    a = ap.parse_args(argv)
    if a.blocks is None:
        a.blocks = [] if a.spans else ([256, 512] if a.kind == "lm" else
                                       [32, 64, 128])
    for spec in a.spans:
        try:
            _parse_span(spec)
        except ValueError as e:
            ap.error(str(e))
    os.makedirs(a.out, exist_ok=True)
    logf = open(os.path.join(a.out, "log.txt"), "w")

    def log(msg):
        print(msg, flush=True)
        logf.write(msg + "\n")
        logf.flush()

    t0 = time.time()
    if a.kind == "lm":
        rows, layers = evaluate_lm(a, log)
    else:
        rows, layers = evaluate_encoder(a, log)
    title = a.title or os.path.basename(a.model)
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(dict(model=a.model, kind=a.kind, layers=layers,
                       rows=rows), f, indent=1)
    table = _table(rows, a.kind)
    with open(os.path.join(a.out, "results.md"), "w") as f:
        f.write(table + "\n")
    _plot(rows, a.kind, os.path.join(a.out, "tradeoff.png"), title)
    log(table)
    log(f"done in {time.time() - t0:.0f} s; results in {a.out}")


if __name__ == "__main__":
    main()
