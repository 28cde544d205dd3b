"""masformer.rewrite and masformer.span_report."""

import json
import os
import re
import tempfile
import warnings

from . import _masformer
from ._report import SpanReport

Error = _masformer.Error

_POLICIES = ("bottom", "top", "spread", "calibrated")


def _plan_option(plan, others):
    """plan=PATH for a plan file or a plan dict (written next to nothing:
    a temporary file the caller removes); `others` are the arguments that
    a plan excludes."""
    if any(others):
        raise ValueError("plan gives every layer its span: it cannot be "
                         "combined with span, sink, full_layers, policy or "
                         "num_full")
    tmp = None
    if isinstance(plan, dict):
        fd, tmp = tempfile.mkstemp(suffix=".json", prefix="masformer-plan-")
        with os.fdopen(fd, "w") as f:
            json.dump(plan, f)
        path = tmp
    elif isinstance(plan, (str, os.PathLike)):
        path = os.fspath(plan)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no such span plan: {path!r}")
    else:
        raise ValueError(f"plan must be a path or a dict "
                         f"(masformer-span-plan), got {plan!r}")
    if "'" in path:
        raise ValueError(f"plan path {path!r}: quotes are not supported")
    return f"plan='{path}'", tmp


def _spans_option(span, full_layers, policy, num_full, sink=0):
    """The --masformer-rewrite-spans options for these arguments."""
    if not isinstance(span, str) or not re.fullmatch(
            r"(block|window):\d+", span):
        raise ValueError(f"span must be 'block:B' or 'window:W' (B, W > 0), "
                         f"got {span!r}")
    if int(span.split(":")[1]) <= 0:
        raise ValueError(f"span size must be positive, got {span!r}")
    parts = [f"span={span}"]
    if not isinstance(sink, int) or isinstance(sink, bool) or sink < 0:
        raise ValueError(f"sink must be an integer >= 0, got {sink!r}")
    if sink:
        parts.append(f"sink={sink}")
    if full_layers is not None:
        if policy is not None or num_full is not None:
            raise ValueError("full_layers names the full layers itself and "
                             "cannot be combined with policy or num_full")
        layers = list(full_layers)
        if any(not isinstance(l, int) or l < 0 for l in layers):
            raise ValueError(f"full_layers must be layer indices >= 0, got "
                             f"{full_layers!r}")
        if layers:
            parts.append("full-layers=" + ",".join(str(l) for l in layers))
        else:
            parts.append("num-full=0")
    if policy is not None:
        if policy not in _POLICIES:
            raise ValueError(f"policy must be one of {_POLICIES}, got "
                             f"{policy!r}")
        parts.append(f"policy={policy}")
    if num_full is not None:
        if not isinstance(num_full, int) or num_full < 0:
            raise ValueError(f"num_full must be an integer >= 0, got "
                             f"{num_full!r}")
        parts.append(f"num-full={num_full}")
    return " ".join(parts)


def _shapes(input_shapes):
    out = []
    for name, dims in (input_shapes or {}).items():
        dims = [int(d) for d in dims]
        out.append((str(name), dims))
    return out


def _run_checks(src, seq_len):
    """The checks of every entry point: `src` exists, `seq_len` > 0."""
    src = os.fspath(src)
    if not os.path.exists(src):
        raise FileNotFoundError(f"no such ONNX model: {src!r}")
    if not isinstance(seq_len, int) or seq_len <= 0:
        raise ValueError(f"seq_len must be a positive integer, got "
                         f"{seq_len!r}")
    return src


def _warn(report):
    """The compiler's warnings (layers left dense...) as Python warnings."""
    for w in report.warnings:
        warnings.warn(w, stacklevel=4)


def _run(src, dst, spans, seq_len, input_shapes):
    src = _run_checks(src, seq_len)
    d = _masformer.rewrite(src, os.fspath(dst) if dst else "", spans,
                           seq_len, _shapes(input_shapes))
    report = SpanReport.from_dict(d)
    _warn(report)
    return report


def rewrite(src, dst=None, *, span=None, sink=0, full_layers=None,
            policy=None, num_full=None, plan=None, seq_len=2048,
            input_shapes=None) -> SpanReport:
    """MASFormer-rewrites the ONNX model `src` into `dst`.

    span: "block:B" or "window:W", the span of the rewritten layers.
    sink: attention sinks of the rewritten layers: their first `sink` keys
    stay visible to every query (docs/spans.md).
    Which layers keep full attention: `full_layers` (indices), or `policy`
    ("bottom", the paper's placement and the default; "top"; "spread") with
    `num_full` layers (default ceil(layers / 6)).
    plan: instead of all of these, a span plan (a path, or the dict that
    `python -m masformer.calibrate` writes; docs/rewrite.md): each listed
    layer gets its span, or each of its key/value heads its own span.
    seq_len: sequence length of the returned cost report.
    input_shapes: optional {input name: [dims]} fixing dynamic dimensions
    (the written model keeps its dynamic axes either way).
    dst=None: nothing is written, only the report is returned.
    """
    if dst is not None and not os.fspath(dst).endswith(".onnx"):
        raise ValueError(f"dst must be a .onnx path, got {dst!r}")
    spans, tmp = _options(span, sink, full_layers, policy, num_full, plan)
    try:
        return _run(src, dst, spans, seq_len, input_shapes)
    finally:
        if tmp:
            os.unlink(tmp)


def _options(span, sink, full_layers, policy, num_full, plan):
    """The rewrite options of rewrite() and compile(), and a temporary plan
    file to remove afterwards (or None)."""
    if plan is not None:
        return _plan_option(plan, [span is not None, sink, full_layers
                                   is not None, policy is not None,
                                   num_full is not None])
    if span is None:
        raise ValueError("give span (\"block:B\" or \"window:W\") or plan")
    return _spans_option(span, full_layers, policy, num_full, sink), None


def span_report(src, *, seq_len=2048, input_shapes=None) -> SpanReport:
    """The attention layers of `src` as they are, and their cost."""
    return _run(src, None, "", seq_len, input_shapes)
