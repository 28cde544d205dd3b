#!/usr/bin/env python3
"""The GPU checks: numerics of every compiled attention configuration and
matrix product against torch, then timings against torch's SDPA (flash),
FlexAttention and torch.matmul.

    run_checks.py DIR [--out RESULTS.md] [--skip-numerics] [--skip-timing]
                      [--skip-flex] [--only REGEX]
                      [--seqs 4096 8192 16384] [--flex-seqs 16384] [--reps 20]

FlexAttention is compiled (torch.compile) once per shape, which takes tens
of seconds: by default it runs at the longest length only. Lines go to --out
as they are printed, so a run cut short keeps what it measured.

DIR is what test/gpu/build.sh wrote. Needs a CUDA GPU, torch and numpy; no
MLIR. Exit status 1 when a numerics check fails.
"""
import argparse
import datetime
import json
import math
import os
import re
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from masformer_gpu import Kernels  # noqa: E402
from timing import median_time  # noqa: E402

TORCH_DTYPE = {'bf16': torch.bfloat16, 'f16': torch.float16,
               'f32': torch.float32}
# Relative to max|reference|: the rounding of P to the element type
# dominates for 16-bit types; 3xTF32 keeps f32 close to f32.
TOLERANCE = {'bf16': 2e-2, 'f16': 4e-3, 'f32': 1e-4}


def allowed(span, causal, sq, skv, device):
    """The (query, key) pairs the span (with its sinks: "window 96, sink 8")
    and the triangle allow."""
    i = torch.arange(sq, device=device)[:, None] + (skv - sq)
    j = torch.arange(skv, device=device)[None, :]
    rule = torch.ones(sq, skv, dtype=torch.bool, device=device)
    rule_text, _, sink_text = span.partition(',')
    sink = int(sink_text.split()[1]) if sink_text.strip() else 0
    kind, _, size = rule_text.strip().partition(' ')
    if kind == 'block':
        b = int(size)
        rule = torch.div(i, b, rounding_mode='floor') == torch.div(
            j, b, rounding_mode='floor')
    elif kind == 'window':
        w = int(size)
        rule = (i - j < w) & ((i - j >= 0) if causal else (j - i < w))
    ok = rule | (j < sink)
    if causal:
        ok &= j <= i
    return ok


def reference(q, k, v, span, causal, scale, mask=None):
    """Masked attention in float64; rows with no allowed key are zero."""
    group = q.shape[1] // k.shape[1]
    k = k.double().repeat_interleave(group, dim=1)
    v = v.double().repeat_interleave(group, dim=1)
    s = torch.einsum('bhqd,bhkd->bhqk', q.double(), k) * scale
    if mask is not None:
        s = s + mask.double()
    ok = allowed(span, causal, q.shape[2], k.shape[2], q.device)
    s = s.masked_fill(~ok, float('-inf'))
    p = torch.softmax(s, dim=-1)
    p = torch.nan_to_num(p, nan=0.0)
    return torch.einsum('bhqk,bhkd->bhqd', p, v)


def numerics(kernels, log, only=None):
    """Every configuration (those whose name `only` matches, a regular
    expression, when given) at shapes with ragged ends, grouped heads and
    fewer queries than keys; returns the number of failures."""
    shapes = [  # (B, H, Hkv, Sq, Skv)
        (1, 2, 2, 200, 200), (2, 4, 2, 130, 130), (1, 3, 1, 64, 64),
        (1, 2, 1, 37, 301), (1, 1, 1, 1, 77), (1, 2, 2, 513, 513),
    ]
    failures = 0
    log('| function | shapes (B, H, Hkv, Sq, Skv) | max error / max | '
        'tolerance | result |')
    log('| --- | --- | --- | --- | --- |')
    gen = torch.Generator(device='cuda').manual_seed(0)
    for name, c in kernels.configs.items():
        if only and not re.search(only, name):
            continue
        if c.get('kind') == 'matmul':
            failures += check_matmul(kernels, name, c, gen, log)
            continue
        dt = TORCH_DTYPE[c['dtype']]
        d = c['head_dim']
        worst = 0.0
        for (b, h, hkv, sq, skv) in shapes:
            q = torch.randn(b, h, sq, d, generator=gen, device='cuda').to(dt)
            k = torch.randn(b, hkv, skv, d, generator=gen,
                            device='cuda').to(dt)
            v = torch.randn(b, hkv, skv, d, generator=gen,
                            device='cuda').to(dt)
            mask = None
            mshape = kernels.mask_shape(name, q.shape, k.shape)
            if mshape is not None:
                # A fifth -inf; whole rows at -3.4e38 (Hugging Face's
                # padding) where the mask has a query dimension.
                mask = torch.randn(mshape, generator=gen, device='cuda')
                mask[torch.rand(mshape, generator=gen, device='cuda') <
                     0.2] = float('-inf')
                if 'q' in c['mask']:
                    mask[..., ::7, :] = -3.4e38
            out = kernels.run_torch(name, q, k, v, mask)
            ref = reference(q, k, v, c['span'], c['causal'],
                            1.0 / math.sqrt(d), mask)
            err = (out.double() - ref).abs().max().item()
            scale = max(ref.abs().max().item(), 1e-6)
            worst = max(worst, err / scale)
        ok = worst <= TOLERANCE[c['dtype']]
        failures += not ok
        log('| %s | %d shapes | %.2e | %.0e | %s |' % (
            name, len(shapes), worst, TOLERANCE[c['dtype']],
            'ok' if ok else 'FAIL'))
    return failures


MATMUL_TOLERANCE = {'bf16': 1e-2, 'f16': 2e-3, 'f32': 2e-5}


def check_matmul(kernels, name, c, gen, log):
    """c + a @ b against float64 torch at a few (B, M); 1 on failure."""
    worst = 0.0
    for (b, m) in ((1, 1), (2, 37), (1, 200)):
        a = torch.randn(b, m, c['k'], generator=gen, device='cuda').to(
            TORCH_DTYPE[c['dtype']])
        bshape = (c['n'], c['k']) if c['transposed_b'] else (c['k'], c['n'])
        w = torch.randn(bshape, generator=gen, device='cuda').to(
            TORCH_DTYPE[c['dtype']])
        c0 = torch.randn(b, m, c['n'], generator=gen, device='cuda').to(
            TORCH_DTYPE[c['result']])
        out = kernels.run_matmul_torch(name, a, w, c0)
        wt = w.t() if c['transposed_b'] else w
        ref = c0.double() + a.double() @ wt.double()
        err = (out.double() - ref).abs().max().item()
        worst = max(worst, err / max(ref.abs().max().item(), 1e-6))
    tol = MATMUL_TOLERANCE[c['result']]
    ok = worst <= tol
    log('| %s | 3 shapes (B, M) | %.2e | %.0e | %s |' % (
        name, worst, tol, 'ok' if ok else 'FAIL'))
    return 0 if ok else 1


def matmul_timing(kernels, reps, log):
    """Our products at M = 8192 rows of 768 against torch.matmul (bf16
    in and out, cuBLAS)."""
    log('| product | M x K x N | ours ms | ours TFLOP/s | torch ms | '
        'ours/torch speed |')
    log('| --- | --- | --- | --- | --- | --- |')
    for name, c in kernels.configs.items():
        if c.get('kind') != 'matmul' or c['dtype'] != 'bf16':
            continue
        m, k, n = 8192, c['k'], c['n']
        a = torch.randn(1, m, k, device='cuda', dtype=torch.bfloat16)
        bshape = (n, k) if c['transposed_b'] else (k, n)
        w = torch.randn(bshape, device='cuda', dtype=torch.bfloat16)
        c0 = torch.zeros(1, m, n, device='cuda',
                         dtype=TORCH_DTYPE[c['result']])
        wt = w.t() if c['transposed_b'] else w

        def ours():
            kernels.free(kernels.call_matmul_device(
                name, a.data_ptr(), tuple(a.shape), w.data_ptr(),
                tuple(w.shape), c0.data_ptr(), tuple(c0.shape)))

        def theirs():
            torch.matmul(a, wt)
            torch.cuda.synchronize()
        t, t_torch = median_time(ours, reps), median_time(theirs, reps)
        log('| %s | %d x %d x %d | %.3f | %.0f | %.3f | %.2f |' % (
            name, m, k, n, t * 1e3, 2.0 * m * k * n / t / 1e12,
            t_torch * 1e3, t_torch / t))


def pairs(span, causal, s):
    return int(allowed(span, causal, s, s, 'cuda').sum().item())


def timing(kernels, seqs, flex_seqs, reps, use_flex, log):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F
    flex = None
    if use_flex:
        try:
            from torch.nn.attention.flex_attention import (create_block_mask,
                                                           flex_attention)
            flex = torch.compile(flex_attention, dynamic=False)
        except Exception as e:  # noqa: BLE001 - report and go on
            log('FlexAttention unavailable: %s' % e)
    heads, batch = 16, 1
    log('| S | D | span | ours ms | ours TFLOP/s | SDPA ms | ours/SDPA speed '
        '| Flex ms | ours/Flex speed | block speed-up | ideal | of ideal |')
    log('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- '
        '| --- |')
    for d in (64, 128):
        for s in seqs:
            q, k, v = (torch.randn(batch, heads, s, d, device='cuda',
                                   dtype=torch.bfloat16) for _ in range(3))

            def ours(name):
                def run():
                    out = kernels.call_device(name, q.data_ptr(),
                                              tuple(q.shape), k.data_ptr(),
                                              v.data_ptr(), tuple(k.shape))
                    kernels.free(out)
                return run

            def sdpa():
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    F.scaled_dot_product_attention(q, k, v, is_causal=True)
                torch.cuda.synchronize()

            t_sdpa = median_time(sdpa, reps)
            full_pairs = pairs('full', True, s)
            t_full = None
            for span in ('full', 'block 512', 'block 1024'):
                name = 'bf16_d%d_%s_causal' % (d, span.replace(' ', ''))
                if name not in kernels.configs:
                    continue
                t = median_time(ours(name), reps)
                n = pairs(span, True, s)
                tflops = 4.0 * d * n * batch * heads / t / 1e12
                t_flex = None
                if flex is not None and span != 'full' and s in flex_seqs:
                    try:
                        bs = int(span.split()[1])

                        def mask_mod(b, h, qi, kj):
                            return (kj <= qi) & (qi // bs == kj // bs)
                        bm = create_block_mask(mask_mod, None, None, s, s,
                                               device='cuda')

                        def run_flex():
                            flex(q, k, v, block_mask=bm)
                            torch.cuda.synchronize()
                        t_flex = median_time(run_flex, reps)
                    except Exception as e:  # noqa: BLE001
                        log('FlexAttention failed at S=%d: %s' % (s, e))
                if span == 'full':
                    t_full = t
                    speedup = ideal = None
                else:
                    speedup = t_full / t if t_full else None
                    ideal = full_pairs / n
                fmt = lambda x, f='%.3f': f % x if x is not None else 'n/a'
                log('| %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s '
                    '| %s |' % (
                        s, d, span, fmt(t * 1e3), fmt(tflops, '%.0f'),
                        fmt(t_sdpa * 1e3) if span == 'full' else '',
                        fmt(t_sdpa / t, '%.2f') if span == 'full' else '',
                        fmt(t_flex * 1e3 if t_flex else None),
                        fmt(t_flex / t if t_flex else None, '%.2f'),
                        fmt(speedup, '%.2f'), fmt(ideal, '%.2f'),
                        fmt(speedup / ideal if speedup else None, '%.2f')))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('dir')
    ap.add_argument('--out', default='gpu-results.md')
    ap.add_argument('--skip-timing', action='store_true')
    ap.add_argument('--skip-numerics', action='store_true')
    ap.add_argument('--only', help='check only the functions whose name '
                    'this regular expression matches (under '
                    'compute-sanitizer, say)')
    ap.add_argument('--skip-flex', action='store_true')
    ap.add_argument('--seqs', type=int, nargs='+', default=[4096, 8192, 16384])
    ap.add_argument('--flex-seqs', type=int, nargs='*', default=[16384])
    ap.add_argument('--reps', type=int, default=20)
    args = ap.parse_args()
    if args.only is not None:
        try:
            only = re.compile(args.only)
        except re.error as e:
            ap.error('--only %r: %s' % (args.only, e))
        with open(os.path.join(args.dir, 'kernels.json')) as f:
            names = [c['name'] for c in json.load(f)]
        if not any(only.search(n) for n in names):
            ap.error('--only %r matches no function of %s' % (
                args.only, args.dir))
    out = open(args.out, 'w')

    def log(line):
        print(line, flush=True)
        out.write(line + '\n')
        out.flush()

    kernels = Kernels(args.dir)
    log('# masformer GPU checks, %s' % datetime.date.today().isoformat())
    log('')
    log('GPU: %s; torch %s' % (kernels.device, torch.__version__))
    log('')
    failures = 0
    if not args.skip_numerics:
        log('## Numerics against float64 torch')
        log('')
        failures = numerics(kernels, log, args.only)
    if not args.skip_timing:
        log('')
        log('## Timings: bf16, causal, batch 1, 16 heads; median of %d calls '
            'each followed by a synchronization (ours: the compiled host '
            'function, which synchronizes its stream); TFLOP/s count the '
            'computed (query, key) pairs only' % args.reps)
        log('')
        timing(kernels, args.seqs, args.flex_seqs, args.reps,
               not args.skip_flex, log)
        log('')
        log('## Matrix products: median of %d calls, each followed by a '
            'synchronization' % args.reps)
        log('')
        matmul_timing(kernels, args.reps, log)
    out.close()
    print('wrote %s; %d numerics failure(s)' % (args.out, failures))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
