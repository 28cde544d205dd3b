#!/usr/bin/env python3
"""Checks an ONNX model exported by masformer-opt against its original:

- onnx.checker (full check) passes;
- every initializer is byte-identical, in the same order; graph inputs,
  outputs, opset imports and metadata are unchanged;
- the nodes outside the rewritten layers are untouched: every original node
  is still there, unchanged, except attention-core nodes (MatMul, the scale
  / mask / cast chain, Softmax) of exactly --rewritten layers;
- with --block B: after shape inference at batch 2 and --seq S, every new
  Softmax works on [.., ceil(S/B), B, B] scores, i.e. only the pairs inside
  the blocks are computed ([.., W, 2W] with --window W, [.., W, 3W] with
  --window W --two-sided; K more key columns with --sink K);
- the model runs in onnxruntime at several sequence lengths (dynamic axes
  are kept).
"""

import argparse
import sys

import numpy as np
import onnx
import onnxruntime as ort


def fail(msg):
    sys.exit(f"check_export: {msg}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("original")
    ap.add_argument("exported")
    ap.add_argument("--rewritten", type=int, required=True,
                    help="how many layers were rewritten")
    ap.add_argument("--block", type=int)
    ap.add_argument("--window", type=int,
                    help="causal window W: scores must be [.., W, 2W]")
    ap.add_argument("--two-sided", action="store_true",
                    help="the window is two-sided: scores [.., W, 3W]")
    ap.add_argument("--sink", type=int, default=0,
                    help="K attention sinks: K more key columns per block")
    ap.add_argument("--seq", type=int, default=16)
    a = ap.parse_args()

    orig = onnx.load(a.original)
    out = onnx.load(a.exported)
    onnx.checker.check_model(out, full_check=True)

    oi, ni = orig.graph.initializer, out.graph.initializer
    if len(oi) != len(ni) or any(x.SerializeToString() != y.SerializeToString()
                                 for x, y in zip(oi, ni)):
        fail("initializers differ")
    for field in ("input", "output"):
        if [x.SerializeToString() for x in getattr(orig.graph, field)] != \
           [x.SerializeToString() for x in getattr(out.graph, field)]:
            fail(f"graph {field}s differ")
    if [x.SerializeToString() for x in orig.opset_import] != \
       [x.SerializeToString() for x in out.opset_import]:
        fail("opset imports differ")
    if [x.SerializeToString() for x in orig.metadata_props] != \
       [x.SerializeToString() for x in out.metadata_props]:
        fail("metadata differs")

    kept = {n.name: n.SerializeToString() for n in out.graph.node}
    core = {"MatMul", "Mul", "Div", "Add", "Where", "Cast", "Softmax",
            "Attention"}
    removed = [n for n in orig.graph.node if n.name not in kept]
    for n in orig.graph.node:
        if n.name in kept and kept[n.name] != n.SerializeToString():
            fail(f"node {n.name} was changed")
    for n in removed:
        if n.op_type not in core:
            fail(f"node {n.name} ({n.op_type}) outside an attention core "
                 f"was removed")
    softmaxes = sum(n.op_type in ("Softmax", "Attention") for n in removed)
    if softmaxes != a.rewritten:
        fail(f"{softmaxes} layers were replaced, expected {a.rewritten}")
    removed = len(removed)

    if a.window:
        a.block = a.window
    if a.block:
        want = [a.block, (3 if a.two_sided else 2) * a.block] if a.window \
            else [a.block, a.block]
        want[1] += min(a.sink, a.seq)
        inferred = onnx.ModelProto()
        inferred.CopyFrom(out)
        for inp in inferred.graph.input:
            dims = inp.type.tensor_type.shape.dim
            dims[0].Clear()
            dims[0].dim_value = 2
            if len(dims) > 1:
                dims[1].Clear()
                dims[1].dim_value = a.seq
        inferred = onnx.shape_inference.infer_shapes(inferred,
                                                     data_prop=True)
        shapes = {v.name: [d.dim_value if d.HasField("dim_value") else None
                           for d in v.type.tensor_type.shape.dim]
                  for v in inferred.graph.value_info}
        nb = -(-a.seq // a.block)
        blocked = [n for n in out.graph.node
                   if n.op_type in ("Softmax", "Attention") and
                   n.name.startswith("masformer/")]
        if len(blocked) != a.rewritten:
            fail(f"{len(blocked)} blocked softmax nodes, expected "
                 f"{a.rewritten}")
        for n in blocked:
            # Softmax: its scores; Attention: its (blocked) query.
            s = shapes.get(n.input[0])
            if n.op_type == "Attention" and s is not None:
                s = [None] + s[-2:-1] * 2 if len(s) == 3 else \
                    [None, s[-2], s[-2]]
            # The block count is only known at run time; the block shape is
            # what proves that only in-block pairs are computed.
            if s is None or s[-2:] != want:
                fail(f"{n.name} computes scores of shape {s}, expected "
                     f"[..., {want[0]}, {want[1]}] ({nb} blocks)")

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(a.exported, opts,
                                providers=["CPUExecutionProvider"])
    for seq in (a.seq, 9, 23):
        feeds = {}
        for inp in sess.get_inputs():
            if "int" in inp.type:
                feeds[inp.name] = np.ones((2, seq), np.int64)
            else:
                feeds[inp.name] = np.zeros((2, seq, inp.shape[-1]), np.float32)
        res = sess.run(None, feeds)
        if not all(np.all(np.isfinite(r)) for r in res):
            fail(f"non-finite output at sequence length {seq}")
    print(f"check_export: OK ({removed} nodes replaced, "
          f"{len(out.graph.node) - len(orig.graph.node) + removed} added)")


if __name__ == "__main__":
    main()
