#!/usr/bin/env python3
"""Runs the whole models that test/gpu/build.sh compiled for the GPU
(`masformer-compile --target=cuda`), on a machine with an NVIDIA GPU, and
compares them with onnxruntime.

    run_models.py DIR [--reps 20] [--out gpu-results.md]

DIR/models.json lists the libraries in DIR (model_<name>.so), the
onnxruntime reference model of each (the original, or the ONNX export of
the same rewrite) and the input sizes. Each library is loaded with the project's
runtime (DIR/libMASFormerRuntime.so, through ctypes: the same C API as
masformer-run), run on the inputs of test/python_utils/ort_inputs.py, and
compared within 1e-4 + 1e-4 * |onnxruntime| (3xTF32 products, f32
elsewhere). Then the median time of --reps runs, host buffers in and out
as masformer_run takes them, against onnxruntime's on the CPU. Needs numpy
and onnxruntime, no MLIR or torch. Exit status 1 if a model fails.
"""
import argparse
import ctypes
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', 'python_utils'))
from ort_inputs import mismatch, reference  # noqa: E402
from timing import median_time  # noqa: E402

DTYPES = ['f32', 'f16', 'bf16', 'f64', 'i64', 'i32', 'i16', 'i8', 'u8',
          'bool']
NP = {'f32': np.float32, 'f16': np.float16, 'f64': np.float64,
      'i64': np.int64, 'i32': np.int32, 'i16': np.int16, 'i8': np.int8,
      'u8': np.uint8, 'bool': np.bool_}


class TensorInfo(ctypes.Structure):
    _fields_ = [('name', ctypes.c_char_p), ('dtype', ctypes.c_int),
                ('rank', ctypes.c_int64),
                ('dims', ctypes.POINTER(ctypes.c_int64)),
                ('dim_names', ctypes.POINTER(ctypes.c_char_p))]


class Tensor(ctypes.Structure):
    _fields_ = [('dtype', ctypes.c_int), ('rank', ctypes.c_int64),
                ('shape', ctypes.POINTER(ctypes.c_int64)),
                ('data', ctypes.c_void_p), ('size_bytes', ctypes.c_size_t)]


class RuntimeError_(Exception):
    pass


class Model:
    """A compiled model, through the runtime's C API."""

    def __init__(self, rt, path):
        self.rt = rt
        self.m = rt.mf_model_load(path.encode())
        if not self.m:
            raise RuntimeError_(rt.mf_last_error().decode())
        self.inputs = []
        for i in range(rt.mf_model_num_inputs(self.m)):
            info = TensorInfo()
            rt.mf_model_input_info(self.m, i, ctypes.byref(info))
            self.inputs.append((info.name.decode(), DTYPES[info.dtype]))

    def run(self, feeds):
        keep = []
        for name, dtype in self.inputs:
            x = np.ascontiguousarray(feeds[name].astype(NP[dtype]))
            keep.append(x)
            shape = (ctypes.c_int64 * x.ndim)(*x.shape)
            if self.rt.mf_model_set_input(self.m, name.encode(),
                                          DTYPES.index(dtype), shape,
                                          x.ndim, x.ctypes.data):
                raise RuntimeError_(self.rt.mf_last_error().decode())
        if self.rt.mf_model_run(self.m):
            raise RuntimeError_(self.rt.mf_last_error().decode())
        outs = []
        for i in range(self.rt.mf_model_num_outputs(self.m)):
            t = Tensor()
            self.rt.mf_model_output(self.m, i, ctypes.byref(t))
            dtype = DTYPES[t.dtype]
            shape = tuple(t.shape[k] for k in range(t.rank))
            n = int(np.prod(shape)) if shape else 1
            buf = (ctypes.c_char * (n * np.dtype(NP[dtype]).itemsize)
                   ).from_address(t.data) if n else b''
            outs.append(np.frombuffer(bytes(buf), NP[dtype]).reshape(shape))
        return outs

    def __del__(self):
        if getattr(self, 'm', None):
            self.rt.mf_model_free(self.m)


def load_runtime(path):
    rt = ctypes.CDLL(path)
    rt.mf_model_load.restype = ctypes.c_void_p
    rt.mf_model_load.argtypes = [ctypes.c_char_p]
    rt.mf_last_error.restype = ctypes.c_char_p
    for f in ('mf_model_num_inputs', 'mf_model_num_outputs'):
        getattr(rt, f).restype = ctypes.c_size_t
        getattr(rt, f).argtypes = [ctypes.c_void_p]
    rt.mf_model_input_info.argtypes = [ctypes.c_void_p, ctypes.c_size_t,
                                       ctypes.c_void_p]
    rt.mf_model_set_input.argtypes = [
        ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int,
        ctypes.POINTER(ctypes.c_int64), ctypes.c_int64, ctypes.c_void_p]
    rt.mf_model_run.argtypes = [ctypes.c_void_p]
    rt.mf_model_output.argtypes = [ctypes.c_void_p, ctypes.c_size_t,
                                   ctypes.c_void_p]
    rt.mf_model_free.argtypes = [ctypes.c_void_p]
    return rt


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('dir')
    ap.add_argument('--reps', type=int, default=20)
    ap.add_argument('--out', default='gpu-results.md')
    a = ap.parse_args()
    with open(os.path.join(a.dir, 'models.json')) as f:
        models = json.load(f)
    rt = load_runtime(os.path.join(a.dir, 'libMASFormerRuntime.so'))
    failed = False
    with open(a.out, 'a') as out:
        def log(line):
            print(line, flush=True)
            out.write(line + '\n')
            out.flush()
        log('\n## Whole models compiled with --target=cuda\n')
        log('| model | inputs | max abs error | check | ours (ms) | '
            'onnxruntime CPU (ms) |')
        log('| --- | --- | --- | --- | --- | --- |')
        for m in models:
            ort_model = os.path.join(a.dir, m['ort_model'])
            sess, feeds, want = reference(ort_model, m['shapes'])
            try:
                model = Model(rt, os.path.join(a.dir, m['lib']))
                got = model.run(feeds)
            except RuntimeError_ as e:
                log('| %s | %s | - | FAIL: %s | - | - |' % (
                    m['name'], ' '.join(m['shapes']), e))
                failed = True
                continue
            bad, err = None, 0.0
            for o, g, w in zip(sess.get_outputs(), got, want):
                bad = bad or mismatch(o.name, g.astype(np.float64),
                                      w.astype(np.float64), 1e-4, 1e-4,
                                      what='GPU')
                if w.size:
                    err = max(err, float(np.abs(g.astype(np.float64) -
                                                w).max()))
            failed |= bad is not None
            ours = median_time(lambda: model.run(feeds), a.reps, warmups=1)
            theirs = median_time(lambda: sess.run(None, feeds), a.reps,
                                 warmups=1)
            log('| %s | %s | %.2e | %s | %.3f | %.3f |' % (
                m['name'], ' '.join(m['shapes']), err,
                'ok' if bad is None else 'FAIL: ' + bad, ours * 1e3,
                theirs * 1e3))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
