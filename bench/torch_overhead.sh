#!/usr/bin/env bash
# The cost of watching a PyTorch eager loop, per op, on the GPU machine (issue 41: +6.5 us per
# torch op with kscope's collector against +1.3 us per launch in C++), and a census of every
# CUDA runtime / driver API call a torch op makes (what it triggers beyond its launch).
#
# Builds the two injection libraries with g++ (bench/cupti_alone_injection.cpp: CUPTI alone;
# bench/cupti_callback_census.cpp: the census) and libkscope_c.so (the Python package's
# library: reused from build-gpu when bench/gpu_tests.sh configured it there, else a lean
# build in build-torch-overhead; KSCOPE_LIBRARY=path skips the build), then runs
# bench/torch_overhead.py with a Python that has torch: every configuration in its own
# process, interleaved over rounds, the census once first. The table (markdown) and the
# census's top 30 go to $OUT/torch_overhead.md; logs, CSV, the census files and build logs
# to $OUT/torch_overhead.tgz. Exit 77 (with the reason) when torch or a GPU is missing.
#
#   bash bench/torch_overhead.sh                       # defaults: < 6 minutes in all
#   ROUNDS=6 STEPS=300 bash bench/torch_overhead.sh
#   CONFIGS='none collector nosync:KSCOPE_CUPTI_OPTIONS=sync=0 bare-kinds:CUPTI_ALONE=kernel,memcpy,memset,sync' \
#     bash bench/torch_overhead.sh
#   CONFIGS='census census-bare:TORCH_OVERHEAD_SCOPES=0' ROUNDS=0 bash bench/torch_overhead.sh   # census only
#
# Environment: OUT (default ./out), CONFIGS, ROUNDS (4), STEPS (150 timed per run), WARMUP (30),
# RUN_TIMEOUT (90 s per run), DEADLINE (330 s for the whole script: no round starts that would
# end past it), PYTHON_TORCH (the interpreter; else python3, /opt/torch/.venv/bin/python3),
# KSCOPE_LIBRARY, TORCH_OVERHEAD_BUILD_DIR, TORCH_OVERHEAD_STREAM=current (stream scopes).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
final=${OUT:-$root/out}
mkdir -p "$final"
work=$(mktemp -d)
mkdir -p "$work/logs"
script_start=$(date +%s)
export PATH=/usr/local/cuda/bin:$PATH
# CMake and Ninja may live in the torch environment only (bench/RESULTS.md, session 13).
for tool in cmake ninja; do
  command -v "$tool" > /dev/null 2>&1 || { [ -x /opt/torch/.venv/bin/$tool ] && export PATH=$PATH:/opt/torch/.venv/bin; }
done
md=$final/torch_overhead.md
finish() {  # $1 exit status; packs whatever there is
  cp "$md" "$work/" 2> /dev/null
  tar -czf "$final/torch_overhead.tgz" -C "$work" --exclude='*.so' . 2> /dev/null
  echo "torch_overhead: $(( $(date +%s) - script_start )) s in all; $md, $final/torch_overhead.tgz"
  exit "$1"
}
skip() {  # the reason, exit 77
  echo "SKIP: $*" | tee "$md"
  finish 77
}

# A Python with torch, as bench/gpu_tests.sh finds one.
py=""
for p in ${PYTHON_TORCH:-} python3 /opt/torch/.venv/bin/python3; do
  command -v "$p" > /dev/null 2>&1 && "$p" -c 'import torch' > /dev/null 2>&1 && { py=$(command -v "$p"); break; }
done
[ -n "$py" ] || skip "no Python with torch found (tried ${PYTHON_TORCH:+$PYTHON_TORCH, }python3, /opt/torch/.venv/bin/python3; set PYTHON_TORCH)"
if ! cuda_check=$("$py" -c 'import torch, sys
ok = torch.cuda.is_available()
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, " + (torch.cuda.get_device_name() if ok else "no CUDA device"))
sys.exit(0 if ok else 1)' 2>&1); then
  skip "torch sees no GPU: $(echo "$cuda_check" | tail -1) ($py)"
fi
echo "python: $py: $cuda_check"

# The injection libraries, in the background while libkscope_c builds.
cupti_lib=$(dirname "$(find /usr/local/cuda/ -name 'libcupti.so' 2>/dev/null | head -1)")
inject() {  # source, library
  g++ -O2 -std=c++17 -shared -fPIC -I/usr/local/cuda/include -I/usr/local/cuda/extras/CUPTI/include \
    "$root/bench/$1" -L"$cupti_lib" -Wl,-rpath,"$cupti_lib" -lcupti -o "$work/$2" > "$work/${2%.so}_build.log" 2>&1
}
inject cupti_alone_injection.cpp libcupti_alone.so &
inject cupti_callback_census.cpp libcupti_callback_census.so &

# libkscope_c.so.
build_start=$(date +%s)
lib=${KSCOPE_LIBRARY:-}
if [ -n "$lib" ]; then
  [ -f "$lib" ] || skip "KSCOPE_LIBRARY=$lib: no such file"
  build_note="libkscope_c.so: KSCOPE_LIBRARY=$lib (not rebuilt)"
else
  build_lib() {  # build dir: configures it (lean) when it is not, builds kscope_c; sets lib
    local build=$1
    case $build in /*) ;; *) build=$PWD/$build ;; esac
    if [ ! -f "$build/CMakeCache.txt" ]; then
      local gen=(); command -v ninja > /dev/null 2>&1 && gen=(-G Ninja)
      cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DKSCOPE_BUILD_PYTHON=ON -DKSCOPE_BUILD_TESTS=OFF -DKSCOPE_BUILD_EXAMPLES=OFF -DKSCOPE_BUILD_BENCH=OFF \
        >> "$work/kscope_configure.log" 2>&1 || { tail -20 "$work/kscope_configure.log"; echo "configure failed: $build"; return 1; }
    fi
    if ! cmake --build "$build" -j "$(nproc)" --target kscope_c >> "$work/kscope_build.log" 2>&1; then
      grep -E "error" "$work/kscope_build.log" | head -20
      echo "libkscope_c.so did not build in $build (kscope_build.log)"
      return 1
    fi
    lib=$build/python/libkscope_c.so
    [ -f "$lib" ] || lib=$(find "$build" -name 'libkscope_c.so' -path '*python*' 2> /dev/null | head -1)
    [ -n "$lib" ] && [ -f "$lib" ] || { echo "no libkscope_c.so in $build"; return 1; }
    build_note="libkscope_c.so: $lib (built in $(( $(date +%s) - build_start )) s)"
  }
  if [ -n "${TORCH_OVERHEAD_BUILD_DIR:-}" ]; then
    build_lib "$TORCH_OVERHEAD_BUILD_DIR" || finish 1
  elif [ -f "$root/build-gpu/CMakeCache.txt" ] && grep -q '^KSCOPE_BUILD_PYTHON:BOOL=ON' "$root/build-gpu/CMakeCache.txt" \
      && grep -qxF "CMAKE_HOME_DIRECTORY:INTERNAL=$root" "$root/build-gpu/CMakeCache.txt"; then
    # bench/gpu_tests.sh's build, configured here with the Python library: the library is
    # built there (no second build of it; never reconfigured with other options). If that
    # fails, the lean build of our own.
    build_lib "$root/build-gpu" || build_lib "$root/build-torch-overhead" || finish 1
  else
    build_lib "$root/build-torch-overhead" || finish 1
  fi
fi
wait
for l in libcupti_alone.so libcupti_callback_census.so; do
  [ -f "$work/$l" ] || { echo "$l did not build:"; tail -20 "$work/${l%.so}_build.log"; }
done
echo "$build_note; injection libraries from $cupti_lib"
export PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH}
export KSCOPE_LIBRARY=$lib PYTHONDONTWRITEBYTECODE=1
export CUPTI_ALONE_LIB=$work/libcupti_alone.so CENSUS_LIB=$work/libcupti_callback_census.so

{
  echo "machine: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1); $(nvcc --version 2>&1 | tail -1)"
  echo "cpu: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
  # The commit, and whether the files differ from it (a copied tree may carry a stale .git).
  commit=$(git -C "$root" rev-parse --short HEAD 2> /dev/null || echo '?')
  if [ "$commit" != '?' ] && [ -n "$(git -C "$root" status --porcelain --untracked-files=no 2> /dev/null | head -1)" ]; then
    commit="$commit, with files that differ from it"
  fi
  echo "python: $py; $cuda_check; commit $commit"
  echo "$build_note"
  echo
} | tee "$work/machine.txt"

elapsed=$(( $(date +%s) - script_start ))
deadline=$(( ${DEADLINE:-330} - elapsed - 10 ))  # 10 s for packing
[ "$deadline" -gt 30 ] || deadline=30
"$py" "$root/bench/torch_overhead.py" \
  --configs "${CONFIGS:-census none scopes collector production bare-kernel bare-launch-cb:CUPTI_ALONE=runtime,driver collector-driver:KSCOPE_CUPTI_OPTIONS=runtime_api=0}" \
  --rounds "${ROUNDS:-4}" --steps "${STEPS:-150}" --warmup "${WARMUP:-30}" --timeout "${RUN_TIMEOUT:-90}" \
  --deadline "$deadline" --log-dir "$work/logs" --csv "$work/torch_overhead.csv" --md "$work/table.md" \
  2>&1 | tee "$work/run.log"
rc=${PIPESTATUS[0]}
if [ -f "$work/table.md" ]; then
  cat "$work/machine.txt" "$work/table.md" > "$md"
else
  { cat "$work/machine.txt"; echo "torch_overhead.py exit $rc, no table:"; tail -20 "$work/run.log"; } > "$md"
fi
finish "$rc"
