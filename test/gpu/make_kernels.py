#!/usr/bin/env python3
"""Writes the MLIR module of the GPU checks: one function per attention
configuration, all sizes dynamic except the head dimension.

    make_kernels.py [--set numerics|timing|all] [--list] > kernels.mlir

Function `<dtype>_d<D>_<span>_<causal|bidir>` computes
masformer.attention(q, k, v) with q [B, H, Sq, D], k and v [B, Hkv, Skv, D].
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
]

TIMING = [('bf16', d, span, True)
          for d in (64, 128)
          for span in ('full', 'block 512', 'block 1024')]


def name(dtype, d, span, causal):
    return '%s_d%d_%s_%s' % (dtype, d, span.replace(' ', ''),
                             'causal' if causal else 'bidir')


def configs(which):
    chosen = {'numerics': NUMERICS, 'timing': TIMING,
              'all': NUMERICS + TIMING}[which]
    seen, out = set(), []
    for c in chosen:
        if name(*c) not in seen:
            seen.add(name(*c))
            out.append(c)
    return out


def function(dtype, d, span, causal):
    t = 'tensor<?x?x?x%dx%s>' % (d, dtype)
    return ('func.func @%s(%%q: %s, %%k: %s, %%v: %s) -> %s '
            'attributes {llvm.emit_c_interface} {\n'
            '  %%o = masformer.attention %%q, %%k, %%v {span = '
            '#masformer.span<%s>, causal = %s} : %s, %s, %s -> %s\n'
            '  return %%o : %s\n}\n' % (name(dtype, d, span, causal), t, t, t,
                                        t, span, str(causal).lower(), t, t, t,
                                        t, t))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--set', default='all',
                    choices=('numerics', 'timing', 'all'))
    ap.add_argument('--list', action='store_true')
    args = ap.parse_args()
    cs = configs(args.set)
    if args.list:
        json.dump([{'name': name(*c), 'dtype': c[0], 'head_dim': c[1],
                    'span': c[2], 'causal': c[3]} for c in cs],
                  sys.stdout, indent=1)
        print()
        return
    sys.stdout.write('\n'.join(function(*c) for c in cs))


if __name__ == '__main__':
    main()
