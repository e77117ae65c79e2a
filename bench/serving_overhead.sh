#!/usr/bin/env bash
# The cost of watching a serving loop, on the GPU machine: builds examples/serving twice
# (with kscope, and with every scope compiled out) against this tree's headers, and
# optionally against an older copy of include/ (BEFORE=dir: the same loop on the old
# library, so before and after share one run), then runs bench/serving_overhead.py with
# every configuration interleaved. Logs and the table go to $OUT/serving_overhead.tgz and
# $OUT/serving_overhead.md.
#
#   bash bench/serving_overhead.sh                         # this tree only
#   BEFORE=.before/include bash bench/serving_overhead.sh  # old headers (and .before/examples) too
#   BEFORE_CONFIGS=scopes+collector ONCE='before:counters:eager'   # which ones the old build runs
#   VARIANTS=eager CONFIGS='none collector nosync:KSCOPE_CUPTI_OPTIONS=sync=0' ROUNDS=3 bash bench/serving_overhead.sh
#   CONFIGS='none collector bare-kernel:CUPTI_ALONE=kernel bare-kinds:CUPTI_ALONE=kernel,memcpy,memset,sync'
#                                                       # CUPTI alone beside kscope
#
# The before/after copy of include/ is made where git is: `git archive <commit> include |
# tar -x -C .before` (and carried to the GPU machine).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
final=${OUT:-$root/out}
mkdir -p "$final"
work=$(mktemp -d)
export PATH=/usr/local/cuda/bin:$PATH
arch=${CUDA_ARCH:-90}
flags=(-O2 -std=c++17 -arch=sm_$arch -DKSCOPE_HAS_CUDA=1 -Xcompiler -pthread -ldl -lcublas)

build_pair() {  # $1 name, $2 include dir, $3 examples dir (default: this tree's)
  local examples=${3:-$root/examples}
  mkdir -p "$work/$1"
  nvcc "${flags[@]}" -I"$2" "$examples/serving.cu" -o "$work/$1/serving" > "$work/$1/build.log" 2>&1 &
  nvcc "${flags[@]}" -DKSCOPE_DISABLE -I"$2" "$examples/serving.cu" -o "$work/$1/serving_uninstrumented" \
    > "$work/$1/build_uninstrumented.log" 2>&1 &
}
start=$(date +%s)
build_pair after "$root/include"
builds=(--build "after=$work/after")
if [ -n "${BEFORE:-}" ]; then
  # The example as it was then, beside the old headers (BEFORE_EXAMPLES; default: the
  # examples/ folder beside BEFORE's include/, else this tree's): today's example may use
  # names the old headers lack.
  before_examples=${BEFORE_EXAMPLES:-$(dirname "$BEFORE")/examples}
  [ -f "$before_examples/serving.cu" ] || before_examples=$root/examples
  build_pair before "$BEFORE" "$before_examples"
  builds=(--build "before=$work/before${BEFORE_CONFIGS:+@$BEFORE_CONFIGS}" "${builds[@]}")
fi
# CUPTI alone, for the bare-...:CUPTI_ALONE=... configurations (bench/cupti_alone_injection.cpp).
cupti_lib=$(dirname "$(find /usr/local/cuda/ -name 'libcupti.so' 2>/dev/null | head -1)")
g++ -O2 -std=c++17 -shared -fPIC -I/usr/local/cuda/include -I/usr/local/cuda/extras/CUPTI/include \
  "$root/bench/cupti_alone_injection.cpp" -L"$cupti_lib" -Wl,-rpath,"$cupti_lib" -lcupti \
  -o "$work/libcupti_alone.so" > "$work/cupti_alone_build.log" 2>&1 &
export CUPTI_ALONE_LIB=$work/libcupti_alone.so
wait
echo "build: $(( $(date +%s) - start )) s"
[ -f "$CUPTI_ALONE_LIB" ] || { echo "libcupti_alone.so did not build:"; tail -20 "$work/cupti_alone_build.log"; }
for b in after ${BEFORE:+before}; do
  for exe in serving serving_uninstrumented; do
    [ -x "$work/$b/$exe" ] || { echo "$b/$exe did not build:"; tail -20 "$work/$b/build"*.log; }
  done
done
{
  echo "machine: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1); $(nvcc --version | tail -1)"
  echo "cpu: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
} | tee "$work/machine.txt"
python3 "$root/bench/serving_overhead.py" "${builds[@]}" --variants "${VARIANTS:-graph,eager,gpu}" \
  --configs "${CONFIGS:-none scopes collector sampling counters production production-steps}" --rounds "${ROUNDS:-3}" \
  --timeout "${RUN_TIMEOUT:-120}" --once "${ONCE:-}" --csv "$work/serving_overhead.csv" --log-dir "$work/logs" | tee "$work/table.txt"
cat "$work/machine.txt" "$work/table.txt" > "$final/serving_overhead.md"
tar -czf "$final/serving_overhead.tgz" -C "$work" --exclude='serving' --exclude='serving_uninstrumented' .
