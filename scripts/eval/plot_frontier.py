#!/usr/bin/env python3
"""Quality against attention cost of every pattern measured, in one plot
per sequence length: the results.json files of python -m masformer.evaluate
runs (several runs of one kind, lm or encoder, on one text), each row put
in a family: blocks and windows, each with or without sinks (one span for
every rewritten layer), per-layer plans and per-head plans (python -m
masformer.calibrate).

    python scripts/eval/plot_frontier.py results/*/results.json \\
        --title "SmolLM2-135M, pydoc" -o docs/images/eval-plans.png

Prints, per length, the lowest cost at which perplexity rises at most 5%
and at most 10% (an encoder: cosine similarity to the original's
embeddings at least 0.95 and 0.90). Needs matplotlib.
"""

import argparse
import json


def family(row):
    span = row["span"]
    if row["policy"] == "plan":
        return "per-layer plan" if "layer" in span else "per-head plan"
    if span.startswith("block"):
        return "blocks + sinks" if "sink" in span else "blocks"
    if "sink" in span:
        return "window + sinks"
    return "window"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results", nargs="+")
    ap.add_argument("--title", default="")
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()
    rows, kinds = [], set()
    for path in a.results:
        res = json.load(open(path))
        kinds.add(res.get("kind", "lm"))
        rows += [r for r in res["rows"] if r["policy"] != "original"]
    if len(kinds) != 1:
        ap.error("the results mix lm and encoder runs")
    lm = kinds.pop() == "lm"
    metric = "ppl_ratio" if lm else "cosine"
    limits = (1.05, 1.10) if lm else (0.95, 0.90)
    seqs = sorted({r["seq_len"] for r in rows})
    for s in seqs:
        at = [r for r in rows if r["seq_len"] == s]
        for limit in limits:
            ok = [r for r in at if (r[metric] <= limit if lm else
                                    r[metric] >= limit)]
            best = min(ok, key=lambda r: r["cost"]) if ok else None
            what = (f"ppl x{limit:.2f} or less" if lm else
                    f"cosine {limit:.2f} or more")
            got = (f"x{best[metric]:.3f}" if lm else
                   f"{best[metric]:.4f}") if best else ""
            print(f"S={s}: {what}: " +
                  (f"cost {best['cost']:.3f} ({best['span']}, {got})"
                   if best else "not reached"))

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    styles = {"blocks": ("tab:red", "s"),
              "blocks + sinks": ("tab:purple", "D"),
              "window": ("tab:gray", "x"),
              "window + sinks": ("tab:blue", "o"),
              "per-layer plan": ("tab:orange", "^"),
              "per-head plan": ("tab:green", "*")}
    fig, axes = plt.subplots(1, len(seqs), figsize=(5.2 * len(seqs), 4.3),
                             squeeze=False)
    for ax, s in zip(axes[0], seqs):
        for fam, (colour, marker) in styles.items():
            pts = sorted((r["cost"], r[metric]) for r in rows
                         if r["seq_len"] == s and family(r) == fam)
            if pts:
                # Plans of one kind at growing budgets form a line; the
                # other rows are single patterns.
                ax.plot(*zip(*pts), color=colour, marker=marker, ls="none"
                        if "plan" not in fam
                        else "-", ms=9 if marker == "*" else 6, label=fam)
        for y in limits:
            ax.axhline(y, color="gray", lw=0.7, ls="--")
        ax.set_xlabel("attention cost (fraction of full)")
        ax.set_ylabel("perplexity / original" if lm else
                      "cosine similarity to the original")
        ax.set_title(f"S = {s}" if lm else f"{s} tokens (padded)")
        ax.legend(fontsize=8)
    fig.suptitle(a.title)
    fig.tight_layout()
    fig.savefig(a.output, dpi=110)
    print(f"wrote {a.output}")


if __name__ == "__main__":
    main()
