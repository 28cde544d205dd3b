#!/usr/bin/env python3
"""Device time of our attention kernels against SDPA's (flash), read with
torch's profiler (CUPTI sees every kernel of the process, ours launched
through the driver API too), apart from the host function's allocation,
launch and synchronization that run_checks.py's wall-clock timings include.

    kernel_times.py DIR [--seqs 16384] [--reps 10]

Prints, per (S, head_dim, span), the mean device time per call of each
kernel name and their sum; bf16, causal, batch 1, 16 heads, as in
run_checks.py's timings.
"""
import argparse
import os
import sys
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from masformer_gpu import Kernels  # noqa: E402


def device_events(fn, reps):
    """{kernel or copy name: (launches, device microseconds)} per call of
    fn, after one call of warm-up."""
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    per = defaultdict(lambda: [0, 0.0])
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            per[e.name][0] += 1
            per[e.name][1] += e.device_time
    return {n: (c / reps, t / reps) for n, (c, t) in per.items()}


def device_times(fn, reps):
    """{kernel name: mean device microseconds per call} of fn."""
    return {n: t for n, (_, t) in device_events(fn, reps).items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('dir')
    ap.add_argument('--seqs', type=int, nargs='+', default=[16384])
    ap.add_argument('--reps', type=int, default=10)
    a = ap.parse_args()
    kernels = Kernels(a.dir)
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    print('| S | D | what | kernel | device us per call |')
    print('| --- | --- | --- | --- | --- |')
    for d in (64, 128):
        for s in a.seqs:
            q, k, v = (torch.randn(1, 16, s, d, device='cuda',
                                   dtype=torch.bfloat16) for _ in range(3))

            def sdpa():
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    F.scaled_dot_product_attention(q, k, v, is_causal=True)
            runs = [('SDPA', sdpa)]
            for span in ('full', 'block512', 'block1024'):
                name = 'bf16_d%d_%s_causal' % (d, span)
                if name not in kernels.configs:
                    continue

                def ours(name=name):
                    kernels.free(kernels.call_device(
                        name, q.data_ptr(), tuple(q.shape), k.data_ptr(),
                        v.data_ptr(), tuple(k.shape)))
                runs.append((name, ours))
            for what, fn in runs:
                times = device_times(fn, a.reps)
                for kname, us in sorted(times.items(), key=lambda x: -x[1]):
                    print('| %d | %d | %s | %s | %.1f |' % (
                        s, d, what, kname[:60], us))
                print('| %d | %d | %s | all | %.1f |' % (
                    s, d, what, sum(times.values())), flush=True)


if __name__ == '__main__':
    sys.exit(main())
