#!/usr/bin/env python3
"""Checks that two ONNX models have the same nodes under a name prefix.

    same_nodes.py A.onnx B.onnx --prefix /model/layers.0/self_attn/

Exit status 0 when the nodes of A and B whose names start with the prefix
are the same (name, op type, inputs, outputs, attributes), in the same
order, and there is at least one; 1 otherwise, naming the first difference.
Used to check that the export of a rewrite leaves layers it did not change
as the model wrote them.
"""
import argparse
import sys

import onnx


def nodes(path, prefix):
    g = onnx.load(path, load_external_data=False).graph
    return [n for n in g.node if n.name.startswith(prefix)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--prefix", required=True)
    args = ap.parse_args()
    a, b = nodes(args.a, args.prefix), nodes(args.b, args.prefix)
    if not a:
        sys.exit(f"no node of {args.a} starts with {args.prefix!r}")
    for x, y in zip(a, b):
        if x.SerializeToString() != y.SerializeToString():
            sys.exit(f"node {x.name!r} ({x.op_type}) differs:\n{x}\n{y}")
    if len(a) != len(b):
        sys.exit(f"{len(a)} nodes under {args.prefix!r} in {args.a}, "
                 f"{len(b)} in {args.b}")
    print(f"same {len(a)} nodes under {args.prefix}")


if __name__ == "__main__":
    main()
