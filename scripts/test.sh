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
# lit printed one PASS/FAIL line per test above; count them.
python3 - "$build/lit-results.xml" <<'PY'
import sys
import xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except (OSError, ET.ParseError) as e:
    sys.exit(f"no lit results: {e}")
cases = root.iter("testcase")
passed = failed = skipped = 0
for c in cases:
    if c.find("failure") is not None or c.find("error") is not None:
        failed += 1
    elif c.find("skipped") is not None:
        skipped += 1
        why = c.find("skipped").get("message", "")
        print(f"SKIPPED {c.get('classname', '')}.{c.get('name', '')}: {why}")
    else:
        passed += 1
print(f"lit: {passed} passed, {failed} failed, {skipped} skipped")
PY
exit $status
