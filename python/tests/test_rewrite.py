"""masformer.rewrite / span_report: the same rewrite as masformer-opt, the
span report as Python objects, and one clear exception per bad input."""

import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import masformer


def run_ort(path, ids):
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(str(path), opts,
                                providers=["CPUExecutionProvider"])
    return sess.run(None, {"input_ids": ids,
                           "attention_mask": np.ones_like(ids)})[0]


def test_rewrite_equals_the_command_line(fixtures, tool, tmp_path):
    out = tmp_path / "py.onnx"
    report = masformer.rewrite(fixtures / "gpt2.onnx", out, span="block:4",
                               full_layers=[0], seq_len=16)
    cli = tmp_path / "cli.onnx"
    subprocess.run([tool("masformer-opt"), str(fixtures / "gpt2.onnx"),
                    "--masformer-rewrite-spans=span=block:4 full-layers=0",
                    "-o", str(cli)], check=True)
    assert out.read_bytes() == cli.read_bytes()
    assert report.full_layers == [0]
    assert [c.span_text for c in report.layers] == ["full", "block 4",
                                                    "block 4"]
    assert all(c.causal and c.heads == 4 and c.head_dim == 8
               for c in report.layers)
    # Causal blocks of 4 at 16 tokens: 4 blocks of 10 pairs = 40 of 136.
    assert report.layers[1].fraction_of_full == pytest.approx(40 / 136)
    assert report.fraction_of_full == pytest.approx((1 + 2 * 40 / 136) / 3)
    assert "47.1% saved" in str(report)


def test_rewritten_model_runs_and_blocks_change_the_output(fixtures,
                                                           tmp_path):
    out = tmp_path / "b4.onnx"
    masformer.rewrite(fixtures / "llama-dynamo.onnx", out, span="block:4",
                      policy="top", num_full=1)
    onnx.checker.check_model(onnx.load(out), full_check=True)
    ids = np.random.default_rng(0).integers(0, 100, (1, 12)).astype(np.int64)
    full = run_ort(fixtures / "llama-dynamo.onnx", ids)
    blocked = run_ort(out, ids)
    assert blocked.shape == full.shape
    # The first block of 4 tokens sees the same keys either way.
    np.testing.assert_allclose(blocked[:, :4], full[:, :4], atol=1e-5)
    assert np.abs(blocked - full).max() > 1e-3


def test_policies_and_window(fixtures, tmp_path):
    r = masformer.rewrite(fixtures / "gpt2.onnx", tmp_path / "t.onnx",
                          span="window:4", policy="top", num_full=1,
                          seq_len=64)
    assert r.full_layers == [2]
    assert [c.span for c in r.layers] == ["window", "window", "full"]
    r = masformer.rewrite(fixtures / "bert.onnx", None, span="block:8",
                          full_layers=[])
    assert r.full_layers == [] and not any(c.causal for c in r.layers)
    # Default: the bottom ceil(3 / 6) = 1 layer stays full.
    r = masformer.rewrite(fixtures / "gpt2.onnx", None, span="block:4")
    assert r.full_layers == [0]


def test_cross_attention_stays_full(fixtures, tmp_path):
    """An encoder-decoder (BART): the decoder's cross-attention layers are
    reported as such and keep full attention; the rewritten model runs in
    onnxruntime with an encoder and a decoder of different lengths."""
    out = tmp_path / "bart-b4.onnx"
    r = masformer.rewrite(fixtures / "bart.onnx", out, span="block:4",
                          policy="top", num_full=1, seq_len=16)
    assert [c.cross for c in r.layers] == [False, False, False, True, False,
                                           True]
    assert [c.span_text for c in r.layers] == ["block 4"] * 3 + ["full"] * 3
    assert r.full_layers == [3, 4, 5]
    assert "full (cross)" in str(r)
    assert r.to_dict()["layers"][3]["cross"] is True
    rng = np.random.default_rng(0)
    feeds = {"input_ids": rng.integers(1, 100, (2, 11)).astype(np.int64),
             "attention_mask": np.ones((2, 11), np.int64),
             "decoder_input_ids": rng.integers(1, 100, (2, 6)).astype(
                 np.int64)}
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    got = ort.InferenceSession(str(out), opts).run(None, feeds)[0]
    assert got.shape == (2, 6, 128) and np.isfinite(got).all()


def test_span_report_of_the_original(fixtures):
    r = masformer.span_report(fixtures / "gpt2-sdpa.onnx", seq_len=1024)
    assert len(r.layers) == 3 and r.fraction_of_full == 1.0
    assert r.to_dict()["layers"][0]["span"] == "full"


def test_input_shapes_give_the_same_model(fixtures, tmp_path):
    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    masformer.rewrite(fixtures / "gpt2.onnx", a, span="block:4")
    masformer.rewrite(fixtures / "gpt2.onnx", b, span="block:4",
                      input_shapes={"input_ids": [2, 16],
                                    "attention_mask": [2, 16]})
    assert a.read_bytes() == b.read_bytes()


def test_rewrite_with_a_per_head_plan(fixtures, tool, tmp_path):
    """A plan dict (per-head and per-layer entries) gives the same model as
    the command line with the same plan file, and the report per head."""
    plan = {"format": "masformer-span-plan", "version": 2, "layers": [
        {"layer": 0, "heads": [{"span": "window", "size": 3, "sink": 2},
                               {"span": "full"}]},
        {"layer": 2, "span": "block", "size": 4}]}
    out = tmp_path / "py.onnx"
    shapes = {"input_ids": [2, 16], "attention_mask": [2, 16]}
    report = masformer.rewrite(fixtures / "llama.onnx", out, plan=plan,
                               seq_len=16, input_shapes=shapes)
    path = tmp_path / "plan.json"
    path.write_text(__import__("json").dumps(plan))
    cli = tmp_path / "cli.onnx"
    subprocess.run([tool("masformer-opt"), str(fixtures / "llama.onnx"),
                    "--input-shape", "input_ids=2x16", "--input-shape",
                    "attention_mask=2x16",
                    f"--masformer-rewrite-spans=plan={path}", "-o", str(cli)],
                   check=True, capture_output=True)
    assert out.read_bytes() == cli.read_bytes()
    l0 = report.layers[0]
    assert (l0.heads, l0.kv_heads) == (4, 2)
    assert l0.span_text == "window 3, sink 2 x1; full x1"
    assert [h["size"] for h in l0.head_spans] == [3, 0]
    # Window 3 + 2 sinks at 16 causal tokens: query p sees [p-2, p] and
    # {0, 1}: 1 + 2 + 3 + 4 + 12 * 5 = 70 of 136 pairs for two query heads,
    # 136 for the other two.
    assert l0.fraction_of_full == pytest.approx((70 + 136) / 272)
    assert report.layers[1].span_text == "full"
    # Layer 0 has a full head and a windowed one: not a full layer.
    assert report.full_layers == [1]
    assert report.layers[2].span_text == "block 4"
    assert len(l0.nodes) == 3 and all(l0.nodes)
    # The same plan from a path, and the report alone.
    again = masformer.rewrite(fixtures / "llama.onnx", None, plan=path,
                              seq_len=16, input_shapes=shapes)
    assert again.to_dict() == report.to_dict()


@pytest.mark.parametrize("kwargs, message", [
    (dict(plan={"format": "masformer-span-plan", "version": 2,
                "layers": []}, span="block:4"),
     "plan gives every layer its span"),
    (dict(plan=3), "plan must be a path or a dict"),
    (dict(), "give span"),
])
def test_bad_plan_arguments(fixtures, tmp_path, kwargs, message):
    with pytest.raises(ValueError, match=message):
        masformer.rewrite(fixtures / "gpt2.onnx", tmp_path / "o.onnx",
                          **kwargs)


def test_bad_plan_is_a_masformer_error(fixtures, tmp_path):
    plan = {"format": "masformer-span-plan", "version": 2, "layers": [
        {"layer": 0, "heads": [{"span": "full"}]}]}
    with pytest.raises(masformer.Error,
                       match=r"layers\[0\]: 1 head spans, but layer 0 has 2 "
                             r"key/value heads"):
        masformer.rewrite(fixtures / "llama.onnx", tmp_path / "o.onnx",
                          plan=plan, input_shapes={"input_ids": [1, 8],
                                                   "attention_mask": [1, 8]})
    assert not (tmp_path / "o.onnx").exists()
    with pytest.raises(FileNotFoundError, match="no such span plan"):
        masformer.rewrite(fixtures / "llama.onnx", None,
                          plan=tmp_path / "missing.json")


@pytest.mark.parametrize("kwargs, message", [
    (dict(span="block"), "span must be 'block:B' or 'window:W'"),
    (dict(span="strided:4"), "span must be 'block:B' or 'window:W'"),
    (dict(span="block:0"), "span size must be positive"),
    (dict(span="block:4", full_layers=[0], policy="top"),
     "cannot be combined with policy or num_full"),
    (dict(span="block:4", policy="middle"), "policy must be one of"),
    (dict(span="block:4", num_full=-1), "num_full must be an integer >= 0"),
    (dict(span="block:4", seq_len=0), "seq_len must be a positive integer"),
])
def test_bad_arguments_raise_value_error(fixtures, tmp_path, kwargs,
                                         message):
    out = tmp_path / "out.onnx"
    with pytest.raises(ValueError, match=message):
        masformer.rewrite(fixtures / "gpt2.onnx", out, **kwargs)
    assert not out.exists()


def test_compiler_errors_raise_masformer_error(fixtures, tmp_path):
    out = tmp_path / "out.onnx"
    with pytest.raises(masformer.Error,
                       match=r"full-layers names layer 7, but the model has "
                             r"3 attention layers \(0\.\.2\)"):
        masformer.rewrite(fixtures / "gpt2.onnx", out, span="block:4",
                          full_layers=[7])
    with pytest.raises(masformer.Error, match=r"num-full=9 is larger than the number of attention layers \(3\)"):
        masformer.rewrite(fixtures / "gpt2.onnx", out, span="block:4",
                          num_full=9)
    with pytest.raises(masformer.Error,
                       match=r"--input-shape nosuch: the model has no input "
                             r"of that name \(its inputs: input_ids, "
                             r"attention_mask\)"):
        masformer.rewrite(fixtures / "gpt2.onnx", out, span="block:4",
                          input_shapes={"nosuch": [1, 16]})
    assert not out.exists()
    inputs = fixtures.parent / "Import" / "Inputs"
    with pytest.raises(masformer.Error,
                       match=r"2 unsupported ONNX nodes: 'hardmax_0' "
                             r"\(Hardmax\), 'lpnorm_0' \(LpNormalization\)"):
        masformer.span_report(inputs / "unsupported.onnx")
    with pytest.raises(masformer.Error, match="not a valid ONNX model"):
        masformer.span_report(inputs / "not-a-model.onnx")
    with pytest.raises(masformer.Error, match="no attention layer"):
        masformer.rewrite(inputs / "external.onnx", None, span="block:4")
    with pytest.raises(masformer.Error,
                       match="write the output .onnx into the input's "
                             "directory"):
        masformer.rewrite(inputs / "external.onnx", out, span="block:4")
    with pytest.raises(FileNotFoundError):
        masformer.span_report(tmp_path / "missing.onnx")
    with pytest.raises(ValueError, match="dst must be a .onnx path"):
        masformer.rewrite(fixtures / "gpt2.onnx", tmp_path / "out.mlir",
                          span="block:4")
    with pytest.raises(masformer.Error, match="do not broadcast"):
        masformer.rewrite(inputs / "dynamic-mismatch.onnx", out,
                          span="block:4")
    assert not out.exists()


def test_sinks(fixtures, tmp_path):
    """sink=K: the rewritten layers keep their first K keys visible; the
    report counts the sink pairs (causal windows of 4 with 2 sinks at 16
    tokens keep 1 + 2 + 3 + 4 + 5 + 11 * 6 = 81 of 136 pairs), and the sinks
    change what the model computes."""
    out = tmp_path / "sinks.onnx"
    report = masformer.rewrite(fixtures / "gpt2.onnx", out, span="window:4",
                               sink=2, full_layers=[0], seq_len=16)
    assert [c.span_text for c in report.layers] == [
        "full", "window 4, sink 2", "window 4, sink 2"]
    assert [c.sink for c in report.layers] == [0, 2, 2]
    assert report.layers[1].fraction_of_full == pytest.approx(81 / 136)
    plain = tmp_path / "plain.onnx"
    masformer.rewrite(fixtures / "gpt2.onnx", plain, span="window:4",
                      full_layers=[0])
    ids = np.random.default_rng(3).integers(0, 100, (1, 16), dtype=np.int64)
    assert np.abs(run_ort(out, ids) - run_ort(plain, ids)).max() > 1e-3
    with pytest.raises(ValueError, match="sink must be an integer >= 0"):
        masformer.rewrite(fixtures / "gpt2.onnx", None, span="window:4",
                          sink=-1)
    with pytest.raises(ValueError, match="give span too"):
        masformer.compile(fixtures / "gpt2.onnx", tmp_path / "x.so", sink=4)


def test_int4_model(fixtures, tmp_path):
    """A model quantized by onnxruntime's weight-only quantizer (every
    MatMul a 4-bit MatMulNBits, as onnxruntime-genai's -p int4): the
    rewrite keeps each quantized node and its packed weights byte for byte,
    and the compiled rewrite computes what onnxruntime computes on the
    export (at accuracy_level 0: level 4 lets onnxruntime quantize the
    activations to int8)."""
    from onnxruntime.quantization import matmul_nbits_quantizer as mnq
    config = mnq.DefaultWeightOnlyQuantConfig(block_size=32, is_symmetric=True,
                                              accuracy_level=0)
    q = mnq.MatMulNBitsQuantizer(onnx.load(fixtures / "llama.onnx"),
                                 algo_config=config)
    q.process()
    src = tmp_path / "llama-q4.onnx"
    onnx.save(q.model.model, src)
    out = tmp_path / "llama-q4-b4.onnx"
    report = masformer.rewrite(src, out, span="block:4", full_layers=[0],
                               seq_len=16)
    assert [c.span_text for c in report.layers] == ["full", "block 4",
                                                    "block 4"]

    def quantized(path):
        g = onnx.load(path).graph
        nodes = [n for n in g.node if n.op_type == "MatMulNBits"]
        names = {i for n in nodes for i in n.input}
        return ([n.SerializeToString() for n in nodes],
                {t.name: t.SerializeToString() for t in g.initializer
                 if t.name in names})
    assert len(quantized(src)[0]) == 22
    assert quantized(out) == quantized(src)
    lib = tmp_path / "llama-q4-b4.so"
    masformer.compile(src, lib, span="block:4", full_layers=[0])
    ids = np.random.default_rng(5).integers(0, 100, (2, 13), dtype=np.int64)
    got = masformer.Session(lib).run(
        {"input_ids": ids, "attention_mask": np.ones_like(ids)})["logits"]
    want = run_ort(out, ids)
    assert np.abs(got - want).max() < 1e-4
    # The blocks change what the model computes (the check can fail).
    assert np.abs(run_ort(src, ids) - want).max() > 1e-3
