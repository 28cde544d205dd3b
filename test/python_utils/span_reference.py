#!/usr/bin/env python3
"""An independent reference for rewritten models: the ORIGINAL model in
onnxruntime, with the span's mask (numpy, from the span definition in
docs/spans.md: masformer_ref.span_allowed) added to the scores of each
rewritten layer right before its Softmax. Nothing of the compiler's export
or decomposition is used.

    span_reference.py ORIGINAL --span window:4 --sink 2 --causal \\
        --rewritten 1,2 --input-shape input_ids=2x16 ... -o ref.onnx
        [--check EXPORTED.onnx]
    span_reference.py ORIGINAL --plan plan.json --causal ...

--plan takes the layers and their spans (one per layer, or one per
key/value head: "heads") from a span plan (docs/rewrite.md) instead of
--span/--sink/--rewritten; per-head masks are [q_heads, q, kv], the heads
read from the Softmax input's inferred shape.

Layer i is the i-th Softmax of the graph over scores (the fixtures'
attention layers, in graph order, as --masformer-raise-attention numbers
them; a Softmax whose input has rank 2, a mixture of experts' router, is
not one); --layers asserts how many there are. With --check, EXPORTED runs in onnxruntime on
the same inputs and must match the reference within 1e-4 + 1e-4 * |ref|
(--atol, --rtol: a half-precision model rounds differently in blocks).
"""

import argparse
import json
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

import masformer_ref as ref
from ort_inputs import mismatch, reference


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("original")
    ap.add_argument("--span", help="block:B or window:W")
    ap.add_argument("--sink", type=int, default=0)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--rewritten", help="comma-separated layer indices")
    ap.add_argument("--plan", help="a span plan (JSON) instead of --span, "
                    "--sink and --rewritten")
    ap.add_argument("--layers", type=int, required=True,
                    help="how many attention layers the model has")
    ap.add_argument("--input-shape", action="append", default=[])
    ap.add_argument("--seq", type=int, required=True,
                    help="the sequence length of the inputs (a layer whose "
                    "scores' lengths shape inference knows uses those)")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--check")
    ap.add_argument("--atol", type=float, default=1e-4,
                    help="--check's tolerance: atol + rtol * |ref|")
    ap.add_argument("--rtol", type=float, default=1e-4)
    a = ap.parse_args()

    model = onnx.load(a.original)
    # Shapes inferred with the inputs fixed to --input-shape (per-head masks
    # need the number of heads of the scores).
    fixed = onnx.load(a.original)
    dims = {n: [int(x) for x in d.split("x")]
            for n, d in (s.split("=") for s in a.input_shape)}
    for inp in fixed.graph.input:
        if inp.name in dims:
            for d, size in zip(inp.type.tensor_type.shape.dim,
                               dims[inp.name]):
                d.Clear()
                d.dim_value = size
    inferred = onnx.shape_inference.infer_shapes(fixed, data_prop=True)
    values = {v.name: v.type.tensor_type
              for v in list(inferred.graph.value_info)
              + list(inferred.graph.input) + list(inferred.graph.output)}
    def rank(name):
        t = values.get(name)
        return len(t.shape.dim) if t is not None and t.HasField("shape") \
            else None

    softmaxes = [n for n in model.graph.node if n.op_type == "Softmax"
                 and rank(n.input[0]) in (None, 3, 4)]
    if len(softmaxes) != a.layers:
        sys.exit(f"span_reference: {len(softmaxes)} Softmax nodes, expected "
                 f"{a.layers} attention layers")

    def parse(entry):
        if entry["span"] == "full":
            return ("full", 0)
        return (entry["span"], entry["size"], entry.get("sink", 0))

    # layer -> one span, or a list of one span per key/value head.
    spans = {}
    if a.plan:
        for entry in json.load(open(a.plan))["layers"]:
            spans[entry["layer"]] = ([parse(h) for h in entry["heads"]]
                                     if "heads" in entry else parse(entry))
    else:
        kind, size = a.span.split(":")
        for layer in (int(x) for x in a.rewritten.split(",")):
            spans[layer] = (kind, int(size), a.sink)
    kept = total = 0
    for layer, span in sorted(spans.items()):
        node = softmaxes[layer]
        tt = values.get(node.input[0])
        et = tt.elem_type if tt else onnx.TensorProto.FLOAT
        dtype = helper.tensor_dtype_to_np_dtype(et)
        heads = 1
        dims = [d.dim_value for d in tt.shape.dim] if tt else []
        # The layer's own query and key lengths where inference knows them
        # (an encoder-decoder's encoder and decoder differ), else --seq.
        q_seq = kv_seq = a.seq
        if len(dims) >= 2 and dims[-2] > 0 and dims[-1] > 0:
            q_seq, kv_seq = dims[-2], dims[-1]
        if isinstance(span, list):
            if len(dims) != 4 or dims[1] <= 0:
                sys.exit(f"span_reference: layer {layer}: per-head spans "
                         f"need scores [batch, heads, q, kv], got {dims}")
            heads = dims[1]
        allowed = ref.heads_allowed(q_seq, kv_seq, span, a.causal, heads)
        kept += allowed.sum() * (1 if allowed.ndim == 3 else heads)
        total += q_seq * kv_seq * heads
        mask = np.where(allowed, 0.0, -np.inf).astype(dtype)
        name = f"span_reference_mask_{layer}"
        model.graph.initializer.append(numpy_helper.from_array(mask, name))
        masked = f"span_reference_scores_{layer}"
        add = helper.make_node("Add", [node.input[0], name], [masked],
                               name=f"span_reference_add_{layer}")
        model.graph.node.insert(list(model.graph.node).index(node), add)
        node.input[0] = masked
    onnx.save(model, a.output)
    print(f"reference: layers {sorted(spans)} masked, {kept} of {total} "
          f"pairs kept")

    # The rewrite must change the result at this length, or a test that
    # compares with the reference could not catch an ignored span.
    _, _, want = reference(a.output, a.input_shape)
    _, _, orig = reference(a.original, a.input_shape)
    change = max(float(np.abs(w.astype(np.float64) - o).max())
                 for w, o in zip(want, orig))
    if change < 1e-3:
        sys.exit(f"span_reference: the span changes the outputs by only "
                 f"{change:.2g}; choose a span that cuts the sequence")
    if a.check:
        sess, feeds, got = reference(a.check, a.input_shape)
        for out, g, w in zip(sess.get_outputs(), got, want):
            msg = mismatch(out.name, g, w, a.atol, a.rtol, what="export")
            if msg:
                sys.exit(msg)
        print(f"OK: {a.check} matches the reference in onnxruntime")


if __name__ == "__main__":
    main()
