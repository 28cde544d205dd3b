#!/usr/bin/env bash
# Builds, here (no GPU needed), everything the GPU checks run:
#
#   test/gpu/build.sh [--chip sm_90] [--set all|numerics|timing] OUTDIR
#
# OUTDIR gets masformer_attention.so (one C function per attention
# configuration of make_kernels.py, host code plus the embedded cubin),
# libMASFormerCudaRuntime.so, kernels.json, and kernels.<chip>.ptx for
# inspection; and (unless --set is numerics or timing) whole models compiled
# with masformer-compile --target=cuda, model_<name>.so, with the ONNX
# models onnxruntime checks them against (model_<name>.onnx), models.json,
# and the runtime that loads them, libMASFormerRuntime.so. It needs the build tree (./scripts/build.sh or test.sh), the
# CUDA toolkit's ptxas (/usr/local/cuda, or CUDA_HOME) and clang.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${MASFORMER_BUILD_DIR:-$root/build}"
chip=sm_90
set_=all
while [[ $# -gt 1 ]]; do
  case "$1" in
    --chip) chip="$2"; shift 2 ;;
    --set) set_="$2"; shift 2 ;;
    *) echo "build.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ $# -eq 1 ]] || { echo "usage: build.sh [--chip sm_XY] [--set all|numerics|timing] OUTDIR" >&2; exit 2; }
out="$1"
toolkit="${CUDA_HOME:-/usr/local/cuda}"
llvm=/usr/lib/llvm-22/bin
cc="$(command -v clang-22 || command -v clang || command -v cc)"
for f in "$build/bin/masformer-opt" "$build/lib/libMASFormerCudaRuntime.so" \
         "$toolkit/bin/ptxas" "$llvm/mlir-translate"; do
  [[ -e "$f" ]] || { echo "build.sh: $f is missing" >&2; exit 1; }
done
mkdir -p "$out"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
python3 "$here/make_kernels.py" --set "$set_" > "$tmp/kernels.mlir"
python3 "$here/make_kernels.py" --set "$set_" --list > "$tmp/kernels.json"
"$build/bin/masformer-opt" "$tmp/kernels.mlir" \
  --masformer-lower-to-nvvm="chip=$chip format=isa host-to-llvm=0" \
  -o "$tmp/ptx.mlir"
python3 "$here/gpu_objects.py" "$tmp/ptx.mlir" "$tmp" > /dev/null
"$build/bin/masformer-opt" "$tmp/kernels.mlir" \
  --masformer-lower-to-nvvm="chip=$chip toolkit=$toolkit" -o "$tmp/host.mlir"
"$llvm/mlir-translate" --mlir-to-llvmir "$tmp/host.mlir" -o "$tmp/host.ll"
"$cc" -shared -fPIC -O2 -Wno-override-module "$tmp/host.ll" \
  -L"$build/lib" -lMASFormerCudaRuntime -Wl,-rpath,'$ORIGIN' \
  -o "$tmp/masformer_attention.so"
cp "$tmp/masformer_attention.so" "$build/lib/libMASFormerCudaRuntime.so" \
   "$tmp/kernels.json" "$out/"
cp "$tmp/masformer_kernels.$chip.ptx" "$out/kernels.$chip.ptx"
if [[ "$set_" == all ]]; then
  # Whole models: the fixtures, all spans full and rewritten, beside the
  # shim (each library finds it through its $ORIGIN run path).
  fixtures="$root/test/fixtures"
  models=()
  model() {  # name onnx shapes [masformer-compile options]
    local name="$1" onnx="$2" shapes="$3"; shift 3
    "$build/bin/masformer-compile" "$fixtures/$onnx" --target=cuda \
      --chip="$chip" --cuda-toolkit="$toolkit" "$@" -o "$out/model_$name.so"
    models+=("$name $shapes")
  }
  rewrite() {  # name onnx spans: the ONNX export of the rewrite
    "$build/bin/masformer-opt" "$fixtures/$2" \
      --masformer-rewrite-spans="$3" -o "$out/model_$1.onnx"
  }
  for f in gpt2 gpt2-sdpa llama-dynamo bert; do
    cp "$fixtures/$f.onnx" "$out/model_$f.onnx"
    model "$f" "$f.onnx" input_ids=2x16,attention_mask=2x16
  done
  rewrite gpt2-block4 gpt2.onnx "span=block:4 full-layers=0"
  model gpt2-block4 gpt2.onnx input_ids=2x16,attention_mask=2x16 \
    --spans="span=block:4 full-layers=0"
  rewrite llama-dynamo-block7 llama-dynamo.onnx "span=block:7 full-layers=0"
  model llama-dynamo-block7 llama-dynamo.onnx \
    input_ids=2x16,attention_mask=2x16 --spans="span=block:7 full-layers=0"
  printf '%s\n' "${models[@]}" | python3 -c '
import json, sys
print(json.dumps([{"name": n, "lib": "model_%s.so" % n,
                   "ort_model": "model_%s.onnx" % n,
                   "shapes": s.split(",")}
                  for n, s in (l.split() for l in sys.stdin)], indent=1))
' > "$out/models.json"
  cp "$build/lib/libMASFormerRuntime.so" "$out/"
fi
echo "build.sh: $(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))))" "$out/kernels.json") functions for $chip in $out"
