#!/usr/bin/env python3
"""Prints `NAME = VALUE` for attribute NAME of every node of type OP in an
ONNX model, in graph order ("NAME = none" where a node lacks it), for
FileCheck.

    dump_attrs.py MODEL OP NAME
"""
import sys

import onnx
from onnx import helper


def main():
    model, op, name = sys.argv[1:4]
    for node in onnx.load(model).graph.node:
        if node.op_type != op:
            continue
        value = "none"
        for a in node.attribute:
            if a.name == name:
                value = helper.get_attribute_value(a)
        print(f"{name} = {value}")


if __name__ == "__main__":
    main()
