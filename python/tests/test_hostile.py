"""Hostile input through the Python API (docs/SECURITY.md): every failure is
a masformer.Error, memory included, and nothing kills the interpreter."""

import os
import pathlib
import subprocess
import sys
import textwrap

import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import masformer

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _big_model(folder, elements):
    """A model whose one weight is `elements` floats of external data (a
    sparse file: it takes no disk)."""
    with open(folder / "big.data", "wb") as f:
        f.truncate(elements * 4)
    t = onnx.TensorProto(name="w", data_type=T.FLOAT, dims=[elements])
    t.data_location = onnx.TensorProto.EXTERNAL
    e = t.external_data.add()
    e.key, e.value = "location", "big.data"
    g = h.make_graph([h.make_node("Add", ["x", "w"], ["y"])], "big",
                     [h.make_tensor_value_info("x", T.FLOAT, [1])],
                     [h.make_tensor_value_info("y", T.FLOAT, [elements])],
                     [t])
    path = folder / "big.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), path)
    return path


# Runs one rewrite under an address-space limit of the process's current
# size plus LIMIT_MB, in a fresh interpreter, and prints how it ended; then
# lifts the limit and rewrites a fixture, to show the interpreter is sound.
_UNDER_LIMIT = textwrap.dedent("""
    import resource, sys
    import masformer
    model, fixture, out, limit_mb = sys.argv[1:5]
    def mapped():
        for line in open("/proc/self/status"):
            if line.startswith("VmSize"):
                return int(line.split()[1]) * 1024
    limit = mapped() + int(limit_mb) * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, resource.RLIM_INFINITY))
    try:
        masformer.rewrite(model, out, span="block:4")
        print("ended: ok")
    except masformer.Error as e:
        print("ended: masformer.Error:", str(e).splitlines()[0])
    except BaseException as e:
        print("ended: other", type(e).__name__, e)
    resource.setrlimit(resource.RLIMIT_AS,
                       (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    r = masformer.rewrite(fixture, out, span="block:4")
    print("after:", len(r.layers), "layers")
""")


def test_memory_limits_give_masformer_errors(fixtures, tmp_path):
    """Under address-space limits around the model's 64 MiB weight, each
    rewrite either succeeds or raises masformer.Error (the budget check
    naming the tensor, or out of memory), never MemoryError or an abort,
    and the interpreter works afterwards."""
    model = _big_model(tmp_path, 16 * 2**20)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    endings = []
    for limit_mb in range(24, 112, 8):
        p = subprocess.run(
            [sys.executable, "-c", _UNDER_LIMIT, str(model),
             str(fixtures / "gpt2.onnx"), str(tmp_path / "out.onnx"),
             str(limit_mb)],
            capture_output=True, text=True, timeout=300, env=env)
        assert p.returncode == 0, (limit_mb, p.stdout, p.stderr[-2000:])
        lines = p.stdout.splitlines()
        assert lines[-1] == "after: 3 layers", (limit_mb, p.stdout)
        ending = lines[-2]
        assert ending.startswith("ended: ok") or ending.startswith(
            "ended: masformer.Error"), (limit_mb, ending)
        endings.append(ending)
    # The tight limits are refused by the budget, before any read.
    assert "tensor 'w' needs 67108864 bytes, more than the memory left " \
        "under this process's address-space limit" in endings[0]


def test_truncated_library_is_a_masformer_error(fixtures, tmp_path):
    lib = tmp_path / "gpt2.so"
    masformer.compile(fixtures / "gpt2.onnx", lib)
    data = lib.read_bytes()
    for n in (len(data) // 2, len(data) - 1):
        cut = tmp_path / f"cut{n}.so"
        cut.write_bytes(data[:n])
        with pytest.raises(masformer.Error, match="is truncated"):
            masformer.Session(cut)
    with pytest.raises(masformer.Error, match="is not a shared library"):
        (tmp_path / "text.so").write_text("not a library")
        masformer.Session(tmp_path / "text.so")


@pytest.mark.parametrize("crasher", sorted(
    (ROOT / "test" / "fuzz" / "model-crashers").glob("*.onnx")),
    ids=lambda p: p.name)
def test_fuzz_crashers_are_masformer_errors(crasher, tmp_path):
    """Models that once crashed the importer: one masformer.Error."""
    with pytest.raises(masformer.Error):
        masformer.rewrite(crasher, tmp_path / "out.onnx", span="block:4")
    assert not (tmp_path / "out.onnx").exists()


_UNUSUAL_ERRORS = [
    "div-zero", "dup-init", "ext-hex", "nodata-huge", "nodata-int",
    "nodata-const", "ext-sparse", "attn-scalar-k", "attn-rank1-k",
    "attn-batch", "attn-heads", "msg-no-outputs", "msg-split",
    "msg-broadcast-huge", "msg-broadcast", "msg-ext-overflow",
    "range-empty", "trilu-empty-k"]


@pytest.fixture(scope="module")
def unusual(tmp_path_factory):
    """The models of test/Import/Inputs/make_unusual.py."""
    out = tmp_path_factory.mktemp("unusual")
    subprocess.run([sys.executable, str(ROOT / "test" / "Import" / "Inputs" /
                                        "make_unusual.py"), str(out)],
                   check=True)
    return out


@pytest.mark.parametrize("name", _UNUSUAL_ERRORS)
def test_models_that_crashed_the_tools_are_masformer_errors(unusual, name,
                                                            tmp_path):
    """The models that crashed the importer, or exhausted memory, before
    (issue 19): in Python each is a masformer.Error whose message names
    the tensor, node or graph, and no output is written."""
    # Beside the model: models with external data are written there.
    out = unusual / f"{name}.out.onnx"
    with pytest.raises(masformer.Error,
                       match=r"tensor '|node '|initializer '|graph has no"):
        masformer.rewrite(unusual / f"{name}.onnx", out, span="block:4")
    assert not out.exists()
