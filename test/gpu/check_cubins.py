#!/usr/bin/env python3
"""Compiles every attention configuration of make_kernels.py for a chip and
checks the result with the CUDA toolkit's ptxas, no GPU needed.

    check_cubins.py --chip sm_90 [--toolkit /usr/local/cuda] [--set all]

Also the matrix-product kernels of make_kernels.PRODUCTS. For each kernel:
the cubin assembles, and ptxas's report (-v) gives its
registers, stack frame and spills; its PTX uses the instructions the kernel
is built on (mma.sync m16n8k16 for f16/bf16 or m16n8k8 for f32,
ldmatrix.x4 and .trans for 16-bit operands, 16-byte cp.async.cg). The main attention configurations (bf16
and f16, head_dim 64 and 128) and the products must not spill; the others
are reported. Also checks
that format=bin puts an ELF cubin into the gpu.binary. Exit status 1 on a
failed check. Needs masformer-opt on PATH.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import gpu_objects  # noqa: E402
import make_kernels  # noqa: E402


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode:
        sys.exit('check_cubins.py: %s failed:\n%s' % (cmd[0], r.stderr))
    return r


def find_tool(toolkit, name):
    """A CUDA tool from the toolkit, PATH, or the nvidia-* wheels."""
    import shutil
    for d in [os.path.join(toolkit, 'bin')]:
        if os.path.exists(os.path.join(d, name)):
            return os.path.join(d, name)
    if shutil.which(name):
        return shutil.which(name)
    try:
        import nvidia  # the pip wheels' namespace package
        for root in nvidia.__path__:
            for sub in sorted(os.listdir(root)):
                p = os.path.join(root, sub, 'bin', name)
                if os.path.exists(p):
                    return p
    except ImportError:
        pass
    return None


def sass_counts(toolkit, cubin):
    """Per kernel of the cubin: (HMMA.16816, HMMA.1688, LDSM, LDGSTS,
    STL + LDL) from cuobjdump -sass; None without the tools."""
    cuobjdump = find_tool(toolkit, 'cuobjdump')
    nvdisasm = find_tool(toolkit, 'nvdisasm')
    if not cuobjdump or not nvdisasm:
        return None
    env = dict(os.environ, PATH=os.path.dirname(nvdisasm) + os.pathsep +
               os.environ.get('PATH', ''))
    r = run([cuobjdump, '-sass', cubin], env=env)
    counts = {}
    for body in re.split(r'\n\s*Function : ', r.stdout)[1:]:
        kname = body.split(None, 1)[0]
        counts[kname] = (
            len(re.findall(r'\bHMMA\.16816\.', body)),
            len(re.findall(r'\bHMMA\.1688\.', body)),
            len(re.findall(r'\bLDSM\.', body)),
            len(re.findall(r'\bLDGSTS\.', body)),
            len(re.findall(r'\b(?:STL|LDL)\b', body)))
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--chip', required=True)
    ap.add_argument('--toolkit',
                    default=os.environ.get('CUDA_HOME', '/usr/local/cuda'))
    ap.add_argument('--set', default='all')
    args = ap.parse_args()
    configs = make_kernels.configs(args.set)
    src = '\n'.join([make_kernels.function(*c) for c in configs] +
                    [make_kernels.product(*p, zero_init=z)
                     for p in make_kernels.PRODUCTS for z in (False, True)])
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        # PTX, assembled here with -v for the report.
        r = run(['masformer-opt', '-', '--masformer-lower-to-nvvm=chip=%s '
                 'format=isa host-to-llvm=0 toolkit=%s' % (args.chip,
                                                           args.toolkit)],
                input=src)
        text = r.stdout
        binaries = re.findall(r'gpu\.binary @(\w+)', text)
        if binaries != ['masformer_kernels']:
            sys.exit('check_cubins.py: expected one gpu.binary, got %s' %
                     binaries)
        mlir = os.path.join(tmp, 'ptx.mlir')
        with open(mlir, 'w') as f:
            f.write(text)
        run([sys.executable, os.path.join(here, 'gpu_objects.py'), mlir,
             tmp])
        ptx = os.path.join(tmp, 'masformer_kernels.%s.ptx' % args.chip)
        r = run([os.path.join(args.toolkit, 'bin', 'ptxas'),
                 '-arch=' + args.chip, '-v', ptx, '-o',
                 os.path.join(tmp, 'k.cubin')])
        # The instructions each kernel must be built on, from its PTX.
        with open(ptx) as f:
            ptx_text = f.read()
        entries = re.split(r'\.entry ', ptx_text)[1:]
        instrs = {}
        for body in entries:
            kname = re.match(r'(\w+)', body).group(1)
            instrs[kname] = (
                len(re.findall(r'mma\.sync\.aligned\.m16n8k16\.', body)),
                len(re.findall(r'mma\.sync\.aligned\.m16n8k8\.', body)),
                len(re.findall(r'ldmatrix\.sync\.aligned\.m8n8\.x4\.shared',
                               body)),
                len(re.findall(
                    r'ldmatrix\.sync\.aligned\.m8n8\.x4\.trans\.shared',
                    body)),
                len(re.findall(r'cp\.async\.cg\.shared\.global \[[^\]]+\], '
                               r'\[[^\]]+\], 16', body)))

        def ptx_check(kname, dtype, trans_needed):
            """Tensor cores of the element type, ldmatrix for 16-bit types
            (.trans where the kernel reads a transposed operand), 16-byte
            cp.async copies."""
            m16, m8, ldsm, ldsmt, cp16 = instrs.get(kname, (0,) * 5)
            ok = cp16 > 0 and (
                m8 > 0 and m16 == 0 if dtype == 'f32' else
                m16 > 0 and ldsm > 0 and (ldsmt > 0 or not trans_needed))
            return ok, ('%d | %d | %d | %d | %d | %s' % (
                m16, m8, ldsm, ldsmt, cp16, 'ptx ok' if ok else 'PTX WRONG'))

        # SASS, where cuobjdump and nvdisasm are found (the toolkit's, or
        # the nvidia-cuda-cuobjdump/-nvdisasm wheels of requirements.txt).
        sass = sass_counts(args.toolkit, os.path.join(tmp, 'k.cubin'))

        def sass_check(kname, dtype, allow_local=False):
            """Tensor-core HMMA of the element type, LDSM for 16-bit
            operands, LDGSTS (cp.async) and no local memory (STL/LDL, the
            spills; allowed where ptxas's spills are reported only)."""
            if sass is None:
                return True, 'no cuobjdump'
            hm16, hm8, ldsm, ldgsts, local = sass.get(kname, (0,) * 5)
            ok = ldgsts > 0 and (local == 0 or allow_local) and (
                hm8 > 0 if dtype == 'f32' else hm16 > 0 and ldsm > 0)
            return ok, '%d | %d | %d | %d | %d | %s' % (
                hm16, hm8, ldsm, ldgsts, local,
                'sass ok' if ok else 'SASS WRONG')

        report = {}
        for m in re.finditer(
                r"Function properties for (\w+)\n\s*(\d+) bytes stack frame, "
                r"(\d+) bytes spill stores, (\d+) bytes spill loads\n"
                r"ptxas info\s*: Used (\d+) registers", r.stderr):
            report[m.group(1)] = tuple(int(x) for x in m.groups()[1:])
        print('| kernel (%s) | registers | stack | spill stores | spill loads '
              '| check | mma m16n8k16 | mma m16n8k8 | ldmatrix.x4 | '
              'ldmatrix.x4.trans | cp.async 16 B | PTX | HMMA.16816 | '
              'HMMA.1688 | LDSM | LDGSTS | STL/LDL | SASS |' % args.chip)
        print('| --- ' * 18 + '|')
        ptx_ok = sass_ok = 0
        for c in configs:
            # Kernels name the causal flag only when set.
            name = 'masformer_attention_' + make_kernels.name(*c[:4]).replace(
                '_bidir', '') + ('_maskf32' if len(c) > 4 else '')
            if name not in report:
                print('| %s | - | - | - | - | MISSING |' % name)
                failures += 1
                continue
            stack, st, ld, regs = report[name]
            main_cfg = c[0] in ('bf16', 'f16') and c[1] in (64, 128)
            ok = not main_cfg or (st == 0 and ld == 0)
            failures += not ok
            # V's fragments come by ldmatrix.x4.trans.
            pok, pcols = ptx_check(name, c[0], trans_needed=True)
            sok, scols = sass_check(name, c[0], allow_local=not main_cfg)
            failures += (not pok) + (not sok)
            ptx_ok += pok
            sass_ok += sok
            print('| %s | %d | %d | %d | %d | %s | %s | %s |' % (
                name, regs, stack, st, ld,
                ('no spills' if st == ld == 0 else
                 'spills (reported: not a main configuration)')
                if ok else 'SPILLS', pcols, scols))
        for (dtype, result, bt), acc in [
                (p, acc) for p in make_kernels.PRODUCTS
                for acc in (True, False)]:
            name = 'masformer_matmul_%s_%s%s%s' % (
                dtype, result, '_bt' if bt else '', '_acc' if acc else '')
            if name not in report:
                print('| %s | - | - | - | - | MISSING |' % name)
                failures += 1
                continue
            stack, st, ld, regs = report[name]
            ok = st == 0 and ld == 0
            failures += not ok
            # B stored [k, n] (not _bt) is read by ldmatrix.x4.trans.
            pok, pcols = ptx_check(name, dtype, trans_needed=not bt)
            sok, scols = sass_check(name, dtype)
            failures += (not pok) + (not sok)
            ptx_ok += pok
            sass_ok += sok
            print('| %s | %d | %d | %d | %d | %s | %s | %s |' % (
                name, regs, stack, st, ld, 'no spills' if ok else 'SPILLS',
                pcols, scols))
        print('PTX: %d of %d kernels on the expected instructions' % (
            ptx_ok, len(report)))
        if sass is None:
            print('SASS: NOT CHECKED (no cuobjdump/nvdisasm)')
        else:
            print('SASS: %d of %d kernels on the expected instructions' % (
                sass_ok, len(report)))
        # The cubin path proper: ptxas inside gpu-module-to-binary.
        one = make_kernels.function('bf16', 64, 'block 128', True)
        r = run(['masformer-opt', '-', '--masformer-lower-to-nvvm=chip=%s '
                 'format=bin host-to-llvm=0 toolkit=%s' % (args.chip,
                                                           args.toolkit)],
                input=one)
        m = re.search(r'bin = "\\7FELF', r.stdout)
        print('format=bin: %s' % ('ELF cubin in the gpu.binary' if m else
                                  'NO CUBIN'))
        failures += not m
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
