"""python -m masformer.evaluate, end to end on the tiny GPT-2 and BERT
fixtures (random weights: this checks the sweep, not a quality)."""

import json

import numpy as np
import pytest

import masformer
from masformer import evaluate


def test_full_layers_of_calibration():
    assert evaluate._full_layers("calibrated", 2, 4, [0.1, 0.5, 0.3, 0.0]) \
        == [1, 2]
    assert evaluate._full_layers("top", 2, 4, None) is None


def test_lm_sweep(fixtures, tmp_path):
    model = tmp_path / "gpt2.onnx"
    model.write_bytes((fixtures / "gpt2.onnx").read_bytes())
    tokens = tmp_path / "tokens.npy"
    np.save(tokens, np.random.default_rng(0).integers(0, 128, 120))
    out = tmp_path / "out"
    evaluate.main(["lm", "--model", str(model), "--tokens", str(tokens),
                   "--seq-lens", "16", "32", "--windows", "2",
                   "--calib-len", "16", "--blocks", "4", "8",
                   "--num-full", "1", "--out", str(out)])
    res = json.loads((out / "results.json").read_text())
    assert res["layers"] == 3
    rows = res["rows"]
    # Per length: the original, then 2 blocks x 4 policies x 1.
    assert len(rows) == 2 * (1 + 8)
    for r in rows:
        assert r["ppl"] > 1 and 0 < r["cost"] <= 1
        if r["policy"] == "original":
            assert r["ppl_ratio"] == 1.0 and r["cost"] == 1.0
        else:
            assert len(r["full_layers"]) == 1 and r["cost"] < 1
    bottom = [r for r in rows if r["policy"] == "bottom"]
    assert all(r["full_layers"] == [0] for r in bottom)
    assert "| 16 | block 4 | bottom | 0 |" in (out / "results.md").read_text()
    assert not list(tmp_path.glob(".gpt2-masformer-eval-*"))


def test_lm_sweep_windows_with_sinks(fixtures, tmp_path):
    model = tmp_path / "gpt2.onnx"
    model.write_bytes((fixtures / "gpt2.onnx").read_bytes())
    tokens = tmp_path / "tokens.npy"
    np.save(tokens, np.random.default_rng(0).integers(0, 128, 80))
    out = tmp_path / "out"
    evaluate.main(["lm", "--model", str(model), "--tokens", str(tokens),
                   "--seq-lens", "32", "--windows", "1", "--calib-len", "16",
                   "--spans", "window:8", "window:8+2", "--num-full", "1",
                   "--policies", "top", "calibrated", "--out", str(out)])
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert [r["span"] for r in rows] == ["full", "window 8", "window 8",
                                         "window 8, sink 2",
                                         "window 8, sink 2"]
    plain, sinks = rows[1], rows[3]
    # Sinks keep more pairs: causal windows of 8 at 32 tokens keep 228
    # pairs, with 2 sinks 24 more (queries 9..31 see key 0, 10..31 key 1).
    assert plain["cost"] < sinks["cost"] < 1
    assert "| 32 | window 8, sink 2 | top | 2 |" in \
        (out / "results.md").read_text()


def test_lm_plans(fixtures, tmp_path):
    """--plans: one row per plan, at the plan's cost from the span report
    (per-head layers are not counted as full layers)."""
    model = tmp_path / "gpt2.onnx"
    model.write_bytes((fixtures / "gpt2.onnx").read_bytes())
    tokens = tmp_path / "tokens.npy"
    np.save(tokens, np.random.default_rng(0).integers(0, 128, 80))
    plan = tmp_path / "heads.json"
    plan.write_text(json.dumps({
        "format": "masformer-span-plan", "version": 2, "layers": [
            {"layer": 1, "heads": [{"span": "full"},
                                   {"span": "window", "size": 4, "sink": 1},
                                   {"span": "window", "size": 4, "sink": 1},
                                   {"span": "full"}]},
            {"layer": 2, "span": "window", "size": 8}]}))
    out = tmp_path / "out"
    evaluate.main(["lm", "--model", str(model), "--tokens", str(tokens),
                   "--seq-lens", "32", "--windows", "1", "--calib-len", "16",
                   "--blocks", "--policies", "top", "--num-full", "0",
                   "--plans", str(plan), "--out", str(out)])
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert [r["policy"] for r in rows] == ["original", "plan"]
    row = rows[1]
    assert row["span"] == "plan heads" and row["full_layers"] == [0]
    assert row["per_head_layers"] == 1 and 0.5 < row["cost"] < 1
    assert row["ppl"] > 1


def _encoder_inputs(fixtures, tmp_path, seed, length):
    """The BERT fixture and 6 paragraphs of 16 tokens, `length` unpadded."""
    model = tmp_path / "bert.onnx"
    model.write_bytes((fixtures / "bert.onnx").read_bytes())
    ids = np.random.default_rng(seed).integers(1, 128, (6, 16))
    mask = np.ones_like(ids)
    mask[:, length:] = 0
    data = tmp_path / "p.npz"
    np.savez(data, input_ids=ids, attention_mask=mask, query_ids=ids[:, ::-1],
             query_mask=mask, doc_ids=ids, doc_mask=mask)
    return model, data


def test_encoder_sweep(fixtures, tmp_path):
    model, data = _encoder_inputs(fixtures, tmp_path, 1, 12)
    out = tmp_path / "out"
    evaluate.main(["encoder", "--model", str(model), "--paragraphs",
                   str(data), "--blocks", "4", "--num-full", "0", "1",
                   "--policies", "bottom", "calibrated", "--out", str(out)])
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert rows[0]["policy"] == "original" and rows[0]["cosine"] == 1.0
    assert len(rows) == 1 + 2 * 2
    assert all(-1 <= r["cosine"] <= 1 and 0 <= r["recall_at_1"] <= 1
               for r in rows)


def test_encoder_spans_and_plans(fixtures, tmp_path):
    """Spans with sinks and per-head plans on an encoder: one row each, at
    the span report's cost."""
    model, data = _encoder_inputs(fixtures, tmp_path, 2, 13)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({
        "format": "masformer-span-plan", "version": 2, "layers": [
            {"layer": 0, "heads": [{"span": "full"},
                                   {"span": "window", "size": 2, "sink": 1},
                                   {"span": "window", "size": 4, "sink": 1},
                                   {"span": "window", "size": 2}]},
            {"layer": 1, "span": "block", "size": 4, "sink": 1}]}))
    out = tmp_path / "out"
    evaluate.main(["encoder", "--model", str(model), "--paragraphs",
                   str(data), "--spans", "window:2+1", "block:4", "--blocks",
                   "--policies", "top", "--num-full", "0", "--plans",
                   str(plan), "--out", str(out)])
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert [r["span"] for r in rows] == [
        "full", "window 2, sink 1", "block 4", "plan plan"]
    for r in rows[1:]:
        assert 0 < r["cost"] < 1 and -1 <= r["cosine"] < 1 - 1e-6
    assert rows[3]["policy"] == "plan" and rows[3]["per_head_layers"] == 1
    import warnings
    with warnings.catch_warnings():
        # Per-head two-sided windows export blocked, without a warning.
        warnings.simplefilter("error")
        report = masformer.rewrite(model, None, plan=plan, seq_len=16)
    assert rows[3]["cost"] == pytest.approx(report.fraction_of_full)
    assert "| window 2, sink 1 | top | none |" in \
        (out / "results.md").read_text()
