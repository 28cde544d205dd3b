"""masformer.compile and masformer.Session."""

import os
from dataclasses import dataclass
from typing import Optional, Tuple, Union

import numpy as np

from . import _masformer
from ._report import SpanReport
from ._rewrite import _options, _run_checks, _shapes, _warn

def compile(src, dst, *, target="cpu", chip=None, precision="f32",
            cpu="native", span=None, sink=0, full_layers=None, policy=None,
            num_full=None, plan=None, seq_len=2048,
            input_shapes=None, embed_weights=False,
            emulate_amx=False, timing=False, jobs=0,
            cache_dir=None) -> SpanReport:
    """Compiles the ONNX model `src` into the shared library `dst`.

    Every op of the model is lowered (matrix products and attention as
    tiled vector kernels, the rest as parallel loops) for `cpu` ("native":
    this machine), or with target="cuda" to GPU kernels for `chip`
    ("sm_90" by default; host code for `cpu` and an embedded cubin);
    precision="bf16" runs the products and attention on bf16 operands
    with f32 accumulation (on the CPU: AMX tiles where it has AMX-BF16,
    else the AVX-512 kernels where it has AVX512-BF16; an error on a CPU
    with neither). With `span` ("block:B" or "window:W") the MASFormer
    rewrite is applied first, choosing the full layers as masformer.rewrite
    does (`full_layers`, or `policy` and `num_full`), with `sink` attention
    sinks in the rewritten layers; or with `plan` a span plan (a path or a
    dict, as masformer.rewrite takes it: per-layer or per-head spans). Without
    `input_shapes` ({input name: [dims]}) dynamic dimensions stay dynamic
    and the library runs at every size. Returns the span report of the
    compiled model at `seq_len`; load the library with masformer.Session.

    The weights stay outside the library: used from the model's external
    data file where they are there as they are, the rest written to `dst`
    with the extension ".weights"; the library and that file travel
    together. `embed_weights=True` keeps them in the library (models well
    under 2 GiB of weights only).

    `emulate_amx=True` (on the CPU; masformer-compile --emulate-amx)
    compiles the products AMX takes (bf16 ones with precision="bf16", a
    quantized model's 8-bit ones at any precision) for AMX whatever the CPU
    has and runs them in a checked scalar emulation of AMX's tile
    instructions: a test of the AMX path on any CPU, slow (docs/cpu.md).

    `timing=True` (masformer-compile --timing) times each step of the
    compile: the report's `timing` is then a tuple of CompileStep (name,
    seconds, nested steps: the MLIR passes one by one under the lowering),
    ending with "Total".

    The machine code is compiled in parts on `jobs` threads (0: one per
    core); `cache_dir` (masformer-compile --cache-dir) keeps each part's
    object there and reuses it on the next compile: None takes
    $MASFORMER_CACHE_DIR (no cache when unset), "" turns the cache off
    (docs/compile.md).
    """
    # Which targets, chips and precisions exist (and go together) is the
    # compiler's to say (masformer.Error naming the option); here only types.
    for name, value in (("target", target), ("precision", precision)):
        if not isinstance(value, str):
            raise ValueError(f"{name} must be a string, got {value!r}")
    if chip is not None and not isinstance(chip, str):
        raise ValueError(f"chip must be a string such as 'sm_90', got "
                         f"{chip!r}")
    if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 0:
        raise ValueError(f"jobs must be a number of threads (0: one per "
                         f"core), got {jobs!r}")
    if cache_dir is not None and not isinstance(cache_dir,
                                                (str, os.PathLike)):
        raise ValueError(f"cache_dir must be a directory's path, got "
                         f"{cache_dir!r}")
    if not isinstance(cpu, str) or not cpu:
        raise ValueError(f"cpu must be an LLVM CPU name or 'native', got "
                         f"{cpu!r}")
    tmp = None
    if span is None and plan is None:
        if full_layers is not None or policy is not None or \
                num_full is not None or sink:
            raise ValueError("sink, full_layers, policy and num_full shape the "
                             "rewrite: give span too")
        spans = ""
    else:
        spans, tmp = _options(span, sink, full_layers, policy, num_full, plan)
    if not isinstance(dst, (str, os.PathLike)) or not os.fspath(dst):
        raise ValueError(f"dst must be the path of the library to write, "
                         f"got {dst!r}")
    try:
        src = _run_checks(src, seq_len)
        d = _masformer.compile(src, os.fspath(dst), target, chip or "",
                               precision, cpu, spans, seq_len,
                               _shapes(input_shapes), bool(embed_weights),
                               bool(emulate_amx), bool(timing), jobs,
                               None if cache_dir is None
                               else os.fspath(cache_dir))
    finally:
        if tmp:
            os.unlink(tmp)
    report = SpanReport.from_dict(d)
    _warn(report)
    return report


@dataclass(frozen=True)
class TensorInfo:
    """An input or output of a compiled model. `shape` holds a size, the
    name of a dynamic size (inputs with the same name must agree), or None
    for an unnamed dynamic size. `dtype` is the numpy element type (bf16
    tensors are passed and returned as float32)."""
    name: str
    dtype: str
    shape: Tuple[Union[int, str, None], ...]


class Session:
    """A model compiled by masformer.compile (or masformer-compile).

        sess = masformer.Session("gpt2.so")
        sess.inputs          # [TensorInfo(name='input_ids', dtype='int64',
                             #             shape=('batch', 'sequence')), ...]
        out = sess.run({"input_ids": ids, "attention_mask": mask})
        out["logits"]        # numpy array

    Inputs must have the model's element types (no silent casts) and
    shapes; errors raise masformer.Error with the runtime's message (or
    ValueError / TypeError for arguments Python can check). One run at a
    time per Session.
    """

    def __init__(self, path):
        path = os.fspath(path)
        if not os.path.exists(path):
            raise FileNotFoundError(f"no such compiled model: {path!r}")
        self._impl = _masformer.Session(path)
        self.path = path
        # The signature is fixed when the library is compiled: read once.
        self._inputs = self._infos(self._impl.inputs())
        self._outputs = self._infos(self._impl.outputs())

    @staticmethod
    def _infos(raw):
        return [TensorInfo(d["name"], d["numpy_dtype"], tuple(d["shape"]))
                for d in raw]

    @property
    def inputs(self):
        return list(self._inputs)

    @property
    def outputs(self):
        return list(self._outputs)

    @property
    def target(self) -> str:
        return self._impl.target

    @property
    def weight_files(self) -> list:
        """[(path, bytes)] of the files the weights are mapped from: the
        model's external data file and/or the library's weights file
        (empty when the weights are inside the library)."""
        return list(self._impl.weight_files())

    def run(self, feeds, output_names: Optional[list] = None) -> dict:
        """Runs the model on `feeds` ({input name: array}); returns
        {output name: numpy array} (all outputs, or `output_names`)."""
        if not isinstance(feeds, dict):
            raise TypeError(f"feeds must be a dict of input name to array, "
                            f"got {type(feeds).__name__}")
        want = {i.name: i.dtype for i in self._inputs}
        missing = [n for n in want if n not in feeds]
        if missing:
            raise ValueError(f"missing input(s) {missing}; the model's "
                             f"inputs are {list(want)}")
        arrays = []
        for name, x in feeds.items():
            if name not in want:
                raise ValueError(f"the model has no input {name!r}; its "
                                 f"inputs are {list(want)}")
            a = np.ascontiguousarray(x)
            if a.dtype != np.dtype(want[name]):
                raise TypeError(f"input {name!r} must be {want[name]}, got "
                                f"{a.dtype}")
            arrays.append((name, a))
        out = self._impl.run(arrays)
        if output_names is None:
            return out
        unknown = [n for n in output_names if n not in out]
        if unknown:
            raise ValueError(f"no output(s) {unknown}; the model's outputs "
                             f"are {list(out)}")
        return {n: out[n] for n in output_names}

    # Generation (docs/generate.md): a library compiled from a causal
    # decoder has a decode entry; the KV cache lives in the runtime, each
    # layer's bounded by its span.

    @staticmethod
    def _ids(ids, what):
        a = np.asarray(ids)
        if a.ndim == 1:
            a = a[None, :]
        if a.ndim != 2 or a.shape[0] == 0 or a.shape[1] == 0:
            raise ValueError(f"{what} must be token ids [batch, length] with "
                             f"at least one token, got shape {a.shape}")
        if not np.issubdtype(a.dtype, np.integer):
            raise TypeError(f"{what} must be integer token ids, got "
                            f"{a.dtype}")
        return np.ascontiguousarray(a, dtype=np.int64)

    def generate(self, ids, max_new_tokens: int, return_logits=False):
        """Greedy generation: prefills `ids` ([batch, length], or one
        sequence [length]) and appends the `max_new_tokens` tokens of
        highest logit. Returns the ids [batch, length + max_new_tokens]
        (the prompt, then the new tokens), and with return_logits=True
        also the logits each new token was chosen from, as (ids, logits
        [batch, max_new_tokens, vocab]). The sequences of a batch have
        the same length; the decode entry computes exactly what the
        whole-sequence model does at each position."""
        prompt = self._ids(ids, "ids")
        if isinstance(max_new_tokens, bool) or \
                not isinstance(max_new_tokens, (int, np.integer)) or \
                max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be an int >= 0, got "
                             f"{max_new_tokens!r}")
        new, logits = self._impl.generate(prompt, int(max_new_tokens),
                                          bool(return_logits))
        out = np.concatenate([prompt, new], axis=1)
        return (out, logits) if return_logits else out

    def prefill(self, ids, logits_rows=None):
        """Empties the cache and runs `ids` [batch, length]; returns the
        logits [batch, length, vocab], or with `logits_rows` only those of
        the last logits_rows tokens ([batch, logits_rows, vocab]; 1: the
        next token's), which skips the LM head's work on the others."""
        prompt = self._ids(ids, "ids")
        if logits_rows is None:
            return self._impl.prefill(prompt, 0)
        if isinstance(logits_rows, bool) or \
                not isinstance(logits_rows, (int, np.integer)) or \
                not 1 <= logits_rows <= prompt.shape[1]:
            raise ValueError(f"logits_rows must be an int in [1, "
                             f"{prompt.shape[1]}] (the prompt's length), "
                             f"got {logits_rows!r}")
        return self._impl.prefill(prompt, int(logits_rows))

    def step(self, ids):
        """Runs new tokens [batch, count] after the cached ones (same
        batch as the prefill); returns their logits [batch, count, vocab]."""
        return self._impl.step(self._ids(ids, "ids"))

    def reset(self):
        """Empties the cache."""
        self._impl.reset()

    @property
    def length(self) -> int:
        """Positions per sequence so far."""
        return self._impl.length()

    @property
    def cache_bytes(self) -> int:
        """Bytes of keys and values the cache holds now."""
        return self._impl.cache_bytes()

    @property
    def peak_cache_bytes(self) -> int:
        return self._impl.peak_cache_bytes()

    @property
    def max_length(self) -> Optional[int]:
        """The most positions the model takes (its position table), or
        None when it has no such limit."""
        n = self._impl.max_length()
        return None if n < 0 else n

    @property
    def cached_positions(self) -> list:
        """Positions each layer's cache keeps now."""
        return list(self._impl.cached_positions())
