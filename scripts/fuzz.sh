#!/usr/bin/env bash
# A long fuzzing run, as a script (not in CI): builds the libFuzzer
# harnesses with ASan and UBSan in build-asan/ (as scripts/test-sanitizers.sh
# does), then runs one of them for SECONDS with a random seed, keeping its
# corpus between runs in build-asan/fuzz-long/<harness>/ (seeded with every
# committed .onnx file and every committed crasher). A finding stops the run
# with a non-zero status and leaves the input in build-asan/fuzz-long/
# artifacts/: commit it to test/fuzz/model-crashers/ with the fix.
#
#   scripts/fuzz.sh SECONDS [model|import|options]   (default: model)
#
# model:   masformer-fuzz-onnx-model, the structure-aware harness: import
#          (dynamic or static shapes), raise, rewrite, span report, export;
# import:  masformer-fuzz-onnx-import, arbitrary bytes as a model;
# options: masformer-fuzz-options, span attributes and pass options.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${ASAN_BUILD_DIR:-$root/build-asan}"
seconds="${1:?usage: scripts/fuzz.sh SECONDS [model|import|options]}"
harness="${2:-model}"
case "$harness" in
  model|import) seeds=onnx ;;
  options) seeds=options ;;
  *) echo "unknown harness '$harness': model, import or options" >&2; exit 2 ;;
esac
"$root/scripts/setup.sh" >/dev/null
if [ ! -f "$build/build.ninja" ]; then
  CC=clang-22 CXX=clang++-22 cmake -S "$root" -B "$build" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DMASFORMER_SANITIZE=ON \
    -DMASFORMER_ENABLE_FUZZERS=ON -DMASFORMER_ENABLE_PYTHON=OFF >/dev/null
fi
ninja -C "$build" "masformer-fuzz-onnx-$harness" 2>/dev/null ||
  ninja -C "$build" "masformer-fuzz-$harness"
bin="$build/bin/masformer-fuzz-onnx-$harness"
[ -x "$bin" ] || bin="$build/bin/masformer-fuzz-$harness"

corpus="$build/fuzz-long/$harness"
artifacts="$build/fuzz-long/artifacts"
mkdir -p "$corpus" "$artifacts"
if [ "$seeds" = onnx ]; then
  cp -n "$root"/test/fixtures/*.onnx "$root"/test/Import/Inputs/*.onnx \
     "$root"/test/Export/Inputs/*.onnx "$root"/test/fuzz/model-crashers/*.onnx \
     "$corpus/"
else
  cp -n "$root"/test/fuzz/options-seeds/* "$corpus/"
fi
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:allow_user_poisoning=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
echo "fuzzing $(basename "$bin") for $seconds s on $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
"$bin" "$corpus" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=4096 \
  -artifact_prefix="$artifacts/" -print_final_stats=1 -detect_leaks=0
echo "fuzz $harness: no finding in $seconds s"
