#!/usr/bin/env bash
# One command from a fresh Debian/Ubuntu machine to a running kscope:
#   bash cmake/setup.sh demo   installs what the demo needs (a compiler, CMake, Ninja),
#                              builds and runs the quickstart; its report files go to build/
#   bash cmake/setup.sh test   installs what the tests need too, builds everything and runs
#                              the whole test suite (it says how long that takes first)
# The CUDA Toolkit is used when it is at /usr/local/cuda (or nvcc is on PATH); without
# it kscope builds its CPU-only configuration and GPU tests are skipped. CUDA code is
# built for this machine's GPU, or for a portable set without one (README, "Building").
# KSCOPE_BUILD_DIR (default build/) and KSCOPE_CMAKE_ARGS (extra configure arguments,
# e.g. -DCMAKE_CUDA_ARCHITECTURES=90) change where and how.
set -euo pipefail
mode=${1:-test}
case "$mode" in demo|test) ;; *) echo "usage: $0 demo|test" >&2; exit 2 ;; esac
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${KSCOPE_BUILD_DIR:-$root/build}
jobs=$(nproc)

# The demo needs a compiler and the build tools only; the tests also need doctest, Google
# Benchmark, nlohmann/json and xmllint (cross-checks of kscope's JSON and SVG), locales
# (a comma-decimal locale test), pkg-config (the kscope.pc test), prometheus_client
# (its OpenMetrics parser reads kscope's live metrics, tests/process/openmetrics_check.py),
# pytest (the Python package's tests, tests/python) and clang with libFuzzer's runtime (the
# fuzz targets, tests/fuzz: Debian 12 ships the runtime in libclang-rt-dev, which clang
# only recommends; where apt knows no such package, clang's own packages carry it).
packages=(cmake g++ ninja-build)
if [ "$mode" = test ]; then
  packages+=(doctest-dev libbenchmark-dev nlohmann-json3-dev libxml2-utils locales pkg-config python3-prometheus-client
             python3-pytest clang)
  if dpkg-query -W libclang-rt-dev >/dev/null 2>&1 || apt-cache show libclang-rt-dev >/dev/null 2>&1; then
    packages+=(libclang-rt-dev)
  fi
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
cuda="none (CPU-only configuration; GPU tests are not built)"
command -v nvcc >/dev/null 2>&1 && cuda="$(command -v nvcc)"

if [ "$mode" = test ]; then
  # Say what is coming and for how long before the long part starts. The times are from
  # a 2-core VM with nvcc and no GPU; a loaded machine takes longer, more cores less.
  cat <<EOF
kscope setup test: about to
  1. install with apt: ${missing[*]:-nothing (all present)}
  2. configure $build (Release; CUDA: $cuda)
  3. build the library's tests, examples, benchmarks, the kscope tool and libkscope_c.so
     (the C interface the Python package loads) ($jobs jobs)
  4. run ctest: CPU unit tests (the core's also under ASan+UBSan, the concurrent ones
     under TSan), the fuzz targets (libFuzzer, a fixed number of inputs each), the kscope
     tool, header and packaging checks (install, find_package, add_subdirectory,
     FetchContent, embed-and-export, pkg-config), the C interface and the Python package
     (pytest; its PyTorch cases need torch and a GPU) and the GPU cases (skipped without
     a device)
On a 2-core machine without a GPU this takes about 10 minutes, most of it compiling (nvcc
builds every GPU test, for sm_90 only: see below); a GPU machine also builds the examples and
benchmarks and runs the GPU cases. Afterwards
  ctest --test-dir $build -L quick    reruns the fast CPU cases in a few seconds
EOF
fi

if ((${#missing[@]})); then
  echo "kscope setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ "$mode" = demo ]; then
  # Only the quickstart: no tests or benchmarks, so none of their dependencies.
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DKSCOPE_BUILD_TESTS=OFF -DKSCOPE_BUILD_BENCH=OFF -DKSCOPE_BUILD_EXAMPLES=ON ${KSCOPE_CMAKE_ARGS:-}
  cmake --build "$build" --target quickstart -j "$jobs"
  # Run inside the build directory: the report files it writes stay out of the sources.
  (cd "$build" && ./examples/quickstart)
  echo "kscope setup: report files written to $build: quickstart_report.json, quickstart_trace.json, quickstart_report.html"
else
  # Without a GPU the GPU tests can only be compiled, not run: one architecture (sm_90)
  # proves they build, at half the time of the portable set (on a 2-core VM the whole
  # test build otherwise takes over 20 minutes). A GPU machine gets its own architecture
  # (the CMake default); KSCOPE_CMAKE_ARGS or CUDAARCHS choose otherwise.
  test_archs=""
  gpu_only="ON"
  if ! nvidia-smi -L >/dev/null 2>&1; then
    # Examples and benchmarks need a GPU to mean anything, and compiling them is a fifth of
    # the build: without a GPU they are left out (KSCOPE_CMAKE_ARGS can turn them back on).
    gpu_only="OFF"
    echo "kscope setup: no GPU here: examples and benchmarks are not built (a GPU machine builds them)"
    if command -v nvcc >/dev/null 2>&1 && [ -z "${CUDAARCHS:-}" ] && [[ "${KSCOPE_CMAKE_ARGS:-}" != *CMAKE_CUDA_ARCHITECTURES* ]]; then
      test_archs="-DCMAKE_CUDA_ARCHITECTURES=90"
      echo "kscope setup: no GPU here: the GPU tests are compiled for sm_90 only, to check they build" \
           "(set KSCOPE_CMAKE_ARGS=-DCMAKE_CUDA_ARCHITECTURES=... for others)"
    fi
  fi
  # Explicit values: a build directory configured by `demo` has tests OFF in its cache.
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKSCOPE_BUILD_PYTHON=ON \
    -DKSCOPE_BUILD_TESTS=ON -DKSCOPE_BUILD_BENCH=$gpu_only -DKSCOPE_BUILD_EXAMPLES=$gpu_only $test_archs ${KSCOPE_CMAKE_ARGS:-}
  start=$(date +%s)
  cmake --build "$build" -j "$jobs"
  built=$(date +%s)
  ctest --test-dir "$build" --output-on-failure -j "$jobs"
  done_at=$(date +%s)
  echo "kscope setup: build $(( (built - start) / 60 )) min $(( (built - start) % 60 )) s," \
       "tests $(( (done_at - built) / 60 )) min $(( (done_at - built) % 60 )) s"
fi
