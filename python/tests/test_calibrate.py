"""python -m masformer.calibrate: the per-head error against attention
computed directly from the span definition, the choice under a budget, and
the tool end to end on the tiny GPT-2 and Llama fixtures (random weights:
this checks the method and the plan, not a quality)."""

import itertools
import json

import numpy as np
import pytest

import masformer
from masformer import calibrate


def softmax_attention(scores, v, allowed):
    """softmax over the allowed keys of each row, times v (float64)."""
    s = np.where(allowed, scores, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


@pytest.mark.parametrize("causal", [True, False])
def test_head_errors_are_the_span_attention_error(causal):
    """Dropping the probabilities outside a span and renormalizing is the
    rewritten layer: compare with attention recomputed over the allowed
    keys only (window W + sinks K: j < K or 0 <= i - j < W, j <= i; for
    an encoder j < K or |i - j| < W)."""
    rng = np.random.default_rng(0)
    seq, d, q_heads, kv_heads = 40, 8, 4, 2
    scores = rng.standard_normal((q_heads, seq, seq)) * 2
    base = np.tril(np.ones((seq, seq), bool)) if causal else \
        np.ones((seq, seq), bool)
    v = rng.standard_normal((kv_heads, seq, d))
    p = np.exp(np.where(base, scores, -np.inf))
    p /= p.sum(-1, keepdims=True)
    rows = np.array([0, 5, 17, 30, 39])
    cands = [("full", 0, 0), ("window", 4, 0), ("window", 8, 2)]
    got, absolute = calibrate.head_errors(p[:, rows].astype(np.float32),
                                          v.astype(np.float32), rows, seq,
                                          kv_heads, cands, causal)
    i, j = np.arange(seq)[:, None], np.arange(seq)[None, :]
    for h_kv, (ci, (_, w, k)) in itertools.product(range(kv_heads),
                                                   enumerate(cands)):
        num = den = 0.0
        for h in (2 * h_kv, 2 * h_kv + 1):
            full = softmax_attention(scores[h], v[h_kv], base)[rows]
            near = ((i - j) < w) if causal else (np.abs(i - j) < w)
            allowed = base & (near | (j < k)) if w else base
            span = softmax_attention(scores[h], v[h_kv], allowed)[rows]
            num += ((span - full) ** 2).sum()
            den += (full ** 2).sum()
        assert got[h_kv, ci] == pytest.approx(num / den, rel=1e-3, abs=1e-9)
        assert absolute[h_kv, ci] == pytest.approx(num, rel=1e-3, abs=1e-9)
    assert np.all(got[:, 0] == 0) and np.all(got[:, 1] > got[:, 2])


def brute_force(errors, costs, weights, budget):
    best = None
    for choice in itertools.product(range(len(costs)), repeat=len(errors)):
        spent = sum(w * costs[c] for w, c in zip(weights, choice))
        if spent <= budget * sum(weights) + 1e-12:
            err = sum(errors[h][c] for h, c in enumerate(choice))
            best = err if best is None else min(best, err)
    return best


@pytest.mark.parametrize("seed", range(6))
def test_choice_respects_the_budget_and_is_near_optimal(seed):
    rng = np.random.default_rng(seed)
    heads, costs = 6, np.array([1.0, 0.1, 0.25, 0.5])
    # Errors fall as the window (and the cost) grows; full errs 0.
    e = np.sort(rng.random((heads, 3)) * rng.random((heads, 1)), axis=1)
    errors = np.concatenate([np.zeros((heads, 1)), e[:, ::-1]], axis=1)
    weights = rng.integers(1, 4, heads).astype(float)
    for budget in (0.15, 0.3, 0.5, 0.8):
        choice = calibrate.choose(errors, costs, weights, budget)
        spent = (weights * costs[choice]).sum() / weights.sum()
        assert spent <= budget + 1e-12
        got = errors[np.arange(heads), choice].sum()
        opt = brute_force(errors, costs, weights, budget)
        # The relaxation plus greedy upgrades: never worse than giving every
        # head the same span, and close to the optimum.
        uniform = min(errors[:, c].sum() for c in range(len(costs))
                      if costs[c] <= budget)
        assert got <= uniform + 1e-12
        assert got <= opt + 0.25 * errors.max() + 1e-12
    assert (calibrate.choose(errors, costs, weights, 1.0) == 0).all()
    with pytest.raises(calibrate.CalibrationError, match="below the cost"):
        calibrate.choose(errors, costs, weights, 0.05)


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_calibrate_end_to_end(fixtures, tmp_path, name):
    model = tmp_path / f"{name}.onnx"
    model.write_bytes((fixtures / f"{name}.onnx").read_bytes())
    tokens = tmp_path / "calib.npy"
    np.save(tokens, np.random.default_rng(1).integers(0, 128, 80))
    plan_path = tmp_path / "plan.json"
    meas = tmp_path / "m.npz"
    calibrate.main([str(model), "--tokens", str(tokens), "--seq-len", "32",
                    "--budget", "0.5", "--windows", "4", "8", "16",
                    "--sink", "2", "--rows", "32", "--offset", "8",
                    "--ref-window", "8", "--save-measurements", str(meas),
                    "-o", str(plan_path)])
    plan = json.loads(plan_path.read_text())
    # Every layer's loss rise was measured; the same measurements give the
    # same plan again, and a plan at another budget.
    assert len(plan["calibration"]["layer_loss_rise"]) == 3
    again = tmp_path / "again.json"
    reuse = [str(model), "--tokens", str(tokens), "--seq-len", "32",
             "--budget", "0.5", "--windows", "4", "8", "16", "--sink", "2",
             "--rows", "32", "--offset", "8", "--ref-window", "8",
             "--measurements", str(meas), "--no-check", "-o", str(again)]
    calibrate.main(reuse)
    assert json.loads(again.read_text())["layers"] == plan["layers"]
    # Measurements saved before the key named rises_from still serve.
    old = dict(np.load(meas))
    key = json.loads(str(old["key"]))
    del key["rises_from"]
    old["key"] = json.dumps(key)
    old_path = tmp_path / "old.npz"
    np.savez(old_path, **old)
    calibrate.main([str(old_path) if a == str(meas) else a for a in reuse])
    assert json.loads(again.read_text())["layers"] == plan["layers"]
    # One span per layer from the same measurements.
    calibrate.main([str(model), "--tokens", str(tokens), "--seq-len", "32",
                    "--budget", "0.5", "--windows", "4", "8", "16",
                    "--sink", "2", "--rows", "32", "--offset", "8",
                    "--ref-window", "8", "--measurements", str(meas),
                    "--per-layer", "--no-check", "-o", str(again)])
    per_layer = json.loads(again.read_text())
    # The layers' rises taken from the 32-token measurements at 48 tokens.
    longer = tmp_path / "longer.json"
    calibrate.main([str(model), "--tokens", str(tokens), "--seq-len", "48",
                    "--budget", "0.5", "--windows", "4", "8", "16",
                    "--sink", "2", "--rows", "32", "--ref-window", "8",
                    "--rises-from", str(meas), "--no-check", "-o",
                    str(longer)])
    assert json.loads(longer.read_text())["calibration"]["layer_loss_rise"] \
        == plan["calibration"]["layer_loss_rise"]
    with pytest.raises(SystemExit, match="taken with sink 2, not 3"):
        calibrate.main([str(model), "--tokens", str(tokens), "--seq-len",
                        "48", "--budget", "0.5", "--windows", "4", "8",
                        "16", "--sink", "3", "--ref-window", "8",
                        "--rises-from", str(meas), "-o", str(longer)])
    assert all("heads" not in entry for entry in per_layer["layers"])
    assert per_layer["calibration"]["granularity"] == "layer"
    assert per_layer["calibration"]["cost"] <= 0.5
    with pytest.raises(SystemExit, match="taken with other options"):
        calibrate.main([str(model), "--tokens", str(tokens), "--seq-len",
                        "32", "--budget", "0.3", "--windows", "4", "8",
                        "--sink", "2", "--rows", "32", "--offset", "8",
                        "--ref-window", "8", "--measurements", str(meas),
                        "-o", str(again)])
    assert plan["format"] == "masformer-span-plan" and plan["version"] == 2
    assert [entry["layer"] for entry in plan["layers"]] == [0, 1, 2]
    info = plan["calibration"]
    assert info["seq_len"] == 32 and info["budget"] == 0.5
    assert info["windows"] == [4, 8, 16] and info["rows"] == 32
    assert 0 < info["cost"] <= 0.5
    assert info["perplexity_ratio"] > 0 and info["original_perplexity"] > 1
    # The plan applies as written, at the cost it states.
    shapes = {"input_ids": [1, 32], "attention_mask": [1, 32]}
    report = masformer.rewrite(model, None, plan=plan_path, seq_len=32,
                               input_shapes=shapes)
    assert report.fraction_of_full == pytest.approx(info["cost"])
    spans = [h for c in report.layers for h in
             (c.head_spans or [dict(span=c.span, size=c.span_size,
                                    sink=c.sink)] * c.kv_heads)]
    assert {(h["span"], h["size"], h["sink"]) for h in spans} <= \
        {("full", 0, 0), ("window", 4, 2), ("window", 8, 2),
         ("window", 16, 2)}
    assert not list(tmp_path.glob(f".{name}-masformer-*"))


def test_calibrate_errors(fixtures, tmp_path):
    tokens = tmp_path / "calib.npy"
    np.save(tokens, np.arange(40) % 100)
    with pytest.raises(SystemExit, match="too few for --seq-len 64"):
        calibrate.main([str(fixtures / "gpt2.onnx"), "--tokens", str(tokens),
                        "--seq-len", "64", "--budget", "0.5", "-o",
                        str(tmp_path / "p.json")])
    with pytest.raises(SystemExit, match="an encoder is calibrated on "
                                         "sequences"):
        calibrate.main([str(fixtures / "bert.onnx"), "--tokens", str(tokens),
                        "--seq-len", "16", "--budget", "0.5", "-o",
                        str(tmp_path / "p.json")])
    seqs = tmp_path / "seqs.npz"
    np.savez(seqs, input_ids=np.ones((2, 16), np.int64),
             attention_mask=np.ones((2, 16), np.int64))
    with pytest.raises(SystemExit, match="a causal LM is calibrated on a "
                                         "text"):
        calibrate.main([str(fixtures / "gpt2.onnx"), "--sequences",
                        str(seqs), "--budget", "0.5", "-o",
                        str(tmp_path / "p.json")])
    with pytest.raises(SystemExit, match="--seq-len 8 is not the "
                                         "sequences' length 16"):
        calibrate.main([str(fixtures / "bert.onnx"), "--sequences",
                        str(seqs), "--seq-len", "8", "--budget", "0.5", "-o",
                        str(tmp_path / "p.json")])
    with pytest.raises(SystemExit, match="too few from offset 1 for "
                                         "--count 2"):
        calibrate.main([str(fixtures / "bert.onnx"), "--sequences",
                        str(seqs), "--offset", "1", "--count", "2",
                        "--budget", "0.5", "-o", str(tmp_path / "p.json")])
    np.savez(seqs, input_ids=np.ones((2, 16), np.int64))
    with pytest.raises(SystemExit, match="no 'attention_mask' array"):
        calibrate.main([str(fixtures / "bert.onnx"), "--sequences",
                        str(seqs), "--budget", "0.5", "-o",
                        str(tmp_path / "p.json")])
    with pytest.raises(SystemExit, match=r"--budget must be in \(0, 1\]"):
        calibrate.main([str(fixtures / "gpt2.onnx"), "--tokens", str(tokens),
                        "--seq-len", "16", "--budget", "1.5", "-o",
                        str(tmp_path / "p.json")])
    with pytest.raises(SystemExit, match="--ref-window 100 is not one of"):
        calibrate.main([str(fixtures / "gpt2.onnx"), "--tokens", str(tokens),
                        "--seq-len", "16", "--budget", "0.5", "--windows",
                        "4", "--ref-window", "100", "-o",
                        str(tmp_path / "p.json")])
    with pytest.raises(SystemExit, match="--tokens"):
        calibrate.main([str(fixtures / "gpt2.onnx"), "--tokens",
                        str(tmp_path / "missing.npy"), "--seq-len", "16",
                        "--budget", "0.5", "-o", str(tmp_path / "p.json")])
    assert not (tmp_path / "p.json").exists()


def _pooled(sess, ids, mask):
    """Mean-pooled, L2-normalized hidden states (numpy, float64)."""
    h = sess.run(None, {"input_ids": ids, "attention_mask": mask})[0]
    m = mask[:, :, None].astype(np.float64)
    e = (h.astype(np.float64) * m).sum(1) / m.sum(1)
    return e / np.linalg.norm(e, axis=1, keepdims=True)


def test_calibrate_encoder(fixtures, tmp_path):
    """An encoder is calibrated on padded sequences by the cosine
    similarity of its embeddings to the original's: each layer's measured
    rise (through masks added to the original model) and the check equal
    that similarity computed here from the rewritten models in
    onnxruntime."""
    ort = pytest.importorskip("onnxruntime")
    model = tmp_path / "bert.onnx"
    model.write_bytes((fixtures / "bert.onnx").read_bytes())
    rng = np.random.default_rng(3)
    ids = rng.integers(1, 100, (7, 24))
    mask = np.ones_like(ids)
    mask[0, 12:] = 0
    mask[3, 20:] = 0
    seqs = tmp_path / "seqs.npz"
    np.savez(seqs, input_ids=ids, attention_mask=mask)
    plan_path, meas = tmp_path / "plan.json", tmp_path / "m.npz"
    args = [str(model), "--sequences", str(seqs), "--offset", "1",
            "--count", "5", "--budget", "0.5", "--windows", "2", "4", "8",
            "--sink", "1", "--ref-window", "4"]
    calibrate.main(args + ["--save-measurements", str(meas), "-o",
                           str(plan_path)])
    plan = json.loads(plan_path.read_text())
    info = plan["calibration"]
    assert info["objective"] == "cosine" and info["sequences"] == [1, 6]
    assert 0 < info["cost"] <= 0.5 and info["seq_len"] == 24
    ids, mask = ids[1:6], mask[1:6]
    opts = ort.SessionOptions()
    ref = _pooled(ort.InferenceSession(str(model), opts), ids, mask)
    out = tmp_path / "rewritten.onnx"
    import warnings
    with warnings.catch_warnings():
        # Two-sided windows export blocked: no layer is left dense.
        warnings.simplefilter("error")
        for layer, rise in enumerate(info["layer_loss_rise"]):
            masformer.rewrite(model, out, span="window:4", sink=1,
                              seq_len=24, full_layers=[1 - layer])
            got = _pooled(ort.InferenceSession(str(out), opts), ids, mask)
            assert rise == pytest.approx(1 - (got * ref).sum(1).mean(),
                                         abs=1e-5)
        report = masformer.rewrite(model, out, plan=plan_path, seq_len=24)
    assert max(info["layer_loss_rise"]) > 1e-4
    assert report.fraction_of_full == pytest.approx(info["cost"])
    got = _pooled(ort.InferenceSession(str(out), opts), ids, mask)
    assert info["cosine"] == pytest.approx((got * ref).sum(1).mean(),
                                           abs=1e-5)
    # The saved measurements give the same plan and check.
    again = tmp_path / "again.json"
    calibrate.main(args + ["--measurements", str(meas), "-o", str(again)])
    again = json.loads(again.read_text())
    assert again["layers"] == plan["layers"]
    assert again["calibration"]["cosine"] == pytest.approx(info["cosine"])
    assert not list(tmp_path.glob(".bert-masformer-*"))


def test_calibrate_several_reference_windows(fixtures, tmp_path):
    """With --ref-window 4 8 every layer runs once per reference window;
    each rise equals the rewritten model's (masformer.rewrite, onnxruntime,
    numpy log-likelihood), and the rises saved at one length serve another
    from several files."""
    ort = pytest.importorskip("onnxruntime")
    model = tmp_path / "gpt2.onnx"
    model.write_bytes((fixtures / "gpt2.onnx").read_bytes())
    tokens = tmp_path / "calib.npy"
    ids = np.random.default_rng(4).integers(0, 128, 80)
    np.save(tokens, ids)
    common = [str(model), "--tokens", str(tokens), "--budget", "0.5",
              "--windows", "4", "8", "16", "--sink", "2", "--rows", "32"]
    both, plan_path = tmp_path / "both.npz", tmp_path / "plan.json"
    calibrate.main(common + ["--seq-len", "32", "--ref-window", "8", "4",
                             "--save-measurements", str(both), "--no-check",
                             "-o", str(plan_path)])
    info = json.loads(plan_path.read_text())["calibration"]
    assert info["ref_window"] == [4, 8]
    rises = info["layer_loss_rise"]
    assert sorted(rises) == ["4", "8"] and len(rises["4"]) == 3
    x = ids[None, :32]
    shapes = {"input_ids": [1, 32], "attention_mask": [1, 32]}

    def loss(path):
        sess = ort.InferenceSession(str(path))
        feeds = {i.name: (x if i.name == "input_ids" else np.ones_like(x))
                 for i in sess.get_inputs()}
        return calibrate._nll(sess.run(None, feeds)[0][0], x[0])

    base = loss(model)
    out = tmp_path / "one-layer.onnx"
    for w in (4, 8):
        for layer in range(3):
            masformer.rewrite(model, out, span=f"window:{w}", sink=2,
                              seq_len=32, input_shapes=shapes,
                              full_layers=[k for k in range(3) if k != layer])
            assert rises[str(w)][layer] == pytest.approx(loss(out) - base,
                                                         abs=1e-5)
    # One reference's rises from a file of its own and one from the pair.
    one = tmp_path / "one.npz"
    calibrate.main(common + ["--seq-len", "32", "--ref-window", "16",
                             "--save-measurements", str(one), "--no-check",
                             "-o", str(plan_path)])
    longer = tmp_path / "longer.json"
    calibrate.main(common + ["--seq-len", "48", "--ref-window", "4", "16",
                             "--rises-from", str(both), str(one),
                             "--no-check", "-o", str(longer)])
    got = json.loads(longer.read_text())["calibration"]["layer_loss_rise"]
    assert got["4"] == rises["4"]
    with pytest.raises(SystemExit, match=r"no layer loss rises at "
                                         r"--ref-window \[16\]"):
        calibrate.main(common + ["--seq-len", "48", "--ref-window", "4",
                                 "16", "--rises-from", str(both), "-o",
                                 str(longer)])
