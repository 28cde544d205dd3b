#!/usr/bin/env bash
# Configures (once) and builds masformer in ./build with Ninja.
# BUILD_DIR overrides the build directory; extra arguments go to cmake.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
if [ ! -f "$build/build.ninja" ] || [ "$#" -gt 0 ]; then
  cmake -S "$root" -B "$build" -G Ninja "$@" >/dev/null
fi
ninja -C "$build"
