#!/usr/bin/env python3
"""A GPT-2-small-shaped model compiled with `masformer-compile
--target=cuda`, full and rewritten, timed on a GPU machine.

Here (MLIR, the CUDA toolkit's ptxas, no GPU needed):

    python3 bench/gpu_model.py prepare OUT [--spans "span=block:512 ..."]

writes the model of bench/make_gpt_model.py (12 layers, d_model 768, 12
heads, vocabulary 50257) with `--repeat-rows 16`, compiles it for sm_90
with all spans full and with the rewrite, each in f32 and with
--precision=bf16, and puts into OUT the two
libraries, their weights and the ONNX model lzma-compressed, and the
runtime and shim they load: about 25 MB, under the 64 MiB a device run
carries, where the weights themselves are 0.5 GB. The repeated rows make
the weights compressible; the model does the same work as with random
weights (the products' and attention's cost does not depend on the values,
and the values are not zeros).

On the GPU machine (numpy, onnxruntime; no MLIR; torch for --torch and
--profile):

    python3 bench/gpu_model.py run OUT [--seqs 2048 8192] [--reps 5]
        [--torch] [--profile]

unpacks OUT into --unpack (default /tmp/masformer-gpu-model-run), checks the full library against onnxruntime (CPU) at the
first length (tolerance 1e-3 + 1e-3 |onnxruntime|: 3xTF32 products over
12 layers), and prints the median time of --reps runs of each library at
each length (the runtime's mf_model_run: input_ids from the host, the
logits into the library's host buffer), the
rewritten / full ratio (of the same precision), and onnxruntime's time on that machine's CPU at
the first length. --torch times the peer on the same GPU: the same model
in PyTorch (TorchPeer), full attention, f32 and bf16, checked against
onnxruntime at the first length.
"""
import argparse
import json
import lzma
import os
import shutil
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "build", "bin")
LIB = os.path.join(ROOT, "build", "lib")


def compress(src, dst):
    with open(src, "rb") as f, lzma.open(dst, "wb", preset=1) as g:
        shutil.copyfileobj(f, g, 1 << 24)


def decompress(src, dst):
    with lzma.open(src, "rb") as f, open(dst, "wb") as g:
        shutil.copyfileobj(f, g, 1 << 24)


def unpack(src_dir, dst_dir):
    """Copies src_dir into dst_dir, decompressing the .xz files, and returns
    its manifest.json (bench/gpu_model.py and bench/cpu_model.py)."""
    os.makedirs(dst_dir, exist_ok=True)
    for name in os.listdir(src_dir):
        src = os.path.join(src_dir, name)
        if name.endswith(".xz"):
            decompress(src, os.path.join(dst_dir, name[:-3]))
        else:
            shutil.copy(src, dst_dir)
    with open(os.path.join(dst_dir, "manifest.json")) as f:
        return json.load(f)


def prepare(a):
    os.makedirs(a.out, exist_ok=True)
    work = a.work
    os.makedirs(work, exist_ok=True)
    model = os.path.join(work, "gpt2-small-r16.onnx")
    if not os.path.exists(model):
        subprocess.run([sys.executable,
                        os.path.join(ROOT, "bench", "make_gpt_model.py"),
                        "--layers", "12", "--d-model", "768", "--heads", "12",
                        "--repeat-rows", "16", "--out", model], check=True)
    libs = {"full": [], "rewritten": ["--spans=" + a.spans],
            "full-bf16": ["--precision=bf16"],
            "rewritten-bf16": ["--precision=bf16", "--spans=" + a.spans]}
    for name, extra in libs.items():
        so = os.path.join(work, name + ".so")
        t = time.perf_counter()
        subprocess.run([os.path.join(BIN, "masformer-compile"), model,
                        "--target=cuda", "--chip=" + a.chip, "-o", so] + extra,
                       check=True)
        print(f"compiled {name} in {time.perf_counter() - t:.1f} s",
              flush=True)
        shutil.copy(so, os.path.join(a.out, name + ".so"))
        compress(os.path.join(work, name + ".weights"),
                 os.path.join(a.out, name + ".weights.xz"))
    compress(model, os.path.join(a.out, "model.onnx.xz"))
    for lib in ("libMASFormerRuntime.so", "libMASFormerCudaRuntime.so"):
        shutil.copy(os.path.join(LIB, lib), a.out)
    with open(os.path.join(a.out, "manifest.json"), "w") as f:
        json.dump({"chip": a.chip, "spans": a.spans,
                   "libs": list(libs)}, f)
    for name in sorted(os.listdir(a.out)):
        size = os.path.getsize(os.path.join(a.out, name))
        print(f"{name}: {size / 2**20:.1f} MiB")


def run(a):
    sys.path.insert(0, os.path.join(ROOT, "test", "gpu"))
    sys.path.insert(0, os.path.join(ROOT, "test", "python_utils"))
    from run_models import Model, load_runtime
    from timing import median_time
    import onnxruntime as ort

    # Unpacked elsewhere: the directory itself travels, and stays small.
    d = a.unpack
    t = time.perf_counter()
    manifest = unpack(a.out, d)
    print(f"unpacked into {d} in {time.perf_counter() - t:.1f} s", flush=True)
    rt = load_runtime(os.path.join(d, "libMASFormerRuntime.so"))
    models = {n: Model(rt, os.path.join(d, n + ".so"))
              for n in manifest["libs"]}
    rng = np.random.default_rng(0)
    sess = ort.InferenceSession(os.path.join(d, "model.onnx"),
                                providers=["CPUExecutionProvider"])
    peer = TorchPeer(os.path.join(d, "model.onnx")) if a.torch else None
    print("| S | attention | ours (ms) | rewritten / full | onnxruntime CPU "
          "(ms) | ours vs onnxruntime | max error / max |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    peer_rows = []
    failed = False
    for i, s in enumerate(a.seqs):
        feeds = {"input_ids": rng.integers(0, 50257, (1, s), dtype=np.int64)}
        times, err, t_ort = {}, None, None
        for n, m in models.items():
            got = m.run(feeds)[0]
            if n == "full" and i == 0:
                want = sess.run(None, feeds)[0]
                diff = np.abs(got.astype(np.float64) - want)
                bad = diff > 1e-3 + 1e-3 * np.abs(want)
                err = float(diff.max() / max(np.abs(want).max(), 1e-30))
                if bad.any() or not np.isfinite(got).all():
                    failed = True
                    print(f"FAIL: S = {s}: {int(bad.sum())} logits off by "
                          f"more than 1e-3 + 1e-3 |ort| (worst "
                          f"{diff.max():.3e})", flush=True)
                t_ort = median_time(lambda: sess.run(None, feeds), 3,
                                    warmups=0)
            # The library's run: input_ids to the device, the forward
            # pass, the logits into the library's host buffer (not the
            # copy into numpy that m.run adds, 0.3 s for GPT-2's 412 MB
            # of logits at S = 2048).
            times[n] = median_time(lambda: m.rt.mf_model_run(m.m), a.reps,
                                   warmups=1)
        if peer:
            ids = feeds["input_ids"]
            for prec, ours in (("f32", "full"), ("bf16", "full-bf16")):
                got = peer.run(ids, prec)
                perr = None
                if i == 0:
                    # The peer against onnxruntime too: it must compute
                    # the same model.
                    perr = float(np.abs(got.astype(np.float64) - want).max()
                                 / max(np.abs(want).max(), 1e-30))
                t_peer = median_time(lambda: peer.run(ids, prec), a.reps,
                                     warmups=1)
                peer_rows.append((s, prec, times[ours], t_peer, perr))
        for n in models:
            base = "full-bf16" if n.endswith("bf16") else "full"
            ratio = times[n] / times[base]
            what = "full" if n.startswith("full") else manifest["spans"]
            if n.endswith("bf16"):
                what += " (bf16)"
            print("| %d | %s | %.1f | %.3f | %s | %s | %s |" % (
                s, what,
                times[n] * 1e3, ratio,
                "%.0f" % (t_ort * 1e3) if t_ort and n == "full" else "",
                "%.1fx" % (t_ort / times[n]) if t_ort and n == "full"
                else "",
                "%.1e" % err if err is not None and n == "full" else ""),
                flush=True)
    if peer_rows:
        import torch
        print(f"\nPyTorch {torch.__version__} on the same GPU "
              f"({torch.cuda.get_device_name()}), full attention, eager:")
        print("| S | precision | ours (ms) | PyTorch (ms) | ours vs PyTorch | "
              "PyTorch max error / max (vs onnxruntime) |")
        print("| --- | --- | --- | --- | --- | --- |")
        for s, prec, ours, t_peer, perr in peer_rows:
            print("| %d | %s | %.1f | %.1f | %.2fx | %s |" % (
                s, prec, ours * 1e3, t_peer * 1e3, t_peer / ours,
                "%.1e" % perr if perr is not None else ""), flush=True)
    if a.profile:
        profile(models, a.seqs[0], rng)
    return 1 if failed else 0


class TorchPeer:
    """The same model in PyTorch on the same GPU, from the ONNX model's
    weights (bench/make_gpt_model.py's names): cuBLAS products, PyTorch's
    fused causal attention (scaled_dot_product_attention), eager. "f32"
    keeps FP32 products (no TF32: ours are 3xTF32, as accurate); "bf16"
    autocasts the products and attention to bf16 with f32 layer norms, as
    our --precision=bf16 does. A run is what mf_model_run does: input_ids
    from the host, the forward pass, the f32 logits into a page-locked host
    buffer."""

    def __init__(self, onnx_path):
        import onnx
        import torch
        from onnx import numpy_helper
        self.torch = torch
        torch.backends.cuda.matmul.allow_tf32 = False
        model = onnx.load(onnx_path)
        self.w = {}
        for t in model.graph.initializer:
            a = numpy_helper.to_array(t)
            if t.name == "c_hd":
                self.heads, self.head_dim = int(a[2]), int(a[3])
            elif a.dtype == np.float32 and a.ndim >= 1:
                self.w[t.name] = torch.from_numpy(a.copy()).cuda()
        self.layers = sum(1 for n in self.w if n.endswith(".ln1.w"))
        self.out = None

    def forward(self, ids):
        F = self.torch.nn.functional
        w = self.w
        b, s = ids.shape
        d = self.heads * self.head_dim
        x = w["wte"][ids] + w["wpe"][:s]
        for i in range(self.layers):
            p = f"h{i}."
            h = F.layer_norm(x, (d,), w[p + "ln1.w"], w[p + "ln1.b"], 1e-5)
            q, k, v = (h @ w[p + "attn.w"] + w[p + "attn.b"]).split(d, dim=2)
            q, k, v = (t.view(b, s, self.heads, self.head_dim).transpose(1, 2)
                       for t in (q, k, v))
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            o = o.transpose(1, 2).reshape(b, s, d)
            x = x + (o @ w[p + "proj.w"] + w[p + "proj.b"])
            h = F.layer_norm(x, (d,), w[p + "ln2.w"], w[p + "ln2.b"], 1e-5)
            f = F.gelu(h @ w[p + "fc.w"] + w[p + "fc.b"], approximate="tanh")
            x = x + (f @ w[p + "mproj.w"] + w[p + "mproj.b"])
        x = F.layer_norm(x, (d,), w["lnf.w"], w["lnf.b"], 1e-5)
        return x @ w["wte"].t()

    def run(self, ids_host, precision):
        torch = self.torch
        with torch.no_grad():
            ids = torch.from_numpy(ids_host).cuda(non_blocking=True)
            if precision == "bf16":
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    logits = self.forward(ids)
            else:
                logits = self.forward(ids)
            logits = logits.float()
            if self.out is None or self.out.shape != logits.shape:
                self.out = torch.empty(logits.shape, dtype=torch.float32,
                                       pin_memory=True)
            self.out.copy_(logits, non_blocking=True)
            torch.cuda.synchronize()
        return self.out.numpy()


def profile(models, s, rng):
    """Where a run's time goes, at length s: the device time of each kernel
    and copy (torch's profiler: CUPTI sees the driver-API launches of our
    shim, through test/gpu/kernel_times.py), against the wall time of the
    run alone."""
    import torch
    from kernel_times import device_events
    from timing import median_time
    torch.cuda.init()
    feeds = {"input_ids": rng.integers(0, 50257, (1, s), dtype=np.int64)}
    for n in ("full", "full-bf16"):
        m = models[n]
        m.run(feeds)
        run_only = median_time(lambda: m.rt.mf_model_run(m.m), 3, warmups=1)
        per = device_events(lambda: m.rt.mf_model_run(m.m), 1)
        total = sum(t for _, t in per.values())
        print(f"\n{n}, S = {s}: mf_model_run alone {run_only * 1e3:.1f} ms "
              f"wall; device {total / 1e3:.1f} ms in {len(per)} kernels "
              f"and copies")
        print("| kernel or copy | calls | device ms |")
        print("| --- | --- | --- |")
        for name, (c, t) in sorted(per.items(), key=lambda x: -x[1][1])[:12]:
            print(f"| {name[:70]} | {c:.0f} | {t / 1e3:.2f} |", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("out")
    p.add_argument("--spans", default="span=block:512 policy=top num-full=3")
    p.add_argument("--chip", default="sm_90")
    p.add_argument("--work", default="/tmp/masformer-gpu-model")
    r = sub.add_parser("run")
    r.add_argument("out")
    r.add_argument("--seqs", type=int, nargs="+", default=[2048, 8192])
    r.add_argument("--reps", type=int, default=5)
    r.add_argument("--unpack", default="/tmp/masformer-gpu-model-run")
    r.add_argument("--torch", action="store_true",
                   help="also time the same model in PyTorch on the GPU "
                   "(f32 and bf16, full attention): the peer")
    r.add_argument("--profile", action="store_true",
                   help="then the device time of each kernel and copy at "
                   "the first length (needs torch)")
    a = ap.parse_args()
    return prepare(a) if a.cmd == "prepare" else run(a)


if __name__ == "__main__":
    sys.exit(main())
