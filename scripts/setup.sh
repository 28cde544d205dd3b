#!/usr/bin/env bash
#===- setup.sh - Install everything masformer needs on Debian 12 ----------===#
#
# Idempotent and non-interactive. A second run with everything present takes
# a few seconds: apt is only touched when a package is missing, pip only when a
# pinned version is missing.
#
#===----------------------------------------------------------------------===#
set -euo pipefail

DEB_PACKAGES=(
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
  libonnx-dev libprotobuf-dev protobuf-compiler
  ninja-build cmake g++ zlib1g-dev libzstd-dev
  clang-22 libclang-rt-22-dev libomp-22-dev
)

PY_REQUIREMENTS="$(cd "$(dirname "$0")" && pwd)/requirements.txt"

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${DEB_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: Debian packages present"
fi

# Python packages the tests and tools use, pinned in scripts/requirements.txt.
PY=${PYTHON:-python3}
if ! "$PY" - "$PY_REQUIREMENTS" <<'PYEOF' 2>/dev/null
import sys
from importlib.metadata import version, PackageNotFoundError
ok = True
for line in open(sys.argv[1]):
    line = line.split('#')[0].strip()
    if not line:
        continue
    name, want = line.split('==')
    try:
        if version(name) != want:
            ok = False
    except PackageNotFoundError:
        ok = False
sys.exit(0 if ok else 1)
PYEOF
then
  echo "setup: installing Python packages from $PY_REQUIREMENTS"
  "$PY" -m pip install -q --disable-pip-version-check -r "$PY_REQUIREMENTS"
else
  echo "setup: Python packages present"
fi
echo "setup: done"
