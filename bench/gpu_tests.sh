#!/usr/bin/env bash
# The GPU test cases and two examples only, in one short call on the lent GPU (when device
# time is scarce; bench/device_check.sh is the full check). Configures, builds the gpu_*
# test targets and the examples quickstart and gemm_vs_cublas with all cores, runs them,
# and packs the logs into $OUT/gpu_tests.tgz with a summary in $OUT/summary.txt. Where a
# Python with torch is found (PYTHON_TORCH=/path/to/python, else python3, /opt/torch/.venv),
# the Python package's GPU suite (tests/python/gpu) runs too, over this build's libkscope_c.so.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
final=${OUT:-$root/out}
mkdir -p "$final"
logs=$(mktemp -d)
build=${KSCOPE_GPU_BUILD_DIR:-$root/build-gpu}
export PATH=/usr/local/cuda/bin:$PATH
summary=$final/summary.txt
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }
note "machine: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1); $(nvcc --version | tail -1)"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DKSCOPE_TSAN_TESTS=OFF -DKSCOPE_BUILD_BENCH=OFF -DKSCOPE_BUILD_PYTHON=ON > "$logs/configure.log" 2>&1 || { note "configure FAILED"; tail -20 "$logs/configure.log"; exit 1; }
targets=$(ninja -C "$build" -t targets all 2>/dev/null | grep -oE '^gpu_[a-z_]+_test' | sort -u)
start=$(date +%s)
python_targets=$(ninja -C "$build" -t targets all 2>/dev/null | grep -oE '^(kscope_c|kscope_c_testing|kscope_cli):' | tr -d ':' | sort -u)
if ! cmake --build "$build" -j "$(nproc)" --target $targets $python_targets quickstart gemm_vs_cublas -- -k 0 > "$logs/build.log" 2>&1; then
  note "build FAILED"; grep -E "error" "$logs/build.log" | head -30 | tee -a "$summary"
fi
note "build: $(( $(date +%s) - start )) s"
passed=0; failed=0; skipped=0
for t in $targets; do
  exe=$build/tests/$t
  [ -x "$exe" ] || { note "$t: not built"; failed=$((failed + 1)); continue; }
  timeout 300 "$exe" > "$logs/$t.log" 2>&1
  rc=$?
  case $rc in
    0) passed=$((passed + 1)) ;;
    77) skipped=$((skipped + 1)) ;;
    *) failed=$((failed + 1)); note "$t FAILED (exit $rc)"; grep -E "ERROR|FAILED|CHECK|REQUIRE" "$logs/$t.log" | head -20 | tee -a "$summary" ;;
  esac
  note "$t: $(grep -E '^\[doctest\] (test cases|assertions)' "$logs/$t.log" | tr '\n' ' ')"
done
note "GPU tests: $passed passed, $failed failed, $skipped skipped"
py=""
for p in ${PYTHON_TORCH:-} python3 /opt/torch/.venv/bin/python3; do
  command -v "$p" > /dev/null 2>&1 && "$p" -c 'import torch' > /dev/null 2>&1 && { py=$p; break; }
done
lib=$(find "$build" -name 'libkscope_c.so' -path '*python*' | head -1)
if [ -n "$py" ] && [ -n "$lib" ]; then
  PYTHONPATH="$root/python" KSCOPE_LIBRARY="$lib" KSCOPE_TESTING_LIBRARY="$(find "$build" -name 'libkscope_c_testing.so' | head -1)" \
    KSCOPE_CLI="$build/tools/kscope" PYTHONDONTWRITEBYTECODE=1 \
    timeout 300 "$py" "$root/tests/python/run_pytest.py" gpu -q -rs -p no:cacheprovider "$root/tests/python/gpu" > "$logs/python_gpu.log" 2>&1
  note "python GPU suite ($py): exit $?: $(tail -1 "$logs/python_gpu.log")"
else
  note "python GPU suite: not run (${py:+no libkscope_c.so built}${py:-no Python with torch found})"
fi
for e in quickstart gemm_vs_cublas; do
  (cd "$logs" && timeout 120 "$build/examples/$e" > "$logs/example_$e.txt" 2>&1); note "example $e: exit $?"
done
cp "$summary" "$logs/"
tar -czf "$final/gpu_tests.tgz" -C "$logs" .
