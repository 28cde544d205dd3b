#!/usr/bin/env python3
"""One attention layer on the CPU (batch 1, 12 heads, head_dim 64; not
causal, or causal with --causal as in a decoder), side by side in one run:

- ours: masformer.attention through --masformer-lower-to-cpu (span-aware
  tiles as masformer-compile chooses them: 64 x 128 with AVX-512, 64 x 64
  without; MASFORMER_BENCH_TILE=QxK for others), online softmax, OpenMP
  over batch x head x query tile),
  full, with block spans of 256 and 512, and with any --spans (windows and
  attention sinks: "window 256, sink 64"; per-head spans: "full x2;
  window 512, sink 64 x10"), compiled as masformer-compile compiles a
  model (LLVM -O3 for this host's CPU and its features, here through
  mlir-translate and clang -O3 -march=native), timed inside the compiled
  program (rtclock around each call, after a warm-up call);
- onnxruntime: the same attention as MatMul-Softmax-MatMul (with --causal,
  an additive causal mask), and as its fused
  com.microsoft.MultiHeadAttention op (with --causal, unidirectional=1).

With --precision bf16, ours runs on bf16 Q, K and V (bf16 result): on AMX
tiles where the CPU has AMX, else on AVX512-BF16's vdpbf16ps where it has
that (docs/cpu.md, "bf16 attention"), next to our f32 full attention;
onnxruntime stays f32 (its CPU attention has no bf16). On Intel's CPUs
without AMX masformer-compile does not use these kernels in a model: its
bf16 attention stays f32 there, the faster, and the run says so.

Each timing is the median of --reps calls after a warm-up call; a span
variant makes --reps times its ideal speed-up calls (at most 400), so that
its median covers about as long as full attention's. Reports GFLOP/s
counting only computed (query, key) pairs (4 * heads *
head_dim FLOP each), the fraction of this machine's measured FMA peak
(the best of numpy's sgemm and onnxruntime's MatMul), and the block speed-up over our full against the ideal
(1 / density: full attention's computed pairs over the span's; with
--causal, both counted under the diagonal). Times are each variant's best round; a span's speed-up is
the median over the rounds of our full's time over the span's in the same
round (the two run back to back; each round's ratio is printed), so that a
slowdown of a shared machine lasting a minute does not decide it.

  python3 bench/attention_cpu.py [--seqs 1024 2048] [--reps 2] [--rounds 2]
      [--spans "window 256, sink 64" "full x2; window 256, sink 64 x10" ...]
      [--precision bf16] [--cpu native] [--causal]
"""

import argparse
import atexit
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h

from machine import describe

# The span definition, written once (test/python_utils/masformer_ref.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "test", "python_utils"))
import masformer_ref  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
H, D = 12, 64
LIB = "/usr/lib/llvm-22/lib"
# MASFORMER_BENCH_TILE=QxK: other tiles than masformer-compile's (64 x 128
# with AVX-512, 64 x 64 without).
TILE = (tuple(int(x) for x in os.environ["MASFORMER_BENCH_TILE"].split("x"))
        if os.environ.get("MASFORMER_BENCH_TILE") else None)


def inputs(s):
    """Deterministic Q, K, V, as the MLIR module computes them."""
    i = np.arange(s, dtype=np.float32)[None, None, :, None]
    hh = np.arange(H, dtype=np.float32)[None, :, None, None]
    d = np.arange(D, dtype=np.float32)[None, None, None, :]
    q = np.sin(0.37 * i + 1.3 * d + hh)
    k = np.sin(0.23 * i + 0.7 * d + 2.0 * hh)
    v = np.cos(0.11 * i + 0.5 * d + hh)
    return q.astype(np.float32), k.astype(np.float32), v.astype(np.float32)


def mlir_module(s, span, reps, precision="f32"):
    ty = f"tensor<1x{H}x{s}x{D}xf32>"
    # The attention's own type: the inputs are made in f32 and rounded to
    # it before the timed calls.
    at = ty.replace("f32", precision)
    fill = []
    for name, (a, b, c, fn) in {"q": (0.37, 1.3, 1.0, "sin"),
                                "k": (0.23, 0.7, 2.0, "sin"),
                                "v": (0.11, 0.5, 1.0, "cos")}.items():
        fill.append(f"""
  %{name}e = tensor.empty() : {ty}
  %{name} = linalg.generic {{indexing_maps = [#id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}} outs(%{name}e : {ty}) {{
  ^bb0(%o: f32):
    %hi = linalg.index 1 : index
    %ii = linalg.index 2 : index
    %di = linalg.index 3 : index
    %h64 = arith.index_cast %hi : index to i64
    %i64 = arith.index_cast %ii : index to i64
    %d64 = arith.index_cast %di : index to i64
    %hf = arith.sitofp %h64 : i64 to f32
    %if = arith.sitofp %i64 : i64 to f32
    %df = arith.sitofp %d64 : i64 to f32
    %ca = arith.constant {a} : f32
    %cb = arith.constant {b} : f32
    %cc = arith.constant {c} : f32
    %x0 = arith.mulf %ca, %if : f32
    %x1 = arith.mulf %cb, %df : f32
    %x2 = arith.mulf %cc, %hf : f32
    %x3 = arith.addf %x0, %x1 : f32
    %x4 = arith.addf %x3, %x2 : f32
    %r = math.{fn} %x4 : f32
    linalg.yield %r : f32
  }} -> {ty}""")
    args, cast = "%q, %k, %v", ""
    if precision != "f32":
        args = "%qa, %ka, %va"
        cast = "".join(f"\n  %{n}a = arith.truncf %{n} : {ty} to {at}"
                       for n in "qkv")
    return f"""#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func private @rtclock() -> f64
func.func private @printF64(f64)
func.func private @printNewline()
func.func @attn(%q: {at}, %k: {at}, %v: {at}) -> {at} {{
  %o = masformer.attention %q, %k, %v {{{span}{", causal = true" if CAUSAL else ""}}} : {at}, {at}, {at} -> {at}
  return %o : {at}
}}
func.func @main() {{{''.join(fill)}{cast}
  %w = call @attn({args}) : ({at}, {at}, {at}) -> {at}
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant {reps} : index
  scf.for %it = %c0 to %n step %c1 {{
    %t0 = func.call @rtclock() : () -> f64
    %r = func.call @attn({args}) : ({at}, {at}, {at}) -> {at}
    %t1 = func.call @rtclock() : () -> f64
    %dt = arith.subf %t1, %t0 : f64
    func.call @printF64(%dt) : (f64) -> ()
    func.call @printNewline() : () -> ()
  }}
  return
}}
"""


# The compiled module returns a freshly allocated output (MBs) on every
# call; glibc would mmap and unmap it each time, and page faults would be
# timed. Keeping them on the heap reuses
# the memory across calls, as onnxruntime's arena does for its buffers.
RUN_ENV = dict(os.environ, MALLOC_MMAP_THRESHOLD_=str(1 << 30),
               MALLOC_TRIM_THRESHOLD_=str(1 << 31))


_BUILT = {}


# The LLVM CPU our code is compiled for (--cpu; "native": this one).
CPU = "native"
# --causal: every variant masks the keys after the query.
CAUSAL = False


def target_macros(cpu):
    """The predefined macros of clang for -march=cpu: which vector
    extensions code for that CPU may use."""
    r = subprocess.run(["clang-22", f"-march={cpu}", "-dM", "-E", "-x", "c",
                        "/dev/null"], capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"--cpu={cpu}: {r.stderr.strip()}")
    return r.stdout


def amd_cpu(cpu):
    """Whether the CPU is an AMD Zen, as masformer-compile decides: the
    name for --cpu (znver*), CPUID's vendor for "native"."""
    if cpu != "native":
        return cpu.startswith("znver")
    with open("/proc/cpuinfo") as f:
        return "AuthenticAMD" in f.read(4096)


def pipeline(precision):
    macros = target_macros(CPU)
    # As masformer-compile chooses for the CPU: vectors of 16 and tiles of
    # 64 x 128 with AVX-512, vectors of 8 and tiles of 64 x 64 without.
    avx512 = "__AVX512F__" in macros
    tile = TILE or ((64, 128) if avx512 else (64, 64))
    opts = f"tile-q={tile[0]} tile-kv={tile[1]}"
    if not avx512:
        opts += " vector-width=8"
    if precision == "bf16":
        opts += " precision=bf16"
        if "__AVX512BF16__" in macros:
            opts += " avx512-bf16=1"
        if "__AMX_BF16__" in macros:
            opts += " amx=1"
    return f"--masformer-lower-to-cpu={opts}"


def build_ours(s, span, reps, precision="f32"):
    """The module lowered by --masformer-lower-to-cpu, compiled for this
    host (-O3 -march=native, as masformer-compile targets the host CPU) into
    a program that prints each call's time. Built once per variant."""
    key = (s, span, reps, precision)
    if key in _BUILT:
        return _BUILT[key]
    opt = os.path.join(ROOT, "build", "bin", "masformer-opt")
    lowered = subprocess.run(
        [opt, "-", pipeline(precision)],
        input=mlir_module(s, span, reps, precision).replace("func.func @main()",
                                                 "func.func @bench_main()"),
        capture_output=True, text=True)
    if lowered.returncode:
        sys.exit(lowered.stderr[-3000:])
    work = tempfile.mkdtemp(prefix="masformer-bench-")
    atexit.register(shutil.rmtree, work, ignore_errors=True)
    ll = os.path.join(work, "attn.ll")
    r = subprocess.run(["/usr/lib/llvm-22/bin/mlir-translate",
                        "--mlir-to-llvmir", "-o", ll],
                       input=lowered.stdout, capture_output=True, text=True)
    if r.returncode:
        sys.exit(r.stderr[-3000:])
    main_c = os.path.join(work, "main.c")
    with open(main_c, "w") as f:
        # AMX's tile registers are Linux's to hand out: a process asks
        # before its first tile instruction (as masformer-compile's runtime
        # does), and stops with why if refused.
        permit = ("  if (syscall(SYS_arch_prctl, 0x1023, 18)) {\n"
                  "    perror(\"arch_prctl(ARCH_REQ_XCOMP_PERM)\");\n"
                  "    return 1;\n  }\n"
                  if "amx=1" in pipeline(precision) else "")
        f.write("#include <stdio.h>\n#include <sys/syscall.h>\n"
                "#include <unistd.h>\n"
                "extern void bench_main(void);\n"
                "int main(void) {\n" + permit +
                "  bench_main(); return 0; }\n")
    exe = os.path.join(work, "attn")
    r = subprocess.run(
        ["clang-22", "-O3", f"-march={CPU}", "-Wno-override-module", main_c,
         ll, "-o", exe, f"-L{LIB}", f"-Wl,-rpath,{LIB}",
         "-lmlir_c_runner_utils", "-lmlir_runner_utils", "-lomp", "-lm"],
        capture_output=True, text=True)
    if r.returncode:
        sys.exit(r.stderr[-3000:])
    _BUILT[key] = exe
    return exe


def time_ours(s, span, reps, precision="f32"):
    run = subprocess.run([build_ours(s, span, reps, precision)],
                         capture_output=True, text=True, env=RUN_ENV)
    if run.returncode:
        sys.exit(run.stderr[-3000:])
    return statistics.median(float(x) for x in run.stdout.split())


def ort_model(s, fused):
    shape = [1, H, s, D]
    if fused:
        nodes = []
        ins = []
        for n in ("q", "k", "v"):
            nodes.append(h.make_node("Transpose", [n], [n + "t"],
                                     perm=[0, 2, 1, 3]))
            nodes.append(h.make_node("Reshape", [n + "t", "shape"],
                                     [n + "3"]))
        nodes.append(h.make_node("MultiHeadAttention", ["q3", "k3", "v3"],
                                 ["o"], domain="com.microsoft", num_heads=H,
                                 unidirectional=int(CAUSAL)))
        inits = [onnx.numpy_helper.from_array(
            np.array([1, s, H * D], np.int64), "shape")]
        out = h.make_tensor_value_info("o", T.FLOAT, [1, s, H * D])
        opsets = [h.make_opsetid("", 17), h.make_opsetid("com.microsoft", 1)]
    else:
        nodes = [h.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
                 h.make_node("MatMul", ["q", "kt"], ["s"]),
                 h.make_node("Mul", ["s", "scale"], ["ss"]),
                 h.make_node("Softmax", ["ss"], ["p"], axis=-1),
                 h.make_node("MatMul", ["p", "v"], ["o"])]
        inits = [onnx.numpy_helper.from_array(
            np.array(1 / np.sqrt(D), np.float32), "scale")]
        if CAUSAL:
            nodes[3].input[0] = "sm"
            nodes.insert(3, h.make_node("Add", ["ss", "mask"], ["sm"]))
            inits.append(onnx.numpy_helper.from_array(
                np.triu(np.full((s, s), -np.inf, np.float32), 1), "mask"))
        out = h.make_tensor_value_info("o", T.FLOAT, shape)
        opsets = [h.make_opsetid("", 17)]
    graph = h.make_graph(nodes, "attn",
                         [h.make_tensor_value_info(n, T.FLOAT, shape)
                          for n in ("q", "k", "v")], [out], inits)
    m = h.make_model(graph, opset_imports=opsets)
    m.ir_version = 8
    return m.SerializeToString()


def time_ort(s, fused, reps):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = os.cpu_count()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(ort_model(s, fused), opts,
                                providers=["CPUExecutionProvider"])
    q, k, v = inputs(s)
    feeds = {"q": q, "k": k, "v": v}
    sess.run(None, feeds)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def fma_peak():
    """The best of numpy's sgemm and onnxruntime's MatMul on 2048^3: a
    BLAS built without this CPU's kernels (numpy's OpenBLAS ran AVX2 code
    at 185 GFLOP/s on a Zen 5, onnxruntime's MLAS 375) is no peak."""
    a = np.random.default_rng(0).standard_normal((2048, 2048), np.float32)
    x = h.make_tensor_value_info("x", T.FLOAT, [2048, 2048])
    y = h.make_tensor_value_info("y", T.FLOAT, [2048, 2048])
    g = h.make_graph([h.make_node("MatMul", ["x", "x"], ["y"])], "mm", [x],
                     [y])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = os.cpu_count()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(m.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    best = 0.0
    for run in (lambda: a @ a, lambda: sess.run(None, {"x": a})):
        run()
        t0 = time.perf_counter()
        for _ in range(5):
            run()
        best = max(best, 5 * 2 * 2048 ** 3 / (time.perf_counter() - t0) / 1e9)
    return best


def head_spans(spec):
    """Per-head spans "full x2; window 256, sink 64 x10" (the span report's
    text: each span with its number of heads, in head order) as a list of
    H span texts; None for one span."""
    if " x" not in spec:
        return None
    heads = []
    for part in spec.split(";"):
        text, _, count = part.strip().rpartition(" x")
        heads += [text.strip()] * int(count)
    if len(heads) != H:
        raise SystemExit(f"--spans {spec!r}: {len(heads)} head spans for "
                         f"{H} heads")
    return heads


def span_attr(spec):
    """The op's span attributes for a span or per-head spans."""
    heads = head_spans(spec)
    if heads is None:
        return f"span = #masformer.span<{spec}>"
    return ("span = #masformer.span<full>, head_spans = [" +
            ", ".join(f"#masformer.span<{t}>" for t in heads) + "]")


def span_pairs(s, span):
    """(query, key) pairs per head a span ("full", "block B", "window W",
    either with ", sink K"; or per-head spans, averaged over the heads)
    keeps at s tokens (causal with --causal), from the definition."""
    heads = head_spans(span) or [span]
    return sum(int(masformer_ref.span_allowed(
        s, s, masformer_ref.parse_span(t), CAUSAL).sum()) for t in heads) \
        / len(heads)


def span_reps(reps, pairs_full, pairs):
    """Calls to time a span of `pairs` computed pairs over: --reps times the
    span's speed-up over full attention's `pairs_full`, so that its median
    is taken over about the time of full attention's (a block of 256 at
    S = 2048 takes 4-5 ms a call, where a stall of a shared VM's core moves
    one call by a tenth)."""
    return min(reps * max(1, round(pairs_full / pairs)), 400)


def paired_speedups(full, span):
    """Our full attention's time over a span's, one ratio per round in which
    both ran: the two are timed back to back within a round (seconds
    apart), so that a slowdown of this shared machine lasting a minute
    moves both, where the ratio of each one's best round could pair a
    quiet round of one with a slow round of the other."""
    return [f / t for f, t in zip(full, span) if f is not None and t is not None]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seqs", type=int, nargs="+", default=[1024, 2048])
    ap.add_argument("--blocks", type=int, nargs="+", default=[256, 512])
    ap.add_argument("--spans", nargs="*", default=[],
                    help='more spans, as the attribute writes them: '
                         '"window 256", "window 256, sink 64"; per-head '
                         'spans as the span report writes them: "full x2; '
                         'window 256, sink 64 x10" (12 heads)')
    ap.add_argument("--reps", type=int, default=2,
                    help="calls per timing of full attention, each timing "
                         "their median; a span runs --reps times its "
                         "ideal speed-up (at most 400)")
    ap.add_argument("--precision", choices=["f32", "bf16"], default="f32",
                    help="bf16: ours on bf16 operands (vdpbf16ps where the "
                         "CPU has AVX512-BF16), next to our f32 full "
                         "attention; onnxruntime stays f32")
    ap.add_argument("--rounds", type=int, default=2,
                    help="every variant is timed once per round (each time "
                         "the median of --reps calls); a time is its best "
                         "round, a span's speed-up the median of its rounds' "
                         "ratios to our full in the same round, so that a "
                         "transient slowdown of this shared machine does not "
                         "decide a ratio")
    ap.add_argument("--causal", action="store_true",
                    help="causal attention, as in a decoder: ours with "
                         "causal = true, onnxruntime with a causal mask "
                         "(MatMul-Softmax-MatMul) and unidirectional=1 "
                         "(MultiHeadAttention); pairs counted under the "
                         "diagonal")
    ap.add_argument("--cpu", default="native",
                    help="compile ours for this LLVM CPU (clang -march; "
                         "vectors of 8 where it has no AVX-512): code for "
                         "an AVX2 server (znver3, haswell) timed on this "
                         "machine; onnxruntime still runs this CPU's kernels")
    a = ap.parse_args()
    global CPU, CAUSAL
    CPU, CAUSAL = a.cpu, a.causal
    peak = fma_peak()
    print(f"CPU: {describe()}")
    print(f"ours compiled for: --cpu={CPU} ({pipeline(a.precision)})")
    print(f"attention: {'causal' if CAUSAL else 'not causal'}")
    p = a.precision
    ours = "ours" if p == "f32" else "ours bf16"
    if p == "bf16":
        print(f"ours bf16: {pipeline(p)}")
        if not amd_cpu(CPU) and "amx=1" not in pipeline(p):
            print("note: Intel without AMX: masformer-compile "
                  "--precision=bf16 keeps attention f32 for this CPU "
                  "(docs/cpu.md, \"bf16 attention\"); these are the bf16 "
                  "kernels it does not use")
    print(f"measured sgemm peak (best of numpy, onnxruntime): {peak:.1f} GFLOP/s ({os.cpu_count()} cores)")
    rows = []
    for s in a.seqs:
        pairs_full = span_pairs(s, "full")
        variants = [(f"{ours} full", pairs_full,
                     lambda: time_ours(s, span_attr("full"), a.reps, p))]
        for b in a.blocks:
            pairs = span_pairs(s, f"block {b}")
            variants.append((f"{ours} block {b}", pairs,
                             lambda b=b, n=span_reps(a.reps, pairs_full, pairs):
                             time_ours(s, span_attr(f"block {b}"), n, p)))
        for span in a.spans:
            pairs = span_pairs(s, span)
            variants.append((f"{ours} {span}", pairs,
                             lambda span=span, n=span_reps(a.reps, pairs_full, pairs):
                             time_ours(s, span_attr(span), n, p)))
        if p != "f32":
            variants.append(("ours f32 full", pairs_full,
                             lambda: time_ours(s, span_attr("full"),
                                               a.reps)))
        variants.append(("onnxruntime MatMul-Softmax-MatMul", pairs_full,
                         lambda: time_ort(s, False, a.reps)))
        variants.append(("onnxruntime MultiHeadAttention (fused)", pairs_full,
                         lambda: time_ort(s, True, a.reps)))
        rounds = {name: [] for name, _, _ in variants}
        for _ in range(a.rounds):
            for name, _, fn in variants:
                try:
                    t = fn()
                except Exception as e:  # noqa: BLE001 - report and go on
                    print(f"{name} unavailable: {e}")
                    t = None
                rounds[name].append(t)
        full = rounds[f"{ours} full"]
        for name, pairs, _ in variants:
            done = [t for t in rounds[name] if t is not None]
            if not done:
                continue
            sp = None
            if name.startswith(f"{ours} ") and name != f"{ours} full":
                ratios = paired_speedups(full, rounds[name])
                if ratios:
                    sp = (statistics.median(ratios), pairs_full / pairs)
                    print(f"S={s} {name}: speed-up over our full per round: "
                          + " ".join(f"{r:.2f}" for r in ratios))
            rows.append((s, name, min(done), pairs, sp))
        print(f"S={s} done", flush=True)
    print()
    print("| S | variant | time (ms) | GFLOP/s (computed pairs) | of peak | "
          "span speed-up over our full | ideal (1/density) | of ideal |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for s, name, t, pairs, sp in rows:
        gf = 4 * H * D * pairs / t / 1e9
        extra = (f"{sp[0]:.2f} | {sp[1]:.2f} | {sp[0] / sp[1]:.3f}" if sp
                 else " | | ")
        print(f"| {s} | {name} | {1e3 * t:.1f} | {gf:.1f} | "
              f"{gf / peak:.3f} | {extra} |")


if __name__ == "__main__":
    main()
