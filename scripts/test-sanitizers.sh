#!/usr/bin/env bash
# The hostile-input checks (issue 9): builds masformer with clang-22,
# AddressSanitizer and UndefinedBehaviorSanitizer in build-asan/, runs the
# whole lit suite there, then fuzzes the ONNX importer (bytes, and models
# mutated as models) and the option parsers with libFuzzer, seeded with every
# committed .onnx file. Any sanitizer
# report or fuzzer crash fails.
#
# By default the fuzz run is deterministic (fixed seed and number of runs,
# about a minute here), so that CI is reproducible. FUZZ_SECONDS=N instead
# fuzzes the importer for N seconds with a random seed, to search further.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${ASAN_BUILD_DIR:-$root/build-asan}"
"$root/scripts/setup.sh" >/dev/null
if [ ! -f "$build/build.ninja" ]; then
  CC=clang-22 CXX=clang++-22 cmake -S "$root" -B "$build" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DMASFORMER_SANITIZE=ON \
    -DMASFORMER_ENABLE_FUZZERS=ON -DMASFORMER_ENABLE_PYTHON=OFF >/dev/null
fi
start=$(date +%s)
ninja -C "$build"
echo "sanitizer build: $(( $(date +%s) - start )) s"

# LLVM and protobuf keep some global state alive at exit by design: leak
# reports would be noise. Every other ASan/UBSan finding aborts.
# allow_user_poisoning=0: LLVM's allocators poison and unpoison memory when
# compiled with ASan; libMLIR.so is not, and shares those allocators with
# our instrumented code, which would make every such allocation look
# poisoned.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:allow_user_poisoning=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# The object cache (docs/compile.md): .ci/run passes the one the first run
# filled, so that the parts compiled there are not compiled again by LLVM
# (not instrumented: the checks are on masformer's own code, which still runs).
export MASFORMER_CACHE_DIR="${MASFORMER_CACHE_DIR:-$build/object-cache}"
status=0
python3 /usr/lib/llvm-22/bin/lit -sv --xunit-xml-output="$build/lit-results.xml" \
  "$build/test" || status=$?
python3 "$root/scripts/lit_summary.py" "$build/lit-results.xml" \
  --label "lit under sanitizers"
[ "$status" -eq 0 ] || exit "$status"

# A fresh corpus of the seeds each time: the run is the same on every machine.
corpus="$build/fuzz-corpus"
rm -rf "$corpus"
mkdir -p "$corpus/onnx" "$corpus/options" "$corpus/model"
cp "$root"/test/fixtures/*.onnx "$root"/test/Import/Inputs/*.onnx \
   "$root"/test/Export/Inputs/*.onnx "$corpus/onnx/"
cp "$corpus"/onnx/*.onnx "$root"/test/fuzz/model-crashers/*.onnx \
   "$corpus/model/"
cp "$root"/test/fuzz/options-seeds/* "$corpus/options/"
cd "$build"
if [ -n "${FUZZ_SECONDS:-}" ]; then
  import_budget=(-max_total_time="$FUZZ_SECONDS")
  options_budget=(-max_total_time=15)
  model_budget=(-max_total_time="$FUZZ_SECONDS")
else
  import_budget=(-seed=1 -runs=15000)
  options_budget=(-seed=1 -runs=6000)
  model_budget=(-seed=1 -runs=6000)
fi
# Every crasher the model fuzzer found, replayed under the sanitizers.
"$build/bin/masformer-fuzz-onnx-model" "$root"/test/fuzz/model-crashers/*.onnx \
  -detect_leaks=0
"$build/bin/masformer-fuzz-onnx-import" "$corpus/onnx" "${import_budget[@]}" \
  -timeout=30 -rss_limit_mb=4096 -print_final_stats=1 -detect_leaks=0
"$build/bin/masformer-fuzz-options" "$corpus/options" "${options_budget[@]}" \
  -timeout=10 -print_final_stats=1 -detect_leaks=0
# Structure-aware: models mutated as models (tools/fuzz/onnx-model), through
# the import, raise, rewrite, span report and export.
"$build/bin/masformer-fuzz-onnx-model" "$corpus/model" "${model_budget[@]}" \
  -timeout=30 -rss_limit_mb=4096 -print_final_stats=1 -detect_leaks=0
echo "sanitizers and fuzzing: OK"
