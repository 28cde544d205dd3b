#!/usr/bin/env python3
"""Runs attention compiled for the GPU by masformer (test/gpu/build.sh).

As a command, inputs and outputs are .npy files:

    masformer_gpu.py DIR FUNCTION --input q=q.npy --input k=k.npy \\
        --input v=v.npy --output-dir OUT [--bench N]

writes OUT/out.npy; with --bench, prints the median time of N calls.
`masformer_gpu.py DIR --list` lists the functions. bf16 tensors are read
from and written to float32 files (numpy has no bfloat16).

As a module, `Kernels(DIR)` calls the functions on numpy arrays (copied to
the GPU and back) or on CUDA torch tensors (in place, no copies).

DIR holds masformer_attention.so (host code with the embedded cubin),
libMASFormerCudaRuntime.so (the mgpu* functions on the CUDA driver API)
and kernels.json. Nothing here needs MLIR or a CUDA toolkit; numpy, and
a GPU with its driver, are enough.
"""
import argparse
import ctypes
import json
import os
import statistics
import sys
import time

import numpy as np


_DESCRIPTORS = {}


def descriptor_type(rank):
    """MLIR's memref descriptor of a rank."""
    if rank not in _DESCRIPTORS:
        class Descriptor(ctypes.Structure):
            _fields_ = [('allocated', ctypes.c_void_p),
                        ('aligned', ctypes.c_void_p),
                        ('offset', ctypes.c_int64),
                        ('sizes', ctypes.c_int64 * rank),
                        ('strides', ctypes.c_int64 * rank)]
        _DESCRIPTORS[rank] = Descriptor
    return _DESCRIPTORS[rank]


Descriptor = descriptor_type(4)


def descriptor(ptr, shape):
    """The descriptor of a contiguous buffer."""
    d = descriptor_type(len(shape))()
    d.allocated = d.aligned = ptr
    d.offset = 0
    stride = 1
    for i in reversed(range(len(shape))):
        d.sizes[i] = shape[i]
        d.strides[i] = stride
        stride *= shape[i]
    return d


ITEMSIZE = {'bf16': 2, 'f16': 2, 'f32': 4}


def to_bf16_bits(x):
    """float32 array -> uint16 bfloat16 bits, rounded to nearest even."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounding = ((u >> 16) & 1) + np.uint32(0x7FFF)
    return ((u + rounding) >> 16).astype(np.uint16)


def from_bf16_bits(b):
    return (b.astype(np.uint32) << 16).view(np.float32)


def to_device_bytes(x, dtype):
    """A numpy array as the bytes of `dtype` elements."""
    if dtype == 'bf16':
        return to_bf16_bits(x)
    return np.ascontiguousarray(x, dtype={'f16': np.float16,
                                          'f32': np.float32}[dtype])


def from_device_bytes(raw, dtype, shape):
    if dtype == 'bf16':
        return from_bf16_bits(raw.view(np.uint16)).reshape(shape)
    return raw.view({'f16': np.float16, 'f32': np.float32}[dtype]).reshape(
        shape)


class CudaError(RuntimeError):
    pass


class Kernels:
    """The compiled functions of DIR."""

    def __init__(self, directory):
        self.dir = directory
        with open(os.path.join(directory, 'kernels.json')) as f:
            self.configs = {c['name']: c for c in json.load(f)}
        # The shim first, globally: the compiled library resolves its mgpu*
        # calls against this instance, whose error state we read.
        self.rt = ctypes.CDLL(
            os.path.join(directory, 'libMASFormerCudaRuntime.so'),
            mode=ctypes.RTLD_GLOBAL)
        rt = self.rt
        rt.masformer_cuda_error.restype = ctypes.c_char_p
        rt.masformer_cuda_device.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        rt.mgpuMemAlloc.restype = ctypes.c_void_p
        rt.mgpuMemAlloc.argtypes = [ctypes.c_uint64, ctypes.c_void_p,
                                    ctypes.c_bool]
        rt.mgpuMemFree.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        rt.mgpuMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p,
                                  ctypes.c_size_t, ctypes.c_void_p]
        rt.mgpuStreamCreate.restype = ctypes.c_void_p
        rt.mgpuStreamSynchronize.argtypes = [ctypes.c_void_p]
        rt.mgpuStreamDestroy.argtypes = [ctypes.c_void_p]
        # Loading the library loads its cubin (a constructor calls
        # mgpuModuleLoad): a missing GPU or a wrong chip shows here.
        self.lib = ctypes.CDLL(os.path.join(directory,
                                            'masformer_attention.so'))
        self.check('loading %s' % os.path.join(directory,
                                               'masformer_attention.so'))
        buf = ctypes.create_string_buffer(512)
        if rt.masformer_cuda_device(buf, len(buf)):
            self.check('querying the GPU')
        self.device = buf.value.decode()

    def check(self, what):
        err = self.rt.masformer_cuda_error()
        if err:
            self.rt.masformer_cuda_clear_error()
            raise CudaError('%s: %s' % (what, err.decode()))

    def _function(self, name):
        if name not in self.configs:
            raise KeyError('no function %r in %s; it has: %s' %
                           (name, self.dir, ', '.join(sorted(self.configs))))
        fn = getattr(self.lib, '_mlir_ciface_' + name)
        fn.restype = None
        return fn

    def mask_shape(self, name, q_shape, kv_shape):
        """The shape the function's mask must have, or None."""
        dims = self.configs[name].get('mask')
        if not dims:
            return None
        size = {'b': q_shape[0], 'h': q_shape[1], 'q': q_shape[2],
                'k': kv_shape[2], '1': 1}
        return tuple(size[x] for x in dims)

    def _check_mask(self, name, q_shape, kv_shape, mask_shape):
        want = self.mask_shape(name, q_shape, kv_shape)
        if want is None and mask_shape is not None:
            raise ValueError('%s takes no mask' % name)
        if want is not None and tuple(mask_shape or ()) != want:
            raise ValueError('%s: the mask must be float32 of shape %s; got '
                             '%s' % (name, want, mask_shape))

    def _check_shapes(self, name, qs, ks, vs):
        d = self.configs[name]['head_dim']
        if len(qs) != 4 or len(ks) != 4 or tuple(ks) != tuple(vs):
            raise ValueError('%s: q, k, v must be [B, H, S, D] with k and v '
                             'alike; got %s, %s, %s' % (name, qs, ks, vs))
        if qs[3] != d or ks[3] != d:
            raise ValueError('%s: head_dim must be %d; got %s and %s' %
                             (name, d, qs, ks))
        if qs[0] != ks[0] or ks[1] == 0 or qs[1] % ks[1]:
            raise ValueError('%s: batch must match and kv heads divide query '
                             'heads; got %s and %s' % (name, qs, ks))

    def call_device(self, name, q_ptr, q_shape, k_ptr, v_ptr, kv_shape,
                    mask_ptr=None, mask_shape=None):
        """Runs on device pointers; returns the result's device pointer (free
        it with free())."""
        self._check_shapes(name, q_shape, kv_shape, kv_shape)
        self._check_mask(name, q_shape, kv_shape, mask_shape)
        fn = self._function(name)
        out = Descriptor()
        args = [descriptor(q_ptr, q_shape), descriptor(k_ptr, kv_shape),
                descriptor(v_ptr, kv_shape)]
        if mask_shape is not None:
            args.append(descriptor(mask_ptr, mask_shape))
        fn(ctypes.byref(out), *[ctypes.byref(a) for a in args])
        self.check(name)
        return out.aligned

    def _matmul_shapes(self, name, a_shape, b_shape, c_shape):
        c = self.configs[name]
        k, n = c['k'], c['n']
        want_b = (n, k) if c['transposed_b'] else (k, n)
        if (len(a_shape) != 3 or a_shape[2] != k or tuple(b_shape) != want_b
                or tuple(c_shape) != (a_shape[0], a_shape[1], n)):
            raise ValueError('%s: expected a [B, M, %d], b %s and c [B, M, '
                             '%d]; got %s, %s and %s' % (
                                 name, k, list(want_b), n, a_shape, b_shape,
                                 c_shape))

    def call_matmul_device(self, name, a_ptr, a_shape, b_ptr, b_shape, c_ptr,
                           c_shape):
        """c + a @ b on device pointers; returns the result's device pointer
        (free it with free())."""
        self._matmul_shapes(name, a_shape, b_shape, c_shape)
        fn = self._function(name)
        out = descriptor_type(3)()
        args = [descriptor(a_ptr, a_shape), descriptor(b_ptr, b_shape),
                descriptor(c_ptr, c_shape)]
        fn(ctypes.byref(out), *[ctypes.byref(x) for x in args])
        self.check(name)
        return out.aligned

    def run_matmul_torch(self, name, a, b, c):
        """CUDA torch tensors in (a and b of the function's input type, c of
        its result type), a torch tensor out."""
        import torch
        types = {'bf16': torch.bfloat16, 'f16': torch.float16,
                 'f32': torch.float32}
        cfg = self.configs[name]
        for t, want in ((a, types[cfg['dtype']]), (b, types[cfg['dtype']]),
                        (c, types[cfg['result']])):
            if t.dtype != want or not t.is_cuda or not t.is_contiguous():
                raise TypeError('%s: a and b must be contiguous CUDA %s '
                                'tensors, c %s' % (name, types[cfg['dtype']],
                                                   types[cfg['result']]))
        torch.cuda.synchronize()
        out = self.call_matmul_device(name, a.data_ptr(), tuple(a.shape),
                                      b.data_ptr(), tuple(b.shape),
                                      c.data_ptr(), tuple(c.shape))
        result = torch.empty_like(c)
        if result.numel():
            self.copy(result.data_ptr(), out,
                      result.numel() * result.element_size())
        self.free(out)
        return result

    def free(self, ptr):
        self.rt.mgpuMemFree(ptr, None)

    def copy(self, dst, src, nbytes):
        s = self.rt.mgpuStreamCreate()
        self.rt.mgpuMemcpy(dst, src, nbytes, s)
        self.rt.mgpuStreamSynchronize(s)
        self.rt.mgpuStreamDestroy(s)
        self.check('copying %d bytes' % nbytes)

    def run_numpy(self, name, q, k, v, mask=None):
        """numpy in, numpy out (float32 for bf16)."""
        dtype = self.configs[name]['dtype']
        self._check_shapes(name, q.shape, k.shape, v.shape)
        self._check_mask(name, q.shape, k.shape,
                         None if mask is None else mask.shape)
        bufs = []
        try:
            ptrs = []
            for i, x in enumerate((q, k, v) if mask is None else
                                  (q, k, v, mask)):
                raw = to_device_bytes(x, dtype if i < 3 else 'f32')
                p = self.rt.mgpuMemAlloc(max(raw.nbytes, 1), None, False)
                self.check('allocating %d bytes' % raw.nbytes)
                bufs.append(p)
                self.copy(p, raw.ctypes.data, raw.nbytes)
                ptrs.append(p)
            out = self.call_device(
                name, ptrs[0], q.shape, ptrs[1], ptrs[2], k.shape,
                ptrs[3] if mask is not None else None,
                None if mask is None else mask.shape)
            if out:
                bufs.append(out)
            host = np.empty(int(np.prod(q.shape)) * ITEMSIZE[dtype], np.uint8)
            if host.nbytes:
                self.copy(host.ctypes.data, out, host.nbytes)
            return from_device_bytes(host, dtype, q.shape)
        finally:
            for p in bufs:
                self.free(p)

    def run_torch(self, name, q, k, v, mask=None):
        """CUDA torch tensors in (contiguous, the function's dtype; the mask
        float32), a torch tensor out."""
        import torch
        want = {'bf16': torch.bfloat16, 'f16': torch.float16,
                'f32': torch.float32}[self.configs[name]['dtype']]
        for t in (q, k, v):
            if t.dtype != want or not t.is_cuda or not t.is_contiguous():
                raise TypeError('%s: inputs must be contiguous CUDA %s '
                                'tensors' % (name, want))
        if mask is not None and (mask.dtype != torch.float32 or
                                 not mask.is_cuda or
                                 not mask.is_contiguous()):
            raise TypeError('%s: the mask must be a contiguous CUDA float32 '
                            'tensor' % name)
        torch.cuda.synchronize()
        out = self.call_device(
            name, q.data_ptr(), tuple(q.shape), k.data_ptr(), v.data_ptr(),
            tuple(k.shape), None if mask is None else mask.data_ptr(),
            None if mask is None else tuple(mask.shape))
        result = torch.empty_like(q)
        if result.numel():
            self.copy(result.data_ptr(), out, result.numel() *
                      result.element_size())
        self.free(out)
        return result


def main():
    ap = argparse.ArgumentParser(
        description='Run a masformer attention compiled for the GPU on .npy '
                    'inputs.')
    ap.add_argument('dir', help='the directory test/gpu/build.sh wrote')
    ap.add_argument('function', nargs='?')
    ap.add_argument('--input', action='append', default=[],
                    metavar='NAME=PATH',
                    help='q, k, v (and m, the mask) as .npy files')
    ap.add_argument('--output-dir')
    ap.add_argument('--bench', type=int, default=0, metavar='N')
    ap.add_argument('--list', action='store_true')
    args = ap.parse_args()
    try:
        kernels = Kernels(args.dir)
        if args.list or not args.function:
            print('device: %s' % kernels.device)
            for c in kernels.configs.values():
                if c.get('kind') == 'matmul':
                    print('%s: c + a @ b, %s -> %s, k %d, n %d%s' % (
                        c['name'], c['dtype'], c['result'], c['k'], c['n'],
                        ', b stored [n, k]' if c['transposed_b'] else ''))
                    continue
                print('%s: %s, head_dim %d, span %s, %s%s' % (
                    c['name'], c['dtype'], c['head_dim'], c['span'],
                    'causal' if c['causal'] else 'bidirectional',
                    ', mask [%s]' % ','.join(c['mask']) if c.get('mask')
                    else ''))
            return 0
        if kernels.configs.get(args.function, {}).get('kind') == 'matmul':
            raise ValueError('%s is a matrix product: run it from Python '
                             '(Kernels.run_matmul_torch)' % args.function)
        inputs = {}
        for spec in args.input:
            key, sep, path = spec.partition('=')
            if not sep or key not in ('q', 'k', 'v', 'm'):
                raise ValueError('--input %s: expected q=, k=, v= or m=PATH'
                                 % spec)
            inputs[key] = np.load(path)
        missing = [x for x in 'qkv' if x not in inputs]
        if missing:
            raise ValueError('missing --input for %s' % ', '.join(missing))
        out = kernels.run_numpy(args.function, inputs['q'], inputs['k'],
                                inputs['v'], inputs.get('m'))
        if args.output_dir:
            os.makedirs(args.output_dir, exist_ok=True)
            np.save(os.path.join(args.output_dir, 'out.npy'),
                    out.astype(np.float32) if out.dtype != np.float16 else out)
        if args.bench:
            times = []
            for _ in range(args.bench):
                t0 = time.perf_counter()
                kernels.run_numpy(args.function, inputs['q'], inputs['k'],
                                  inputs['v'], inputs.get('m'))
                times.append(time.perf_counter() - t0)
            print('median of %d runs (with host copies): %.3f ms' %
                  (args.bench, statistics.median(times) * 1e3))
        return 0
    except (OSError, ValueError, KeyError, TypeError, CudaError) as e:
        print('masformer_gpu: error: %s' % e, file=sys.stderr)
        return 1


if __name__ == '__main__':
    sys.exit(main())
