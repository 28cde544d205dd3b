#!/usr/bin/env python3
"""Writes the MLIR module of the GPU checks: one function per attention
configuration, all sizes dynamic except the head dimension.

    make_kernels.py [--set numerics|timing|all] [--list] > kernels.mlir

Function `<dtype>_d<D>_<span>_<causal|bidir>[_mask<dims>]` computes
masformer.attention(q, k, v [, mask]) with q [B, H, Sq, D], k and v
[B, Hkv, Skv, D], and an additive f32 mask whose dimensions are named by
letters: b (batch), h (heads), q (queries), k (keys) or 1.
With the products (every set but `timing`), functions
`matmul_<dtype>_<result>[_bt](a, b, c) = c + a @ b` with a [B, M, 768], a
weight b [768, 3072] (or [3072, 768], `_bt`) and c [B, M, 3072] run the
kernels of --masformer-contractions-to-gpu.
`--list` prints the configurations as JSON instead (run_checks.py reads it).
"""
import argparse
import json
import sys

NUMERICS = [
    (dtype, d, span, causal)
    for dtype in ('bf16', 'f16', 'f32')
    for span in ('full', 'block 128', 'window 96')
    for causal in (True, False)
    for d in (64,)
] + [
    ('bf16', 128, 'full', True), ('bf16', 128, 'block 128', True),
    ('f16', 128, 'window 96', False), ('f16', 32, 'full', False),
    ('f32', 128, 'block 128', True),
    # Additive masks: padding [B, 1, 1, Skv], and a full [B, H, Sq, Skv].
    ('bf16', 64, 'block 128', True, 'b11k'), ('f16', 128, 'full', False,
                                              'bhqk'),
    ('f32', 64, 'window 96', True, 'qk'),
    # Attention sinks.
    ('bf16', 64, 'window 96, sink 8', True), ('f16', 128, 'block 128, sink 4',
                                              True),
]

TIMING = [('bf16', d, span, True)
          for d in (64, 128)
          for span in ('full', 'block 512', 'block 1024')]


def name(dtype, d, span, causal, mask=None):
    return '%s_d%d_%s_%s%s' % (dtype, d,
                               span.replace(', ', '_').replace(' ', ''),
                               'causal' if causal else 'bidir',
                               '_mask' + mask if mask else '')


def configs(which):
    chosen = {'numerics': NUMERICS, 'timing': TIMING,
              'all': NUMERICS + TIMING}[which]
    seen, out = set(), []
    for c in chosen:
        if name(*c) not in seen:
            seen.add(name(*c))
            out.append(c)
    return out


def function(dtype, d, span, causal, mask=None):
    t = 'tensor<?x?x?x%dx%s>' % (d, dtype)
    margs = mop = ''
    if mask:
        mt = 'tensor<%sxf32>' % 'x'.join('1' if x == '1' else '?'
                                         for x in mask)
        margs, mop = ', %%m: %s' % mt, ' mask(%%m : %s)' % mt
    return ('func.func @%s(%%q: %s, %%k: %s, %%v: %s%s) -> %s '
            'attributes {llvm.emit_c_interface} {\n'
            '  %%o = masformer.attention %%q, %%k, %%v%s {span = '
            '#masformer.span<%s>, causal = %s} : %s, %s, %s -> %s\n'
            '  return %%o : %s\n}\n' % (name(dtype, d, span, causal, mask),
                                        t, t, t, margs, t, mop, span,
                                        str(causal).lower(), t, t, t, t, t))


# Matrix products of --masformer-contractions-to-gpu for check_cubins.py:
# (A and B type, result type, B stored [N, K]).
PRODUCTS = [('bf16', 'f32', False), ('bf16', 'bf16', True),
            ('f16', 'f16', False), ('f32', 'f32', True)]


def product(dtype, result, transposed_b, k=768, n=3072, zero_init=False):
    """A product with a weight B: C[b, m, n] = C0[b, m, n] + A[b, m, k]
    B[k, n], or, with `zero_init`, A B into a zero fill (a MatMul as the
    importer writes it; the function then takes a and b only)."""
    a = 'tensor<?x?x%dx%s>' % (k, dtype)
    bt = 'tensor<%dx%dx%s>' % ((n, k, dtype) if transposed_b
                               else (k, n, dtype))
    c = 'tensor<?x?x%dx%s>' % (n, result)
    body = '^bb0(%%x: %s, %%y: %s, %%acc: %s):\n' % (dtype, dtype, result)
    x, y = '%x', '%y'
    if dtype != result:
        body += ('    %%xe = arith.extf %%x : %s to %s\n'
                 '    %%ye = arith.extf %%y : %s to %s\n' % (
                     dtype, result, dtype, result))
        x, y = '%xe', '%ye'
    body += ('    %%p = arith.mulf %s, %s : %s\n'
             '    %%s = arith.addf %%acc, %%p : %s\n'
             '    linalg.yield %%s : %s' % (x, y, result, result, result))
    head = ('func.func @matmul_%s_%s%s%s(%%a: %s, %%b: %s%s) -> %s '
            'attributes {llvm.emit_c_interface} {\n' % (
                dtype, result, '_bt' if transposed_b else '',
                '_zero' if zero_init else '', a, bt,
                '' if zero_init else ', %%c: %s' % c, c))
    if zero_init:
        head += ('  %%c0 = arith.constant 0 : index\n'
                 '  %%c1 = arith.constant 1 : index\n'
                 '  %%d0 = tensor.dim %%a, %%c0 : %s\n'
                 '  %%d1 = tensor.dim %%a, %%c1 : %s\n'
                 '  %%e = tensor.empty(%%d0, %%d1) : %s\n'
                 '  %%z = arith.constant 0.0 : %s\n'
                 '  %%c = linalg.fill ins(%%z : %s) outs(%%e : %s) -> %s\n'
                 % (a, a, c, result, result, c, c))
    return head + (
        '  %%r = linalg.generic {indexing_maps = ['
        'affine_map<(b, m, n, k) -> (b, m, k)>, '
        'affine_map<(b, m, n, k) -> (%s)>, '
        'affine_map<(b, m, n, k) -> (b, m, n)>], iterator_types = '
        '["parallel", "parallel", "parallel", "reduction"]} '
        'ins(%%a, %%b : %s, %s) outs(%%c : %s) {\n  %s\n  } -> %s\n'
        '  return %%r : %s\n}\n' % ('n, k' if transposed_b else 'k, n', a,
                                    bt, c, body, c, c))


def product_name(dtype, result, transposed_b):
    return 'matmul_%s_%s%s' % (dtype, result, '_bt' if transposed_b else '')


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--set', default='all',
                    choices=('numerics', 'timing', 'all'))
    ap.add_argument('--list', action='store_true')
    args = ap.parse_args()
    cs = configs(args.set)
    products = PRODUCTS if args.set != 'timing' else []
    if args.list:
        json.dump([{'name': name(*c), 'kind': 'attention', 'dtype': c[0],
                    'head_dim': c[1], 'span': c[2], 'causal': c[3],
                    'mask': c[4] if len(c) > 4 else None} for c in cs] +
                  [{'name': product_name(*p), 'kind': 'matmul',
                    'dtype': p[0], 'result': p[1], 'transposed_b': p[2],
                    'k': 768, 'n': 3072} for p in products],
                  sys.stdout, indent=1)
        print()
        return
    sys.stdout.write('\n'.join([function(*c) for c in cs] +
                               [product(*p) for p in products]))


if __name__ == '__main__':
    main()
