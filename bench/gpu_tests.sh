#!/usr/bin/env bash
# The GPU test cases and two examples only, in one short call on the lent GPU (when device
# time is scarce; bench/device_check.sh is the full check). Configures, builds the tests
# ctest labels "gpu" and the examples quickstart and gemm_vs_cublas with all cores, runs
# them, and packs the logs into $OUT/gpu_tests.tgz with a summary in $OUT/summary.txt.
# Where a Python with torch is found (PYTHON_TORCH=/path/to/python, else python3,
# /opt/torch/.venv), the Python package's GPU suite (tests/python/gpu) runs too, over this
# build's libkscope_c.so.
#
# It gates: the exit status is 0 only when every GPU test passed, and non-zero when one
# failed, was not built (or not configured), or exited 77 (Skipped) for a reason not in
# the allowed list; the Python suite and the examples failing, or not running, fail it too.
# A test exits 77 with one "SKIP: <case>: <reason>" line per case it could not run
# (tests/gpu/gpu_main.cpp); the only reason allowed by default is gpu_multigpu_test's "needs 2
# GPUs, found N" on a machine with N < 2 GPUs. The summary names every skipped test and why,
# and ends with "GPU tests: N passed, N failed, N skipped".
#
# Environment:
#   OUT                          where summary.txt and gpu_tests.tgz go (default ./out)
#   KSCOPE_GPU_BUILD_DIR         the build directory (default build-gpu)
#   KSCOPE_GPU_SKIP_BUILD=1      run what that directory holds, without configuring or building
#                                (a build made elsewhere, e.g. on a machine without a GPU,
#                                configured with -DKSCOPE_BUILD_GPU_TESTS=ON: setup.sh test
#                                leaves the GPU tests out where it finds no GPU)
#   KSCOPE_GPU_ALLOWED_SKIPS     more allowed skips: "test=regex;test=regex" (the regex is
#                                matched against the test's SKIP lines)
#   KSCOPE_GPU_TEST_ARGS         arguments for every test executable (e.g. "-s -d")
#   KSCOPE_GPU_TEST_TIMEOUT      seconds per test executable (default 600, as ctest's)
#   KSCOPE_GPU_DEADLINE          seconds from the script's start by which every test must end
#                                (a lent machine's call limit): each test's timeout is cut to
#                                what is left, and a test with under 10 s left is not started
#                                and counts as failed ("not run: deadline"), so the summary line
#                                is always written (an outer `timeout` would kill the script and
#                                leave its test running, holding the GPU's counters)
#   KSCOPE_GPU_TESTS             only these tests, in this order ("gpu_cupti_test gpu_bench_test");
#                                the summary says the run was a subset
#   KSCOPE_GPU_PYTHON=0          leave the Python GPU suite out; KSCOPE_GPU_EXAMPLES=0 the examples
#   KSCOPE_GPU_REQUIRE_DEVICE=0  run even without a GPU (to test this runner: every GPU test
#                                then exits 77 with "no NVIDIA driver" and fails the run)
#   KSCOPE_GPU_JOBS              build jobs (default: all cores)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
script_start=$(date +%s)
final=${OUT:-$root/out}
mkdir -p "$final"
logs=$(mktemp -d)
build=${KSCOPE_GPU_BUILD_DIR:-$root/build-gpu}
case $build in /*) ;; *) build=$PWD/$build ;; esac
export PATH=/usr/local/cuda/bin:$PATH
summary=$final/summary.txt
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }
gate_failures=()
gate_fail() { gate_failures+=("$*"); note "FAIL: $*"; }
pack() {
  cp "$summary" "$logs/" 2> /dev/null
  tar -czf "$final/gpu_tests.tgz" -C "$logs" . 2> /dev/null
}
trap pack EXIT

note "machine: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1); $(nvcc --version 2>&1 | tail -1)"
gpu_count=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU ')
if [ "$gpu_count" -eq 0 ]; then
  if [ "${KSCOPE_GPU_REQUIRE_DEVICE:-1}" != 0 ]; then
    note "no GPU on this machine (nvidia-smi -L lists none): bench/gpu_tests.sh runs the GPU tests and needs one"
    note "GPU tests: 0 passed, 0 failed, 0 skipped (not run: no GPU)"
    exit 2
  fi
  note "no GPU on this machine; KSCOPE_GPU_REQUIRE_DEVICE=0: running anyway (every GPU test should fail the gate)"
fi

# The tests ctest labels "gpu" (tests/CMakeLists.txt), less the Python suite (labelled
# "python" too), which runs below with a Python that has torch. Names, never a name pattern:
# gpu_time_test is a CPU test.
gpu_tests() {
  (cd "$build" && ctest -N -L '^gpu$' -LE '^python$' 2> /dev/null) | sed -n 's/^ *Test *#[0-9]*: *//p' | sort -u
}

if [ "${KSCOPE_GPU_SKIP_BUILD:-0}" = 1 ]; then
  note "build: skipped (KSCOPE_GPU_SKIP_BUILD=1): running what $build holds"
  [ -f "$build/CTestTestfile.cmake" ] || { gate_fail "$build is not a configured build directory"; note "GPU tests: 0 passed, 0 failed, 0 skipped"; exit 1; }
else
  if ! cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DKSCOPE_TSAN_TESTS=OFF -DKSCOPE_BUILD_BENCH=OFF -DKSCOPE_BUILD_PYTHON=ON -DKSCOPE_BUILD_GPU_TESTS=ON \
      > "$logs/configure.log" 2>&1; then
    gate_fail "configure failed (configure.log)"; tail -20 "$logs/configure.log"
    note "GPU tests: 0 passed, 0 failed, 0 skipped"
    exit 1
  fi
  start=$(date +%s)
  known=$(ninja -C "$build" -t targets all 2> /dev/null | sed -n 's/^\([^:]*\):.*/\1/p' | sort -u)
  wanted="$(gpu_tests) kscope_c kscope_c_testing kscope_cli quickstart gemm_vs_cublas"
  targets=$(for t in $wanted; do grep -qxF "$t" <<< "$known" && echo "$t"; done)
  if ! cmake --build "$build" -j "${KSCOPE_GPU_JOBS:-$(nproc)}" --target $targets -- -k 0 > "$logs/build.log" 2>&1; then
    gate_fail "build failed (build.log)"; grep -E "error" "$logs/build.log" | head -30 | tee -a "$summary"
  fi
  note "build: $(( $(date +%s) - start )) s"
fi

tests=$(gpu_tests)
# Every tests/gpu/*_test.cu must be a configured GPU test (a stale build directory misses new ones).
configured_missing=()
for source in "$root"/tests/gpu/*_test.cu; do
  t=gpu_$(basename "$source" .cu)
  grep -qxF "$t" <<< "$tests" || configured_missing+=("$t")
done
subset=""
if [ -n "${KSCOPE_GPU_TESTS:-}" ]; then
  chosen=""
  for t in $KSCOPE_GPU_TESTS; do
    if grep -qxF "$t" <<< "$tests"; then chosen="$chosen $t"; else gate_fail "$t (KSCOPE_GPU_TESTS) is not a configured GPU test"; fi
  done
  tests=$chosen
  configured_missing=()
  subset=" (subset: KSCOPE_GPU_TESTS)"
fi
[ -n "$tests" ] || gate_fail "no test labelled gpu in $build (configured without nvcc?)"

# Skips allowed here: "test=regex" entries. gpu_multigpu_test on a machine with fewer than 2 GPUs.
allowed=()
[ "$gpu_count" -lt 2 ] && allowed+=("gpu_multigpu_test=needs 2 GPUs, found $gpu_count\$")
IFS=';' read -r -a extra <<< "${KSCOPE_GPU_ALLOWED_SKIPS:-}"
for e in ${extra[@]+"${extra[@]}"}; do [ -n "$e" ] && allowed+=("$e"); done
skip_allowed() {  # test, SKIP line (without "SKIP: ")
  local entry
  for entry in ${allowed[@]+"${allowed[@]}"}; do
    [ "${entry%%=*}" = "$1" ] && grep -qE -- "${entry#*=}" <<< "$2" && return 0
  done
  return 1
}

# Seconds left before KSCOPE_GPU_DEADLINE (a large number without one).
time_left() {
  if [ -n "${KSCOPE_GPU_DEADLINE:-}" ]; then echo $(( KSCOPE_GPU_DEADLINE - ($(date +%s) - script_start) )); else echo 1000000; fi
}

passed=0; failed=0; skipped=0
skip_lines=()
for t in ${configured_missing[@]+"${configured_missing[@]}"}; do
  note "$t: FAILED: not configured in $build (tests/gpu/${t#gpu_}.cu exists; reconfigure)"; failed=$((failed + 1))
done
for t in $tests; do
  exe=$build/tests/$t
  [ -x "$exe" ] || { note "$t: FAILED: not built ($exe)"; failed=$((failed + 1)); continue; }
  limit=${KSCOPE_GPU_TEST_TIMEOUT:-600}
  if [ -n "${KSCOPE_GPU_DEADLINE:-}" ]; then
    left=$(time_left)
    if [ "$left" -lt 10 ]; then note "$t FAILED: not run: deadline (KSCOPE_GPU_DEADLINE=$KSCOPE_GPU_DEADLINE s)"; failed=$((failed + 1)); continue; fi
    [ "$left" -lt "$limit" ] && limit=$left
  fi
  # ctest's working directory for these tests; killed 5 s after its timeout if it ignores it.
  (cd "$build/tests" && timeout -k 5 "$limit" "$exe" ${KSCOPE_GPU_TEST_ARGS:-}) > "$logs/$t.log" 2>&1
  rc=$?
  case $rc in
    0) passed=$((passed + 1)) ;;
    77)
      mapfile -t lines < <(sed -n 's/^SKIP: //p' "$logs/$t.log")
      unexpected=()
      [ "${#lines[@]}" -gt 0 ] || unexpected+=("exit 77 without a SKIP line")
      for line in ${lines[@]+"${lines[@]}"}; do skip_allowed "$t" "$line" || unexpected+=("$line"); done
      if [ "${#unexpected[@]}" -eq 0 ]; then
        skipped=$((skipped + 1))
        for line in ${lines[@]+"${lines[@]}"}; do skip_lines+=("$t skipped (allowed): $line"); done
      else
        failed=$((failed + 1))
        note "$t FAILED: skipped where it must run (exit 77):"
        for line in ${unexpected[@]+"${unexpected[@]}"}; do note "  SKIP: $line"; done
      fi
      ;;
    124|137) failed=$((failed + 1)); note "$t FAILED: timed out after $limit s" ;;
    *) failed=$((failed + 1)); note "$t FAILED (exit $rc)"; grep -E "ERROR|FAILED|CHECK|REQUIRE" "$logs/$t.log" | head -20 | tee -a "$summary" ;;
  esac
  counts=$(grep -E '^\[doctest\] (test cases|assertions)' "$logs/$t.log" | tr '\n' ' ')
  [ -z "$counts" ] || note "$t: $counts"
done

if [ "${KSCOPE_GPU_PYTHON:-1}" != 0 ]; then
  py=""
  for p in ${PYTHON_TORCH:-} python3 /opt/torch/.venv/bin/python3; do
    command -v "$p" > /dev/null 2>&1 && "$p" -c 'import torch' > /dev/null 2>&1 && { py=$p; break; }
  done
  lib=$(find "$build" -name 'libkscope_c.so' -path '*python*' 2> /dev/null | head -1)
  py_limit=$(time_left); [ "$py_limit" -gt 300 ] && py_limit=300
  if [ "$py_limit" -lt 30 ]; then
    gate_fail "python GPU suite not run: deadline (KSCOPE_GPU_DEADLINE)"
  elif [ -n "$py" ] && [ -n "$lib" ]; then
    PYTHONPATH="$root/python" KSCOPE_LIBRARY="$lib" KSCOPE_TESTING_LIBRARY="$(find "$build" -name 'libkscope_c_testing.so' | head -1)" \
      KSCOPE_CLI="$build/tools/kscope" PYTHONDONTWRITEBYTECODE=1 \
      timeout -k 5 "$py_limit" "$py" "$root/tests/python/run_pytest.py" gpu -q -rs -p no:cacheprovider "$root/tests/python/gpu" > "$logs/python_gpu.log" 2>&1
    rc=$?
    note "python GPU suite ($py): exit $rc: $(tail -1 "$logs/python_gpu.log")"
    [ "$rc" -eq 0 ] || gate_fail "python GPU suite exit $rc (77: skipped: $(grep -m1 SKIPPED "$logs/python_gpu.log"))"
  else
    gate_fail "python GPU suite not run (${py:+no libkscope_c.so built in $build}${py:-no Python with torch found: set PYTHON_TORCH}; KSCOPE_GPU_PYTHON=0 leaves it out)"
  fi
fi
if [ "${KSCOPE_GPU_EXAMPLES:-1}" != 0 ]; then
  for e in quickstart gemm_vs_cublas; do
    if [ ! -x "$build/examples/$e" ]; then gate_fail "example $e not built"; continue; fi
    ex_limit=$(time_left); [ "$ex_limit" -gt 120 ] && ex_limit=120
    if [ "$ex_limit" -lt 10 ]; then gate_fail "example $e not run: deadline (KSCOPE_GPU_DEADLINE)"; continue; fi
    (cd "$logs" && timeout -k 5 "$ex_limit" "$build/examples/$e" > "$logs/example_$e.txt" 2>&1)
    rc=$?
    note "example $e: exit $rc"
    [ "$rc" -eq 0 ] || gate_fail "example $e exit $rc"
  done
fi

for line in ${skip_lines[@]+"${skip_lines[@]}"}; do note "$line"; done
[ "${#gate_failures[@]}" -eq 0 ] || note "gate: ${#gate_failures[@]} failure(s) besides the test counts above"
note "GPU tests: $passed passed, $failed failed, $skipped skipped$subset"
[ "$failed" -eq 0 ] && [ "${#gate_failures[@]}" -eq 0 ]
