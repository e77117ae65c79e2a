#!/usr/bin/env bash
# The whole GPU check in one call on the lent H200 (see bench/RESULTS.md for results):
# configure, build, ctest (GPU cases included), the GPU benchmarks and examples, and the
# ncu cross-checks. Logs go to $OUT (or ./out). Usage: bench/device_check.sh [steps...]
# steps: build test bench examples scripts (default: all), and on request:
#   harness (the harness-vs-do_bench table only), study (bench/gemm_clock_study.sh)
# summary.txt is written to $OUT as the steps go, so a cut-short call still returns it.
# The exit status gates: non-zero when the build fails, when a test fails, when a GPU test
# (those ctest labels "gpu") fails, is not built or is skipped for a reason not allowed
# (bench/gpu_tests.sh runs them and judges their SKIP lines), or when an example fails.
# Without a GPU it says so and exits 2 (KSCOPE_GPU_REQUIRE_DEVICE=0 runs it anyway).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
final=${OUT:-$root/out}
out=$(mktemp -d)   # everything is logged here, then packed: only 8 files come back from $OUT
mkdir -p "$final"
build=${KSCOPE_DEVICE_BUILD_DIR:-$root/build-device}  # the build directory (build-device)
steps=${*:-build test bench examples scripts}
export PATH=/usr/local/cuda/bin:$PATH
has() { [[ " $steps " == *" $1 "* ]]; }
status=0
summary=$final/summary.txt
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }

{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm --format=csv; nvcc --version | tail -1; } > "$out/machine.txt" 2>&1
note "machine: $(tr '\n' ' ' < "$out/machine.txt")"
if [ "$(nvidia-smi -L 2> /dev/null | grep -c '^GPU ')" -eq 0 ] && [ "${KSCOPE_GPU_REQUIRE_DEVICE:-1}" != 0 ]; then
  note "no GPU on this machine (nvidia-smi -L lists none): bench/device_check.sh is the GPU check and needs one"
  exit 2
fi

if has build; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DKSCOPE_TSAN_TESTS=OFF > "$out/configure.log" 2>&1 || { note "configure FAILED"; tail -30 "$out/configure.log"; exit 1; }
  if ! cmake --build "$build" -j 16 -- -k 0 > "$out/build.log" 2>&1; then
    note "build FAILED"; grep -E "error|Error" "$out/build.log" | head -40; status=1
  else
    note "build ok"
  fi
fi
if has test; then
  # Every test but those labelled gpu, which bench/gpu_tests.sh runs next and judges.
  (cd "$build" && ctest --output-on-failure -j 4 --timeout 600 -E "package_" -LE '^gpu$' > "$out/ctest.log" 2>&1)
  rc=$?
  note "ctest (all but the gpu label): $(grep -E 'tests passed|tests failed' "$out/ctest.log" | tail -1)"
  grep -E "Failed|\*\*\*|Skipped" "$out/ctest.log" | head -20 | tee -a "$summary"
  [ "$rc" -eq 0 ] || { note "ctest FAILED (exit $rc)"; status=1; }
  # The GPU tests (and the Python GPU suite) on this build, with every assertion and the
  # durations in their logs (-s -d); its summary is copied here.
  OUT="$out/gpu_tests" KSCOPE_GPU_BUILD_DIR="$build" KSCOPE_GPU_SKIP_BUILD=1 KSCOPE_GPU_EXAMPLES=0 \
    KSCOPE_GPU_TEST_ARGS="${KSCOPE_GPU_TEST_ARGS:--s -d}" bash "$root/bench/gpu_tests.sh" > "$out/gpu_tests.log" 2>&1
  rc=$?
  note "== bench/gpu_tests.sh (exit $rc)"
  grep -vE '^machine:' "$out/gpu_tests/summary.txt" >> "$summary" 2> /dev/null
  [ "$rc" -eq 0 ] || { note "GPU tests FAILED (bench/gpu_tests.sh exit $rc)"; status=1; }
fi
if has bench; then
  # Google Benchmark programs: 5 repetitions, medians reported.
  for name in scope_bench stats_bench attribution_bench; do
    b="$build/bench/$name"
    [ -x "$b" ] || { note "$name not built"; continue; }
    timeout 300 "$b" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
      --benchmark_out="$out/$name.json" --benchmark_out_format=json > "$out/$name.txt" 2>&1 || note "$name exit $?"
    note "== $name"; grep -E "_median|ERROR" "$out/$name.txt" >> "$summary"
  done
  for name in cupti_overhead_bench harness_gpu_bench; do
    b="$build/bench/$name"
    [ -x "$b" ] || { note "$name not built"; continue; }
    timeout 400 "$b" > "$out/$name.txt" 2>&1 || note "$name exit $?"
    note "== $name"; tail -25 "$out/$name.txt" >> "$summary"
  done
fi
if has harness && ! has bench; then
  timeout 400 "$build/bench/harness_gpu_bench" > "$out/harness_gpu_bench.txt" 2>&1 || note "harness_gpu_bench exit $?"
  note "== harness_gpu_bench"; tail -25 "$out/harness_gpu_bench.txt" >> "$summary"
fi
if has study; then
  note "== gemm_clock_study.sh"; timeout 300 bash "$root/bench/gemm_clock_study.sh" "$build" >> "$summary" 2>&1 || note "exit $?"
fi
if has scripts; then
  note "== reproducibility.sh"; timeout 400 bash "$root/bench/reproducibility.sh" "$build" >> "$summary" 2>&1 || note "exit $?"
  note "== harness_vs_ncu.sh"; timeout 300 bash "$root/bench/harness_vs_ncu.sh" "$build" >> "$summary" 2>&1 || note "exit $?"
  note "== cupti_vs_ncu.sh"; timeout 300 bash "$root/bench/cupti_vs_ncu.sh" "$out/cvn" >> "$summary" 2>&1 || note "exit $?"
fi
if has examples; then
  for e in "$build"/examples/*; do
    [ -x "$e" ] && [ -f "$e" ] || continue
    name=$(basename "$e")
    (cd "$out" && timeout 300 "$e" > "$out/example_$name.txt" 2>&1) || { note "example $name FAILED (exit $?)"; status=1; }
  done
fi
note "done: $([ "$status" -eq 0 ] && echo "passed" || echo "FAILED (see above)")"
cp "$summary" "$out/summary.txt"
tar -czf "$final/logs.tgz" -C "$out" .
cat "$summary"
exit $status
