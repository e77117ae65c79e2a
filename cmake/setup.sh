#!/usr/bin/env bash
# One command from a fresh Debian/Ubuntu machine to a running kscope:
#   bash cmake/setup.sh demo   installs what is missing, builds, runs the quickstart demo
#   bash cmake/setup.sh test   installs what is missing, builds, runs the whole test suite
# The CUDA Toolkit is used when it is at /usr/local/cuda (or nvcc is on PATH); without
# it kscope builds its CPU-only configuration and GPU tests are skipped.
set -euo pipefail
mode=${1:-test}
case "$mode" in demo|test) ;; *) echo "usage: $0 demo|test" >&2; exit 2 ;; esac
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

packages=(cmake g++ ninja-build doctest-dev libbenchmark-dev nlohmann-json3-dev libxml2-utils locales)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "kscope setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
build=${KSCOPE_BUILD_DIR:-$root/build}
jobs=$(nproc)
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release ${KSCOPE_CMAKE_ARGS:-}
if [ "$mode" = demo ]; then
  cmake --build "$build" --target quickstart -j "$jobs"
  "$build/examples/quickstart"
else
  cmake --build "$build" -j "$jobs"
  ctest --test-dir "$build" --output-on-failure -j "$jobs"
fi
