"""Runs an imported masformer module on the CPU with numpy inputs.

The module's @main (as masformer-translate --import-onnx writes it) is
called from a generated @masformer_entry that embeds the inputs as exact hex
constants and prints every result; the module is lowered with a masformer-opt
pipeline and run by mlir-runner, and the printed results are parsed back.
"""

import re
import subprocess

import numpy as np

_TENSOR = r"tensor<[^>]*>"
_NUMBER = re.compile(r"-?(?:nan|inf|\d+(?:\.\d*)?(?:e[-+]?\d+)?)")
_DTYPES = {"f32": np.float32, "f16": np.float16, "i64": np.int64,
           "i32": np.int32, "i1": np.bool_}


def _parse_type(t):
    """tensor<2x?x8xf32> -> ([2, None, 8], "f32")."""
    body = t[len("tensor<"):-1]
    parts = body.split("x")
    return [None if p == "?" else int(p) for p in parts[:-1]], parts[-1]


def main_signature(mlir_text, func="main"):
    """Argument and result tensor types of @func, as (shape, elem) lists."""
    m = re.search(r"func\.func @%s\((.*)\) -> (.*) \{\s*$" % func, mlir_text,
                  re.M)
    if not m:
        raise RuntimeError(f"no @{func} in module")
    args = [_parse_type(t) for t in re.findall(_TENSOR, m.group(1))]
    results = [_parse_type(t) for t in re.findall(_TENSOR, m.group(2))]
    return args, results


def _hex_dense(x, elem):
    if elem == "f32":
        raw = np.ascontiguousarray(x, dtype="<f4").tobytes()
    elif elem == "f16":
        raw = np.ascontiguousarray(x, dtype="<f2").tobytes()
    elif elem == "i64":
        raw = np.ascontiguousarray(x, dtype="<i8").tobytes()
    elif elem == "i32":
        raw = np.ascontiguousarray(x, dtype="<i4").tobytes()
    else:
        raise ValueError(f"unsupported input element type {elem}")
    return f'dense<"0x{raw.hex().upper()}">'


def _dim(d):
    return "?" if d is None else str(d)


def _ty(shape, elem):
    return "tensor<" + "".join(f"{_dim(d)}x" for d in shape) + elem + ">"


def _memref(shape, elem):
    return "memref<" + "".join(f"{_dim(d)}x" for d in shape) + elem + ">"


def build_entry(args, results, inputs, func="main"):
    lines = ["func.func private @printMemrefF32(memref<*xf32>)",
             "func.func private @printMemrefI64(memref<*xi64>)",
             "func.func @masformer_entry() {"]
    names = []
    for i, ((shape, elem), x) in enumerate(zip(args, inputs)):
        if len(x.shape) != len(shape) or any(
                d is not None and d != n for d, n in zip(shape, x.shape)):
            raise ValueError(f"input {i} has shape {x.shape}, @main wants "
                             f"{shape}")
        static = list(x.shape)
        lines.append(f"  %in{i} = arith.constant {_hex_dense(x, elem)} : "
                     f"{_ty(static, elem)}")
        if static != shape:
            # A dynamic @main: the static inputs are cast to its types.
            lines.append(f"  %dyn{i} = tensor.cast %in{i} : "
                         f"{_ty(static, elem)} to {_ty(shape, elem)}")
            names.append(f"%dyn{i}")
        else:
            names.append(f"%in{i}")
    rtypes = [_ty(s, e) for s, e in results]
    lines.append(f"  %r:{len(results)} = call @{func}({', '.join(names)}) : "
                 f"({', '.join(_ty(s, e) for s, e in args)}) -> "
                 f"({', '.join(rtypes)})")
    for i, (shape, elem) in enumerate(results):
        val = f"%r#{i}"
        pelem = elem
        if elem in ("f16", "bf16"):
            lines.append(f"  %x{i} = arith.extf {val} : {_ty(shape, elem)} to "
                         f"{_ty(shape, 'f32')}")
            val, pelem = f"%x{i}", "f32"
        if pelem not in ("f32", "i64"):
            raise ValueError(f"cannot print results of type {elem}")
        lines.append(f"  %b{i} = bufferization.to_buffer {val} : "
                     f"{_ty(shape, pelem)} to {_memref(shape, pelem)}")
        lines.append(f"  %u{i} = memref.cast %b{i} : {_memref(shape, pelem)} "
                     f"to memref<*x{pelem}>")
        fn = "printMemrefF32" if pelem == "f32" else "printMemrefI64"
        lines.append(f"  call @{fn}(%u{i}) : (memref<*x{pelem}>) -> ()")
    lines.append("  return\n}")
    return "\n".join(lines) + "\n"


def run_module(mlir_text, inputs, opt="masformer-opt", runner="mlir-runner",
               lib_dir="/usr/lib/llvm-22/lib",
               pipeline=("--masformer-reference-to-llvm",)):
    """Returns the results of @main on `inputs` as numpy arrays."""
    args, results = main_signature(mlir_text)
    entry = build_entry(args, results, inputs)
    m = re.search(r"^module( attributes \{.*\})? \{\s*$", mlir_text, re.M)
    if not m:
        raise RuntimeError("no module header")
    text = mlir_text[:m.end()] + "\n" + entry + mlir_text[m.end():]
    lowered = subprocess.run([opt, "-"] + list(pipeline), input=text,
                             capture_output=True, text=True)
    if lowered.returncode:
        raise RuntimeError(f"masformer-opt failed:\n{lowered.stderr[-4000:]}")
    run = subprocess.run(
        [runner, "-e", "masformer_entry", "-entry-point-result=void",
         f"-shared-libs={lib_dir}/libmlir_runner_utils.so,"
         f"{lib_dir}/libmlir_c_runner_utils.so"],
        input=lowered.stdout, capture_output=True, text=True)
    if run.returncode:
        raise RuntimeError(f"mlir-runner failed:\n{run.stderr[-4000:]}")
    blocks = run.stdout.split("Unranked Memref")[1:]
    if len(blocks) != len(results):
        raise RuntimeError(f"expected {len(results)} printed results, got "
                           f"{len(blocks)}")
    outs = []
    for block, (_, elem) in zip(blocks, results):
        # The printed sizes: results of a dynamic @main have them only there.
        sizes = re.search(r"sizes = \[([^\]]*)\]", block).group(1)
        shape = [int(d) for d in sizes.split(",") if d.strip()]
        if 0 in shape:
            # An empty result prints no values (only brackets).
            arr = np.zeros(shape)
        else:
            vals = [float(v)
                    for v in _NUMBER.findall(block.split("data =", 1)[1])]
            arr = np.array(vals).reshape(shape)
        outs.append(arr.astype(np.int64) if elem == "i64" else arr)
    return outs
