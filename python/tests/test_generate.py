"""masformer.Session.generate / prefill / step: generation through the
compiled decode entry with a KV cache the runtime owns, against onnxruntime
running the whole sequence (the original model, or the original with the
span's mask added by test/python_utils/span_reference.py), and against the
with-cache export of the same model."""

import pathlib
import subprocess
import sys

import numpy as np
import onnxruntime as ort
import pytest

import masformer

ROOT = pathlib.Path(__file__).resolve().parents[2]
UTILS = ROOT / "test" / "python_utils"


def ort_session(path):
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    return ort.InferenceSession(str(path), opts,
                                providers=["CPUExecutionProvider"])


def whole_sequence_logits(model, ids):
    """onnxruntime on all of `ids` at once, unpadded."""
    return ort_session(model).run(None, {
        "input_ids": ids, "attention_mask": np.ones_like(ids)})[0]


def span_reference(original, out, span, sink, rewritten, seq, batch,
                   layers=3):
    subprocess.run(
        [sys.executable, str(UTILS / "span_reference.py"), str(original),
         "--span", span, "--sink", str(sink), "--causal", "--rewritten",
         ",".join(map(str, rewritten)), "--layers", str(layers), "--seq",
         str(seq),
         "--input-shape", f"input_ids={batch}x{seq}", "--input-shape",
         f"attention_mask={batch}x{seq}", "-o", str(out)],
        check=True, capture_output=True,
        env={"PYTHONPATH": str(UTILS), "PATH": "/usr/bin:/bin"})
    return out


def close(got, want, what):
    err = np.abs(got.astype(np.float64) - want)
    bound = 1e-4 + 1e-4 * np.abs(want)
    assert np.all(err <= bound), f"{what}: max error {err.max():.3g}"


def prompt(batch, length, seed=3):
    return np.random.default_rng(seed).integers(0, 100, (batch, length))


@pytest.mark.parametrize("fixture,span,sink,rewritten", [
    ("llama.onnx", None, 0, []),
    ("gpt2.onnx", "block:4", 0, [1, 2]),
    ("llama.onnx", "window:5", 2, [0, 2]),
])
def test_generate_equals_whole_sequence(fixture, span, sink, rewritten,
                                        tmp_path):
    """32 greedy tokens: the same tokens as rerunning the whole sequence at
    every step, and the logits within 1e-4."""
    model = ROOT / "test" / "fixtures" / fixture
    lib = tmp_path / "m.so"
    if span:
        full = [l for l in range(3) if l not in rewritten]
        masformer.compile(model, lib, span=span, sink=sink, full_layers=full)
    else:
        masformer.compile(model, lib)
    sess = masformer.Session(lib)
    p = prompt(2, 6)
    ids, logits = sess.generate(p, max_new_tokens=32, return_logits=True)
    assert ids.shape == (2, 38) and logits.shape == (2, 32, 128)
    np.testing.assert_array_equal(ids[:, :6], p)
    ref = model
    if span:
        ref = span_reference(model, tmp_path / "ref.onnx", span, sink,
                             rewritten, 37, 2)
    want = whole_sequence_logits(ref, ids[:, :-1])[:, 5:]
    close(logits, want, f"{fixture} {span}")
    np.testing.assert_array_equal(ids[:, 6:], want.argmax(-1))
    if span:
        # The span changes the result: a decode that ignored it would fail.
        orig = whole_sequence_logits(model, ids[:, :-1])[:, 5:]
        assert np.abs(orig - want).max() > 1e-2


@pytest.mark.parametrize("sink", [1, 6])
def test_steps_of_several_tokens_across_blocks(sink, tmp_path):
    """Steps of 3 and 4 tokens whose queries straddle block boundaries,
    with sinks (fewer than a block, and more: the cache then keeps two
    whole blocks of sinks); the cache never holds more than that."""
    model = ROOT / "test" / "fixtures" / "llama.onnx"
    lib = tmp_path / "b.so"
    masformer.compile(model, lib, span="block:4", sink=sink, full_layers=[2])
    sess = masformer.Session(lib)
    ids = prompt(2, 18, seed=5)
    got = [sess.prefill(ids[:, :5])]
    sink_blocks = -(-sink // 4) * 4
    for a, b in ((5, 8), (8, 12), (12, 13), (13, 18)):
        got.append(sess.step(ids[:, a:b]))
        n = sess.length
        assert n == b
        start = n // 4 * 4
        kept = n - start + sink_blocks if start >= sink_blocks else n
        assert sess.cached_positions == [kept, kept, n]
    assert sess.cache_bytes == sum(sess.cached_positions) * 2 * 2 * 8 * 4 * 2
    assert sess.peak_cache_bytes >= sess.cache_bytes
    ref = span_reference(model, tmp_path / "ref.onnx", "block:4", sink,
                         [0, 1], 18, 2)
    close(np.concatenate(got, axis=1), whole_sequence_logits(ref, ids),
          "steps")


def test_per_head_spans(tmp_path):
    """Per-head spans: a layer whose key/value heads have windows of 3 (1
    sink) and 5 keeps what the widest needs (window 5, 1 sink), a layer
    mixing full and window heads keeps everything; the tokens and logits
    equal the reference with each head's own mask."""
    import json
    model = ROOT / "test" / "fixtures" / "llama.onnx"
    plan = {"format": "masformer-span-plan", "version": 2, "layers": [
        {"layer": 0, "heads": [{"span": "window", "size": 3, "sink": 1},
                               {"span": "window", "size": 5}]},
        {"layer": 2, "heads": [{"span": "full"},
                               {"span": "window", "size": 2}]}]}
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(json.dumps(plan))
    lib = tmp_path / "h.so"
    masformer.compile(model, lib, plan=str(plan_path))
    sess = masformer.Session(lib)
    p = prompt(2, 6, seed=4)
    ids, logits = sess.generate(p, max_new_tokens=16, return_logits=True)
    n = sess.length
    assert sess.cached_positions == [min(n, 1 + 4), n, n]
    ref = tmp_path / "ref.onnx"
    subprocess.run(
        [sys.executable, str(UTILS / "span_reference.py"), str(model),
         "--plan", str(plan_path), "--causal", "--layers", "3", "--seq",
         "21", "--input-shape", "input_ids=2x21", "--input-shape",
         "attention_mask=2x21", "-o", str(ref)],
        check=True, capture_output=True,
        env={"PYTHONPATH": str(UTILS), "PATH": "/usr/bin:/bin"})
    want = whole_sequence_logits(ref, ids[:, :-1])[:, 5:]
    close(logits, want, "per-head spans")
    np.testing.assert_array_equal(ids[:, 6:], want.argmax(-1))


@pytest.mark.parametrize("span", [None, "block:16"])
def test_bf16_decode_against_onnxruntime_f32(span, tmp_path):
    """bf16 on AMX tiles (emulated, so on every CPU; heads of 64, which
    take the bf16 attention kernels reading the cache buffers in place): a
    prompt, then 24 steps of given tokens. Each step's logits against
    onnxruntime's f32 on the whole sequence within the bf16 tolerance of
    test/Compile/bf16-cpu.test for this fixture (atol 1.0; the argmax
    differs only on near ties: 0.94 agree on this prompt, where the
    library's whole-sequence run agrees as much), and against the same
    library's whole-sequence entry within 5e-4 of the largest logit (1.4e-4
    seen: a step's products take other kernels than the prompt's, vdpbf16ps
    for its one row where the CPU has it, so sums are ordered differently
    and a key can round to the next bf16; a wrong cache row costs whole
    units). The cache is kept in bf16. Block 16 on the second layer
    with 1 sink: its cache is compacted and its sink moved as the steps
    go."""
    model = ROOT / "test" / "fixtures" / "gpt2-hd64.onnx"
    lib = tmp_path / "bf16.so"
    if span:
        masformer.compile(model, lib, precision="bf16", emulate_amx=True,
                          span=span, sink=1, full_layers=[0])
    else:
        masformer.compile(model, lib, precision="bf16", emulate_amx=True)
    sess = masformer.Session(lib)
    ids = prompt(2, 64, seed=11)
    got = [sess.prefill(ids[:, :40])]
    for t in range(40, 64):
        got.append(sess.step(ids[:, t:t + 1]))
    got = np.concatenate(got, axis=1)
    ref = model
    if span:
        ref = span_reference(model, tmp_path / "ref.onnx", span, 1, [1], 64,
                             2, layers=2)
    want = whole_sequence_logits(ref, ids)
    err = np.abs(got.astype(np.float64) - want).max()
    assert err <= 1.0, f"bf16 decode: max error {err:.3g}"
    agree = np.mean(got.argmax(-1) == want.argmax(-1))
    assert agree >= 0.9, f"bf16 decode: argmax agreement {agree:.3f}"
    whole = sess.run({"input_ids": ids,
                      "attention_mask": np.ones_like(ids)})["logits"]
    err = np.abs(got - whole).max() / np.abs(whole).max()
    assert err <= 5e-4, f"bf16 decode vs whole sequence: {err:.3g}"
    # The cache is bf16 (2 bytes a value): 2 sequences x 2 heads x 64.
    assert sess.cache_bytes == sum(sess.cached_positions) * 2 * 2 * 2 * 64 * 2
    if span:
        n = sess.length
        assert sess.cached_positions == [n, n - n // 16 * 16 + 16]


def test_prefill_and_steps_equal_the_with_cache_export(tmp_path):
    """llama-cache.onnx is the transformers use_cache=True export of
    llama.onnx's weights: onnxruntime on it, fed its own presents, gives
    the session's logits at every step."""
    fixtures = ROOT / "test" / "fixtures"
    lib = tmp_path / "llama.so"
    masformer.compile(fixtures / "llama.onnx", lib)
    sess = masformer.Session(lib)
    cached = ort_session(fixtures / "llama-cache.onnx")
    ids = prompt(2, 12, seed=9)
    past = {f"past_key_values.{l}.{kv}": np.zeros((2, 2, 0, 8), np.float32)
            for l in range(3) for kv in ("key", "value")}
    done = 0
    for n in (5, 1, 3, 1, 2):
        chunk = ids[:, done:done + n]
        outs = cached.run(None, {"input_ids": chunk,
                                 "attention_mask": np.ones((2, done + n),
                                                           np.int64),
                                 **past})
        names = [o.name for o in cached.get_outputs()]
        past = {name.replace("present", "past_key_values"): o
                for name, o in zip(names[1:], outs[1:])}
        got = sess.prefill(chunk) if done == 0 else sess.step(chunk)
        close(got, outs[0], f"tokens {done}..{done + n}")
        done += n


@pytest.mark.parametrize("fixture,span", [
    ("gpt2.onnx", None), ("llama.onnx", "block:4"), ("gemma2.onnx", None),
    ("gptneox-dynamo.onnx", None), ("mixtral-dynamo.onnx", None)])
def test_prefill_logits_rows(fixture, span, tmp_path):
    """prefill(ids, logits_rows=k) returns the logits of the last k
    positions only, those of onnxruntime on the whole prompt (the decode
    entry computes the last ops, from the final norm on, on those rows), and
    leaves the same cache: the steps after it equal those after a prefill
    of every row. Gemma 2 softcaps its logits after the head; GPT-NeoX's
    layers add attention and MLP in parallel; Mixtral's experts take the
    tokens NonZero counts at run time."""
    model = ROOT / "test" / "fixtures" / fixture
    lib = tmp_path / "m.so"
    if span:
        masformer.compile(model, lib, span=span, full_layers=[0, 1])
    else:
        masformer.compile(model, lib)
    sess = masformer.Session(lib)
    ids = prompt(2, 13, seed=4)
    ref = model
    if span:
        ref = span_reference(model, tmp_path / "ref.onnx", span, 0, [2], 13,
                             2)
    want = whole_sequence_logits(ref, ids)
    for k in (1, 3, 12):
        got = sess.prefill(ids[:, :12], logits_rows=k)
        assert got.shape == (2, k, want.shape[-1])
        close(got, want[:, 12 - k:12], f"{fixture} last {k} rows")
        close(sess.step(ids[:, 12:]), want[:, 12:], f"{fixture} after {k}")
    close(sess.prefill(ids[:, :12]), want[:, :12], f"{fixture} every row")
    for bad in (0, 13, True, 1.0):
        with pytest.raises(ValueError, match=r"logits_rows must be an int "
                                             r"in \[1, 12\]"):
            sess.prefill(ids[:, :12], logits_rows=bad)


def test_generation_errors(tmp_path):
    fixtures = ROOT / "test" / "fixtures"
    lib = tmp_path / "gpt2.so"
    masformer.compile(fixtures / "gpt2.onnx", lib)
    sess = masformer.Session(lib)
    assert sess.max_length == 128
    with pytest.raises(masformer.Error, match="a step needs a prefill first"):
        sess.step([[1]])
    with pytest.raises(TypeError, match="integer token ids, got float32"):
        sess.generate(np.zeros((1, 4), np.float32), 4)
    with pytest.raises(ValueError, match="max_new_tokens must be an int"):
        sess.generate([[1, 2]], -1)
    with pytest.raises(ValueError, match=r"token ids \[batch, length\]"):
        sess.prefill(np.zeros((1, 0), np.int64))
    with pytest.raises(masformer.Error,
                       match="a prompt of 120 tokens and 10 new ones need "
                             "129 positions"):
        sess.generate(np.zeros((1, 120), np.int64), 10)
    with pytest.raises(masformer.Error, match="takes at most 128 positions"):
        sess.prefill(np.zeros((1, 129), np.int64))
    sess.prefill([[1, 2, 3]])
    with pytest.raises(masformer.Error,
                       match="a step of 2 sequences, but the prefill had 1"):
        sess.step([[1], [2]])
    # Still usable, and a one-dimensional prompt is one sequence.
    assert sess.generate([5, 6, 7], 3).shape == (1, 6)
    enc = tmp_path / "bert.so"
    masformer.compile(fixtures / "bert.onnx", enc)
    with pytest.raises(masformer.Error,
                       match="has no decode entry, so it cannot generate: "
                             "layer 0 is not causal"):
        masformer.Session(enc).generate([[1, 2]], 2)
