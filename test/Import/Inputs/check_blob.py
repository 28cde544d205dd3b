#!/usr/bin/env python3
"""Checks that a dense_resource blob of an MLIR module holds exactly the
array of a .npy file (same bytes: element type, order and every bit).

    check_blob.py MODULE.mlir KEY EXPECTED.npy

KEY is the resource's name in the module's `dialect_resources` (builtin).
Prints "KEY: N bytes equal" or exits 1 naming the first element that
differs.
"""
import re
import sys

import numpy as np


def main():
    path, key, expected = sys.argv[1:4]
    text = open(path).read()
    m = re.search(r"^\s*" + re.escape(key) + r': "0x([0-9A-Fa-f]*)"', text,
                  re.MULTILINE)
    if not m:
        sys.exit(f"check_blob.py: no resource {key!r} in {path}")
    # The blob's first 4 bytes are its alignment.
    data = bytes.fromhex(m.group(1))[4:]
    want = np.load(expected)
    got = np.frombuffer(data, dtype=want.dtype)
    if got.size != want.size:
        sys.exit(f"{key}: {got.size} elements, expected {want.size}")
    as_bits = f"u{want.itemsize}"
    diff = np.flatnonzero(got.view(as_bits)
                          != want.reshape(-1).view(as_bits))
    if diff.size:
        i = diff[0]
        sys.exit(f"{key}: {diff.size} elements differ, first at flat index "
                 f"{i}: {got.reshape(-1)[i]!r}, expected "
                 f"{want.reshape(-1)[i]!r}")
    print(f"{key}: {len(data)} bytes equal")


if __name__ == "__main__":
    main()
