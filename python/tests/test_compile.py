"""masformer.compile / masformer.Session: compiled libraries that match
onnxruntime, full and rewritten, and one clear exception per bad input."""

import os
import subprocess
import sys

import numpy as np
import onnxruntime as ort
import pytest

import masformer


def ort_logits(path, feeds):
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(str(path), opts,
                                providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)[0]


def tokens(batch, seq, seed=0):
    ids = np.random.default_rng(seed).integers(0, 100, (batch, seq))
    mask = np.ones((batch, seq), np.int64)
    mask[-1, -2:] = 0
    return {"input_ids": ids.astype(np.int64), "attention_mask": mask}


@pytest.fixture(scope="module")
def gpt2_lib(tmp_path_factory):
    root = __import__("pathlib").Path(__file__).resolve().parents[2]
    lib = tmp_path_factory.mktemp("lib") / "gpt2.so"
    report = masformer.compile(root / "test" / "fixtures" / "gpt2.onnx", lib)
    assert report.fraction_of_full == 1.0
    return lib


def test_session_matches_onnxruntime(fixtures, gpt2_lib):
    sess = masformer.Session(gpt2_lib)
    assert sess.target == "cpu"
    assert sess.inputs == [
        masformer.TensorInfo("input_ids", "int64", ("batch", "sequence")),
        masformer.TensorInfo("attention_mask", "int64",
                             ("batch", "sequence"))]
    assert sess.outputs == [
        masformer.TensorInfo("logits", "float32",
                             ("batch", "sequence", 128))]
    # One library, two sizes; runs do not leak inputs into each other.
    for batch, seq in ((2, 16), (1, 5), (2, 16)):
        feeds = tokens(batch, seq, seed=seq)
        got = sess.run(feeds)["logits"]
        want = ort_logits(fixtures / "gpt2.onnx", feeds)
        assert got.shape == want.shape and got.dtype == np.float32
        np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4)


def test_weights_outside_the_library(fixtures, gpt2_lib, tmp_path):
    # The library's weights file beside it; the embedded build gives the
    # same bits; two sessions share one mapping, and each still runs after
    # the other is gone.
    weights = gpt2_lib.with_suffix(".weights")
    sess = masformer.Session(gpt2_lib)
    assert sess.weight_files == [(str(weights), weights.stat().st_size)]
    emb = tmp_path / "emb.so"
    masformer.compile(fixtures / "gpt2.onnx", emb, embed_weights=True)
    assert not emb.with_suffix(".weights").exists()
    assert masformer.Session(emb).weight_files == []
    feeds = tokens(2, 16)
    other = masformer.Session(gpt2_lib)
    want = masformer.Session(emb).run(feeds)["logits"]
    np.testing.assert_array_equal(sess.run(feeds)["logits"], want)
    del sess
    np.testing.assert_array_equal(other.run(feeds)["logits"], want)
    # A weights file of another size is refused, naming it.
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "gpt2.so").write_bytes(gpt2_lib.read_bytes())
    (bad / "gpt2.weights").write_bytes(weights.read_bytes()[:-64])
    with pytest.raises(masformer.Error, match="gpt2.weights' is .* bytes"):
        masformer.Session(bad / "gpt2.so")


def test_compiled_rewrite_matches_the_exported_rewrite(fixtures, tmp_path):
    lib = tmp_path / "b4.so"
    report = masformer.compile(fixtures / "llama-dynamo.onnx", lib,
                               span="block:4", policy="top", num_full=1,
                               seq_len=16)
    assert report.full_layers == [2]
    exported = tmp_path / "b4.onnx"
    masformer.rewrite(fixtures / "llama-dynamo.onnx", exported,
                      span="block:4", policy="top", num_full=1)
    feeds = tokens(2, 12)
    got = masformer.Session(lib).run(feeds, output_names=["logits"])
    np.testing.assert_allclose(got["logits"], ort_logits(exported, feeds),
                               atol=1e-4, rtol=1e-4)
    full = ort_logits(fixtures / "llama-dynamo.onnx", feeds)
    assert np.abs(got["logits"] - full).max() > 1e-3


def test_compile_timing(fixtures, tmp_path):
    lib = tmp_path / "t.so"
    report = masformer.compile(fixtures / "gpt2.onnx", lib, span="block:4",
                               full_layers=[0], timing=True,
                               input_shapes={"input_ids": [2, 8],
                                             "attention_mask": [2, 8]})
    names = [s.name for s in report.timing]
    assert names == ["import, raise and rewrite (ONNX frontend)",
                     "lowering (MLIR passes)", "translation to LLVM IR",
                     "LLVM optimization and machine code", "link",
                     "weights file", "Rest", "Total"], names
    lowering = report.timing[1]
    passes = [s.name for s in lowering.steps]
    assert "TileAttention" in passes and "OutlineKernels" in passes, passes
    assert all(s.seconds >= 0 for s in report.timing)
    total = report.timing[-1].seconds
    assert total > 0
    # Rounded to 0.1 ms each: the steps add up to the total.
    assert abs(sum(s.seconds for s in report.timing[:-1]) - total) < 1e-3
    assert lowering.seconds >= sum(s.seconds for s in lowering.steps) - 1e-3
    # Timing changes nothing of what is compiled: the library matches
    # onnxruntime on the original model with the blocks' mask from the span
    # definition (test/python_utils/span_reference.py, not our export).
    assert report.full_layers == [0]
    feeds = tokens(2, 8)
    utils = fixtures.parent / "python_utils"
    ref = tmp_path / "b4-ref.onnx"
    subprocess.run(
        [sys.executable, str(utils / "span_reference.py"),
         str(fixtures / "gpt2.onnx"), "--span", "block:4", "--causal",
         "--rewritten", "1,2", "--layers", "3", "--seq", "8",
         "--input-shape", "input_ids=2x8", "--input-shape",
         "attention_mask=2x8", "-o", str(ref)],
        check=True, capture_output=True,
        env=dict(os.environ, PYTHONPATH=str(utils)))
    got = masformer.Session(lib).run(feeds, output_names=["logits"])
    np.testing.assert_allclose(got["logits"], ort_logits(ref, feeds),
                               atol=1e-4, rtol=1e-4)
    # Without timing=True, no timing.
    assert masformer.compile(fixtures / "gpt2.onnx", tmp_path / "u.so",
                             input_shapes={"input_ids": [2, 8],
                                           "attention_mask": [2, 8]}
                             ).timing == ()


def test_compile_object_cache(fixtures, tmp_path, monkeypatch):
    # cache_dir keeps each part's object (docs/compile.md): a second compile
    # of the same model to the same library adds nothing to the cache, and
    # its library computes the same; jobs changes nothing of the code.
    monkeypatch.delenv("MASFORMER_CACHE_DIR", raising=False)
    cache = tmp_path / "cache"
    shapes = {"input_ids": [2, 8], "attention_mask": [2, 8]}
    lib = tmp_path / "c.so"
    masformer.compile(fixtures / "gpt2.onnx", lib, input_shapes=shapes,
                      cache_dir=cache, jobs=2)
    first = sorted(os.listdir(cache))
    assert len(first) > 3 and all(f.endswith(".o") for f in first), first
    feeds = tokens(2, 8)
    want = masformer.Session(lib).run(feeds, output_names=["logits"])
    np.testing.assert_allclose(want["logits"],
                               ort_logits(fixtures / "gpt2.onnx", feeds),
                               atol=1e-4, rtol=1e-4)
    lib.unlink()
    masformer.compile(fixtures / "gpt2.onnx", lib, input_shapes=shapes,
                      cache_dir=cache, jobs=1)
    assert sorted(os.listdir(cache)) == first
    got = masformer.Session(lib).run(feeds, output_names=["logits"])
    np.testing.assert_array_equal(got["logits"], want["logits"])
    # $MASFORMER_CACHE_DIR is the default, and "" turns the cache off.
    monkeypatch.setenv("MASFORMER_CACHE_DIR", str(tmp_path / "env-cache"))
    masformer.compile(fixtures / "gpt2.onnx", tmp_path / "e.so",
                      input_shapes=shapes, cache_dir="")
    assert not (tmp_path / "env-cache").exists()
    masformer.compile(fixtures / "gpt2.onnx", tmp_path / "e.so",
                      input_shapes=shapes)
    assert len(os.listdir(tmp_path / "env-cache")) == len(first)
    with pytest.raises(ValueError, match="jobs must be a number of threads"):
        masformer.compile(fixtures / "gpt2.onnx", lib, jobs=-1)
    with pytest.raises(ValueError, match="cache_dir must be"):
        masformer.compile(fixtures / "gpt2.onnx", lib, cache_dir=3)


def test_compile_errors(fixtures, tmp_path):
    out = tmp_path / "x.so"
    with pytest.raises(masformer.Error, match="--target=tpu: expected cpu or cuda"):
        masformer.compile(fixtures / "gpt2.onnx", out, target="tpu")
    with pytest.raises(ValueError, match="give span too"):
        masformer.compile(fixtures / "gpt2.onnx", out, num_full=1)
    with pytest.raises(FileNotFoundError):
        masformer.compile(tmp_path / "missing.onnx", out)
    with pytest.raises(masformer.Error, match="not a CPU that LLVM knows"):
        masformer.compile(fixtures / "gpt2.onnx", out, cpu="pentium9000")
    with pytest.raises(masformer.Error, match="unsupported ONNX node"):
        masformer.compile(fixtures.parent / "Import" / "Inputs" /
                          "unsupported.onnx", out)
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []


def test_session_errors(gpt2_lib, tmp_path):
    with pytest.raises(FileNotFoundError):
        masformer.Session(tmp_path / "none.so")
    bogus = tmp_path / "bogus.so"
    bogus.write_bytes(b"not a library")
    with pytest.raises(masformer.Error, match="is not a shared library"):
        masformer.Session(bogus)
    sess = masformer.Session(gpt2_lib)
    feeds = tokens(2, 8)
    with pytest.raises(ValueError, match=r"missing input\(s\) "
                                         r"\['attention_mask'\]"):
        sess.run({"input_ids": feeds["input_ids"]})
    with pytest.raises(ValueError, match="has no input 'ids'"):
        sess.run({**feeds, "ids": feeds["input_ids"]})
    with pytest.raises(TypeError, match="'input_ids' must be int64, got "
                                        "int32"):
        sess.run({**feeds, "input_ids": feeds["input_ids"].astype(np.int32)})
    with pytest.raises(masformer.Error, match=r"input 'input_ids' has shape "
                                              r"\[batch, sequence\], got "
                                              r"rank 3"):
        sess.run({**feeds, "input_ids": feeds["input_ids"][None]})
    with pytest.raises(masformer.Error, match="'sequence' is 7, but it is 8"):
        sess.run({**feeds, "attention_mask": feeds["attention_mask"][:, :7]})
    with pytest.raises(TypeError, match="feeds must be a dict"):
        sess.run([feeds["input_ids"]])
    # The session still works after the errors.
    assert sess.run(feeds)["logits"].shape == (2, 8, 128)


_PTXAS = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin",
                      "ptxas")


@pytest.mark.skipif(
    not os.path.exists(_PTXAS) and
    os.environ.get("MASFORMER_REQUIRE_PTXAS") != "1",
    reason=f"GPU compile SKIPPED: no CUDA toolkit ({_PTXAS})")
def test_compile_cuda(fixtures, tmp_path):
    """target="cuda": a library with the CPU library's interface; without a
    GPU, running it raises the driver's reason."""
    lib = tmp_path / "gpt2-cuda.so"
    report = masformer.compile(fixtures / "gpt2.onnx", lib, target="cuda",
                               chip="sm_80", span="block:4", num_full=1)
    assert report.fraction_of_full < 1.0
    sess = masformer.Session(lib)
    assert sess.target == "cuda"
    assert [i.name for i in sess.inputs] == ["input_ids", "attention_mask"]
    if not _has_cuda_gpu():
        with pytest.raises(masformer.Error, match=r"\(compiled for sm_80\) "
                                                  "on the GPU"):
            sess.run(tokens(1, 8, seed=1))
    lib16 = tmp_path / "gpt2-bf16.so"
    masformer.compile(fixtures / "gpt2.onnx", lib16, target="cuda",
                      precision="bf16")
    assert masformer.Session(lib16).target == "cuda"
    with pytest.raises(masformer.Error, match="--chip=sm_90 needs --target=cuda"):
        masformer.compile(fixtures / "gpt2.onnx", lib, chip="sm_90")
    with pytest.raises(masformer.Error, match="--chip=sm_70: unsupported"):
        masformer.compile(fixtures / "gpt2.onnx", tmp_path / "old.so",
                          target="cuda", chip="sm_70")


def _cpu_flags():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def test_compile_bf16_cpu(fixtures, tmp_path):
    """precision="bf16" on the CPU: within 0.25 of onnxruntime's f32 logits
    (docs/cpu.md) where this CPU has AMX-BF16 or AVX512-BF16; code for a
    CPU with neither is one clear error, with nothing written. On a CPU
    with neither, the AMX path runs in its emulator (emulate_amx=True)."""
    lib = tmp_path / "gpt2-bf16.so"
    with pytest.raises(masformer.Error,
                       match=r"--precision=bf16 on the CPU needs AMX-BF16 or "
                             r"AVX512-BF16, and --cpu=skylake-avx512 "
                             r"\(skylake-avx512\) has neither"):
        masformer.compile(fixtures / "gpt2.onnx", lib, precision="bf16",
                          cpu="skylake-avx512")
    assert not lib.exists()
    with pytest.raises(masformer.Error, match=r"--emulate-amx needs "
                       r"--target=cpu"):
        masformer.compile(fixtures / "gpt2.onnx", lib, emulate_amx=True,
                          target="cuda")
    assert not lib.exists()
    emulate = not ({"amx_bf16", "avx512_bf16"} & _cpu_flags())
    masformer.compile(fixtures / "gpt2.onnx", lib, precision="bf16",
                      emulate_amx=emulate)
    feeds = tokens(2, 70, seed=3)
    got = masformer.Session(lib).run(feeds)["logits"]
    want = ort_logits(fixtures / "gpt2.onnx", feeds)
    assert np.abs(got - want).max() <= 0.25
    assert (got.argmax(-1) == want.argmax(-1)).mean() >= 0.95


def _has_cuda_gpu():
    import ctypes
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    count = ctypes.c_int(0)
    return (cuda.cuInit(0) == 0 and
            cuda.cuDeviceGetCount(ctypes.byref(count)) == 0 and
            count.value > 0)
