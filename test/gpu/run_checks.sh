#!/usr/bin/env bash
# The GPU checks, on a machine with an NVIDIA GPU whose python3 has torch and
# numpy; no MLIR, no CUDA toolkit, no network needed. Build their inputs
# here first (any machine with the toolkit's ptxas, no GPU needed):
#
#   test/gpu/build.sh --chip sm_90 build-gpu      # then carry build-gpu/ and test/gpu/
#   test/gpu/run_checks.sh build-gpu [--out gpu-results.md] [run_checks.py options]
#
# Numerics of every compiled configuration against float64 torch, then
# timings at S = 4096, 8192, 16384 (bf16, 16 heads, head_dim 64 and 128)
# against SDPA (flash) and FlexAttention; then the whole models of
# models.json (masformer-compile --target=cuda) against onnxruntime
# (run_models.py, needs onnxruntime). The tables go to --out. Under 7
# minutes on an H100/H200; exit status 1 if a numerics check fails.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
[[ $# -ge 1 ]] || { echo "usage: run_checks.sh DIR [run_checks.py options]" >&2; exit 2; }
dir="$1"; shift
for f in masformer_attention.so libMASFormerCudaRuntime.so kernels.json; do
  [[ -f "$dir/$f" ]] || { echo "run_checks.sh: $dir/$f is missing (run test/gpu/build.sh first)" >&2; exit 1; }
done
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true
python3 -c "import torch, numpy; assert torch.cuda.is_available(), 'torch sees no CUDA GPU'" \
  || { echo "run_checks.sh: needs python3 with torch (CUDA) and numpy" >&2; exit 1; }
status=0
timeout 290 python3 "$here/run_checks.py" "$dir" "$@" || status=$?
# Whole models (masformer-compile --target=cuda) against onnxruntime.
if [[ -f "$dir/models.json" ]]; then
  out=gpu-results.md
  for ((i = 1; i <= $#; i++)); do
    [[ "${!i}" == --out ]] && { j=$((i + 1)); out="${!j}"; }
  done
  if python3 -c "import onnxruntime" 2>/dev/null; then
    timeout 120 python3 "$here/run_models.py" "$dir" --out "$out" || status=1
  else
    echo "run_checks.sh: no onnxruntime: the whole models were not checked" >&2
    status=1
  fi
fi
exit $status
