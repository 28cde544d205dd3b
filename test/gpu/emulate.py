#!/usr/bin/env python3
"""Runs the GPU kernels of --masformer-attention-to-gpu and
--masformer-contractions-to-gpu without a GPU.

An interpreter of their IR (generic MLIR form, after the pass and
canonicalization). The host function runs as written: its reshapes, device
allocations and launches, with the grid, block and shared-memory size it
computes (a kernel's shared-memory views must fit in what the launch gives).
Each launch runs block by block; a block's 128 threads execute in lockstep
with numpy, with the PTX ISA's semantics for
the warp-level operations: ldmatrix (.x4, .trans), mma.sync (m16n8k16 on
f16/bf16, m16n8k8 on tf32, whose low 13 mantissa bits are ignored), cp.async
with zero fill and commit/wait groups, and shfl.bfly. Divergent branches are
executed under lane masks; loads and stores are bounds-checked; shared memory
starts as NaN, so reading anything no copy wrote shows in the result.

cp.async copies land either at once ("eager") or only at the wait that
covers them ("late"): a kernel must be right both ways. Shared memory is
checked as the hardware promises it (SharedMemory below): a byte one warp
writes and another touches with no barrier between is a race, a cp.async
destination touched before its wait is a race, views are typed windows on
one byte array per block (overlapping ones are a layout error), and
cp.async/ldmatrix addresses must be 16-byte aligned.
--mutate runs the kernels with a known bug, which must fail.

    emulate.py --dtype bf16 --head-dim 64 --span "block 128" --causal \\
        --shape 1,2,2,130,130 [--shape ...] [--timing late|eager|both]
    emulate.py --gemm --dtype f16 [--result f32] [--transposed-b] \\
        [--weights] --shape B,M,N,K [--shape ...]

compiles the attention configuration (or, with --gemm, the matrix product
of --masformer-contractions-to-gpu: C = Cinit + A B, B stored [N, K] with
--transposed-b, without a batch with --weights) with masformer-opt (on
PATH), runs it at each shape (B,H,Hkv,Sq,Skv; B,M,N,K) on random inputs, and compares with a float64
reference; exit status 1 on a mismatch. What this cannot see: timing,
scheduling, or a misreading of the ISA shared by kernel and emulator; those
the GPU checks (run_checks.sh) cover.
"""
import argparse
import functools
import json
import os
import re
import struct
import subprocess
import sys

import numpy as np

# The span definition, written once for every test (docs/spans.md).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', 'python_utils'))
import masformer_ref  # noqa: E402

L = 128  # threads per block
BLOCK_ROWS = 64  # query rows of an attention block (4 warps x 16)
KEY_TILE = 64    # keys of an attention key tile

# A bug to run the kernels with (--mutate), to show that the emulator
# catches it: each is a kernel mistake the emulator executes as written.
#   no-barrier       the kernel's gpu.barrier ops removed;
#   swap-early       the in-loop cp.async prefetch into the buffer being
#                    computed on (double buffering swapped one step early);
#   overlap-views    the second shared-memory view placed 16 bytes early,
#                    over the end of the first (a layout bug);
#   misaligned-copy  cp.async destinations one 4-byte word off alignment;
#   grid-short       the launch one block short in x;
#   extra-tile       the attention kernel's key-tile loop one tile longer.
MUTATIONS = ('no-barrier', 'swap-early', 'overlap-views', 'misaligned-copy',
             'grid-short', 'extra-tile')
MUTATION = None

# Dynamic shared memory one block may use, by chip (CUDA C Programming
# Guide, technical specifications per compute capability): every launch is
# checked against the --chip's.
CHIP_SHARED_MEMORY = {'sm_80': 163 * 1024, 'sm_86': 99 * 1024,
                      'sm_89': 99 * 1024, 'sm_90': 227 * 1024}
CHIP = 'sm_90'

# ---------------------------------------------------------------------------
# Parsing the generic form.
# ---------------------------------------------------------------------------

_OP = re.compile(r'^\s*(?:(%[\w]+)(?::(\d+))?\s*=\s*)?"([\w.]+)"\((.*?)\)(.*)$')
_BLOCK = re.compile(r'^\s*\^bb\d+\((.*)\):\s*$')


class Op:
    def __init__(self, name, results, operands, attrs):
        self.name, self.results, self.operands = name, results, operands
        self.attrs = attrs
        self.regions = []
        self.in_types = self.out_types = []


class Region:
    def __init__(self):
        self.args, self.ops = [], []


def split_top(s):
    """Splits at commas outside <>, (), [], {}."""
    out, depth, cur = [], 0, ''
    for ch in s:
        if ch in '<([{':
            depth += 1
        elif ch in '>)]}':
            depth -= 1
        if ch == ',' and depth == 0:
            out.append(cur.strip())
            cur = ''
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def parse_types(sig):
    """' : (a, b) -> c' -> ([a, b], [c])."""
    sig = sig.strip()
    if not sig.startswith(':'):
        return [], []
    sig = sig[1:].strip()
    # The top-level '->'.
    depth, arrow = 0, -1
    for i, ch in enumerate(sig):
        if ch in '<([{':
            depth += 1
        elif ch in '>)]}' and not (ch == '>' and sig[i - 1] == '-'):
            depth -= 1
        elif ch == '-' and sig[i + 1:i + 2] == '>' and depth == 0:
            arrow = i
            break
    ins, outs = sig[:arrow].strip(), sig[arrow + 2:].strip()
    ins = split_top(ins[1:-1]) if ins.startswith('(') else [ins]
    outs = split_top(outs[1:-1]) if outs.startswith('(') else [outs]
    return ins, outs


def parse(lines, i, region):
    """Parses ops into `region` from line i until the region's end; returns
    the index of the closing line."""
    while i < len(lines):
        line = lines[i]
        s = line.strip()
        if s.startswith('})') or s == '}, {':
            return i
        m = _BLOCK.match(line)
        if m:
            for a in split_top(m.group(1)):
                region.args.append(a.split(':')[0].strip())
            i += 1
            continue
        m = _OP.match(line)
        if not m:
            i += 1
            continue
        res, count, name, operands, rest = m.groups()
        results = []
        if res:
            results = ([res] if not count else
                       ['%s#%d' % (res, k) for k in range(int(count))])
        ops = [o.strip() for o in operands.split(',') if o.strip()]
        op = Op(name, results, ops, rest)
        if rest.rstrip().endswith('({'):
            while True:
                r = Region()
                i = parse(lines, i + 1, r)
                op.regions.append(r)
                if lines[i].strip() == '}, {':
                    continue
                # Attributes printed after the regions (gpu.func's).
                closing = lines[i].strip()[2:]
                op.attrs += ' ' + closing
                op.in_types, op.out_types = parse_types(
                    re.sub(r'^\s*\{.*?\}\s*(?=:)', '', closing))
                break
        else:
            op.in_types, op.out_types = parse_types(
                re.sub(r'^\s*(<\{.*?\}>)?\s*(\{.*?\})?', '', rest))
        region.ops.append(op)
        i += 1
    return i


def attr(op, key):
    m = re.search(r'\b' + key + r' = ([^,}>]+(?:<[^>]*>)?)', op.attrs)
    return m.group(1).strip() if m else None


def int_array_attr(op, key):
    m = re.search(key + r' = array<i\d+: ([-\d, ]+)>', op.attrs)
    return [int(x) for x in m.group(1).split(',')]

# ---------------------------------------------------------------------------
# Values.
# ---------------------------------------------------------------------------


def round_to(x, ty):
    x = np.asarray(x, dtype=np.float32)
    if ty == 'f16':
        return x.astype(np.float16).astype(np.float32)
    if ty == 'bf16':
        u = x.view(np.uint32).astype(np.uint64)
        u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
        return (u & 0xFFFFFFFF).astype(np.uint32).view(np.float32)
    return x


def elem_of(ty):
    m = re.search(r'x?(bf16|f16|f32|i32|i1|index)>?$', ty.replace(
        ', #gpu.address_space<workgroup>>', '>'))
    return m.group(1) if m else ty


class Mem:
    def __init__(self, arr, elem, name, base=None):
        self.arr, self.elem, self.name = arr, elem, name
        # Shared memory views: the view's first byte in the block's shared
        # memory (None for global memory).
        self.base = base

    @property
    def esize(self):
        return 4 if self.elem in ('f32', 'i32') else 2


class SharedWindow:
    """A typed view of shared memory: indexing reads and writes the block's
    bytes (SharedMemory.data), little-endian, so that two views of the same
    bytes see each other's writes as the hardware does. Values are float32
    (or integers for i32) exactly as the element type holds them."""

    def __init__(self, data, base, shape, elem):
        self.data, self.base, self.shape, self.elem = data, base, tuple(
            shape), elem
        self.esize = 4 if elem in ('f32', 'i32') else 2

    def _bytes(self, idx):
        ix = np.broadcast_arrays(*[np.asarray(i, dtype=np.int64)
                                   for i in idx])
        lin = np.ravel_multi_index(ix, self.shape)
        first = self.base + lin * self.esize
        return first[..., None] + np.arange(self.esize)

    def __getitem__(self, idx):
        b = self.data[self._bytes(idx)].astype(np.uint32)
        word = b[..., 0] | (b[..., 1] << 8)
        if self.esize == 4:
            word = word | (b[..., 2] << 16) | (b[..., 3] << 24)
            return (word.view(np.float32) if self.elem == 'f32' else
                    word.view(np.int32).astype(np.int64))
        if self.elem == 'f16':
            return word.astype(np.uint16).view(np.float16).astype(np.float32)
        return (word << 16).view(np.float32)  # bf16

    def __setitem__(self, idx, vals):
        vals = np.asarray(vals)
        if self.elem == 'f32':
            word = vals.astype(np.float32).view(np.uint32)
        elif self.elem == 'i32':
            word = vals.astype(np.int64).astype(np.uint32)
        elif self.elem == 'f16':
            word = vals.astype(np.float16).view(np.uint16).astype(np.uint32)
        else:  # bf16: values are already rounded to it
            word = vals.astype(np.float32).view(np.uint32) >> 16
        b = self._bytes(idx)
        word = np.broadcast_to(word, b.shape[:-1])
        for k in range(self.esize):
            self.data[b[..., k]] = (word >> (8 * k)) & 0xFF


class SharedMemory:
    """What the hardware promises about one block's shared memory, checked
    on every access: the byte-addressed state behind the typed views.

    Warps are not in lockstep on the GPU: between two barriers, a byte one
    warp writes and another reads (or writes) is a race whatever order the
    emulator happens to run them in. So each byte remembers the barrier
    epoch and warp of its last write, and the epoch and warps of its reads
    since; a cp.async destination is "in flight" from the copy's issue to
    the wait that completes it (any access to it then is a race), and its
    bytes count as written by the issuing warp at the wait. Views are typed
    windows on the bytes: two views that overlap without being the same
    window are a layout error. cp.async and ldmatrix addresses must be
    aligned to 16 bytes (the copy's size for smaller copies).
    """

    def __init__(self, nbytes):
        self.nbytes = nbytes
        # The bytes themselves: all ones, a NaN in every float type, so that
        # reading what no copy wrote shows in the result.
        self.data = np.full(nbytes, 0xFF, np.uint8)
        self.w_epoch = np.full(nbytes, -1, np.int64)
        self.w_warp = np.full(nbytes, -1, np.int64)
        self.r_epoch = np.full(nbytes, -1, np.int64)
        self.r_mask = np.zeros(nbytes, np.int64)
        self.pending = np.zeros(nbytes, bool)
        self.epoch = 0
        self.windows = {}   # base -> (end, type)
        self.barriers = 0

    def add_view(self, base, nbytes, ty):
        end = base + nbytes
        if base in self.windows:
            if self.windows[base] != (end, ty):
                raise EmulationError(
                    'shared memory: two views at byte %d of different types '
                    'or sizes' % base)
            return
        for b, (e, _) in self.windows.items():
            if base < e and b < end:
                raise EmulationError(
                    'shared memory: the view of bytes [%d, %d) overlaps the '
                    'view of bytes [%d, %d)' % (base, end, b, e))
        self.windows[base] = (end, ty)

    def addresses(self, mem, idx, n, mask):
        """Per active lane: the bytes an access of n elements (0: one
        scalar) at `idx` touches, and the lane's warp."""
        lanes = np.nonzero(mask)[0]
        ix = [np.broadcast_to(np.asarray(x), (L,))[lanes] for x in idx]
        lin = np.ravel_multi_index(ix, mem.arr.shape) if ix else \
            np.zeros(len(lanes), np.int64)
        width = max(n, 1) * mem.esize
        first = mem.base + lin * mem.esize
        return first, first[:, None] + np.arange(width)[None, :], \
            lanes // 32

    def check_align(self, first, align, what):
        bad = first % align != 0
        if bad.any():
            raise EmulationError('%s: shared address %d is not aligned to %d '
                                 'bytes' % (what, first[bad][0], align))

    def _race(self, what, kind, byte, warp, other):
        raise EmulationError(
            'shared memory race (%s) in %s: warp %d and warp %d touch byte '
            '%d with no barrier between them' % (kind, what, warp, other,
                                                 byte))

    def read(self, mem, idx, n, mask, what):
        first, B, w = self.addresses(mem, idx, n, mask)
        if B.size == 0:
            return first
        wb = np.broadcast_to(w[:, None], B.shape)
        inflight = self.pending[B]
        if inflight.any():
            raise EmulationError(
                'shared memory race in %s: warp %d reads byte %d while a '
                'cp.async to it is in flight' % (what, wb[inflight][0],
                                                  B[inflight][0]))
        raw = (self.w_epoch[B] == self.epoch) & (self.w_warp[B] != wb)
        if raw.any():
            self._race(what, 'read after write', B[raw][0], wb[raw][0],
                       self.w_warp[B][raw][0])
        flat, fw = B.ravel(), wb.ravel()
        stale = self.r_epoch[flat] != self.epoch
        self.r_mask[flat[stale]] = 0
        self.r_epoch[flat] = self.epoch
        np.bitwise_or.at(self.r_mask, flat, np.left_shift(1, fw))
        return first

    def write(self, mem, idx, n, mask, what, asynchronous=False):
        first, B, w = self.addresses(mem, idx, n, mask)
        if B.size == 0:
            return first, B, w
        wb = np.broadcast_to(w[:, None], B.shape)
        inflight = self.pending[B]
        if inflight.any():
            raise EmulationError(
                'shared memory race in %s: warp %d writes byte %d while a '
                'cp.async to it is in flight' % (what, wb[inflight][0],
                                                  B[inflight][0]))
        others = self.r_mask[B] & ~np.left_shift(1, wb)
        war = (self.r_epoch[B] == self.epoch) & (others != 0)
        if war.any():
            o = others[war][0]
            self._race(what, 'write after read', B[war][0], wb[war][0],
                       int(o & -o).bit_length() - 1)
        waw = (self.w_epoch[B] == self.epoch) & (self.w_warp[B] != wb)
        if waw.any():
            self._race(what, 'write after write', B[waw][0], wb[waw][0],
                       self.w_warp[B][waw][0])
        # Two warps writing one byte in the same access.
        flat, fw = B.ravel(), wb.ravel()
        order = np.lexsort((fw, flat))
        fs, ws = flat[order], fw[order]
        clash = (fs[1:] == fs[:-1]) & (ws[1:] != ws[:-1])
        if clash.any():
            self._race(what, 'write after write', fs[1:][clash][0],
                       ws[1:][clash][0], ws[:-1][clash][0])
        if asynchronous:
            self.pending[flat] = True
        else:
            self.w_epoch[flat] = self.epoch
            self.w_warp[flat] = fw
        return first, B, w

    def land(self, B, w):
        """A cp.async completes: its bytes are the issuing warp's write."""
        wb = np.broadcast_to(w[:, None], B.shape).ravel()
        flat = B.ravel()
        self.pending[flat] = False
        self.w_epoch[flat] = self.epoch
        self.w_warp[flat] = wb

    def barrier(self, mask):
        if not mask.all():
            raise EmulationError(
                'gpu.barrier reached by %d of the block\'s %d threads'
                % (int(mask.sum()), L))
        self.epoch += 1
        self.barriers += 1


class EmulationError(Exception):
    pass


def bcast(c, x):
    return c.reshape(c.shape + (1,) * (np.ndim(x) - 1))


class Block:
    """One thread block."""

    def __init__(self, kernel, args, block_id, late, smem_bytes=None):
        self.kernel, self.block_id, self.late = kernel, block_id, late
        # Random timing: `late` is a seed; each copy lands at a random op
        # between its issue and the wait that covers it.
        self.rng = (np.random.default_rng([late, *block_id])
                    if not isinstance(late, bool) else None)
        self.smem_bytes = smem_bytes
        self.env = {}
        for name, val in zip(kernel.regions[0].args, args):
            self.env[name] = val
        self.views = {}
        # Per global memory read by cp.async: the rows (dimension -2) its
        # live copies read, to count the tiles a block loads.
        self.copied_rows = {}
        self.smem = SharedMemory(smem_bytes if smem_bytes is not None
                                 else 256 * 1024)
        self.pending = []   # committed groups of copies
        self.open = []      # copies since the last commit
        self.lane = np.arange(L)

    def v(self, name):
        return self.env[name]

    def uniform(self, x, mask, what):
        x = np.asarray(x)
        vals = x[mask] if x.shape == (L,) else np.array([x])
        if len(vals) and not np.all(vals == vals[0]):
            raise EmulationError('%s is not uniform across the block' % what)
        return vals[0] if len(vals) else None

    def check_bounds(self, mem, idx, n, mask, what):
        arr = mem.arr
        for d, ix in enumerate(idx):
            ix = np.broadcast_to(ix, (L,))[mask]
            hi = arr.shape[d] - (n - 1 if d == len(idx) - 1 else 0)
            if len(ix) and (ix.min() < 0 or ix.max() >= hi):
                raise EmulationError(
                    '%s: index %d out of bounds [0, %d) of %s %s' % (
                        what, d, hi, mem.name, arr.shape))

    def load(self, mem, idx, n, mask, what):
        self.check_bounds(mem, idx, n, mask, what)
        if mem.base is not None:
            first = self.smem.read(mem, idx, n, mask, what)
            if what == 'ldmatrix':
                self.smem.check_align(first, 16, what)
        idx = [np.where(mask, np.broadcast_to(ix, (L,)), 0) for ix in idx]
        if n == 0:
            return mem.arr[tuple(idx)]
        cols = [mem.arr[tuple(idx[:-1] + [idx[-1] + e])] for e in range(n)]
        return np.stack(cols, axis=1)

    def run(self):
        self.exec_region(self.kernel.regions[0], [], np.ones(L, bool))

    def exec_region(self, region, args, mask):
        for name, val in zip(region.args, args):
            self.env[name] = val
        for op in region.ops:
            if op.name in ('scf.yield', 'gpu.return'):
                return [self.v(o) for o in op.operands]
            self.exec_op(op, mask)
            if self.rng is not None:
                self.land_some()
        return []

    def land_some(self):
        """Random timing: now and then, one in-flight copy (committed or
        not) lands, in no particular order."""
        groups = [g for g in self.pending + [self.open] if g]
        if not groups or self.rng.random() > 0.05:
            return
        g = groups[self.rng.integers(len(groups))]
        self.apply_copies([g.pop(self.rng.integers(len(g)))])

    def apply_copies(self, copies):
        for (dst, didx, vals, mask, *landing) in copies:
            if landing and landing[0] is not None:
                self.smem.land(*landing[0])
            for e in range(vals.shape[1]):
                di = tuple(np.asarray(x)[mask] for x in didx[:-1]) + (
                    np.asarray(didx[-1])[mask] + e,)
                dst.arr[di] = vals[mask, e]

    def exec_op(self, op, mask):
        n, o = op.name, [self.v(x) for x in op.operands]
        out = None
        res_ty = op.out_types[0] if op.out_types else ''
        if n == 'arith.constant':
            val = attr(op, 'value')
            m = re.match(r'(dense<)?([^:>]+)>? : (.*)', val)
            lit = m.group(2).strip()
            if lit.startswith('0x'):
                out = np.float32(struct.unpack(
                    '<f', struct.pack('<I', int(lit, 16)))[0])
            elif lit in ('true', 'false'):
                out = lit == 'true'
            elif re.match(r'^-?\d+$', lit):
                out = int(lit)
            else:
                out = np.float32(float(lit))
            out = np.full(L, out)
            if 'vector<' in res_ty:
                k = int(re.search(r'vector<(\d+)x', res_ty).group(1))
                out = np.repeat(out[:, None], k, axis=1)
        elif n in ('arith.addi', 'arith.addf'):
            out = o[0] + o[1]
        elif n in ('arith.subi', 'arith.subf'):
            out = o[0] - o[1]
        elif n in ('arith.muli', 'arith.mulf'):
            out = o[0] * o[1]
        elif n == 'arith.divf':
            with np.errstate(divide='ignore', invalid='ignore'):
                out = (o[0] / o[1]).astype(np.float32)
        elif n in ('arith.divui', 'arith.remui'):
            if np.any(np.asarray(o[0])[mask] < 0) or np.any(
                    np.asarray(o[1])[mask] <= 0):
                raise EmulationError('%s on a negative value' % n)
            d = np.where(np.asarray(o[1]) > 0, o[1], 1)
            out = o[0] // d if n == 'arith.divui' else o[0] % d
        elif n == 'arith.floordivsi':
            out = np.floor_divide(o[0], o[1])
        elif n == 'arith.ceildivsi':
            out = -np.floor_divide(-np.asarray(o[0]), o[1])
        elif n == 'arith.minsi':
            out = np.minimum(o[0], o[1])
        elif n == 'arith.maxsi':
            out = np.maximum(o[0], o[1])
        elif n == 'arith.maxnumf':
            out = np.fmax(o[0], o[1])
        elif n == 'arith.andi':
            out = (o[0] & o[1]) if res_ty != 'i32' else (
                (np.asarray(o[0]) & np.asarray(o[1])) & 0xFFFFFFFF)
        elif n == 'arith.ori':
            out = o[0] | o[1]
        elif n == 'arith.cmpi':
            p = int(attr(op, 'predicate').split(':')[0])
            a, b = np.asarray(o[0]), np.asarray(o[1])
            out = [a == b, a != b, a < b, a <= b, a > b, a >= b, a < b,
                   a <= b, a > b, a >= b][p]
        elif n == 'arith.cmpf':
            p = int(attr(op, 'predicate').split(':')[0])
            a, b = np.asarray(o[0]), np.asarray(o[1])
            table = {1: a == b, 2: a > b, 3: a >= b, 4: a < b, 5: a <= b,
                     6: (a != b) & ~np.isnan(a) & ~np.isnan(b)}
            if p not in table:
                raise EmulationError('cmpf predicate %d' % p)
            out = table[p]
        elif n == 'arith.select':
            c = np.asarray(o[0])
            out = np.where(bcast(c, o[1]) if c.ndim else c, o[1], o[2])
        elif n == 'arith.bitcast':
            x = np.asarray(o[0])
            if res_ty == 'i32':
                out = x.astype(np.float32).view(np.uint32).astype(np.int64)
            else:
                out = (x & 0xFFFFFFFF).astype(np.uint32).view(np.float32)
        elif n == 'arith.truncf':
            out = round_to(o[0], elem_of(res_ty))
        elif n == 'arith.extf':
            out = np.asarray(o[0], dtype=np.float32)
        elif n == 'arith.index_cast':
            out = np.asarray(o[0]).astype(np.int64)
        elif n == 'math.exp2':
            with np.errstate(over='ignore'):
                out = np.exp2(np.asarray(o[0], dtype=np.float32))
        elif n == 'math.tanh':
            out = np.tanh(np.asarray(o[0], dtype=np.float32))
        elif n == 'memref.dim':
            out = np.full(L, o[0].arr.shape[int(o[1][0])])
        elif n == 'gpu.thread_id':
            out = self.lane.copy()
        elif n == 'gpu.block_id':
            dim = 'xyz'.index(re.search(r'dim (\w)', op.attrs).group(1))
            out = np.full(L, self.block_id[dim])
        elif n == 'gpu.dynamic_shared_memory':
            out = 'smem'
        elif n == 'memref.view':
            off = int(self.uniform(o[1], mask, 'view offset'))
            shape = [int(x) for x in re.search(
                r'memref<([\dx]+)x(?:bf16|f16|f32)', res_ty).group(1).split(
                    'x')]
            if MUTATION == 'overlap-views' and off > 0:
                off -= 16
            if off not in self.views:
                nbytes = int(np.prod(shape)) * (
                    4 if elem_of(res_ty) == 'f32' else 2)
                if (self.smem_bytes is not None and
                        off + nbytes > self.smem_bytes):
                    raise EmulationError(
                        'shared memory: a view of bytes [%d, %d) but the '
                        'launch gives %d' % (off, off + nbytes,
                                             self.smem_bytes))
                self.views[off] = Mem(
                    SharedWindow(self.smem.data, off, shape, elem_of(res_ty)),
                    elem_of(res_ty), 'smem@%d' % off, base=off)
            nbytes = int(np.prod(shape)) * self.views[off].esize
            self.smem.add_view(off, nbytes, res_ty)
            out = self.views[off]
        elif n == 'memref.load':
            out = self.load(o[0], o[1:], 0, mask, n)
        elif n == 'vector.load':
            k = int(re.search(r'vector<(\d+)x', res_ty).group(1))
            out = self.load(o[0], o[1:], k, mask, n)
        elif n == 'vector.store':
            val, mem, idx = np.asarray(o[0]), o[1], o[2:]
            self.check_bounds(mem, idx, val.shape[1], mask, n)
            if mem.base is not None:
                self.smem.write(mem, idx, val.shape[1], mask, n)
            self.apply_copies([(mem, idx, round_to(val, mem.elem), mask)])
        elif n == 'memref.store':
            val, mem, idx = np.asarray(o[0]), o[1], o[2:]
            self.check_bounds(mem, idx, 1, mask, n)
            if mem.base is not None:
                self.smem.write(mem, idx, 0, mask, n)
            self.apply_copies([(mem, idx, round_to(val, mem.elem)[:, None],
                                mask)])
        elif n == 'vector.bitcast':
            out = np.asarray(o[0]).reshape(L, 1, 2)  # two halves of an i32
        elif n == 'vector.extract':
            pos = int_array_attr(op, 'static_position')
            out = np.asarray(o[0])[(slice(None),) + tuple(pos)]
        elif n == 'vector.from_elements':
            out = np.stack([np.broadcast_to(x, (L,)) for x in o], axis=1)
        elif n == 'gpu.shuffle':
            # The kernels' reductions: a butterfly over the full warp.
            if 'xor' not in op.attrs:
                raise EmulationError('gpu.shuffle: only xor mode is '
                                     'emulated: %s' % op.attrs)
            if int(self.uniform(o[2], mask, 'shuffle width')) != 32:
                raise EmulationError('gpu.shuffle: width must be 32')
            warps = mask.reshape(L // 32, 32)
            if np.any(warps.any(axis=1) & ~warps.all(axis=1)):
                raise EmulationError('gpu.shuffle under divergence: part of '
                                     'a warp would read inactive lanes')
            m = int(self.uniform(o[1], mask, 'shuffle offset'))
            src = (self.lane & ~31) | ((self.lane & 31) ^ m)
            self.env[op.results[0]] = np.asarray(o[0])[src]
            self.env[op.results[1]] = np.ones(L, bool)
            return
        elif n == 'gpu.barrier':
            if MUTATION != 'no-barrier':
                self.smem.barrier(mask)
        elif n == 'nvgpu.device_async_copy':
            seg = int_array_attr(op, 'operandSegmentSizes')
            k = int(re.search(r'dstElements = (\d+)', op.attrs).group(1))
            dst, didx = o[0], o[1:1 + seg[1]]
            s0 = 1 + seg[1]
            src, sidx = o[s0], o[s0 + 1:s0 + 1 + seg[3]]
            nsrc = o[s0 + 1 + seg[3]] if seg[4] else np.full(L, k)
            if (MUTATION == 'swap-early' and self.smem.barriers > 0 and
                    dst.arr.shape[0] == 2):
                didx = [1 - np.asarray(didx[0])] + list(didx[1:])
            if MUTATION == 'misaligned-copy':
                didx = list(didx[:-1]) + [np.asarray(didx[-1]) +
                                          4 // dst.esize]
            self.check_bounds(dst, didx, k, mask, 'cp.async destination')
            first, B, w = self.smem.write(dst, didx, k, mask, 'cp.async',
                                          asynchronous=True)
            self.smem.check_align(first, min(16, k * dst.esize), 'cp.async')
            live = mask & (np.asarray(nsrc) > 0)
            vals = np.zeros((L, k), np.float32)
            got = self.load(src, sidx, k, live, 'cp.async source')
            if len(sidx) >= 2 and live.any():
                rows = np.broadcast_to(np.asarray(sidx[-2]), (L,))[live]
                self.copied_rows.setdefault(id(src), set()).update(
                    rows.tolist())
            for e in range(k):
                vals[:, e] = np.where(live & (e < np.asarray(nsrc)),
                                      got[:, e], 0.0)
            copy = (dst, didx, vals, mask.copy(), (B, w))
            if self.late is not False:
                self.open.append(copy)
            else:
                self.apply_copies([copy])
            out = None
        elif n == 'nvvm.cp.async.commit.group':
            self.pending.append(self.open)
            self.open = []
        elif n == 'nvvm.cp.async.wait.group':
            keep = int(attr(op, 'n').split(':')[0])
            while len(self.pending) > keep:
                self.apply_copies(self.pending.pop(0))
        elif n == 'nvgpu.ldmatrix':
            tiles = int(attr(op, 'numTiles').split(':')[0])
            trans = attr(op, 'transpose') == 'true'
            if not mask.all():
                raise EmulationError('ldmatrix under divergence')
            # Lanes 8m..8m+7 address the rows of matrix m; lane l receives
            # row l/4, elements 2(l%4) and 2(l%4)+1 (.trans: the transpose).
            rows = self.load(o[0], o[1:], 8, mask, 'ldmatrix')
            rows = rows.reshape(L // 32, 32, 8)
            l = np.arange(32)[:, None, None]
            mt = np.arange(tiles)[None, :, None]
            e = np.arange(2)[None, None, :]
            if trans:
                src, col = 8 * mt + 2 * (l % 4) + e, l // 4 + 0 * e
            else:
                src, col = 8 * mt + l // 4 + 0 * e, 2 * (l % 4) + e
            w = np.arange(L // 32)[:, None, None, None]
            out = rows[w, src[None], col[None]].reshape(L, tiles, 2)
        elif n == 'nvvm.mma.sync':
            out = self.mma(op, o, mask)
        elif n == 'llvm.extractvalue':
            out = np.asarray(o[0])[:, int_array_attr(op, 'position')[0]]
        elif n == 'scf.if':
            c = np.asarray(o[0]) & mask
            t_mask, e_mask = c, mask & ~c
            outs_t = outs_e = None
            if t_mask.any() or not op.results:
                outs_t = self.exec_region(op.regions[0], [], t_mask) \
                    if t_mask.any() else None
            if e_mask.any() and len(op.regions) > 1 and op.regions[1].ops:
                outs_e = self.exec_region(op.regions[1], [], e_mask)
            for i, r in enumerate(op.results):
                if outs_t is None:
                    self.env[r] = outs_e[i]
                elif outs_e is None:
                    self.env[r] = outs_t[i]
                else:
                    self.env[r] = np.where(bcast(c, outs_t[i]), outs_t[i],
                                           outs_e[i])
            return
        elif n == 'scf.for':
            lb = int(self.uniform(o[0], mask, 'loop bound'))
            ub = int(self.uniform(o[1], mask, 'loop bound'))
            step = int(self.uniform(o[2], mask, 'loop step'))
            if MUTATION == 'extra-tile' and any(
                    x.name == 'gpu.barrier' for x in op.regions[0].ops):
                # The key-tile range one tile longer, for the loop and every
                # other use of its bound (the prefetch's condition).
                ub += step
                self.env[op.operands[1]] = np.asarray(o[1]) + step
            carried = o[3:]
            for it in range(lb, ub, step):
                carried = self.exec_region(op.regions[0],
                                           [np.full(L, it)] + carried, mask)
            for r, val in zip(op.results, carried):
                self.env[r] = val
            return
        else:
            raise EmulationError('no emulation of %s' % n)
        if op.results:
            self.env[op.results[0]] = out

    def mma(self, op, o, mask):
        """mma.sync per warp, fragments placed by the PTX ISA's tables."""
        if not mask.all():
            raise EmulationError('mma.sync under divergence')
        k_ = int(re.search(r'k = (\d+)', op.attrs).group(1))
        a, b, c = o[0:4], o[4:6], o[6:10]
        W = L // 32
        a_idx, b_idx, c_idx = _mma_layout(k_)
        if k_ == 16:
            # Two f16/bf16 values a register, in its order.
            av = np.stack([np.asarray(a[j // 2]).reshape(L, 2)[:, j % 2]
                           for j in range(8)], axis=1)
            bv = np.stack([np.asarray(b[j // 2]).reshape(L, 2)[:, j % 2]
                           for j in range(4)], axis=1)
        else:
            def tf32(bits):
                bits = (np.asarray(bits).astype(np.int64) & 0xFFFFE000)
                return bits.astype(np.uint32).view(np.float32)
            av = np.stack([tf32(a[j]) for j in range(4)], axis=1)
            bv = np.stack([tf32(b[j]) for j in range(2)], axis=1)
        cv = np.stack([np.asarray(c[j]).reshape(L) for j in range(4)], axis=1)
        # Each lane's fragment elements scattered into its warp's matrices
        # (flat row-major indices from _mma_layout).
        A = np.zeros((W, 16 * k_))
        B = np.zeros((W, k_ * 8))
        C = np.zeros((W, 16 * 8))
        wi = np.arange(W)[:, None, None]
        A[wi, a_idx[None]] = av.reshape(W, 32, -1)
        B[wi, b_idx[None]] = bv.reshape(W, 32, -1)
        C[wi, c_idx[None]] = cv.reshape(W, 32, -1)
        D = (A.reshape(W, 16, k_) @ B.reshape(W, k_, 8) +
             C.reshape(W, 16, 8)).astype(np.float32).reshape(W, 16 * 8)
        return D[wi, c_idx[None]].reshape(L, 4)


@functools.lru_cache(maxsize=None)
def _mma_layout(k_):
    """The PTX ISA's fragment tables of mma.sync m16n8k16 (f16/bf16) and
    m16n8k8 (tf32), as each lane's flat index into A [16, k], B [k, 8] and
    C/D [16, 8] for each of its fragment elements: arrays [32, elements]."""
    lane = np.arange(32)
    g, t = lane // 4, lane % 4
    if k_ == 16:
        # a_j (j = 0..7), two per register: row g (+8 for j = 2, 3, 6, 7),
        # column 2t + j%2 (+8 for j >= 4).
        a = [(g + (8 if j in (2, 3, 6, 7) else 0)) * k_ +
             2 * t + (j & 1) + (8 if j >= 4 else 0) for j in range(8)]
        # b_j (j = 0..3): row 2t + j%2 (+8 for j >= 2), column g.
        b = [(2 * t + (j & 1) + (8 if j >= 2 else 0)) * 8 + g
             for j in range(4)]
    else:
        # a_j: row g (+8 for j = 1, 3), column t (+4 for j >= 2).
        a = [(g + (8 if j in (1, 3) else 0)) * k_ + t + (4 if j >= 2 else 0)
             for j in range(4)]
        # b_j: row t (+4 for j = 1), column g.
        b = [(t + 4 * j) * 8 + g for j in range(2)]
    # c_j and d_j: row g (+8 for j >= 2), column 2t + j%2.
    c = [(g + (8 if j >= 2 else 0)) * 8 + 2 * t + (j & 1) for j in range(4)]
    return tuple(np.stack(x, axis=1) for x in (a, b, c))

# ---------------------------------------------------------------------------
# Host code: the function around the launches.
# ---------------------------------------------------------------------------


def parse_module(text):
    top = Region()
    parse(text.splitlines(), 0, top)
    return top


def find_ops(region, name):
    found = []

    def walk(r):
        for op in r.ops:
            if op.name == name:
                found.append(op)
            for sub in op.regions:
                walk(sub)
    walk(region)
    return found


def sym_name(op):
    return attr(op, 'sym_name').strip('"')


def scalar_constant(op):
    value = attr(op, 'value')
    if value in ('true', 'false'):  # i1 constants print without a type
        return value == 'true'
    lit = re.match(r'([^:]+) : ', value).group(1).strip()
    if lit in ('true', 'false'):
        return lit == 'true'
    if re.match(r'^-?\d+$', lit):
        return int(lit)
    if lit.startswith('0x'):
        return float(np.uint32(int(lit, 16)).view(np.float32))
    return float(lit)


def shape_of(ty, dynamic):
    """The shape of a tensor or memref type, dynamic sizes from `dynamic`."""
    dims = re.match(r'(?:tensor|memref)<((?:[\d?]+x)*)', ty).group(1)
    dims = [x for x in dims.split('x') if x]
    it = iter(dynamic)
    return tuple(int(next(it)) if x == '?' else int(x) for x in dims)


class Host:
    """Runs a host function of the GPU passes' output: reshapes, device
    allocations, and launches, each launch run block by block."""

    # Called after each block with (block_id, block, kernel arguments):
    # attention runs count the key tiles the block loaded.
    tile_check = None

    def __init__(self, module, late):
        self.kernels = {sym_name(f): f for f in find_ops(module, 'gpu.func')}
        self.funcs = {sym_name(f): f for f in find_ops(module, 'func.func')}
        self.late = late

    def run(self, name, args):
        func = self.funcs[name]
        env = dict(zip(func.regions[0].args, args))
        for op in func.regions[0].ops:
            o = [env[x] for x in op.operands]
            if op.name == 'func.return':
                return o
            res = self.exec(op, o)
            for r, v in zip(op.results, res):
                env[r] = v
        raise EmulationError('%s has no return' % name)

    def exec(self, op, o):
        n = op.name
        if n == 'arith.constant':
            return [scalar_constant(op)]
        if n in ('bufferization.to_buffer', 'bufferization.to_tensor',
                 'memref.cast', 'tensor.cast'):
            return [o[0]]
        if n in ('tensor.dim', 'memref.dim'):
            return [o[0].shape[o[1]]]
        arith = {
            'arith.addi': lambda a, b: a + b,
            'arith.subi': lambda a, b: a - b,
            'arith.muli': lambda a, b: a * b,
            'arith.divui': lambda a, b: a // b,
            'arith.remui': lambda a, b: a % b,
            'arith.ceildivsi': lambda a, b: -(-a // b),
            'arith.floordivsi': lambda a, b: a // b,
            'arith.maxsi': max, 'arith.minsi': min,
            'arith.andi': lambda a, b: a and b,
        }
        if n in arith:
            return [arith[n](o[0], o[1])]
        if n == 'arith.cmpi':
            p = int(attr(op, 'predicate').split(':')[0])
            a, b = o
            return [[a == b, a != b, a < b, a <= b, a > b, a >= b][p % 6]]
        if n == 'arith.select':
            return [o[1] if o[0] else o[2]]
        if n == 'tensor.empty':
            return [np.zeros(shape_of(op.out_types[0], o), np.float32)]
        if n in ('tensor.collapse_shape', 'memref.collapse_shape'):
            groups = json.loads(attr(op, 'reassociation')
                                if 'reassociation = [[' not in op.attrs else
                                re.search(r'reassociation = (\[\[.*?\]\])',
                                          op.attrs).group(1))
            shape = [int(np.prod([o[0].shape[i] for i in g])) for g in groups]
            return [o[0].reshape(shape)]
        if n in ('tensor.expand_shape', 'memref.expand_shape'):
            static = int_array_attr(op, 'static_output_shape')
            it = iter(o[1:])
            shape = [int(next(it)) if s < 0 else s for s in static]
            return [o[0].reshape(shape)]
        if n == 'gpu.wait':
            return [None] * len(op.results)
        if n == 'gpu.alloc':
            seg = int_array_attr(op, 'operandSegmentSizes')
            dyn = o[seg[0]:seg[0] + seg[1]]
            return [np.full(shape_of(op.out_types[0], dyn), np.nan,
                            np.float32), None]
        if n == 'gpu.launch_func':
            return [self.launch(op, o)]
        raise EmulationError('no host emulation of %s' % n)

    def launch(self, op, o):
        seg = int_array_attr(op, 'operandSegmentSizes')
        vals, pos = [], 0
        for size in seg:
            vals.append(o[pos:pos + size])
            pos += size
        grid = [v[0] for v in vals[1:4]]
        if MUTATION == 'grid-short' and grid[0] > 1:
            grid[0] -= 1
        block = [v[0] for v in vals[4:7]]
        smem = vals[10][0] if vals[10] else 0
        if smem > CHIP_SHARED_MEMORY[CHIP]:
            raise EmulationError(
                'launch with %d bytes of dynamic shared memory: %s allows a '
                'block %d' % (smem, CHIP, CHIP_SHARED_MEMORY[CHIP]))
        operands = vals[11]
        name = re.search(r'kernel = @\w+::@(\w+)', op.attrs).group(1)
        kernel = self.kernels[name]
        known = int_array_attr(kernel, 'known_block_size')
        if block != [L, 1, 1] or known != [L, 1, 1]:
            raise EmulationError('%s launched with block %s, known %s; the '
                                 'emulator runs %d threads' % (
                                     name, block, known, L))
        types = op.in_types[pos - len(operands):pos]
        mems = [Mem(x, elem_of(t), 'arg%d' % i)
                for i, (x, t) in enumerate(zip(operands, types))]
        for bz in range(grid[2]):
            for by in range(grid[1]):
                for bx in range(grid[0]):
                    blk = Block(kernel, mems, (bx, by, bz), self.late, smem)
                    blk.run()
                    if self.tile_check:
                        self.tile_check((bx, by, bz), blk, mems)
        return None


def timings(args):
    """The copy timings of --timing: True (late), False (eager) or seeds."""
    if args.timing == 'random':
        return list(range(1, args.schedules + 1))
    return {'late': [True], 'eager': [False],
            'both': [True, False]}[args.timing]


def timing_name(late):
    if isinstance(late, bool):
        return 'late' if late else 'eager'
    return 'random seed %d' % late


def compile_module(src, passes, opt):
    """`src` through masformer-opt `passes`, parsed."""
    r = subprocess.run([opt, '-'] + passes +
                       ['--canonicalize', '--cse', '--mlir-print-op-generic'],
                       input=src, capture_output=True, text=True)
    if r.returncode:
        sys.exit('emulate.py: masformer-opt failed:\n' + r.stderr + src)
    if 'gpu.launch_func' not in r.stdout:
        sys.exit('emulate.py: nothing was converted:\n' + src)
    return parse_module(r.stdout)


# ---------------------------------------------------------------------------
# Driver.
# ---------------------------------------------------------------------------


def reference(q, k, v, span, causal, mask=None, softcap=None):
    group = q.shape[1] // k.shape[1]
    k = np.repeat(k.astype(np.float64), group, axis=1)
    v = np.repeat(v.astype(np.float64), group, axis=1)
    sq, skv = q.shape[2], k.shape[2]
    s = np.einsum('bhqd,bhkd->bhqk', q.astype(np.float64), k) / np.sqrt(
        q.shape[3])
    if softcap is not None:
        s = softcap * np.tanh(s / softcap)
    ok = masformer_ref.span_allowed(sq, skv, masformer_ref.parse_span(span),
                                    causal)
    if mask is not None:
        s = s + mask.astype(np.float64)
    s = np.where(ok, s, -np.inf)
    if s.size == 0:
        return np.zeros(q.shape)
    mx = s.max(axis=-1, keepdims=True)
    with np.errstate(invalid='ignore'):
        p = np.where(ok & np.isfinite(s),
                     np.exp(s - np.where(np.isfinite(mx), mx, 0)), 0.0)
    den = p.sum(axis=-1, keepdims=True)
    p = np.divide(p, den, out=np.zeros_like(p), where=den > 0)
    return np.einsum('bhqk,bhkd->bhqd', p, v)


def compile_attention(dtype, d, span, causal, opt, mask_dims=None,
                      softcap=None):
    """The module of @f = masformer.attention, after the GPU pass."""
    t = 'tensor<?x?x?x%dx%s>' % (d, dtype)
    margs = mtype = ''
    if mask_dims:
        mt = 'tensor<%sxf32>' % 'x'.join('1' if x == '1' else '?'
                                         for x in mask_dims)
        margs = ', %%m: %s' % mt
        mtype = ' mask(%%m : %s)' % mt
    src = ('func.func @f(%%q: %s, %%k: %s, %%v: %s%s) -> %s {\n'
           '  %%o = masformer.attention %%q, %%k, %%v%s {span = '
           '#masformer.span<%s>, causal = %s%s} : %s, %s, %s -> %s\n'
           '  return %%o : %s\n}\n' % (
               t, t, t, margs, t, mtype, span, str(causal).lower(),
               '' if softcap is None else ', softcap = %r : f32' % softcap,
               t, t, t, t, t))
    return compile_module(src, ['--masformer-attention-to-gpu=chip=' + CHIP],
                          opt)


def compile_gemm(args, n, k):
    """The module of a generic C[b,m,n] += A[b,m,k] B[(b,)k,n] (or [n,k]);
    K and N static, as the kernel requires of 16-byte rows."""
    dt, res = args.dtype, args.result or args.dtype
    lead = '' if args.weights else '?x'
    a = 'tensor<?x?x%dx%s>' % (k, dt)
    bt = ('tensor<%s%dx%dx%s>' if args.transposed_b else
          'tensor<%s%dx%dx%s>') % ((lead, n, k, dt) if args.transposed_b
                                   else (lead, k, n, dt))
    c = 'tensor<?x?x%dx%s>' % (n, res)
    fill = ''
    cargs = ', %%c: %s' % c
    if args.zero_init:
        cargs = ''
        fill = ('  %%i0 = arith.constant 0 : index\n'
                '  %%i1 = arith.constant 1 : index\n'
                '  %%d0 = tensor.dim %%a, %%i0 : %s\n'
                '  %%d1 = tensor.dim %%a, %%i1 : %s\n'
                '  %%e = tensor.empty(%%d0, %%d1) : %s\n'
                '  %%z = arith.constant 0.0 : %s\n'
                '  %%c = linalg.fill ins(%%z : %s) outs(%%e : %s) -> %s\n'
                % (a, a, c, res, res, c, c))
    bidx = ('n, k' if args.transposed_b else 'k, n')
    bmap = '(%s)' % (bidx if args.weights else 'b, ' + bidx)
    body = ['^bb0(%%x: %s, %%y: %s, %%acc: %s):' % (dt, dt, res)]
    xs, ys = '%x', '%y'
    if dt != res:
        body += ['  %%xe = arith.extf %%x : %s to %s' % (dt, res),
                 '  %%ye = arith.extf %%y : %s to %s' % (dt, res)]
        xs, ys = '%xe', '%ye'
    body += ['  %%p = arith.mulf %s, %s : %s' % (xs, ys, res),
             '  %%s = arith.addf %%acc, %%p : %s' % res,
             '  linalg.yield %%s : %s' % res]
    src = ('func.func @f(%%a: %s, %%b: %s%s) -> %s {\n%s'
           '  %%r = linalg.generic {indexing_maps = ['
           'affine_map<(b, m, n, k) -> (b, m, k)>, '
           'affine_map<(b, m, n, k) -> %s>, '
           'affine_map<(b, m, n, k) -> (b, m, n)>], iterator_types = '
           '["parallel", "parallel", "parallel", "reduction"]} '
           'ins(%%a, %%b : %s, %s) outs(%%c : %s) {\n  %s\n  } -> %s\n'
           '  return %%r : %s\n}\n' % (a, bt, cargs, c, fill, bmap, a, bt,
                                      c, '\n  '.join(body), c, c))
    return compile_module(src, ['--masformer-contractions-to-gpu'],
                          args.masformer_opt)


def lowered_only(module):
    """--lower-only: the module parsed (compile_module checked that it
    launches a kernel); report its kernels without running them."""
    kernels = [f for gm in find_ops(module, 'gpu.module')
               for f in find_ops(gm.regions[0], 'gpu.func')]
    if not kernels:
        print('FAIL: no gpu.func in the lowered module')
        return 1
    print('ok   lowered and parsed, not run (--lower-only): %d kernels' %
          len(kernels))
    return 0


def run_gemm(args):
    tol = {'bf16': 1e-2, 'f16': 2e-3, 'f32': 1e-5}
    rng = np.random.default_rng(args.seed)
    result = args.result or args.dtype
    failed = False
    kernels = {}
    for shape in args.shape:
        bb, m, n, k = (int(x) for x in shape.split(','))
        if (n, k) not in kernels:
            kernels[(n, k)] = compile_gemm(args, n, k)
        module = kernels[(n, k)]
        if args.lower_only:
            failed |= lowered_only(module) != 0
            continue
        a = round_to(rng.standard_normal((bb, m, k)), args.dtype)
        bshape = (n, k) if args.transposed_b else (k, n)
        bmat = round_to(rng.standard_normal(
            bshape if args.weights else (bb,) + bshape), args.dtype)
        c0 = round_to(rng.standard_normal((bb, m, n)), result)
        if args.zero_init:
            c0 = np.zeros_like(c0)
        b3 = bmat[None] if args.weights else bmat
        bt = np.swapaxes(b3, -1, -2) if args.transposed_b else b3
        ref = c0.astype(np.float64) + np.matmul(a.astype(np.float64), bt)
        for late in timings(args):
            inputs = [a, bmat] + ([] if args.zero_init else [c0])
            try:
                out = Host(module, late).run('f', inputs)[0]
            except EmulationError as e:
                print('FAIL %s: %s' % (shape, e))
                failed = True
                continue
            out = out.reshape(ref.shape)
            err = (np.abs(out - ref).max() / max(np.abs(ref).max(), 1e-6)
                   if out.size else 0.0)
            ok = bool(np.isfinite(out).all()) and err <= tol[args.dtype]
            failed |= not ok
            print('%s matmul %s->%s%s%s%s shape %s (%s copies): max error / '
                  'max %.2e (tolerance %.0e)' % (
                      'ok  ' if ok else 'FAIL', args.dtype, result,
                      ' B^T' if args.transposed_b else '',
                      ' weights' if args.weights else '',
                      ' zero-init' if args.zero_init else '', shape,
                      timing_name(late), err, tol[args.dtype]))
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--dtype', required=True, choices=('bf16', 'f16', 'f32'))
    ap.add_argument('--head-dim', type=int)
    ap.add_argument('--gemm', action='store_true',
                    help='a matrix product instead of attention; shapes '
                         'are B,M,N,K')
    ap.add_argument('--result', choices=('bf16', 'f16', 'f32'),
                    help='the product\'s result type (default: --dtype)')
    ap.add_argument('--transposed-b', action='store_true')
    ap.add_argument('--weights', action='store_true',
                    help='B without a batch dimension')
    ap.add_argument('--zero-init', action='store_true',
                    help='C starts as a zero fill (MatMul), not an input')
    ap.add_argument('--span', default='full')
    ap.add_argument('--causal', action='store_true')
    ap.add_argument('--shape', action='append', required=True,
                    help='B,H,Hkv,Sq,Skv')
    ap.add_argument('--mask', metavar='DIMS',
                    help='an additive f32 mask of these dimensions, each b, '
                         'h, q, k (batch, heads, queries, keys) or 1, e.g. '
                         'b,1,1,k; a fifth of it -inf, some rows all -3.4e38')
    ap.add_argument('--softcap', type=float,
                    help='the op\'s softcap: scores capped to '
                         'c * tanh(s / c) before the mask')
    ap.add_argument('--timing', default='both',
                    choices=('late', 'eager', 'both', 'random'),
                    help='when cp.async copies land: at the wait, at issue, '
                    'both runs, or (random) at random points between, one '
                    'run per --schedules seed')
    ap.add_argument('--schedules', type=int, default=8,
                    help='seeds of --timing random')
    ap.add_argument('--masformer-opt', default='masformer-opt')
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--chip', default='sm_90', choices=sorted(
        CHIP_SHARED_MEMORY), help='compile for this chip and check every '
        'launch against its shared memory per block')
    ap.add_argument('--mutate', choices=MUTATIONS,
                    help='run the kernels with this bug; the run must fail')
    ap.add_argument('--lower-only', action='store_true',
                    help='lower and parse the kernels, and stop there: no '
                         'emulation (the sanitizer run, whose checks are on '
                         'masformer-opt)')
    args = ap.parse_args()
    global MUTATION, CHIP
    MUTATION = args.mutate
    CHIP = args.chip
    if args.gemm:
        return run_gemm(args)
    if args.head_dim is None:
        ap.error('--head-dim is required for attention')
    mask_dims = args.mask.split(',') if args.mask else None
    module = compile_attention(args.dtype, args.head_dim, args.span,
                               args.causal, args.masformer_opt, mask_dims,
                               args.softcap)
    if args.lower_only:
        return lowered_only(module)
    tol = {'bf16': 2e-2, 'f16': 4e-3, 'f32': 1e-5}[args.dtype]
    rng = np.random.default_rng(args.seed)
    failed = False
    for shape in args.shape:
        bb, hh, hkv, sq, skv = (int(x) for x in shape.split(','))
        d = args.head_dim
        q = round_to(rng.standard_normal((bb, hh, sq, d)), args.dtype)
        k = round_to(rng.standard_normal((bb, hkv, skv, d)), args.dtype)
        v = round_to(rng.standard_normal((bb, hkv, skv, d)), args.dtype)
        mask = None
        if mask_dims:
            sizes = {'b': bb, 'h': hh, 'q': sq, 'k': skv, '1': 1}
            mshape = tuple(sizes[x] for x in mask_dims)
            mask = rng.standard_normal(mshape).astype(np.float32)
            mask[rng.random(mshape) < 0.2] = -np.inf
            if len(mshape) >= 2 and mshape[-2] > 1:
                # Rows masked entirely by a large finite value (Hugging
                # Face's padding): a uniform softmax, not zeros.
                mask[..., ::7, :] = np.float32(-3.4e38)
        ref = reference(q, k, v, args.span, args.causal, mask, args.softcap)
        allowed = masformer_ref.span_allowed(
            q.shape[2], k.shape[2], masformer_ref.parse_span(args.span),
            args.causal)
        tiles = {'loaded': 0, 'cover': 0}

        def check_tiles(block_id, blk, mems):
            """The key tiles a block loads are exactly those that hold a key
            some query row of the block may see (the minimal cover)."""
            rows = allowed[block_id[0] * BLOCK_ROWS:
                           (block_id[0] + 1) * BLOCK_ROWS]
            if block_id[1] >= q.shape[1] or block_id[2] >= q.shape[0]:
                rows = rows[:0]  # the one block launched for no heads/batch
            keys = np.nonzero(rows.any(axis=0))[0]
            cover = set((keys // KEY_TILE).tolist())
            loaded = set(r // KEY_TILE
                         for r in blk.copied_rows.get(id(mems[1]), ()))
            tiles["loaded"] += len(loaded)
            tiles['cover'] += len(cover)
            if loaded != cover:
                raise EmulationError(
                    'block %s loads key tiles %s; the span and the causal '
                    'triangle need exactly %s' % (
                        block_id, sorted(loaded), sorted(cover)))

        for late in timings(args):
            try:
                inputs = [q, k, v] + ([] if mask is None else [mask])
                host = Host(module, late)
                host.tile_check = check_tiles
                tiles['loaded'] = tiles['cover'] = 0
                out = host.run('f', inputs)[0]
            except EmulationError as e:
                print('FAIL %s %s: %s' % (shape, timing_name(late),
                                          e))
                failed = True
                continue
            err = (np.abs(out - ref).max() / max(np.abs(ref).max(), 1e-6)
                   if out.size else 0.0)
            ok = np.isfinite(out).all() and err <= tol
            failed |= not ok
            print('%s %s d=%d %s%s shape %s (%s copies): max error / max '
                  '%.2e (tolerance %.0e); %d key tiles loaded, the minimal '
                  'cover' % (
                      'ok  ' if ok else 'FAIL', args.dtype, d, args.span,
                      ' causal' if args.causal else '', shape,
                      timing_name(late), err, tol,
                      tiles['loaded']))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
