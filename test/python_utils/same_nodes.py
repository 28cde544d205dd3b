#!/usr/bin/env python3
"""Checks that two ONNX models have the same nodes under a name prefix, or
of an op type, and that the initializers those nodes read are the same.

    same_nodes.py A.onnx B.onnx --prefix /model/layers.0/self_attn/
    same_nodes.py A.onnx B.onnx --op-type MatMulNBits

Exit status 0 when the nodes of A and B whose names start with the prefix
(or whose op type is the one given) are the same (name, op type, inputs,
outputs, attributes), in the same order, and there is at least one, and
every initializer they read holds the same bytes in both; 1 otherwise,
naming the first difference. Used to check that the export of a rewrite
leaves layers it did not change, and quantized weights, as the model wrote
them.
"""
import argparse
import sys

import onnx


def nodes(graph, prefix, op_type):
    if op_type:
        return [n for n in graph.node if n.op_type == op_type]
    return [n for n in graph.node if n.name.startswith(prefix)]


def initializer_bytes(graph, names):
    """The initializers among `names`, each as its array's bytes (external
    data is read from beside its model)."""
    out = {}
    for t in graph.initializer:
        if t.name in names:
            out[t.name] = onnx.numpy_helper.to_array(t).tobytes()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--prefix")
    which.add_argument("--op-type")
    args = ap.parse_args()
    ga, gb = (onnx.load(p).graph for p in (args.a, args.b))
    a = nodes(ga, args.prefix, args.op_type)
    b = nodes(gb, args.prefix, args.op_type)
    what = (f"of type {args.op_type}" if args.op_type
            else f"under {args.prefix!r}")
    if not a:
        sys.exit(f"no node of {args.a} is {what}")
    for x, y in zip(a, b):
        if x.SerializeToString() != y.SerializeToString():
            sys.exit(f"node {x.name!r} ({x.op_type}) differs:\n{x}\n{y}")
    if len(a) != len(b):
        sys.exit(f"{len(a)} nodes {what} in {args.a}, {len(b)} in {args.b}")
    names = {i for n in a for i in n.input}
    wa, wb = initializer_bytes(ga, names), initializer_bytes(gb, names)
    for name, data in wa.items():
        if wb.get(name) != data:
            sys.exit(f"initializer {name!r} differs (or is missing) in "
                     f"{args.b}")
    print(f"same {len(a)} nodes {what}, {len(wa)} initializers")


if __name__ == "__main__":
    main()
