#!/usr/bin/env bash
# What a profiled step costs on the GPU machine, in one short call (issue 41 item 3): builds
# bench/counter_step_probe.cu and bench/profiled_steps.cu against this tree's headers, runs
# the probe's modes (each in its own process: a crash in one leaves the others' lines; one
# at a time: two processes cannot both hold the GPU's counters), then profiled_steps with one
# range per scope stretch (--scopes) and with one range per kernel. The lines go to
# $OUT/counter_steps.txt, every log to $OUT/counter_steps.tgz.
#
#   bash bench/counter_steps.sh
#   MODES='segments kept' STEPS=5 bash bench/counter_steps.sh
#
# Environment: OUT (default ./out), MODES (the probe's modes; default: segments
# segments_kept_same started kept kept_same cached fresh), STEPS (profiled steps per probe mode, 5), RUN_TIMEOUT (s per
# process, 60), CUDA_ARCH (90).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
final=${OUT:-$root/out}
mkdir -p "$final"
work=$(mktemp -d)
export PATH=/usr/local/cuda/bin:$PATH
flags=(-std=c++17 -arch=sm_${CUDA_ARCH:-90} -O2 -DKSCOPE_HAS_CUDA=1 -Xcompiler -pthread -I"$root/include")
out=$final/counter_steps.txt
: > "$out"
echo "machine: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1)" | tee -a "$out"
nvcc "${flags[@]}" "$root/bench/counter_step_probe.cu" -o "$work/counter_step_probe" -ldl > "$work/probe_build.log" 2>&1 &
probe_build=$!
nvcc "${flags[@]}" "$root/bench/profiled_steps.cu" -o "$work/profiled_steps" -ldl > "$work/steps_build.log" 2>&1 &
steps_build=$!
wait "$probe_build" || echo "counter_step_probe did not build (probe_build.log)" | tee -a "$out"
wait "$steps_build" || echo "profiled_steps did not build (steps_build.log)" | tee -a "$out"
limit=${RUN_TIMEOUT:-60}
for mode in ${MODES:-segments segments_kept_same started kept kept_same cached fresh}; do
  [ -x "$work/counter_step_probe" ] || break
  timeout -k 5 "$limit" "$work/counter_step_probe" "$mode" "${STEPS:-5}" > "$work/probe_$mode.log" 2>&1
  echo "probe $mode: exit $?" >> "$work/probe_$mode.log"
  sed 's/; resident.*//' "$work/probe_$mode.log" | tee -a "$out"
done
for args in --scopes ""; do
  [ -x "$work/profiled_steps" ] || break
  name=steps${args:+_${args#--}}
  timeout -k 5 "$limit" "$work/profiled_steps" $args > "$work/$name.log" 2>&1
  echo "profiled_steps $args: exit $?" >> "$work/$name.log"
  tee -a "$out" < "$work/$name.log"
done
tar -czf "$final/counter_steps.tgz" -C "$work" .
