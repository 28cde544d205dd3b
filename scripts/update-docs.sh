#!/usr/bin/env bash
# Regenerates docs/reference/*.md from the TableGen definitions (op, attribute
# and pass docs) after a build. test/docs.test fails when they drift.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
ninja -C "$build" masformer-doc >/dev/null
cp "$build"/docs/MASFormer/*.md "$root/docs/reference/"
echo "updated: $(ls "$root"/docs/reference)"
