#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds, and runs the whole test suite
# (ctest, which runs the pytest suite of python/ and the lit suite under
# test/). README command (2); CI runs this through .ci/run.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
"$root/scripts/setup.sh"
start=$(date +%s)
BUILD_DIR="$build" "$root/scripts/build.sh"
echo "build: $(( $(date +%s) - start )) s"
# One object cache for the run's compiles (docs/compile.md): a fixture
# compiled again reuses its parts. .ci/run shares one with the sanitizer run.
export MASFORMER_CACHE_DIR="${MASFORMER_CACHE_DIR:-$build/object-cache}"
status=0
# pytest (about 1.3 cores on average) and lit (one worker per core) at once:
# pytest's idle share of the cores goes to lit.
ctest --test-dir "$build" -V -j 2 || status=$?
# lit printed each test's result above; repeat the skips and failures last.
python3 "$root/scripts/lit_summary.py" "$build/lit-results.xml"
exit $status
