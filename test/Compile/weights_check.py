#!/usr/bin/env python3
"""Helpers of weights.test (docs/compile.md, "Weights").

    weights_check.py external SRC.onnx DST.onnx
        saves SRC with its initializers of 1 kB or more in DST.data
        (onnx's external-data layout, one file, as exporters write it)
    weights_check.py inputs DIR
        writes DIR/input_ids.npy and DIR/attention_mask.npy (2x16)
    weights_check.py same A.npy B.npy
        exit 1 unless the two arrays are bit-identical
    weights_check.py sizes EMBEDDED.so EXTERNAL.so WEIGHTS...
        exit 1 unless the external library is smaller than the embedded
        one by at least 90% of the weights' bytes
    weights_check.py poke FILE OFFSET
        flips the bits of one byte of FILE at OFFSET (negative: from the end)
    weights_check.py offset LIB.so KIND
        prints the offset of the first weight the manifest of LIB.so places
        in its file of KIND (own: the weights file; model: the data file)
"""
import os
import re
import sys

import numpy as np


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "external":
        import onnx
        m = onnx.load(args[0])
        onnx.save(m, args[1], save_as_external_data=True,
                  all_tensors_to_one_file=True,
                  location=os.path.basename(args[1]) + ".data",
                  size_threshold=1024)
    elif cmd == "inputs":
        rng = np.random.default_rng(0)
        np.save(os.path.join(args[0], "input_ids.npy"),
                rng.integers(0, 100, (2, 16)).astype(np.int64))
        mask = np.ones((2, 16), np.int64)
        mask[1, :3] = 0
        np.save(os.path.join(args[0], "attention_mask.npy"), mask)
    elif cmd == "same":
        a, b = np.load(args[0]), np.load(args[1])
        if a.shape != b.shape or a.tobytes() != b.tobytes():
            sys.exit(f"{args[0]} and {args[1]} differ: max |a - b| = "
                     f"{np.abs(a - b).max() if a.shape == b.shape else '?'}")
        print(f"identical: {a.shape} {a.dtype}")
    elif cmd == "sizes":
        embedded, external = os.path.getsize(args[0]), os.path.getsize(args[1])
        weights = sum(os.path.getsize(w) for w in args[2:])
        print(f"embedded {embedded} B, external {external} B, "
              f"weights {weights} B")
        if embedded - external < 0.9 * weights:
            sys.exit("the external library is not smaller by the weights")
    elif cmd == "poke":
        path, offset = args[0], int(args[1])
        with open(path, "r+b") as f:
            f.seek(offset, os.SEEK_END if offset < 0 else os.SEEK_SET)
            at = f.tell()
            b = f.read(1)
            f.seek(at)
            f.write(bytes([b[0] ^ 0xFF]))
    elif cmd == "offset":
        data = open(args[0], "rb").read()
        kinds = re.findall(rb"\nfile\t(\w+)\t", data)
        if args[1].encode() not in kinds:
            sys.exit(f"no file of kind {args[1]} in {args[0]}")
        index = kinds.index(args[1].encode())
        m = re.search(rb"\nweight\t" + str(index).encode() + rb"\t(\d+)\t",
                      data)
        if not m:
            sys.exit(f"no weight in file {index}")
        print(int(m.group(1)))
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
