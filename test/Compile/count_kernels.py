"""Counts the large functions of an LLVM IR file, to check that identical
kernels are compiled once.

Every attention layer of one shape lowers to the same kernel, the largest
function of a model's LLVM IR (its OpenMP region,
`@masformer_kernel_N..omp_par`). Compiled once, every layer calls that one
function; compiled per layer, there is one copy per layer. Prints the sizes of the
functions at least two thirds as large as the largest one (in IR lines) and
fails unless there are exactly --expect of them. (Half was the bound until
the kernels' temporaries moved to the stack, 2026-12-06: the attention
kernels lost their calls to malloc and free, the largest of the GPT-2
fixture's has 2090 lines, and its decode glue (1168) and one other kernel
(1136) passed half of that.)

--at-most NAME=LINES instead checks that one function has at most LINES lines
(the glue of a small static model, whose loops LLVM must not unroll).
"""

import argparse
import re
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ll")
    ap.add_argument("--expect", type=int)
    ap.add_argument("--at-most", metavar="NAME=LINES")
    args = ap.parse_args()
    if (args.expect is None) == (args.at_most is None):
        sys.exit("give one of --expect and --at-most")
    sizes = {}
    name = None
    with open(args.ll) as f:
        for line in f:
            m = re.match(r"define [^@]*@([\w.$\"]+)\(", line)
            if m:
                name, sizes[m.group(1)] = m.group(1), 0
            elif line.startswith("}"):
                name = None
            elif name is not None:
                sizes[name] += 1
    if not sizes:
        sys.exit(f"{args.ll}: no function definitions")
    if args.at_most:
        fn, _, limit = args.at_most.rpartition("=")
        if fn not in sizes:
            sys.exit(f"{args.ll}: no function @{fn}")
        print(f"@{fn}: {sizes[fn]} lines")
        if sizes[fn] > int(limit):
            sys.exit(f"@{fn} has {sizes[fn]} lines, more than {limit}")
        return
    largest = max(sizes.values())
    large = sorted((n for n in sizes if 3 * sizes[n] >= 2 * largest),
                   key=lambda n: -sizes[n])
    for n in large:
        print(f"@{n}: {sizes[n]} lines")
    if len(large) != args.expect:
        sys.exit(f"{len(large)} large functions, expected {args.expect}")
    print(f"OK: {len(large)} large functions")


if __name__ == "__main__":
    main()
