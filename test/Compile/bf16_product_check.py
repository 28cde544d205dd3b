#!/usr/bin/env python3
"""One matrix product compiled with --precision=bf16 against its definition:

    bf16_product_check.py DIR K N M [--transposed] [--cpu=NAME] [--emulate-amx]

writes DIR/p.onnx (y = MatMul(x[m, K], W) with constant weights W [K, N],
or MatMul(x, Transpose(W)) with W stored [N, K] when --transposed),
compiles it with masformer-compile --precision=bf16 (and --cpu,
--emulate-amx: the AMX path in its emulator on any CPU), runs it on
M random rows, and compares y with numpy: x and W rounded to bf16 (to
nearest, ties to even), multiplied in float64. The only error left is the
f32 accumulation: y must be within 1e-6 of the largest |y|.
"""

import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh


def to_bf16(a):
    """a (float32) rounded to the nearest bf16, ties to even, as float32."""
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return u.astype(np.uint32).view(np.float32)


def main():
    args = [x for x in sys.argv[1:] if not x.startswith("--")]
    flags = [x for x in sys.argv[1:] if x.startswith("--")]
    out, k, n, m = args[0], int(args[1]), int(args[2]), int(args[3])
    transposed = "--transposed" in flags
    cpu = [f for f in flags if f.startswith("--cpu=")]
    cpu += [f for f in flags if f == "--emulate-amx"]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(k * 1000 + n + m)
    w = rng.standard_normal((n, k) if transposed else (k, n)).astype(
        np.float32)
    nodes = ([h.make_node("Transpose", ["w"], ["wt"], perm=[1, 0]),
              h.make_node("MatMul", ["x", "wt"], ["y"])] if transposed
             else [h.make_node("MatMul", ["x", "w"], ["y"])])
    g = h.make_graph(nodes, "product",
                     [h.make_tensor_value_info("x", T.FLOAT, ["m", k])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["m", n])],
                     [nh.from_array(w, "w")])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    path, lib = os.path.join(out, "p.onnx"), os.path.join(out, "p.so")
    onnx.save(model, path)
    subprocess.run(["masformer-compile", path, "-o", lib,
                    "--precision=bf16"] + cpu, check=True)
    x = rng.standard_normal((m, k)).astype(np.float32)
    np.save(os.path.join(out, "x.npy"), x)
    subprocess.run(["masformer-run", lib, "--input",
                    f"x={os.path.join(out, 'x.npy')}", "--output-dir", out],
                   check=True, capture_output=True)
    y = np.load(os.path.join(out, "y.npy"))
    weights = w.T if transposed else w
    want = to_bf16(x).astype(np.float64) @ to_bf16(weights).astype(np.float64)
    err = float(np.abs(y - want).max() / np.abs(want).max())
    what = (f"[{m} x {k}] x [{k} x {n}]{' (transposed)' if transposed else ''}"
            f"{' ' + ' '.join(cpu) if cpu else ''}")
    if not np.isfinite(y).all() or err > 1e-6:
        sys.exit(f"{what}: the bf16 product is {err:.3g} (relative to the "
                 "largest result) from its definition")
    print(f"OK: {what}, relative error {err:.3g}")


if __name__ == "__main__":
    main()
