# -*- Python -*-
# lit configuration for the masformer tests.

import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "MASFORMER"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Inputs", "input.mlir", "lib"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.masformer_obj_root, "test")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%cmake", config.cmake_command))
# The compiler that built the project (test/gpu/fake_cuda.c is built with
# it, as C).
config.substitutions.append(("%cxx", config.cxx_compiler))
config.substitutions.append(("%fixtures", os.path.join(config.masformer_src_root, "test", "fixtures")))
config.substitutions.append(("%mlir_lib_dir", config.llvm_lib_dir))
config.substitutions.append(("%masformer_src_root", config.masformer_src_root))
config.substitutions.append(("%masformer_obj_root", config.masformer_obj_root))

config.substitutions.append((
    "%runner_libs",
    "-shared-libs=%s/libmlir_runner_utils.so,%s/libmlir_c_runner_utils.so"
    % (config.llvm_lib_dir, config.llvm_lib_dir)))

if config.masformer_sanitize:
    config.available_features.add("sanitizers")

# MASFORMER_CACHE_DIR: the object cache the test run shares (scripts/test.sh,
# .ci/run), docs/compile.md.
llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP",
                                     "ASAN_OPTIONS", "UBSAN_OPTIONS",
                                     "MASFORMER_CACHE_DIR"])
llvm_config.use_default_substitutions()

tool_dirs = [config.masformer_tools_dir, config.llvm_tools_dir]
tools = ["masformer-opt", "masformer-translate", "masformer-compile",
         "masformer-run", "mlir-opt", "mlir-runner", "FileCheck", "not", "count"]
llvm_config.add_tool_substitutions(tools, tool_dirs)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.masformer_tools_dir, append_path=True)
# Python helpers under test/ import the shared masformer test utilities.
llvm_config.with_environment(
    "PYTHONPATH", os.path.join(config.masformer_src_root, "test", "python_utils"),
    append_path=True)

# bf16 on the CPU: AMX tiles, or AVX512-BF16 (test/Compile/bf16-cpu.test).
try:
    _flags = set()
    for _line in open("/proc/cpuinfo"):
        if _line.startswith("flags"):
            _flags = set(_line.split(":", 1)[1].split())
            break
except OSError:
    _flags = set()
if {"amx_tile", "amx_bf16"} <= _flags:
    config.available_features.add("cpu-amx-bf16")
# 8-bit products on AMX tiles (tdpbusd): AMX-INT8.
if {"amx_tile", "amx_int8"} <= _flags:
    config.available_features.add("cpu-amx-int8")
if "avx512_bf16" in _flags:
    config.available_features.add("cpu-avx512-bf16")
# 8-bit products on vpdpbusd (test/Import/int8-ops.test): AVX512-VNNI.
if {"avx512f", "avx512_vnni"} <= _flags:
    config.available_features.add("cpu-avx512-vnni")
# Code for --cpu=znver4 runs on a CPU with Zen 4's AVX-512 extensions
# (Sapphire Rapids and later, Zen 4 and 5), not on every CPU with
# AVX512-BF16 (Cooper Lake lacks VBMI2, BITALG, GFNI and more).
if {"avx512_bf16", "avx512vbmi", "avx512_vbmi2", "avx512_bitalg",
        "avx512_vpopcntdq", "avx512ifma", "gfni", "vaes",
        "vpclmulqdq"} <= _flags:
    config.available_features.add("cpu-znver4-isa")
# Code for AVX2 servers (--cpu=haswell: vectors of 8, 16 registers) runs
# on any CPU with AVX2 and FMA.
if {"avx2", "fma"} <= _flags:
    config.available_features.add("cpu-avx2")

# The CUDA toolkit's ptxas (the GPU pipeline's cubin tests need it; no GPU).
cuda_home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
if os.path.exists(os.path.join(cuda_home, "bin", "ptxas")):
    config.available_features.add("ptxas")
    config.substitutions.append(("%cuda_home", cuda_home))
elif os.environ.get("MASFORMER_REQUIRE_PTXAS") == "1":
    # CI's machines have the toolkit: without it, every cubin check would
    # silently not run.
    lit_config.fatal(
        f"MASFORMER_REQUIRE_PTXAS=1 but there is no {cuda_home}/bin/ptxas: "
        "the GPU cubin tests cannot run. Install the CUDA toolkit (or set "
        "CUDA_HOME), or run with MASFORMER_NO_PTXAS=1 to skip them on a "
        "machine without it")
else:
    lit_config.warning(
        f"no {cuda_home}/bin/ptxas (CUDA_HOME): the tests that compile GPU "
        "kernels to cubins (REQUIRES: ptxas) are SKIPPED; the emulator "
        "tests still run")


def _has_cuda_gpu():
    """A driver that initializes and sees at least one device."""
    import ctypes
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        count = ctypes.c_int(0)
        return (cuda.cuInit(0) == 0 and
                cuda.cuDeviceGetCount(ctypes.byref(count)) == 0 and
                count.value > 0)
    except OSError:
        return False


# GPU execution tests run only where a GPU is present.
if _has_cuda_gpu():
    config.available_features.add("cuda-gpu")
else:
    lit_config.note(
        "no CUDA GPU here: the tests that run kernels on a GPU (REQUIRES: "
        "cuda-gpu) are skipped; test/gpu/run_checks.sh runs them on a GPU "
        "machine")
_gpu_dir = os.path.join(config.masformer_src_root, "test", "gpu")
config.substitutions.append(("%gpu_dir", _gpu_dir))
# The GPU emulator (test/gpu/emulate.py, emulate_model.py) is Python: the
# sanitizers check none of it, and its interpretation of a module repeats
# the first run's exactly (the same masformer-opt output). Under them,
# %emulate_model and %emulate_kernel only lower each module (masformer-opt,
# instrumented) and parse it (--lower-only); scripts/test.sh's run
# interprets the same modules and compares them with their references.
_emulate_flags = " --lower-only" if config.masformer_sanitize else ""
config.substitutions.append((
    "%emulate_model",
    "%s %s%s" % (config.python_executable,
                 os.path.join(_gpu_dir, "emulate_model.py"), _emulate_flags)))
config.substitutions.append((
    "%emulate_kernel",
    "%s %s%s" % (config.python_executable,
                 os.path.join(_gpu_dir, "emulate.py"), _emulate_flags)))
