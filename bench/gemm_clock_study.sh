#!/usr/bin/env bash
# How the SM clock and the time of a power-hungry kernel (cuBLAS bf16 GEMM 4096^3, cold
# L2) evolve under sustained load, and how that moves the harness's median from one
# process to the next. The numbers behind bench_options' min_time_s and
# managed_min_time_s (bench/RESULTS.md, "Cross-process reproducibility").
#
#   bench/gemm_clock_study.sh [BUILD_DIR]   (needs bench/harness_gpu_bench built there)
# Prints a 15 s trace (25 chunks: median time and SM clock), then five processes per
# harness setting, with the old 50 ms minimum and with the defaults.
set -uo pipefail
build=${1:-build}
bin=$build/bench/harness_gpu_bench
[ -x "$bin" ] || { echo "gemm_clock_study.sh: $bin not found" >&2; exit 2; }
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,temperature.gpu,power.draw,power.limit,clocks.sm,clocks.max.sm --format=csv
echo "== trace: 15 s of back-to-back samples, no warm-up"
"$bin" --repro gemm --trace --budget-s 15 --target 0 --warmup-s 0 2>&1
for variant in "--min-time-s 0.05 --managed-min-time-s 0" "" ; do
  echo "== 5 processes: gemm ${variant:-(defaults)}"
  for i in 1 2 3 4 5; do "$bin" --repro gemm $variant; done
done
echo "== 5 processes, 5 s idle before each: gemm (defaults)"
for i in 1 2 3 4 5; do sleep 5; "$bin" --repro gemm; done
