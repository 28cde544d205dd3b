#!/usr/bin/env python3
"""What one core's AMX does with bf16 on this machine: the ceiling to read
the bf16 products' GFLOP/s against (bench/matmul_cpu.py --precision bf16).

Compiles (clang-22) and runs a C loop of AMX tile instructions in the 2 x 2
blocking our products use (four 16 x 16 f32 accumulators, two A and two B
tiles of 16 x 32 bf16, one tile load per tdpbf16ps), its operands streamed
from regions of growing size: from L1, from L2, from beyond. With
--drain N, the accumulators are also stored and zeroed every N steps, as a
product stores each block of results when its run of k ends.

    python3 bench/amx_peak.py [--regions 16 256 1024 4096] [--drain 24]

Prints GFLOP/s a core (one thread) for each region, with the machine. Exits
with a message and status 1 where the CPU has no AMX-BF16.
"""

import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import machine  # noqa: E402

SOURCE = r"""
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct config {
  uint8_t palette, start;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  long kib = atol(argv[1]), drain = atol(argv[2]), steps = atol(argv[3]);
  /* Linux hands out the tile registers on request (ARCH_REQ_XCOMP_PERM). */
  if (syscall(SYS_arch_prctl, 0x1023, 18)) {
    perror("arch_prctl(ARCH_REQ_XCOMP_PERM)");
    return 1;
  }
  struct config c;
  memset(&c, 0, sizeof c);
  c.palette = 1;
  for (int i = 0; i < 8; ++i) {
    c.colsb[i] = 64;
    c.rows[i] = 16;
  }
  _tile_loadconfig(&c);
  /* Four streams (two of A, two of B), each kib / 4 KiB of 1 KiB tiles. */
  long tiles = kib / 4 > 0 ? kib / 4 : 1;
  uint16_t *x = aligned_alloc(4096, (size_t)tiles * 1024 * 4);
  if (!x) {
    fprintf(stderr, "cannot allocate %ld KiB\n", tiles * 4);
    return 1;
  }
  /* Random bf16 in [-0.5, 0.5): AMX's rate depends on the data (zeros run
     about 30% faster here), so the operands look like a model's. */
  srand(1);
  for (long i = 0; i < tiles * 512 * 4; ++i) {
    float f = (float)(rand() & 0xffff) / 65536.0f - 0.5f;
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    x[i] = (uint16_t)(bits >> 16);
  }
  static float sink[4 * 256];
  long stride = tiles * 512;
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  double t0 = now();
  for (long i = 0; i < steps; ++i) {
    long o = (i % tiles) * 512;
    _tile_loadd(4, x + o, 64);
    _tile_loadd(5, x + stride + o, 64);
    _tile_loadd(6, x + 2 * stride + o, 64);
    _tile_loadd(7, x + 3 * stride + o, 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
    if (drain && i % drain == drain - 1) {
      _tile_stored(0, sink, 64);
      _tile_stored(1, sink + 256, 64);
      _tile_stored(2, sink + 512, 64);
      _tile_stored(3, sink + 768, 64);
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
    }
  }
  double t = now() - t0;
  _tile_stored(0, sink, 64);
  _tile_release();
  printf("%.1f %g\n", 4.0 * steps * 16 * 16 * 32 * 2 / t / 1e9, sink[0]);
  return 0;
}
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--regions", type=int, nargs="+",
                    default=[16, 64, 256, 1024, 4096],
                    help="KiB of operands streamed (four streams in all)")
    ap.add_argument("--drain", type=int, default=0,
                    help="store and zero the accumulators every N steps "
                         "(0: never)")
    ap.add_argument("--steps", type=int, default=20_000_000)
    ap.add_argument("--rounds", type=int, default=3,
                    help="runs per region; the best is printed")
    a = ap.parse_args()
    if min(a.regions) <= 0 or a.drain < 0 or a.steps <= 0 or a.rounds <= 0:
        ap.error("--regions, --steps and --rounds must be positive, "
                 "--drain 0 or more")
    print(machine.describe())
    if "amx_bf16" not in machine.isa_extensions().split():
        sys.exit("amx_peak: this CPU has no AMX-BF16 (no amx_bf16 in "
                 "/proc/cpuinfo)")
    with tempfile.TemporaryDirectory(prefix="masformer-amx-") as work:
        src = os.path.join(work, "amx.c")
        exe = os.path.join(work, "amx")
        with open(src, "w") as f:
            f.write(SOURCE)
        r = subprocess.run(["clang-22", "-O2", "-march=native", "-mamx-tile", "-mamx-bf16",
                            src, "-o", exe], capture_output=True, text=True)
        if r.returncode:
            sys.exit(f"amx_peak: compiling the loop failed:\n{r.stderr}")
        print(f"\nAMX tdpbf16ps, 2 x 2 blocks, one core, accumulators stored "
              f"{f'every {a.drain} steps' if a.drain else 'at the end'} (best of {a.rounds}):\n")
        print("| operands (KiB) | GFLOP/s |")
        print("| --- | --- |")
        for kib in a.regions:
            best = 0.0
            for _ in range(a.rounds):
                run = subprocess.run([exe, str(kib), str(a.drain),
                                      str(a.steps)], capture_output=True,
                                     text=True)
                if run.returncode:
                    sys.exit(f"amx_peak: {run.stderr.strip()}")
                best = max(best, float(run.stdout.split()[0]))
            print(f"| {kib} | {best:.0f} |")


if __name__ == "__main__":
    main()
