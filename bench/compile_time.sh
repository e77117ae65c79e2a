#!/usr/bin/env bash
# bench/compile_time.sh — what including kscope costs a translation unit.
#
# scope.hpp goes into every instrumented file, so it must stay cheap to compile. This
# compiles (g++ -fsyntax-only, C++17, with the CUDA headers on the include path when
# present) a small file that includes only <vector> <string> <map>, then the same file
# with one KSCOPE_SCOPE, with one KSCOPE_SCOPE under -DKSCOPE_DISABLE, and with the
# umbrella kscope.hpp, and reports the best of N CPU times (user + sys) and the ratio to
# the first. Targets (exit status 1 when one is missed):
#   one KSCOPE_SCOPE                  <= 2.5 x the baseline
#   one KSCOPE_SCOPE, KSCOPE_DISABLE  <= 1.5 x the baseline
# Then the same at g++ -O2 -c (object code, what a build pays), where the compiled mode
# (KSCOPE_SEPARATE_COMPILATION, kscope/core/config.hpp) is measured too, with the umbrella
# and one scope, and one more file: kscope/kscope.hpp included and
# `session::global().report().text()` called. Targets:
#   -O2, compiled mode: one KSCOPE_SCOPE               <= 2.5 x the -O2 baseline
#   -O2, compiled mode: report().text() file           <= 3 s
# It also checks what scope.hpp pulls in (g++ -M): never the session, statistics,
# roofline, device, CUPTI, report or bench headers; under KSCOPE_DISABLE not even the
# CUDA runtime, NVTX or the recorder.
#
#   bench/compile_time.sh                 # 5 runs each
#   bench/compile_time.sh --runs 9 --nvcc # also nvcc on .cu files: one scope, and report() (no target)
#
# CPU times are what the targets are about, but a busy machine still slows them (shared
# caches, frequency): run it on a quiet machine. The load average is printed with the table.
set -euo pipefail

runs=5
cxx=${CXX:-g++}
with_nvcc=0
cuda_include=${CUDA_INCLUDE:-/usr/local/cuda/include}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --cxx) cxx=$2; shift 2 ;;
    --cuda-include) cuda_include=$2; shift 2 ;;
    --nvcc) with_nvcc=1; shift ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done

root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

includes=(-I "$root/include")
[[ -d "$cuda_include" ]] && includes+=(-I "$cuda_include")

# One function, so the scope has somewhere to live; the same code in every file.
write_source() {  # write_source FILE EXTRA_INCLUDE SCOPE_LINE [PRELUDE]
  {
    printf '#include <map>\n#include <string>\n#include <vector>\n'
    [[ -n "$2" ]] && printf '#include <%s>\n' "$2"
    printf '%s' "${4:-}"
    cat <<'CODE'

int work_item(int n) {
CODE
    [[ -n "$3" ]] && printf '  %s\n' "$3"
    cat <<'CODE'
  std::vector<std::string> names(static_cast<std::size_t>(n), "x");
  std::map<int, int> counts;
  for (int i = 0; i < n; ++i) counts[i % 3] += static_cast<int>(names[static_cast<std::size_t>(i)].size());
  return static_cast<int>(counts.size());
}
CODE
  } > "$1"
}
scope_line='KSCOPE_SCOPE("work_item");'
write_source "$work/baseline.cpp" "" ""
write_source "$work/scope.cpp" kscope/scope/scope.hpp "$scope_line"
write_source "$work/umbrella.cpp" kscope/kscope.hpp "$scope_line"
cat > "$work/report_text.cpp" <<'CODE'
#include <kscope/kscope.hpp>

#include <cstdio>
#include <string>

int main() {
  const std::string text = kscope::session::global().report().text();
  std::fputs(text.c_str(), stdout);
}
CODE

# Best of $runs user+sys seconds of one command (bash's `time` counts the children's CPU).
best_cpu_s() {
  local best="" t
  for ((i = 0; i < runs; ++i)); do
    t=$( { TIMEFORMAT='%U %S'; time "$@" >/dev/null 2>"$work/err" || { cat "$work/err" >&2; echo "FAILED: $*" >&2; exit 3; }; } 2>&1 |
        tail -n 1 | awk '{ printf "%.3f", $1 + $2 }')
    if [[ -z "$best" ]] || awk -v a="$t" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$t; fi
  done
  echo "$best"
}

compile() { "$cxx" -std=c++17 -fsyntax-only "${includes[@]}" "$@"; }
compile_o2() { "$cxx" -std=c++17 -O2 -c -o "$work/out.o" "${includes[@]}" "$@"; }

# What scope.hpp includes, as the compiler sees it (paths normalized: the headers include
# each other as "../session/session.hpp").
failed=0
header_list() { compile -M "$@" | tr ' \\' '\n\n' | grep -E '\.(h|hpp)$' | xargs realpath -m; }
deps=$(header_list "$work/scope.cpp")
heavy=$(grep -E 'kscope/(session|device|cupti|report|bench)/|kscope/core/(stats|roofline|sweep)\.hpp' <<<"$deps" || true)
if [[ -n "$heavy" ]]; then
  echo "scope.hpp includes headers it must not:" >&2
  echo "$heavy" >&2
  failed=1
fi
deps_disabled=$(header_list -DKSCOPE_DISABLE "$work/scope.cpp")
heavy=$(grep -E 'cuda_runtime_api\.h|nvToolsExt\.h|kscope/scope/recorder\.hpp|kscope/(session|device|cupti|report|bench)/' \
  <<<"$deps_disabled" || true)
if [[ -n "$heavy" ]]; then
  echo "scope.hpp with KSCOPE_DISABLE includes headers it must not:" >&2
  echo "$heavy" >&2
  failed=1
fi

load_before=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")
base=$(best_cpu_s compile "$work/baseline.cpp")
scope=$(best_cpu_s compile "$work/scope.cpp")
disabled=$(best_cpu_s compile -DKSCOPE_DISABLE "$work/scope.cpp")
umbrella=$(best_cpu_s compile "$work/umbrella.cpp")
o2_base=$(best_cpu_s compile_o2 "$work/baseline.cpp")
o2_scope=$(best_cpu_s compile_o2 "$work/scope.cpp")
o2_scope_compiled=$(best_cpu_s compile_o2 -DKSCOPE_SEPARATE_COMPILATION "$work/scope.cpp")
o2_umbrella=$(best_cpu_s compile_o2 "$work/umbrella.cpp")
o2_umbrella_quiet=$(best_cpu_s compile_o2 -DKSCOPE_NO_ENVIRONMENT_START "$work/umbrella.cpp")
o2_report=$(best_cpu_s compile_o2 "$work/report_text.cpp")
o2_report_quiet=$(best_cpu_s compile_o2 -DKSCOPE_NO_ENVIRONMENT_START "$work/report_text.cpp")
o2_report_compiled=$(best_cpu_s compile_o2 -DKSCOPE_SEPARATE_COMPILATION "$work/report_text.cpp")
load_after=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
# row NAME SECONDS BASE TARGET ("" = none): prints one line, remembers a miss.
row() {
  local r verdict="" target_text="-"
  r=$(ratio "$2" "$3")
  if [[ -n "$4" ]]; then
    target_text="<= $4"
    if awk -v r="$r" -v t="$4" 'BEGIN { exit !(r <= t) }'; then verdict="ok"; else verdict="MISSED"; failed=1; fi
  fi
  printf '%-44s %8s %7s %8s  %s\n' "$1" "$2" "$r" "$target_text" "$verdict"
}

echo "kscope compile time: $cxx -std=c++17 -fsyntax-only, best of $runs, CPU seconds (user+sys)"
echo "CUDA headers: $([[ -d "$cuda_include" ]] && echo "$cuda_include" || echo "not found (CPU-only configuration)")"
printf '%-44s %8s %7s %8s\n' "translation unit" "seconds" "ratio" "target"
row "<vector> <string> <map> (baseline)" "$base" "$base" ""
row "+ scope.hpp, one KSCOPE_SCOPE" "$scope" "$base" "2.5"
row "+ scope.hpp, one KSCOPE_SCOPE, KSCOPE_DISABLE" "$disabled" "$base" "1.5"
row "+ kscope.hpp (umbrella), one KSCOPE_SCOPE" "$umbrella" "$base" ""
echo "$cxx -std=c++17 -O2 -c, best of $runs, CPU seconds (user+sys)"
row "-O2: <vector> <string> <map> (baseline)" "$o2_base" "$o2_base" ""
row "-O2: + scope.hpp, one KSCOPE_SCOPE" "$o2_scope" "$o2_base" ""
row "-O2: the same, compiled mode" "$o2_scope_compiled" "$o2_base" "2.5"
row "-O2: kscope.hpp, one KSCOPE_SCOPE" "$o2_umbrella" "$o2_base" ""
row "-O2: the same, KSCOPE_NO_ENVIRONMENT_START" "$o2_umbrella_quiet" "$o2_base" ""
row "-O2: kscope.hpp + report().text()" "$o2_report" "$o2_base" ""
row "-O2: the same, KSCOPE_NO_ENVIRONMENT_START" "$o2_report_quiet" "$o2_base" ""
# An absolute target: the ratio column is against one second.
row "-O2: the same, compiled mode (s)" "$o2_report_compiled" "1" "3"

if [[ "$with_nvcc" == 1 ]]; then
  nvcc_bin=$(command -v nvcc || echo "${cuda_include%/include}/bin/nvcc")
  if [[ -x "$nvcc_bin" ]]; then
    kernel=$'__global__ void scale(float* x, float a) { x[threadIdx.x] *= a; }\n'
    write_source "$work/baseline.cu" "" "" "$kernel"
    write_source "$work/scope.cu" kscope/scope/scope.hpp "$scope_line" "$kernel"
    nvcc_compile() { "$nvcc_bin" -std=c++17 -c -o "$work/out.o" "${includes[@]}" "$@"; }
    { printf '%s' "$kernel"; cat "$work/report_text.cpp"; } > "$work/report_text.cu"
    nvcc_base=$(best_cpu_s nvcc_compile "$work/baseline.cu")
    nvcc_scope=$(best_cpu_s nvcc_compile "$work/scope.cu")
    # The umbrella header-only in a .cu file: the host pass compiles every body, the device
    # pass only declarations (core/config.hpp).
    nvcc_report=$(best_cpu_s nvcc_compile "$work/report_text.cu")
    nvcc_report_compiled=$(best_cpu_s nvcc_compile -DKSCOPE_SEPARATE_COMPILATION "$work/report_text.cu")
    row "nvcc -c: .cu with a kernel (baseline)" "$nvcc_base" "$nvcc_base" ""
    row "nvcc -c: the same + one KSCOPE_SCOPE" "$nvcc_scope" "$nvcc_base" ""
    row "nvcc: kernel + kscope.hpp + report().text()" "$nvcc_report" "$nvcc_base" ""
    row "nvcc: the same, compiled mode" "$nvcc_report_compiled" "$nvcc_base" ""
  else
    echo "nvcc not found: skipped the .cu case"
  fi
fi

echo "load average (1, 5, 15 min): before $load_before, after $load_after on $(nproc 2>/dev/null || echo '?') cores"
if [[ "$failed" != 0 ]]; then
  echo "compile-time target missed" >&2
  exit 1
fi
