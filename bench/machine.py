"""What every benchmark prints about the machine it ran on: the CPU model,
its core count and the vector / matrix extensions that decide which kernels
can run (two machines with the same model name can differ here: a cloud
"Intel Xeon Processor" may or may not have AMX)."""

import os
import platform

# The ISA extensions the CPU kernels and onnxruntime choose between, as
# /proc/cpuinfo names them, in the order they are printed.
_EXTENSIONS = ["avx2", "fma", "avx512f", "avx512bw", "avx512vl",
               "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni",
               "amx_tile", "amx_bf16", "amx_int8", "sve", "asimd"]


def _cpuinfo_field(name):
    try:
        for line in open("/proc/cpuinfo"):
            if line.split(":", 1)[0].strip() == name:
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpu_model():
    """The CPU's model name, from /proc/cpuinfo."""
    return (_cpuinfo_field("model name") or platform.processor()
            or platform.machine())


# x86 (vendor, family, model range) -> microarchitecture, for the server
# CPUs a cloud VM is likely to be: its model name is often just "AMD EPYC"
# or "Intel Xeon Processor", and Zen 4 and Zen 5 differ in what matters
# here (Zen 4 runs 512-bit vector ops as two halves, and lacks AVX-VNNI).
_MICROARCHITECTURES = [
    ("AuthenticAMD", 0x17, range(0x00, 0x30), "Zen/Zen 2"),
    ("AuthenticAMD", 0x17, range(0x30, 0x100), "Zen 2"),
    ("AuthenticAMD", 0x19, range(0x00, 0x10), "Zen 3"),
    ("AuthenticAMD", 0x19, range(0x10, 0x20), "Zen 4"),
    ("AuthenticAMD", 0x19, range(0x20, 0x60), "Zen 3"),
    ("AuthenticAMD", 0x19, range(0x60, 0x80), "Zen 4"),
    ("AuthenticAMD", 0x19, range(0xa0, 0xb0), "Zen 4c"),
    ("AuthenticAMD", 0x1a, range(0x00, 0x100), "Zen 5"),
    ("GenuineIntel", 6, range(0x55, 0x56), "Skylake/Cascade Lake"),
    ("GenuineIntel", 6, range(0x6a, 0x6d), "Ice Lake"),
    ("GenuineIntel", 6, range(0x8f, 0x90), "Sapphire Rapids"),
    ("GenuineIntel", 6, range(0xad, 0xaf), "Granite Rapids"),
    ("GenuineIntel", 6, range(0xcf, 0xd0), "Emerald Rapids"),
]


def microarchitecture():
    """"Zen 4 (family 25, model 17)" from /proc/cpuinfo's vendor, family
    and model; the numbers alone for a CPU not in the table; None off
    x86 Linux."""
    vendor = _cpuinfo_field("vendor_id")
    try:
        family = int(_cpuinfo_field("cpu family"))
        model = int(_cpuinfo_field("model"))
    except (TypeError, ValueError):
        return None
    ids = f"family {family}, model {model}"
    for v, f, models, name in _MICROARCHITECTURES:
        if v == vendor and f == family and model in models:
            return f"{name} ({ids})"
    return ids


def isa_extensions():
    """The extensions of _EXTENSIONS that the CPU has, space-separated
    ("unknown" when /proc/cpuinfo has no flags)."""
    flags = _cpuinfo_field("flags") or _cpuinfo_field("Features")
    if flags is None:
        return "unknown"
    have = set(flags.split())
    return " ".join(e for e in _EXTENSIONS if e in have) or "none listed"


def l2_per_thread():
    """Bytes of L2 cache per hardware thread, from Linux's sysfs (the L2's
    size over the threads that share it, as masformer-compile sizes the
    products' groups of row tiles by); None where sysfs does not say."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        entries = sorted(os.listdir(base))
    except OSError:
        return None

    def read(entry, name):
        with open(os.path.join(base, entry, name)) as f:
            return f.read().strip()

    for entry in entries:
        if not entry.startswith("index"):
            continue
        try:
            if (read(entry, "level") != "2"
                    or read(entry, "type") not in ("Unified", "Data")):
                continue
            size = read(entry, "size")
            shared = read(entry, "shared_cpu_list")
        except OSError:
            continue
        scale = {"K": 1024, "M": 1 << 20}.get(size[-1:], 1)
        try:
            size_bytes = int(size.rstrip("KM")) * scale
            threads = 0
            for part in filter(None, shared.split(",")):
                lo, _, hi = part.partition("-")
                threads += int(hi or lo) - int(lo) + 1
        except ValueError:
            return None
        return size_bytes // max(threads, 1)
    return None


def describe():
    """"<CPU model> [<microarchitecture>], <n> cores, L2 <k> KiB a thread,
    ISA: <extensions>": the line every benchmark prints with its tables."""
    arch = microarchitecture()
    model = f"{cpu_model()} [{arch}]" if arch else cpu_model()
    l2 = l2_per_thread()
    cache = f", L2 {l2 // 1024} KiB a thread" if l2 else ""
    return (f"{model}, {os.cpu_count()} cores{cache}, "
            f"ISA: {isa_extensions()}")


if __name__ == "__main__":
    print(describe())
