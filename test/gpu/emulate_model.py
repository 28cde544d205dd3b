#!/usr/bin/env python3
"""Runs a whole model compiled for the GPU without a GPU, and compares it
with onnxruntime.

    emulate_model.py MODEL.onnx --shape input_ids=2x16 [--shape ...]
        [--input-shape name=dims ...] [--spans "span=block:4 ..."]
        [--ort-model REWRITTEN.onnx] [--masformer-opt PATH]

compiles MODEL with `masformer-opt --masformer-model-to-nvvm=
"lower-kernels=false"`: the same pipeline as `masformer-compile
--target=cuda` up to the NVVM lowering, so the kernels are still in the
gpu dialect and the host function works on device buffers. Then it runs the
host function as written with emulate.py's interpreter: each device
allocation, copy in and out, free and launch, in order; every kernel block
by block, 128 threads in lockstep (our tensor-core kernels with their
mma.sync, ldmatrix and cp.async semantics, and the one-thread-per-element
kernels of --masformer-loops-to-gpu). Freed device buffers are poisoned
(NaN, or a huge integer), fresh ones start as NaN, and every access is
bounds-checked, so a buffer freed too early, read before it is written or
indexed out of range shows in the result or as an error.

The outputs are compared with onnxruntime on the original model (or on
--ort-model: the ONNX export of the same rewrite) on the inputs of
test/python_utils/ort_inputs.py, within --atol + --rtol * |expected|
(--f16-tol for float16 outputs).
Exit status 1 on a mismatch or an emulation error. What this cannot see:
timing, races that lockstep execution hides, and the NVVM lowering and
ptxas (CI compiles every fixture to a cubin separately).
"""
import argparse
import math
import os
import re
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', 'python_utils'))
import emulate as E  # noqa: E402
from ort_inputs import mismatch, reference  # noqa: E402

L = E.L
INT_TYPES = ('i64', 'i32', 'i16', 'i8', 'index')
POISON_INT = -0x5A5A5A5A5A5A5A5A

# ---------------------------------------------------------------------------
# Element types beyond the kernels' floats.
# ---------------------------------------------------------------------------

_round_to = E.round_to


def round_to(x, ty):
    if ty in INT_TYPES:
        return np.asarray(x).astype(np.int64)
    if ty == 'i1':
        return np.asarray(x).astype(bool)
    return _round_to(x, ty)


def elem_of(ty):
    ty = ty.replace(', #gpu.address_space<workgroup>>', '>')
    ty = re.sub(r', strided<[^>]*>', '', ty)
    m = re.search(r'x?(bf16|f16|f32|f64|i64|i32|i16|i8|i1|index)>?$', ty)
    return m.group(1) if m else ty


E.round_to, E.elem_of = round_to, elem_of


def new_buffer(shape, elem):
    if elem in INT_TYPES:
        return np.full(shape, POISON_INT, np.int64)
    if elem == 'i1':
        return np.zeros(shape, bool)
    return np.full(shape, np.nan, np.float32)


def poison(arr):
    if arr.dtype == np.int64:
        arr[...] = POISON_INT
    elif arr.dtype == np.float32:
        arr[...] = np.nan


# ---------------------------------------------------------------------------
# Kernels: the ops of one-thread-per-element kernels.
# ---------------------------------------------------------------------------

_erf = np.vectorize(math.erf, otypes=[np.float64])


def f32(x):
    return np.asarray(x, dtype=np.float32)


# Integers are held as int64, an iN value as its signed reading (what an
# i8 buffer holds): casts between widths wrap, and the unsigned ones read
# the N bits as unsigned (uint8 is i8 in the IR).
INT_BITS = {'i64': 64, 'i32': 32, 'i16': 16, 'i8': 8, 'index': 64}


def wrap_signed(x, bits):
    x = np.asarray(x).astype(np.int64)
    if bits is None or bits >= 64:
        return x
    half = 1 << (bits - 1)
    return ((x + half) % (1 << bits)) - half


def as_unsigned(x, bits):
    x = np.asarray(x).astype(np.int64)
    return x if bits is None or bits >= 64 else x % (1 << bits)


INT_CASTS = {
    'arith.trunci': lambda x, i, o: wrap_signed(x, o),
    'arith.extsi': lambda x, i, o: np.asarray(x).astype(np.int64),
    'arith.extui': lambda x, i, o: as_unsigned(x, i),
    'arith.uitofp': lambda x, i, o: f32(as_unsigned(x, i)),
    'arith.fptosi': lambda x, i, o: wrap_signed(np.trunc(f32(x)), o),
    'arith.fptoui': lambda x, i, o: wrap_signed(np.trunc(f32(x)), o),
}

UNARY = {
    'arith.negf': lambda x: -f32(x),
    'math.exp': lambda x: np.exp(f32(x)),
    'math.log': lambda x: np.log(f32(x)),
    'math.tanh': lambda x: np.tanh(f32(x)),
    'math.erf': lambda x: _erf(f32(x)).astype(np.float32),
    'math.sqrt': lambda x: np.sqrt(f32(x)),
    'math.rsqrt': lambda x: (1 / np.sqrt(f32(x))).astype(np.float32),
    'math.absf': lambda x: np.abs(f32(x)),
    'math.sin': lambda x: np.sin(f32(x)),
    'math.cos': lambda x: np.cos(f32(x)),
    'math.floor': lambda x: np.floor(f32(x)),
    'math.ceil': lambda x: np.ceil(f32(x)),
    'math.roundeven': lambda x: np.rint(f32(x)),
    'arith.sitofp': lambda x: f32(x),
    'arith.index_castui': lambda x: np.asarray(x).astype(np.int64),
}

BINARY = {
    'math.powf': lambda a, b: np.power(f32(a), f32(b)),
    'arith.minnumf': lambda a, b: np.fmin(f32(a), f32(b)),
    'arith.maximumf': lambda a, b: np.maximum(f32(a), f32(b)),
    'arith.minimumf': lambda a, b: np.minimum(f32(a), f32(b)),
    'arith.remf': lambda a, b: np.fmod(f32(a), f32(b)),
    'arith.divsi': lambda a, b: np.trunc(np.asarray(a) / np.where(
        np.asarray(b) == 0, 1, b)).astype(np.int64),
    'arith.remsi': lambda a, b: np.fmod(np.asarray(a), np.where(
        np.asarray(b) == 0, 1, b)).astype(np.int64),
    'arith.minui': lambda a, b: np.minimum(a, b),
    'arith.maxui': lambda a, b: np.maximum(a, b),
    'arith.xori': lambda a, b: np.asarray(a) ^ np.asarray(b),
    'arith.shli': lambda a, b: np.asarray(a) << np.asarray(b),
    'arith.shrui': lambda a, b: np.asarray(a) >> np.asarray(b),
    'arith.shrsi': lambda a, b: np.asarray(a) >> np.asarray(b),
}


class ModelBlock(E.Block):
    def __init__(self, kernel, args, block_id, late, smem_bytes=None,
                 threads=L):
        super().__init__(kernel, args, block_id, late, smem_bytes)
        self.threads = threads

    def run(self):
        # A launch of fewer threads (one, for a reduction to a scalar): the
        # other lanes stay masked off.
        self.exec_region(self.kernel.regions[0], [], self.lane < self.threads)

    def exec_op(self, op, mask):
        n = op.name
        if n in INT_CASTS:
            bits = [INT_BITS.get(elem_of(t)) for t in (op.in_types[0],
                                                        op.out_types[0])]
            with np.errstate(all='ignore'):
                out = INT_CASTS[n](self.v(op.operands[0]), *bits)
            self.env[op.results[0]] = out
            return
        if n in UNARY or n in BINARY:
            o = [self.v(x) for x in op.operands]
            with np.errstate(all='ignore'):
                out = UNARY[n](o[0]) if n in UNARY else BINARY[n](*o)
            self.env[op.results[0]] = out
            return
        if n == 'arith.constant' and 'dense<' not in (E.attr(op, 'value')
                                                      or ''):
            val = E.scalar_constant(op)
            ty = op.out_types[0] if op.out_types else ''
            if ty in INT_TYPES or ty == 'i1':
                self.env[op.results[0]] = np.full(L, val, np.int64
                                                  if ty != 'i1' else bool)
                return
        if n == 'arith.cmpf':
            p = int(E.attr(op, 'predicate').split(':')[0])
            a, b = (np.asarray(self.v(x)) for x in op.operands)
            table = {0: np.zeros(np.shape(a), bool),
                     1: a == b, 2: a > b, 3: a >= b, 4: a < b, 5: a <= b,
                     6: (a != b) & ~np.isnan(a) & ~np.isnan(b),
                     7: ~np.isnan(a) & ~np.isnan(b),
                     8: (a == b) | np.isnan(a) | np.isnan(b),
                     9: ~(a <= b), 10: ~(a < b), 11: ~(a >= b),
                     12: ~(a > b), 13: a != b,
                     14: np.isnan(a) | np.isnan(b),
                     15: np.ones(np.shape(a), bool)}
            self.env[op.results[0]] = table[p]
            return
        if n == 'scf.for':
            return self.divergent_for(op, mask)
        if n == 'memref.extract_strided_metadata':
            # (A load through a reshaped view, folded to the buffer: only
            # the sizes are read, to delinearize the index.)
            mem = self.v(op.operands[0])
            shape = mem.arr.shape
            strides = [int(np.prod(shape[d + 1:])) for d in range(len(shape))]
            vals = [mem, 0] + list(shape) + strides
            for r, val in zip(op.results, vals):
                self.env[r] = val if isinstance(val, E.Mem) else np.full(L, val)
            return
        if n == 'memref.load' and len(op.operands) == 1:  # rank 0
            mem = self.v(op.operands[0])
            self.env[op.results[0]] = np.full(L, mem.arr[()])
            return
        if n == 'memref.store' and len(op.operands) == 2:  # rank 0
            val, mem = self.v(op.operands[0]), self.v(op.operands[1])
            if mask.any():
                mem.arr[()] = round_to(np.broadcast_to(val, (L,))[mask][-1],
                                       mem.elem)
            return
        super().exec_op(op, mask)

    def divergent_for(self, op, mask):
        """scf.for whose bounds may differ between lanes (a warp-strided
        loop starting at the lane's index): each lane runs its own
        iterations; the body runs under the mask of the lanes still
        iterating, and values carried by finished lanes stay."""
        o = [self.v(x) for x in op.operands]
        lb, ub, step = (np.broadcast_to(np.asarray(x), (L,)).astype(np.int64)
                        for x in o[:3])
        if np.any(step[mask] <= 0):
            raise E.EmulationError('scf.for with a step <= 0')
        iv = lb.copy()
        carried = [np.array(np.broadcast_to(x, (L,) + np.shape(x)[1:]))
                   if np.ndim(x) else np.full(L, x) for x in o[3:]]
        while True:
            active = mask & (iv < ub)
            if not active.any():
                break
            new = self.exec_region(op.regions[0], [iv.copy()] + carried,
                                   active)
            carried = [np.where(E.bcast(active, np.asarray(n_)), n_, c)
                       for n_, c in zip(new, carried)]
            iv = np.where(active, iv + step, iv)
        for r, val in zip(op.results, carried):
            self.env[r] = val


E.Block = ModelBlock

# ---------------------------------------------------------------------------
# Constants: memref.global data, inline or in the resource section.
# ---------------------------------------------------------------------------

_NP = {'f32': np.float32, 'f64': np.float64, 'i64': np.int64,
       'i32': np.int32, 'i16': np.int16, 'i8': np.int8, 'i1': np.bool_,
       'f16': np.float16, 'bf16': np.uint16}


def as_emulated(arr, elem):
    """A constant's data in the emulator's representation."""
    if elem == 'bf16':
        return (arr.astype(np.uint32) << 16).view(np.float32)
    if elem in ('f16', 'f32', 'f64'):
        return arr.astype(np.float32)
    if elem == 'i1':
        return arr.astype(bool)
    return arr.astype(np.int64)


def parse_resources(text):
    res = {}
    m = re.search(r'\{-#\s*dialect_resources:\s*\{\s*builtin:\s*\{(.*?)\}\s*'
                  r'\}\s*#-\}', text, re.S)
    if m:
        for key, hexdata in re.findall(
                r'\s*("[^"]*"|[^\s:]+)\s*:\s*"0x([0-9A-Fa-f]*)"',
                m.group(1)):
            res[key.strip('"')] = bytes.fromhex(hexdata)[4:]
    return res


def parse_globals(text):
    resources = parse_resources(text)
    out = {}
    for line in text.splitlines():
        if '"memref.global"' not in line:
            continue
        name = re.search(r'sym_name = "([^"]+)"', line).group(1)
        ty = re.search(r'type = (memref<[^>]*>)', line).group(1)
        shape = E.shape_of(ty, [])
        elem = elem_of(ty)
        init = re.search(r'initial_value = (dense(?:_resource)?<.*?>) : '
                         r'tensor', line).group(1)
        dt = _NP[elem]
        if init.startswith('dense_resource<'):
            key = init[len('dense_resource<'):-1].strip('"')
            arr = np.frombuffer(resources[key], dtype=dt)
        else:
            body = init[len('dense<'):-1]
            if body.startswith('"0x'):
                raw = bytes.fromhex(body[3:-1])
                arr = np.frombuffer(raw, dtype=dt)
            else:
                vals = re.findall(r'true|false|[-+]?(?:\d+\.?\d*(?:[eE]'
                                  r'[-+]?\d+)?|inf|nan|0x[0-9A-Fa-f]+)',
                                  body)
                conv = []
                for v in vals:
                    if v in ('true', 'false'):
                        conv.append(v == 'true')
                    elif v.startswith('0x'):
                        conv.append(np.uint32(int(v, 16)).view(np.float32)
                                    if elem == 'f32' else int(v, 16))
                    else:
                        conv.append(float(v))
                arr = np.array(conv, dtype=np.float64 if elem != 'i1'
                               else bool)
        size = int(np.prod(shape)) if shape else 1
        if arr.size == 1 and size != 1:
            arr = np.full(size, arr.reshape(-1)[0])
        out[name] = as_emulated(np.asarray(arr).reshape(shape), elem)
    return out


# ---------------------------------------------------------------------------
# The host function.
# ---------------------------------------------------------------------------


class ModelHost(E.Host):
    def __init__(self, module, late, globals_):
        super().__init__(module, late)
        self.globals = globals_
        self.kernels_by_module = index_kernels(module)
        self.launches = 0
        self.kernel_names = set()

    def exec(self, op, o):
        n = op.name
        if n == 'gpu.alloc':
            seg = E.int_array_attr(op, 'operandSegmentSizes')
            dyn = o[seg[0]:seg[0] + seg[1]]
            ty = op.out_types[0]
            arr = new_buffer(E.shape_of(ty, dyn), elem_of(ty))
            return [arr] + [None] * (len(op.results) - 1)
        if n == 'memref.alloc':
            ty = op.out_types[0]
            return [new_buffer(E.shape_of(ty, o), elem_of(ty))]
        if n == 'gpu.memcpy':
            dst, src = o[-2], o[-1]
            if dst.shape != src.shape:
                raise E.EmulationError('gpu.memcpy of %s into %s' % (
                    src.shape, dst.shape))
            np.copyto(dst, src.astype(dst.dtype))
            return [None] * len(op.results)
        if n == 'gpu.dealloc':
            poison(o[-1])
            return [None] * len(op.results)
        if n == 'memref.get_global':
            return [self.globals[re.search(r'name = @(\w+)',
                                           op.attrs).group(1)]]
        if n == 'memref.subview':
            offs = E.int_array_attr(op, 'static_offsets')
            sizes = E.int_array_attr(op, 'static_sizes')
            strides = E.int_array_attr(op, 'static_strides')
            dyn = iter(o[1:])
            dyn_val = -9223372036854775808
            offs = [next(dyn) if x == dyn_val else x for x in offs]
            sizes = [next(dyn) if x == dyn_val else x for x in sizes]
            strides = [next(dyn) if x == dyn_val else x for x in strides]
            view = o[0][tuple(slice(a, a + s * st, st) for a, s, st in
                              zip(offs, sizes, strides))]
            res_shape = E.shape_of(op.out_types[0], [
                s for s, x in zip(sizes, E.int_array_attr(op, 'static_sizes'))
                if x == dyn_val])
            return [view.reshape(res_shape)]
        if n == 'arith.index_cast':
            return [int(o[0])]
        return super().exec(op, o)

    def launch(self, op, o):
        seg = E.int_array_attr(op, 'operandSegmentSizes')
        vals, pos = [], 0
        for size in seg:
            vals.append(o[pos:pos + size])
            pos += size
        grid = [int(v[0]) for v in vals[1:4]]
        block = [int(v[0]) for v in vals[4:7]]
        smem = int(vals[10][0]) if vals[10] else 0
        operands = vals[11]
        module, kname = re.search(r'kernel = @(\w+)::@(\w+)',
                                  op.attrs).groups()
        name = '@%s::@%s' % (module, kname)
        kernel = self.kernels_by_module[(module, kname)]
        known = E.int_array_attr(kernel, 'known_block_size')
        if block[1:] != [1, 1] or not 1 <= block[0] <= L or known != block:
            raise E.EmulationError('%s launched with block %s, known %s; '
                                   'the emulator runs up to %d threads' % (
                                       name, block, known, L))
        first = sum(seg[:11])
        types = op.in_types[first:first + len(operands)]
        args = []
        for i, (x, t) in enumerate(zip(operands, types)):
            if t.startswith('memref<'):
                args.append(E.Mem(x, elem_of(t), 'arg%d' % i))
            else:
                args.append(np.full(L, x))
        self.launches += 1
        self.kernel_names.add(kname)
        for bz in range(grid[2]):
            for by in range(grid[1]):
                for bx in range(grid[0]):
                    ModelBlock(kernel, args, (bx, by, bz), self.late,
                               smem, block[0]).run()
        return None


def index_kernels(module):
    """(gpu.module name, gpu.func name) -> gpu.func."""
    out = {}
    for gm in E.find_ops(module, 'gpu.module'):
        mname = E.sym_name(gm)
        for f in E.find_ops(gm.regions[0], 'gpu.func'):
            out[(mname, E.sym_name(f))] = f
    return out


def to_emulated(x):
    """An input in the emulator's representation."""
    if x.dtype.kind in 'iu':
        return x.astype(np.int64)
    if x.dtype == np.bool_:
        return x.copy()
    return x.astype(np.float32)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('model')
    ap.add_argument('--shape', action='append', default=[],
                    help='name=d0xd1: the size of an input in the run')
    ap.add_argument('--input-shape', action='append', default=[],
                    help='compile with this static shape (masformer-opt '
                         '--input-shape)')
    ap.add_argument('--spans', default='',
                    help='the rewrite: --masformer-rewrite-spans options')
    ap.add_argument('--ort-model',
                    help='run this model in onnxruntime instead of MODEL')
    ap.add_argument('--masformer-opt', default='masformer-opt')
    ap.add_argument('--atol', type=float, default=1e-4)
    ap.add_argument('--rtol', type=float, default=1e-4)
    ap.add_argument('--f16-tol', type=float, nargs=2, default=[0.25, 2e-2],
                    metavar=('ATOL', 'RTOL'),
                    help='tolerance of float16 outputs (rounded to f16, '
                         'where onnxruntime keeps f32 inside MatMul)')
    ap.add_argument('--rel-rms', type=float,
                    help='compare by relative RMS error, |got - want|_2 / '
                         '|want|_2 <= this, instead of --atol/--rtol')
    ap.add_argument('--expect-kernel', action='append', default=[],
                    help='fail unless a launched kernel name contains this')
    ap.add_argument('--timing', default='late', choices=('late', 'eager'))
    ap.add_argument('--precision', default='f32', choices=('f32', 'bf16'),
                    help='bf16: products and attention on bf16 operands, as '
                         'masformer-compile --precision=bf16')
    ap.add_argument('--constants', default='copy',
                    choices=('copy', 'arguments'),
                    help='arguments: the weights are trailing arguments of '
                         '@main, passed in the order of its '
                         'masformer.constants attribute, as masformer_run '
                         'does for masformer-compile --target=cuda')
    ap.add_argument('--lower-only', action='store_true',
                    help='lower and parse the module, and stop there: no '
                         'emulation, no onnxruntime (the sanitizer run, '
                         'whose checks are on masformer-opt)')
    a = ap.parse_args()
    # Lanes outside a branch's mask compute on garbage: no warnings.
    np.seterr(all='ignore')

    cmd = [a.masformer_opt, a.model]
    cmd += ['--input-shape=' + s for s in a.input_shape]
    if a.spans:
        cmd.append('--masformer-rewrite-spans=' + a.spans)
    cmd += ['--masformer-model-to-nvvm=lower-kernels=false precision=%s '
            'constants=%s' % (a.precision, a.constants),
            '--lower-affine', '--canonicalize', '--cse',
            '--mlir-print-op-generic']
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit('emulate_model.py: masformer-opt failed:\n' + r.stderr)
    module = E.parse_module(r.stdout)
    host = ModelHost(module, a.timing == 'late', parse_globals(r.stdout))
    if a.lower_only:
        if 'main' not in host.funcs:
            print('FAIL: no @main in the lowered module')
            return 1
        return E.lowered_only(module)

    sess, feeds, want = reference(a.ort_model or a.model, a.shape)
    main_fn = host.funcs['main']
    names = [i.name for i in sess.get_inputs()]
    # @main's arguments are the graph inputs, in order.
    args = [to_emulated(feeds[n]) for n in names]
    weights = []
    if a.constants == 'arguments':
        listed = re.search(r'masformer\.constants = \[([^\]]*)\]',
                           main_fn.attrs)
        for sym in re.findall(r'@(\w+)', listed.group(1) if listed else ''):
            # A device copy, which every run shares: no kernel may write it.
            weights.append((sym, host.globals[sym].copy()))
            args.append(weights[-1][1])
    if len(args) != len(main_fn.regions[0].args):
        sys.exit('emulate_model.py: @main takes %d arguments, the model has '
                 '%d inputs' % (len(main_fn.regions[0].args), len(args)))
    try:
        outs = host.run('main', args)
    except E.EmulationError as e:
        print('FAIL emulation: %s' % e)
        return 1
    failed = False
    for sym, dev in weights:
        if not np.array_equal(dev, host.globals[sym], equal_nan=True):
            print('FAIL: a kernel wrote the weight @%s' % sym)
            failed = True
    for part in a.expect_kernel:
        if not any(part in k for k in host.kernel_names):
            print('FAIL: no launched kernel is a %s kernel (launched: %s)' % (
                part, ', '.join(sorted(host.kernel_names))))
            failed = True
    for o, got, exp in zip(sess.get_outputs(), outs, want):
        got = np.asarray(got)
        if exp.dtype == np.uint8:
            # An i8 buffer holds signed readings; the output is uint8.
            got = as_unsigned(got, 8)
        atol, rtol = (a.f16_tol if exp.dtype == np.float16
                      else (a.atol, a.rtol))
        if a.rel_rms is not None:
            e64 = exp.astype(np.float64)
            rel = (float(np.linalg.norm(got.astype(np.float64) - e64) /
                         max(np.linalg.norm(e64), 1e-30))
                   if got.shape == exp.shape else float('inf'))
            bad = (None if rel <= a.rel_rms else
                   '%s: relative RMS error %.2e > %.0e' % (o.name, rel,
                                                           a.rel_rms))
            print('%s %s %s: relative RMS error %.2e (tolerance %.0e)' % (
                'FAIL' if bad else 'ok  ', o.name, tuple(exp.shape), rel,
                a.rel_rms))
            failed |= bool(bad)
            continue
        bad = mismatch(o.name, got, exp.astype(np.float64), atol, rtol,
                       what='emulated GPU')
        err = float(np.abs(got.astype(np.float64) -
                           exp.astype(np.float64)).max()) \
            if exp.size and got.shape == exp.shape else float('nan')
        print('%s %s %s: max |error| %.2e (%d launches)' % (
            'FAIL' if bad else 'ok  ', o.name, tuple(exp.shape), err,
            host.launches))
        if bad:
            print(bad)
            failed = True
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
