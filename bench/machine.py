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


def isa_extensions():
    """The extensions of _EXTENSIONS that the CPU has, space-separated
    ("unknown" when /proc/cpuinfo has no flags)."""
    flags = _cpuinfo_field("flags") or _cpuinfo_field("Features")
    if flags is None:
        return "unknown"
    have = set(flags.split())
    return " ".join(e for e in _EXTENSIONS if e in have) or "none listed"


def describe():
    """"<CPU model>, <n> cores, ISA: <extensions>": the line every
    benchmark prints with its tables."""
    return (f"{cpu_model()}, {os.cpu_count()} cores, ISA: "
            f"{isa_extensions()}")


if __name__ == "__main__":
    print(describe())
