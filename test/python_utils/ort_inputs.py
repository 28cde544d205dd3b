"""Deterministic inputs for an onnxruntime session of a test fixture, the
reference outputs, and the comparison every numerics test makes.

Integer inputs (token ids; int64, or int32 where the model declares int32)
are random in [0, 100), 8-bit ones (quantized values) over their type's
range; an input named *mask* is
all ones except the last three positions of the last batch row (padding;
pad=False: all ones).
Float inputs are standard normal (of the input's float type). Fixed seed.
"""

import numpy as np
import onnxruntime as ort


def make_inputs(sess, shapes, seed=7, pad=True):
    rng = np.random.default_rng(seed)
    feeds = {}
    for inp in sess.get_inputs():
        # Unnamed: the model's own static shape.
        shape = shapes.get(inp.name)
        if shape is None:
            if not all(isinstance(d, int) for d in inp.shape):
                raise KeyError(f"input {inp.name!r} has dynamic dimensions "
                               f"{inp.shape}: give --input-shape")
            shape = list(inp.shape)
        if inp.type in ("tensor(uint8)", "tensor(int8)"):
            # Quantized values: the type's whole range.
            unsigned = inp.type == "tensor(uint8)"
            x = rng.integers(0 if unsigned else -128, 256 if unsigned else 128,
                             size=shape,
                             dtype=np.uint8 if unsigned else np.int8)
        elif "int" in inp.type:
            itype = np.int32 if inp.type == "tensor(int32)" else np.int64
            if "mask" in inp.name:
                x = np.ones(shape, itype)
                if pad:
                    x[-1, -3:] = 0
            else:
                x = rng.integers(0, 100, size=shape, dtype=itype)
        elif inp.type == "tensor(bool)":
            # A boolean attention mask (true: attend), the diagonal kept
            # so that no query row loses every key.
            x = rng.random(shape) < 0.8
            if len(shape) >= 2 and shape[-1] == shape[-2]:
                x |= np.eye(shape[-1], dtype=bool)
        else:
            dtype = {"tensor(float16)": np.float16,
                     "tensor(double)": np.float64}.get(inp.type, np.float32)
            x = rng.standard_normal(shape).astype(dtype)
        feeds[inp.name] = x
    return feeds


def reference(model, shape_specs, pad=True):
    """Runs `model` in onnxruntime on make_inputs sized by `shape_specs`
    ("name=d0xd1..."; masks without padding unless `pad`); returns
    (session, feeds, outputs)."""
    shapes = {}
    for spec in shape_specs:
        name, dims = spec.split("=")
        shapes[name] = [int(d) for d in dims.split("x")]
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model, opts,
                                providers=["CPUExecutionProvider"])
    feeds = make_inputs(sess, shapes, pad=pad)
    return sess, feeds, sess.run(None, feeds)


def mismatch(name, got, want, atol, rtol, what="masformer"):
    """None when |got - want| <= atol + rtol * |want| everywhere (and the
    shapes agree), else the message naming the worst element."""
    if got.shape != want.shape:
        return f"{name}: shape {got.shape}, onnxruntime {want.shape}"
    # (In float64: |int8(-128)| is -128 in int8.)
    want = want.astype(np.float64)
    err = np.abs(got.astype(np.float64) - want)
    bound = atol + rtol * np.abs(want)
    if np.all(err <= bound):
        return None
    i = np.unravel_index(np.argmax(err - bound), err.shape)
    return (f"{name}: |{what} - onnxruntime| = {err[i]:.3g} at {i} (got "
            f"{got[i]}, want {want[i]}); tolerance {atol} + {rtol}*|want|")
