"""The span report: each attention layer's span and attention cost."""

import json
from dataclasses import dataclass, field


@dataclass(frozen=True)
class CompileStep:
    """One timed step of masformer.compile(timing=True): the ONNX frontend,
    the MLIR lowering (its passes as `steps`), the translation to LLVM IR,
    LLVM's optimization and machine code, link, weights file; then "Rest"
    (time in no step) and "Total"."""

    name: str
    seconds: float
    steps: tuple = ()

    @classmethod
    def from_json(cls, text: str) -> tuple:
        """The steps of MLIR's JSON timing report, in order (MLIR ends each
        list of nested steps with an empty entry, dropped here)."""
        def steps(entries):
            return tuple(cls(e["name"], float(e["wall"]["duration"]),
                             steps(e.get("passes", ())))
                         for e in entries if e)
        return steps(json.loads(text))


@dataclass(frozen=True)
class LayerCost:
    """One attention layer at the report's sequence length (batch 1).

    FLOPs count 4 * heads * head_dim per computed (query, key) pair.
    """

    layer: int
    span: str            # "full", "block" or "window"
    span_size: int       # block or window size; 0 for full
    causal: bool
    heads: int
    head_dim: int
    flops: float
    full_flops: float
    sink: int = 0        # keys visible to every query; 0 for none
    kv_heads: int = 0
    # Per-head spans: one {"span", "size", "sink"} per key/value head (and
    # span is "full"); empty when the layer has one span.
    head_spans: tuple = ()
    # The model's nodes the layer was raised from (scores MatMul, Softmax,
    # output MatMul; or one Attention node), where known.
    nodes: tuple = ()
    # Cross-attention (an encoder-decoder's decoder reading the encoder):
    # its keys come from another sequence, so it always keeps full
    # attention; costed as seq_len queries by seq_len keys.
    cross: bool = False

    def __post_init__(self):
        object.__setattr__(self, "head_spans",
                           tuple(dict(h) for h in self.head_spans))
        object.__setattr__(self, "nodes", tuple(self.nodes))

    @property
    def fraction_of_full(self) -> float:
        return self.flops / self.full_flops if self.full_flops else 1.0

    @staticmethod
    def _text(span, size, sink):
        if span == "full":
            return span
        return f"{span} {size}" + (f", sink {sink}" if sink else "")

    @property
    def span_text(self) -> str:
        if not self.head_spans:
            return self._text(self.span, self.span_size, self.sink)
        counts = {}
        for h in self.head_spans:
            t = self._text(h["span"], h["size"], h["sink"])
            counts[t] = counts.get(t, 0) + 1
        return "; ".join(f"{t} x{n}" for t, n in counts.items())


@dataclass(frozen=True)
class SpanReport:
    seq_len: int
    layers: list = field(default_factory=list)
    total_flops: float = 0.0
    full_flops: float = 0.0
    warnings: list = field(default_factory=list)
    # masformer.compile(timing=True): the compile's steps (CompileStep).
    timing: tuple = ()

    @property
    def fraction_of_full(self) -> float:
        """Attention cost of the model relative to full attention."""
        return self.total_flops / self.full_flops if self.full_flops else 1.0

    @property
    def saved(self) -> float:
        return 1.0 - self.fraction_of_full

    @property
    def full_layers(self) -> list:
        """Layers whose every head keeps full attention."""
        return [c.layer for c in self.layers
                if c.span == "full" and
                all(h["span"] == "full" for h in c.head_spans)]

    @classmethod
    def from_dict(cls, d: dict) -> "SpanReport":
        return cls(seq_len=d["seq_len"],
                   layers=[LayerCost(**c) for c in d["layers"]],
                   total_flops=d["total_flops"], full_flops=d["full_flops"],
                   warnings=list(d.get("warnings", [])),
                   timing=CompileStep.from_json(d["timing"])
                   if d.get("timing") else ())

    def to_dict(self) -> dict:
        return {"seq_len": self.seq_len,
                "layers": [dict(c.__dict__, head_spans=list(c.head_spans),
                                nodes=list(c.nodes),
                                fraction_of_full=c.fraction_of_full)
                           for c in self.layers],
                "total_flops": self.total_flops,
                "full_flops": self.full_flops,
                "fraction_of_full": self.fraction_of_full}

    def __str__(self) -> str:
        lines = [f"masformer span report: {len(self.layers)} attention "
                 f"layers, seq-len {self.seq_len}, batch 1",
                 f"{'layer':>5}  {'span':<20} {'causal':>6} {'heads':>6} "
                 f"{'head_dim':>9} {'attn GFLOP':>14} {'of full':>9}"]
        for c in self.layers:
            span = c.span_text + (" (cross)" if c.cross else "")
            lines.append(f"{c.layer:>5}  {span:<20} "
                         f"{'yes' if c.causal else 'no':>6} {c.heads:>6} "
                         f"{c.head_dim:>9} {c.flops / 1e9:>14.3f} "
                         f"{c.fraction_of_full:>9.3f}")
        lines.append(f"{'total':>5}  {'':<20} {'':>6} {'':>6} {'':>9} "
                     f"{self.total_flops / 1e9:>14.3f} "
                     f"{self.fraction_of_full:>9.3f}")
        lines.append(f"attention cost: {100 * self.fraction_of_full:.1f}% of "
                     f"full attention ({100 * self.saved:.1f}% saved)")
        return "\n".join(lines)
