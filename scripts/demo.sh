#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds, and runs the main job on the
# example shipped in the repo. README command (1).
#
# Today the main job is masformer-opt on examples/three-layers.mlir: the span
# canonicalization (a block covering the sequence becomes full) and the
# reference decomposition of a block-sparse layer, run on the CPU and checked
# against numpy.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
"$root/scripts/setup.sh" >/dev/null
BUILD_DIR="$build" "$root/scripts/build.sh" >/dev/null
opt="$build/bin/masformer-opt"

echo "== masformer-opt examples/three-layers.mlir --canonicalize"
"$opt" "$root/examples/three-layers.mlir" --canonicalize

echo
echo "== one block-sparse layer, decomposed and run on the CPU against numpy"
PYTHONPATH="$root/test/python_utils" python3 \
  "$root/test/Integration/CPU/attention_exec.py" --case block-causal \
  --opt "$opt" --runner /usr/lib/llvm-22/bin/mlir-runner \
  --lib-dir /usr/lib/llvm-22/lib --pipeline=--masformer-reference-to-llvm
