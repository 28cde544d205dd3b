#!/usr/bin/env python3
"""Every (element type, head_dim, chip) masformer-attention-to-gpu accepts
launches with no more dynamic shared memory than the chip allows one block,
and every one it refuses would have needed more (issue 22). The limits are
NVIDIA's (CUDA C Programming Guide, technical specifications per compute
capability), written here independently of the pass.

  smem_sweep.py MASFORMER_OPT
"""

import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

KIB = 1024
LIMITS = {"sm_80": 163 * KIB, "sm_86": 99 * KIB, "sm_89": 99 * KIB,
          "sm_90": 227 * KIB}
STEPS = {"f16": 16, "bf16": 16, "f32": 8}


def run(opt, chip, elem, d):
    t = f"tensor<1x2x8x{d}x{elem}>"
    src = (f"func.func @f(%q: {t}) -> {t} {{\n"
           f"  %0 = masformer.attention %q, %q, %q "
           f"{{span = #masformer.span<full>}} : {t}, {t}, {t} -> {t}\n"
           f"  return %0 : {t}\n}}\n")
    p = subprocess.run([opt, "-", f"--masformer-attention-to-gpu=chip={chip}"],
                       input=src, capture_output=True, text=True)
    return chip, elem, d, p


def main():
    opt = sys.argv[1]
    jobs = [(chip, elem, d) for chip in LIMITS for elem, step in STEPS.items()
            for d in range(step, 257, step)]
    failures, accepted = [], 0
    with ThreadPoolExecutor(4) as pool:
        for chip, elem, d, p in pool.map(lambda j: run(opt, *j), jobs):
            what = f"{elem} head_dim {d} on {chip}"
            if p.returncode == 0:
                m = re.search(r"dynamic_shared_memory_size %c(\d+)_i32",
                              p.stdout)
                if not m:
                    failures.append(f"{what}: no launch in the output")
                elif int(m.group(1)) > LIMITS[chip]:
                    failures.append(f"{what}: launches with {m.group(1)} "
                                    f"bytes, over {LIMITS[chip]}")
                accepted += 1
                continue
            m = re.search(r"needs (\d+) bytes of shared memory .* chip "
                          + chip + " allows", p.stderr)
            if not m:
                failures.append(f"{what}: refused without the shared-memory "
                                f"reason: {p.stderr.strip()[:300]}")
            elif int(m.group(1)) <= LIMITS[chip]:
                failures.append(f"{what}: refused, but {m.group(1)} bytes "
                                f"fit the {LIMITS[chip]} of {chip}")
    for f in failures:
        print("FAILED:", f)
    print(f"{len(jobs)} configurations, {accepted} accepted within their "
          f"chip's shared memory, {len(jobs) - accepted} refused, "
          f"{len(failures)} wrong")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
