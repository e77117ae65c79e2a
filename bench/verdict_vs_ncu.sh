#!/usr/bin/env bash
# kscope's verdict against Nsight Compute's on seven kernel classes (issue 28), on the GPU
# machine: copy, stencil, transpose, tensor_gemm (cuBLAS HGEMM), fp32_gemm, barrier, tiny.
#
#   bash bench/verdict_vs_ncu.sh                  # all cases; $OUT (or ./out) gets the results
#   CASES='copy tiny' bash bench/verdict_vs_ncu.sh
#   NCU=/path/to/ncu NCU_CLOCK_CONTROL=none BUDGET_S=300 bash bench/verdict_vs_ncu.sh
#   BIN=/path/to/verdict_vs_ncu bash bench/verdict_vs_ncu.sh   # skip the build
#
# Builds bench/verdict_vs_ncu.cu header-only against this tree's include/, then per case:
# the program with --kscope (kscope's counters, warp stalls and classify(): KSCOPE lines)
# and the program with --plain under
#   ncu --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis
#       --section WarpStateStats --metrics <throughputs, pipes, stall samples> --csv --page raw
#       -k regex:<the case's kernel> -c 1
# (the metrics the device's `ncu --query-metrics` does not list are left out; if ncu still
# refuses the list, it runs again with the throughputs only, then with the sections only).
# bench/verdict_vs_ncu.py derives Nsight Compute's class, top unit and top stall from the raw
# CSV and prints the table beside kscope's. $OUT/verdict_vs_ncu.md holds it with the machine;
# $OUT/verdict_vs_ncu.tgz every log and CSV. Each step has a timeout, and steps stop when the
# budget (BUDGET_S, default 330 s) is spent: what was skipped is said in the summary.
# Exit status: the comparison's (0: every case agrees), or 1 when the build fails.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
final=${OUT:-$root/out}
mkdir -p "$final"
work=$(mktemp -d)
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export PATH=$CUDA_HOME/bin:$PATH
NCU=${NCU:-$(command -v ncu || echo "$CUDA_HOME/bin/ncu")}
arch=${CUDA_ARCH:-90}
budget_s=${BUDGET_S:-330}
start=$(date +%s)
summary=$work/summary.txt
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }
left_s() { echo $(( budget_s - ($(date +%s) - start) )); }
step_s() { local t; t=$(left_s); echo $(( t < $1 ? t : $1 )); }  # a step's timeout: at most what is left
finish() {  # $1: exit status
  cat "$work/machine.txt" "$summary" "$work/table.md" > "$final/verdict_vs_ncu.md" 2>/dev/null
  tar -czf "$final/verdict_vs_ncu.tgz" -C "$work" --exclude=verdict_vs_ncu .
  exit "$1"
}

{
  echo "machine: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1); $(nvcc --version | tail -1)"
  echo "ncu: $("$NCU" --version 2>&1 | tail -1)"
  echo
} | tee "$work/machine.txt"
: > "$work/table.md"

# CUPTI's headers are in the toolkit's include/ (CUDA 13) or extras/CUPTI/include (older).
# KSCOPE_CUDA_LIBRARY_DIR tells kscope's loaders where libcupti and libnvperf_host are.
flags=(-O2 -std=c++17 "-arch=sm_$arch" -DKSCOPE_HAS_CUDA=1 "-DKSCOPE_CUDA_LIBRARY_DIR=\"$CUDA_HOME/lib64\""
       -I"$root/include")
[ -d "$CUDA_HOME/extras/CUPTI/include" ] && flags+=(-I"$CUDA_HOME/extras/CUPTI/include")
bin=$work/verdict_vs_ncu
if [ -n "${BIN:-}" ]; then  # BIN=path: a binary built elsewhere from the same source
  cp "$BIN" "$bin" || finish 1
elif ! timeout 240 nvcc "${flags[@]}" "$root/bench/verdict_vs_ncu.cu" -o "$bin" -lcublas -ldl -Xcompiler -pthread \
    > "$work/build.log" 2>&1; then
  note "build FAILED"; tail -30 "$work/build.log" | tee -a "$summary"
  finish 1
fi
note "build: ${BIN:+skipped, $BIN copied; }$(( $(date +%s) - start )) s"

have_ncu=1
if ! command -v "$NCU" > /dev/null 2>&1; then
  have_ncu=0; note "ncu not found (set NCU=/path/to/ncu): Nsight Compute's side is empty"
fi

# The metrics asked of ncu beyond its sections: the throughputs and pipes kscope's verdict
# reads, and the stall samples. A name ncu does not know fails its whole run, so the ones its
# metric listing lacks (by base name) are left out; the listing is kept in the logs.
throughputs=(sm__throughput.avg.pct_of_peak_sustained_elapsed
  gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed
  dram__throughput.avg.pct_of_peak_sustained_elapsed
  lts__throughput.avg.pct_of_peak_sustained_elapsed
  l1tex__throughput.avg.pct_of_peak_sustained_active
  sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed
  sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed
  sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active
  sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active
  sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active
  sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active
  sm__warps_active.avg.pct_of_peak_sustained_active
  gpu__time_duration.sum)
stalls=()
for r in barrier long_scoreboard short_scoreboard wait math_pipe_throttle mio_throttle lg_throttle not_selected \
         selected no_instruction branch_resolving dispatch_stall drain membar sleeping tex_throttle imc_miss misc; do
  stalls+=("smsp__pcsamp_warps_issue_stalled_$r")
done
keep_listed() {  # names on stdin -> those whose base name ncu --query-metrics lists (all if no listing)
  local listing=$work/ncu_query_metrics.txt
  if ! grep -qE '^[a-z0-9]+__[a-z0-9_]+[[:space:]]' "$listing" 2>/dev/null; then cat; return; fi
  local m
  while read -r m; do
    if grep -qE "^${m%%.*}[[:space:]]" "$listing"; then echo "$m"; else echo "not listed by ncu: $m" >> "$work/ncu_metrics_left_out.txt"; fi
  done
}
if [ "$have_ncu" = 1 ]; then
  timeout 60 "$NCU" --query-metrics > "$work/ncu_query_metrics.txt" 2>&1 || note "ncu --query-metrics failed (exit $?): every metric is asked for"
  throughput_list=$(printf '%s\n' "${throughputs[@]}" | keep_listed | paste -sd, -)
  full_list=$(printf '%s\n' "${throughputs[@]}" "${stalls[@]}" | keep_listed | paste -sd, -)
  [ -s "$work/ncu_metrics_left_out.txt" ] && note "ncu: $(sort -u "$work/ncu_metrics_left_out.txt" | wc -l) metric(s) not listed, left out (ncu_metrics_left_out.txt)"
fi
ncu_args=(--section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis
          --section WarpStateStats --csv --page raw --print-units base)
[ -n "${NCU_CLOCK_CONTROL:-}" ] && ncu_args+=(--clock-control "$NCU_CLOCK_CONTROL")

wanted=" ${CASES:-copy stencil transpose tensor_gemm fp32_gemm barrier tiny} "
ran=()
mapfile -t case_lines < <("$bin" --list)  # "<case> <ncu -k regex>" per line
for line in "${case_lines[@]}"; do
  read -r c regex <<< "$line"
  [[ "$wanted" == *" $c "* ]] || continue
  if [ "$(left_s)" -lt 45 ]; then note "$c: skipped, the ${budget_s} s budget is spent"; continue; fi
  t0=$(date +%s)
  timeout "$(step_s 120)" "$bin" --case "$c" --kscope > "$work/kscope_$c.txt" 2>&1 < /dev/null
  rc=$?
  [ $rc -ne 0 ] && note "$c: kscope run exit $rc (kscope_$c.txt)"
  t1=$(date +%s)
  if [ "$have_ncu" = 1 ]; then
    # The full list, then the throughputs alone, then the sections alone: the first run with a
    # kernel row is kept.
    for attempt in full throughput none; do
      if [ "$(left_s)" -lt 20 ]; then note "$c: ncu skipped, the ${budget_s} s budget is spent"; break; fi
      case $attempt in
        full) list=$full_list ;;
        throughput) list=$throughput_list ;;
        none) list= ;;
      esac
      [ "$attempt" != full ] && [ -n "$list" ] && [ "$list" = "$full_list" ] && continue
      metric_args=()
      [ -n "$list" ] && metric_args=(--metrics "$list")
      timeout "$(step_s 150)" "$NCU" "${ncu_args[@]}" ${metric_args[@]+"${metric_args[@]}"} -k "regex:$regex" -c 1 \
        "$bin" --case "$c" --plain > "$work/ncu_$c.csv" 2> "$work/ncu_$c.err" < /dev/null
      rc=$?
      grep -q '^"[0-9]' "$work/ncu_$c.csv" && break
      note "$c: ncu with metrics '$attempt' gave no kernel row (exit $rc): $(grep -h -m1 -i 'error' "$work/ncu_$c.csv" "$work/ncu_$c.err" | head -1 | cut -c1-200)"
      cp "$work/ncu_$c.csv" "$work/ncu_${c}_failed_$attempt.csv"
      cp "$work/ncu_$c.err" "$work/ncu_${c}_failed_$attempt.err"
      # No kernel matched the regex: fewer metrics would not change that.
      grep -qi 'no kernels were profiled' "$work/ncu_$c.csv" "$work/ncu_$c.err" && break
    done
  fi
  note "$c: kscope $(( t1 - t0 )) s, ncu $(( $(date +%s) - t1 )) s"
  ran+=("$c")
done
note "total: $(( $(date +%s) - start )) s"
echo

python3 "$root/bench/verdict_vs_ncu.py" "$work" --cases "${ran[*]:-}" > "$work/table.md" 2> "$work/table.err"
status=$?
[ -s "$work/table.err" ] && cat "$work/table.err" >> "$work/table.md"
cat "$work/table.md"
finish "$status"
