#!/usr/bin/env bash
# One command from a fresh machine to a running kscope:
#   bash cmake/setup.sh demo   checks for what the demo needs (a C++17 compiler, CMake 3.22 or
#                              newer, Ninja or Make), installs what is missing, builds and
#                              runs the quickstart; its report files go to build/
#   bash cmake/setup.sh test   checks for what the tests need too, installs what is missing,
#                              builds everything and runs the whole test suite (it says how
#                              long that takes first)
#   bash cmake/setup.sh check [demo|test]
#                              the checks alone: what is here and what is missing; installs
#                              and builds nothing (exit 1 when the mode could not build)
# Tools are looked for as commands with their versions, libraries as headers and CMake
# package files, wherever they come from (apt, pip, conda, /usr/local, CMAKE_PREFIX_PATH).
# apt-get installs only what is missing, and only where it can: apt-get present and
# working, and root or passwordless sudo. Where it cannot (no root, no network, not
# Debian) the script says exactly what is missing and goes on with what is there: a
# missing optional library skips the tests that need it. It stops, saying why, only
# without a C++17 compiler, CMake 3.22 or newer or a build tool (Ninja or Make), and for
# `test` without doctest or nlohmann/json (the unit tests include both).
# The CUDA Toolkit is used when nvcc is on PATH or at /usr/local/cuda; without it kscope
# builds its CPU-only configuration and GPU tests are skipped. CUDA code is built for this
# machine's GPU, or for a portable set without one (docs/building.md, "CUDA architectures").
# Environment: KSCOPE_BUILD_DIR (default build/) and KSCOPE_CMAKE_ARGS (extra configure
# arguments, e.g. -DCMAKE_CUDA_ARCHITECTURES=90) change where and how; KSCOPE_SETUP_INSTALL=0
# never installs; KSCOPE_SETUP_STOP_AFTER_CHECKS=1 stops demo/test after the checks and the
# installing (tests/setup/setup_check_test.sh runs it so, with apt-get made to fail).
set -euo pipefail
usage() { echo "usage: $0 demo|test|check [demo|test]" >&2; exit 2; }
mode=${1:-test}
checks_only=0
case "$mode" in
  demo|test) ;;
  check) checks_only=1; mode=${2:-test}; case "$mode" in demo|test) ;; *) usage ;; esac ;;
  *) usage ;;
esac
stop_after_checks=$checks_only
[ "${KSCOPE_SETUP_STOP_AFTER_CHECKS:-0}" = 1 ] && stop_after_checks=1
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${KSCOPE_BUILD_DIR:-$root/build}
jobs=$(nproc 2>/dev/null || echo 2)

# The Debian packages each mode needs, installed with apt-get only when the check below
# (check_package) does not find what the package provides.
# The demo needs a compiler and the build tools only (Ninja, or Make where Ninja cannot be
# installed). The tests also need doctest and nlohmann/json (required: the unit tests include
# them), Google Benchmark (benchmarks, the gbench header check), xmllint (cross-checks of
# kscope's SVG), locales (a comma-decimal locale test), pkg-config (the kscope.pc test),
# prometheus_client (its OpenMetrics parser reads kscope's live metrics,
# tests/process/openmetrics_check.py), pytest (the Python package's tests, tests/python) and
# clang with libFuzzer's runtime (the fuzz targets, tests/fuzz: Debian 12 ships the runtime
# in libclang-rt-dev, which clang only recommends; where apt knows no such package, clang's
# own packages carry it). Without an optional one the tests that use it are Skipped.
demo_packages=(g++ cmake ninja-build)
# test-mode package list (added to the demo's)
test_packages=(doctest-dev libbenchmark-dev nlohmann-json3-dev libxml2-utils locales pkg-config python3-prometheus-client
               python3-pytest clang libclang-rt-dev chromium)
packages=("${demo_packages[@]}")
[ "$mode" = test ] && packages+=("${test_packages[@]}")

have() { command -v "$1" >/dev/null 2>&1; }
first_line() { sed -n 1p; }  # reads all its input: no SIGPIPE for the writer under pipefail

# --- the checks: each sets `note` (what was found, or what is missing) -----------------------
note=""
cxx=""          # the C++17 compiler found
build_tool=""   # ninja or make
cmake_min_major=3 cmake_min_minor=22

version_at_least() {  # VERSION MAJOR MINOR
  local major=${1%%.*} rest=${1#*.} minor
  minor=${rest%%.*}
  [[ $major =~ ^[0-9]+$ && $minor =~ ^[0-9]+$ ]] || return 1
  (( major > $2 || (major == $2 && minor >= $3) ))
}

check_cxx() {
  local c path tried=""
  local candidates=(c++ g++ clang++)
  [ -n "${CXX:-}" ] && candidates=("$CXX")
  cxx=""
  for c in "${candidates[@]}"; do
    if ! path=$(command -v "$c" 2>/dev/null); then tried+=", $c (not found)"; continue; fi
    if printf '%s\n' '#include <optional>' '#include <string_view>' \
         'static_assert(__cplusplus >= 201703L, "C++17");' \
         'int main() { std::optional<std::string_view> s; return s ? 1 : 0; }' |
       "$path" -std=c++17 -fsyntax-only -x c++ - >/dev/null 2>&1; then
      cxx=$path
      note="$path ($("$path" --version 2>/dev/null | first_line || true))"
      return 0
    fi
    tried+=", $c ($path: does not compile C++17)"
  done
  note="no C++17 compiler: tried ${tried#, }${CXX:+ (CXX=$CXX)}"
  return 1
}

check_cmake() {
  local path v
  if ! path=$(command -v cmake 2>/dev/null); then note="no cmake on PATH"; return 1; fi
  v=$(cmake --version 2>/dev/null | sed -n '1s/^cmake[0-9]* version \([0-9][0-9.]*\).*/\1/p' || true)
  if [ -z "$v" ]; then note="$path does not give its version (cmake --version)"; return 1; fi
  if version_at_least "$v" "$cmake_min_major" "$cmake_min_minor"; then note="$path ($v)"; return 0; fi
  note="$path is CMake $v, older than $cmake_min_major.$cmake_min_minor"
  return 1
}

check_ninja() {
  local c path
  for c in ninja ninja-build; do
    if path=$(command -v "$c" 2>/dev/null); then
      note="$path ($("$path" --version 2>/dev/null | first_line || true))"
      return 0
    fi
  done
  note="no ninja on PATH"
  return 1
}

# Where CMake's find_package and find_path look: CMAKE_PREFIX_PATH, the parent of each PATH
# entry that ends in bin (a virtual environment, conda, /usr/local), then /usr/local and /usr.
prefixes() {
  local p
  local IFS=:
  for p in ${CMAKE_PREFIX_PATH:-}; do [ -n "$p" ] && echo "$p"; done
  for p in $PATH; do case $p in */bin|*/sbin) echo "${p%/*}" ;; esac; done
  echo /usr/local
  echo /usr
}

compiler_include_dirs=()
compiler_include_dirs_read=0
read_compiler_include_dirs() {  # the compiler's own #include <...> search list
  (( compiler_include_dirs_read )) && return 0
  compiler_include_dirs_read=1
  [ -n "$cxx" ] || return 0
  mapfile -t compiler_include_dirs < <("$cxx" -std=c++17 -E -x c++ -v /dev/null 2>&1 >/dev/null |
    sed -n '/^#include <...> search starts here:/,/^End of search list/s/^ \+\([^ ]*\).*/\1/p' || true)
}

check_header() {  # HEADER [prefixes]: in the compiler's search list (and the prefixes' include/)
  local d dirs
  read_compiler_include_dirs
  dirs=("${compiler_include_dirs[@]}")
  if [ "${2:-}" = prefixes ]; then mapfile -t -O "${#dirs[@]}" dirs < <(prefixes | sed 's|$|/include|'); fi
  for d in "${dirs[@]}"; do
    if [ -f "$d/$1" ]; then note="$d/$1"; return 0; fi
  done
  note="no $1 in the compiler's include path"
  [ -z "${2:-}" ] || note+=" or CMake's prefixes"
  return 1
}

check_cmake_package() {  # NAME: a NAMEConfig.cmake or name-config.cmake find_package(NAME) finds
  local name=$1 lower p f restore
  lower=$(echo "$1" | tr '[:upper:]' '[:lower:]')
  restore=$(shopt -p nullglob || true)
  shopt -s nullglob
  for p in $(prefixes); do
    for f in "$p"/{lib,lib64,lib/*,share}/cmake/"$name"*/{"$name"Config,"$lower"-config}.cmake \
             "$p"/{lib,lib64,lib/*,share}/"$name"*/{,cmake/}{"$name"Config,"$lower"-config}.cmake; do
      if [ -f "$f" ]; then note="$f"; eval "$restore"; return 0; fi
    done
  done
  eval "$restore"
  note="no CMake package $name (${name}Config.cmake) under $(prefixes | tr '\n' ' ' | sed 's/ $//')"
  return 1
}

test_python() {  # the python3 the tests use: Debian's first (tests/CMakeLists.txt: HINTS /usr/bin)
  if [ -x /usr/bin/python3 ]; then echo /usr/bin/python3; else command -v python3; fi
}

check_python_module() {
  local py
  if ! py=$(test_python); then note="no python3"; return 1; fi
  if "$py" -c "import $1" >/dev/null 2>&1; then note="$py: import $1"; return 0; fi
  note="$py cannot import $1"
  return 1
}

clangxx=""
check_clang() {
  local c path
  for c in clang++ clang++-{19..14}; do
    if path=$(command -v "$c" 2>/dev/null); then clangxx=$path; note="$path"; return 0; fi
  done
  clangxx=""
  note="no clang++ on PATH"
  return 1
}

check_libfuzzer() {
  local rd f restore
  [ -n "$clangxx" ] || check_clang || { note="no clang++, so no libFuzzer"; return 1; }
  rd=$("$clangxx" -print-resource-dir 2>/dev/null || true)
  restore=$(shopt -p nullglob || true)
  shopt -s nullglob
  for f in "$rd"/lib/*/libclang_rt.fuzzer-"$(uname -m)".a "$rd"/lib/*/libclang_rt.fuzzer.a; do
    note="$f"; eval "$restore"; return 0
  done
  eval "$restore"
  note="no libFuzzer runtime (libclang_rt.fuzzer*.a) in $clangxx's resource directory ${rd:-?}"
  return 1
}

check_locales() {
  local d
  for d in /usr/share/i18n/locales /usr/local/share/i18n/locales; do
    if [ -f "$d/de_DE" ]; then note="$d/de_DE (the test generates de_DE.UTF-8 from it)"; return 0; fi
  done
  if have locale && locale -a 2>/dev/null | grep -i '^de_DE\.utf-\?8$' >/dev/null; then
    note="installed locale de_DE.UTF-8"
    return 0
  fi
  note="no locale source de_DE and no installed de_DE.UTF-8"
  return 1
}

# check_package PACKAGE: is what the Debian package provides here, from wherever it came?
check_package() {
  case $1 in
    g++) check_cxx ;;
    cmake) check_cmake ;;
    ninja-build) check_ninja ;;
    doctest-dev) check_header doctest/doctest.h prefixes ;;
    nlohmann-json3-dev) check_header nlohmann/json.hpp ;;
    libbenchmark-dev) check_cmake_package benchmark ;;
    libxml2-utils) if have xmllint; then note=$(command -v xmllint); else note="no xmllint on PATH"; false; fi ;;
    locales) check_locales ;;
    pkg-config) if have pkg-config; then note=$(command -v pkg-config); else note="no pkg-config on PATH"; false; fi ;;
    python3-prometheus-client) check_python_module prometheus_client ;;
    python3-pytest) check_python_module pytest ;;
    clang) check_clang ;;
    libclang-rt-dev) check_libfuzzer ;;
    # Any other package is taken to provide a command of its name (chromium: chromium).
    *) if have "$1"; then note=$(command -v "$1"); else note="no $1 on PATH"; false; fi ;;
  esac
}

# What each package is, and what goes without it.
describe() {
  case $1 in
    g++) echo "C++17 compiler" ;;
    cmake) echo "CMake >= $cmake_min_major.$cmake_min_minor" ;;
    ninja-build) echo "Ninja" ;;
    doctest-dev) echo "doctest" ;;
    nlohmann-json3-dev) echo "nlohmann/json" ;;
    libbenchmark-dev) echo "Google Benchmark" ;;
    libxml2-utils) echo "xmllint" ;;
    locales) echo "a comma-decimal locale" ;;
    pkg-config) echo "pkg-config" ;;
    python3-prometheus-client) echo "Python prometheus_client" ;;
    python3-pytest) echo "Python pytest" ;;
    clang) echo "clang++" ;;
    libclang-rt-dev) echo "libFuzzer runtime" ;;
    *) echo "$1" ;;
  esac
}
without() {
  case $1 in
    g++|cmake) echo "nothing can be built" ;;
    ninja-build) if have make; then echo "building with make instead"; else echo "no build tool (neither ninja nor make)"; fi ;;
    doctest-dev|nlohmann-json3-dev) echo "the unit tests cannot be built" ;;
    libbenchmark-dev) echo "the benchmarks and bench/gbench.hpp's header check are not built" ;;
    libxml2-utils) echo "plot_test does not check its SVG with xmllint" ;;
    locales) echo "locale_test is Skipped" ;;
    pkg-config) echo "the kscope.pc test (package_pkgconfig) is not built" ;;
    python3-prometheus-client) echo "the openmetrics_* tests are Skipped" ;;
    python3-pytest) echo "python_cpu is Skipped" ;;
    clang|libclang-rt-dev) echo "the libFuzzer targets (tests/fuzz) are Skipped" ;;
    *) echo "the tests that use it are Skipped" ;;
  esac
}
# Without these the mode cannot build at all.
essential() {
  case $1 in
    g++|cmake) return 0 ;;
    ninja-build) ! have make ;;
    doctest-dev|nlohmann-json3-dev) [ "$mode" = test ] ;;
    *) return 1 ;;
  esac
}

if ! have nvcc && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi

missing=()
fatal=()
find_missing() {  # [report]: sets missing and fatal; with report, says what is here and what is not
  local p
  missing=() fatal=() compiler_include_dirs_read=0
  for p in "${packages[@]}"; do
    if check_package "$p"; then
      [ -z "${1:-}" ] || printf '  [ok]      %s: %s\n' "$(describe "$p")" "$note"
    else
      missing+=("$p")
      if essential "$p"; then
        if [ "$p" = ninja-build ]; then fatal+=("a build tool (Ninja or Make)"); else fatal+=("$(describe "$p")"); fi
      fi
      [ -z "${1:-}" ] || printf '  [missing] %s (Debian package %s): %s; %s\n' "$(describe "$p")" "$p" "$note" "$(without "$p")"
    fi
  done
  return 0
}

# --- installing what is missing, where apt-get can -------------------------------------------
sudo_cmd=()
apt_options=(-o Acquire::Retries=0 -o Acquire::http::Timeout=20 -o Acquire::https::Timeout=20)
cannot_install_reason() {  # prints why apt-get cannot be used here; empty when it can
  if [ "${KSCOPE_SETUP_INSTALL:-1}" = 0 ]; then echo "installing is turned off (KSCOPE_SETUP_INSTALL=0)"; return; fi
  if ! have apt-get; then echo "no apt-get here (not Debian or Ubuntu)"; return; fi
  if [ "$(id -u)" -ne 0 ]; then
    if ! have sudo; then echo "not root, and no sudo"; return; fi
    if ! sudo -n true >/dev/null 2>&1; then echo "not root, and sudo asks for a password"; return; fi
  fi
}

last_lines() { grep -v '^\s*$' | tail -n 2 | tr '\n' ' ' | sed 's/ $//'; }

install_missing() {
  local reason out p known=() unknown=() failed=()
  reason=$(cannot_install_reason)
  if [ -n "$reason" ]; then
    echo "kscope setup: cannot install ${missing[*]}: $reason"
    return 0
  fi
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo -n)
  echo "kscope setup: installing with apt-get: ${missing[*]}"
  if ! out=$(${sudo_cmd[@]+"${sudo_cmd[@]}"} apt-get update -qq "${apt_options[@]}" 2>&1); then
    echo "kscope setup: cannot install ${missing[*]}: apt-get update failed: $(echo "$out" | last_lines)"
    return 0
  fi
  for p in "${missing[@]}"; do
    if apt-cache show "$p" >/dev/null 2>&1; then known+=("$p"); else unknown+=("$p"); fi
  done
  ((${#unknown[@]} == 0)) || echo "kscope setup: apt-get knows no package ${unknown[*]}: not installed"
  ((${#known[@]})) || return 0
  if ! out=$(${sudo_cmd[@]+"${sudo_cmd[@]}"} env DEBIAN_FRONTEND=noninteractive \
               apt-get install -y -qq --no-install-recommends "${apt_options[@]}" "${known[@]}" 2>&1); then
    # One at a time, so that what can be fetched still is.
    for p in "${known[@]}"; do
      ${sudo_cmd[@]+"${sudo_cmd[@]}"} env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "${apt_options[@]}" "$p" >/dev/null 2>&1 || failed+=("$p")
    done
    ((${#failed[@]} == 0)) ||
      echo "kscope setup: apt-get could not install ${failed[*]}: $(echo "$out" | last_lines)"
  fi
}

# --- check, install what is missing, check again --------------------------------------------
echo "kscope setup $mode: checking for what the Debian packages ${packages[*]} provide (from wherever they come)"
find_missing
if ((${#missing[@]})); then
  echo "kscope setup: missing: ${missing[*]}"
fi
cuda="none (CPU-only configuration; GPU tests are not built)"
if have nvcc; then
  cuda="$(command -v nvcc) ($(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/CUDA \1/p' | first_line || true))"
fi

if [ "$mode" = test ] && (( ! stop_after_checks )); then
  # Say what is coming and for how long before the long part starts. The times are from
  # a 2-core VM with nvcc and no GPU; a loaded machine takes longer, more cores less.
  cat <<EOF
kscope setup test: about to
  1. install what is missing with apt-get: ${missing[*]:-nothing (all present)}
  2. configure $build (Release; CUDA: $cuda)
  3. build the library's tests, examples, benchmarks, the kscope tool and libkscope_c.so
     (the C interface the Python package loads) ($jobs jobs)
  4. run ctest: CPU unit tests (the core's also under ASan+UBSan, the concurrent ones
     under TSan), the fuzz targets (libFuzzer, a fixed number of inputs each), the kscope
     tool, header and packaging checks (install, find_package, add_subdirectory,
     FetchContent, embed-and-export, pkg-config), the C interface and the Python package
     (pytest; its PyTorch cases need torch and a GPU) and the GPU cases (skipped without
     a device)
On a 2-core machine without a GPU this takes about 10 minutes, most of it compiling (the GPU
cases are not built there: listed as Skipped); a GPU machine also builds the GPU cases, the
examples and benchmarks, and runs the GPU cases. Afterwards
  ctest --test-dir $build -L quick    reruns the fast CPU cases in a few seconds
EOF
fi

if ((${#missing[@]})); then
  if (( checks_only )); then
    echo "kscope setup: check only: nothing installed"
  else
    install_missing
  fi
else
  echo "kscope setup: nothing to install"
fi

# What is here now, and what goes without what is not.
echo "kscope setup: what $mode needs:"
find_missing report
if have nvcc; then echo "  [ok]      CUDA: $cuda"; else echo "  [none]    CUDA: $cuda"; fi
if check_ninja; then build_tool="ninja"; elif have make; then build_tool="make"; fi
if ((${#fatal[@]})); then
  list=$(printf ', %s' "${fatal[@]}")
  echo "kscope setup: cannot build without: ${list#, }." \
       "Install them (or put them on PATH) and run this again." >&2
  exit 1
fi
if ((${#missing[@]})); then
  echo "kscope setup: going on without ${missing[*]}"
fi
(( stop_after_checks )) && exit 0

# CMake takes the compiler that was checked (a build directory configured before keeps its own).
[ -n "${CXX:-}" ] || export CXX="$cxx"
# The generator: the one an existing build directory was configured with, else Ninja when
# it is here, else Make.
generator=""
[ -f "$build/CMakeCache.txt" ] && generator=$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$build/CMakeCache.txt")
if [ -z "$generator" ]; then
  if [ "$build_tool" = ninja ]; then generator=Ninja; else generator="Unix Makefiles"; fi
elif [ "$generator" = Ninja ] && [ "$build_tool" != ninja ]; then
  echo "kscope setup: $build was configured for Ninja, which is not here: remove it or set KSCOPE_BUILD_DIR" >&2
  exit 1
fi
echo "kscope setup: generator $generator; CUDA: $cuda"

if [ "$mode" = demo ]; then
  # Only the quickstart: no tests or benchmarks, so none of their dependencies.
  # shellcheck disable=SC2086  # KSCOPE_CMAKE_ARGS is a list of arguments
  cmake -S "$root" -B "$build" -G "$generator" -DCMAKE_BUILD_TYPE=Release \
    -DKSCOPE_BUILD_TESTS=OFF -DKSCOPE_BUILD_BENCH=OFF -DKSCOPE_BUILD_EXAMPLES=ON ${KSCOPE_CMAKE_ARGS:-}
  cmake --build "$build" --target quickstart -j "$jobs"
  # Run inside the build directory: the report files it writes stay out of the sources.
  (cd "$build" && ./examples/quickstart)
  echo "kscope setup: report files written to $build: quickstart_report.json, quickstart_trace.json, quickstart_report.html"
else
  # Without a GPU the GPU tests could only be compiled, not run: they are left out (listed
  # and Skipped with the reason; their 19 nvcc compiles were 4 of the 10 minutes on a 2-core
  # VM). nvcc still checks every header (tests/headers), for one architecture (sm_90), at
  # half the time of the portable set. A GPU machine builds and runs them, for its own
  # architecture (the CMake default); KSCOPE_CMAKE_ARGS or CUDAARCHS choose otherwise
  # (-DKSCOPE_BUILD_GPU_TESTS=ON builds them here too).
  test_archs=""
  gpu_only="ON"
  tests_only="OFF"
  if ! nvidia-smi -L >/dev/null 2>&1; then
    # Examples and benchmarks need a GPU to mean anything, and compiling them is a fifth of
    # the build: without a GPU they are left out (KSCOPE_CMAKE_ARGS can turn them back on).
    gpu_only="OFF"
    tests_only="ON"  # nothing timed is built: the compiled library at -O1, as the tests are
    echo "kscope setup: no GPU here: the GPU tests, examples and benchmarks are not built (a GPU machine builds" \
         "them; the GPU tests are listed as Skipped)"
    if have nvcc && [ -z "${CUDAARCHS:-}" ] && [[ "${KSCOPE_CMAKE_ARGS:-}" != *CMAKE_CUDA_ARCHITECTURES* ]]; then
      test_archs="-DCMAKE_CUDA_ARCHITECTURES=90"
      echo "kscope setup: no GPU here: nvcc checks the headers for sm_90 only" \
           "(KSCOPE_CMAKE_ARGS='-DKSCOPE_BUILD_GPU_TESTS=ON -DCMAKE_CUDA_ARCHITECTURES=...' builds the GPU tests too)"
    fi
  fi
  # Explicit values: a build directory configured by `demo` has tests OFF in its cache.
  # shellcheck disable=SC2086  # test_archs and KSCOPE_CMAKE_ARGS are lists of arguments
  cmake -S "$root" -B "$build" -G "$generator" -DCMAKE_BUILD_TYPE=Release -DKSCOPE_BUILD_PYTHON=ON \
    -DKSCOPE_BUILD_TESTS=ON -DKSCOPE_BUILD_BENCH=$gpu_only -DKSCOPE_BUILD_EXAMPLES=$gpu_only \
    -DKSCOPE_BUILD_GPU_TESTS=$gpu_only \
    -DKSCOPE_TESTS_ONLY_BUILD=$tests_only $test_archs ${KSCOPE_CMAKE_ARGS:-}
  start=$(date +%s)
  cmake --build "$build" -j "$jobs"
  built=$(date +%s)
  ctest --test-dir "$build" --output-on-failure -j "$jobs"
  done_at=$(date +%s)
  echo "kscope setup: build $(( (built - start) / 60 )) min $(( (built - start) % 60 )) s," \
       "tests $(( (done_at - built) / 60 )) min $(( (done_at - built) % 60 )) s"
fi
