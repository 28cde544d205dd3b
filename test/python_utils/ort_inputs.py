"""Deterministic inputs for an onnxruntime session of a test fixture.

Integer inputs (token ids) are random in [0, 100); an input named *mask* is
all ones except the last three positions of the last batch row (padding).
Float inputs are standard normal (of the input's float type). Fixed seed.
"""

import numpy as np


def make_inputs(sess, shapes, seed=7):
    rng = np.random.default_rng(seed)
    feeds = {}
    for inp in sess.get_inputs():
        shape = shapes[inp.name]
        if "int" in inp.type:
            if "mask" in inp.name:
                x = np.ones(shape, np.int64)
                x[-1, -3:] = 0
            else:
                x = rng.integers(0, 100, size=shape, dtype=np.int64)
        else:
            dtype = {"tensor(float16)": np.float16,
                     "tensor(double)": np.float64}.get(inp.type, np.float32)
            x = rng.standard_normal(shape).astype(dtype)
        feeds[inp.name] = x
    return feeds
