#!/usr/bin/env bash
# cmake/setup.sh's checks where apt cannot install (issue 42): the tools are looked for as
# commands with their versions, apt-get runs only for what is missing, and what is missing
# is said exactly. Each scenario runs `KSCOPE_SETUP_STOP_AFTER_CHECKS=1 setup.sh demo` (or
# `setup.sh check test`) with a PATH of its own: a fake apt-get, apt-cache and sudo that log
# every call and fail (as on a GPU machine without a package network), a fake `id` (root or
# not, whoever runs the test), a "pip" folder with the tools of the scenario, and the few
# commands the script itself uses. Nothing is installed and nothing is built.
#   setup_check_test.sh SETUP_SH CMAKE CXX
# ctest: setup_check (tests/CMakeLists.txt). Exit 0 when every scenario passed.
# shellcheck disable=SC2016,SC2028  # the fake commands' text is written as it is, unexpanded
set -uo pipefail
setup=$1 cmake_real=$2 cxx_real=$3
ninja_real=$(command -v ninja || command -v ninja-build || true)
make_real=$(command -v make || true)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL [$scenario]: $*"; failures=$((failures + 1)); }

# The commands setup.sh runs itself (bash and coreutils), and nothing else.
base=$work/base
mkdir -p "$base"
for c in bash env sed grep tr tail dirname nproc uname; do
  p=$(command -v "$c") || { echo "setup_check_test: SKIPPED: no $c here"; exit 77; }
  ln -s "$p" "$base/$c"
done

# scenario NAME USER TOOLS...: a fresh PATH. USER root|user; TOOLS from cxx cmake ninja make
# cmake310 (a cmake that says 3.10.2) apt-ok (an apt-get that installs ninja-build).
scenario() {
  scenario=$1
  local user=$2 tool
  shift 2
  rm -rf "$work/fake" "$work/pip" "$work/apt.log"
  mkdir -p "$work/fake" "$work/pip"
  if [ "$user" = root ]; then uid=0; else uid=1000; fi
  printf '#!%s\n[ "${1:-}" = -u ] && { echo %s; exit 0; }\necho "uid=%s"\n' "$base/bash" "$uid" "$uid" > "$work/fake/id"
  # apt-get, apt-cache and sudo as where there is no package network: logged, failing.
  for c in apt-get apt-cache; do
    printf '#!%s\necho "%s $*" >> %s\necho "E: Unable to locate package ${*: -1}" >&2\nexit 100\n' \
      "$base/bash" "$c" "$work/apt.log" > "$work/fake/$c"
  done
  printf '#!%s\necho "sudo $*" >> %s\necho "sudo: a password is required" >&2\nexit 1\n' \
    "$base/bash" "$work/apt.log" > "$work/fake/sudo"
  for tool in "$@"; do
    case $tool in
      cxx) ln -s "$cxx_real" "$work/pip/c++" ;;
      cmake) ln -s "$cmake_real" "$work/pip/cmake" ;;
      ninja) ln -s "$ninja_real" "$work/pip/ninja" ;;
      make) ln -s "$make_real" "$work/pip/make" ;;
      cmake310) printf '#!%s\necho "cmake version 3.10.2"\n' "$base/bash" > "$work/pip/cmake" ;;
      apt-ok)  # update works, and installing ninja-build puts a ninja on PATH
        {
          echo "#!$base/bash"
          echo "echo \"apt-get \$*\" >> $work/apt.log"
          echo "case \" \$* \" in *' install '*' ninja-build '*)"
          echo "  printf '#!$base/bash\\necho 1.11.1\\n' > $work/pip/ninja; $(command -v chmod) +x $work/pip/ninja ;;"
          echo "esac"
        } > "$work/fake/apt-get"
        printf '#!%s\necho "apt-cache $*" >> %s\nexit 0\n' "$base/bash" "$work/apt.log" > "$work/fake/apt-cache" ;;
    esac
  done
  chmod +x "$work"/fake/* "$work"/pip/* 2>/dev/null
}

# run ARGS...: setup.sh with the scenario's PATH and nothing else from this environment.
run() {
  out=$(cd "$work" && "$base/env" -i PATH="$work/fake:$work/pip:$base" HOME="$work" \
        KSCOPE_SETUP_STOP_AFTER_CHECKS=1 KSCOPE_BUILD_DIR="$work/build" "$base/bash" "$setup" "$@" 2>&1)
  rc=$?
  apt_calls=$(cat "$work/apt.log" 2>/dev/null || true)
}
has_line() { grep -Fxq -- "$1" <<<"$out" || fail "no line '$1' in:"$'\n'"$out"; }
has_prefix() { grep -Fq -- "$1" <<<"$out" || fail "nothing like '$1' in:"$'\n'"$out"; }
no_line_like() { if grep -Eq -- "$1" <<<"$out"; then fail "a line like '$1' in:"$'\n'"$out"; fi; }
expect_rc() { [ "$rc" -eq "$1" ] || fail "exit code $rc, expected $1; output:"$'\n'"$out"; }
expect_no_apt() { [ -z "$apt_calls" ] || fail "apt-get, apt-cache or sudo was called: $apt_calls"; }

# 1. CMake and Ninja from pip, apt unreachable, as root: nothing missing, apt never called.
if [ -n "$ninja_real" ]; then
  scenario pip-tools root cxx cmake ninja
  run demo
  expect_rc 0
  expect_no_apt
  has_line "kscope setup: nothing to install"
  has_prefix "  [ok]      C++17 compiler: $work/pip/c++ ("
  has_prefix "  [ok]      CMake >= 3.22: $work/pip/cmake ("
  has_prefix "  [ok]      Ninja: $work/pip/ninja ("
  no_line_like '^  \[missing\]'
else
  echo "setup_check_test: no ninja here: scenario pip-tools not run"
fi

# 2. No ninja but make, not root, sudo wants a password: ninja named, make used, no apt-get.
if [ -n "$make_real" ]; then
  scenario no-ninja-user user cxx cmake make
  run demo
  expect_rc 0
  has_line "kscope setup: missing: ninja-build"
  has_line "kscope setup: cannot install ninja-build: not root, and sudo asks for a password"
  has_line "  [missing] Ninja (Debian package ninja-build): no ninja on PATH; building with make instead"
  has_line "kscope setup: going on without ninja-build"
  [ "$apt_calls" = "sudo -n true" ] || fail "expected only 'sudo -n true', got: $apt_calls"

  # 3. The same as root with apt-get failing: apt-get update is tried, nothing else.
  scenario no-ninja-root root cxx cmake make
  run demo
  expect_rc 0
  has_line "kscope setup: installing with apt-get: ninja-build"
  has_prefix "kscope setup: cannot install ninja-build: apt-get update failed: E: Unable to locate package"
  has_line "  [missing] Ninja (Debian package ninja-build): no ninja on PATH; building with make instead"
  grep -q '^apt-get update' <<<"$apt_calls" || fail "apt-get update not tried: $apt_calls"
  if grep -q 'install' <<<"$apt_calls"; then fail "apt-get install was run: $apt_calls"; fi
fi

# 4. Where apt-get works (root), it installs what is missing and only that: ninja-build.
if [ -n "$make_real" ]; then
  scenario apt-works root cxx cmake make apt-ok
  run demo
  expect_rc 0
  has_line "kscope setup: installing with apt-get: ninja-build"
  has_prefix "  [ok]      Ninja: $work/pip/ninja (1.11.1)"
  no_line_like '^  \[missing\]'
  grep -Eq '^apt-get install .* ninja-build$' <<<"$apt_calls" || fail "apt-get install ... ninja-build not run: $apt_calls"
  if grep -E '^apt-get install' <<<"$apt_calls" | grep -Eq ' (g\+\+|cmake)( |$)'; then
    fail "installed what was there: $apt_calls"
  fi
fi

# 5. A CMake older than 3.22 (and apt failing): the exact reason, and no build.
scenario old-cmake root cxx cmake310 ${ninja_real:+ninja} ${make_real:+make}
run demo
expect_rc 1
has_line "  [missing] CMake >= 3.22 (Debian package cmake): $work/pip/cmake is CMake 3.10.2, older than 3.22; nothing can be built"
has_line "kscope setup: cannot build without: CMake >= 3.22. Install them (or put them on PATH) and run this again."

# 6. Neither ninja nor make, not root: a build tool named as what is missing.
scenario no-build-tool user cxx cmake
run demo
expect_rc 1
has_line "  [missing] Ninja (Debian package ninja-build): no ninja on PATH; no build tool (neither ninja nor make)"
has_line "kscope setup: cannot build without: a build tool (Ninja or Make). Install them (or put them on PATH) and run this again."

# 7. `check test` never installs: apt is not called, and each package has one line.
scenario check-test root cxx cmake ${ninja_real:+ninja} ${make_real:+make}
out=$(cd "$work" && "$base/env" -i PATH="$work/fake:$work/pip:$base" HOME="$work" "$base/bash" "$setup" check test 2>&1)
rc=$?
apt_calls=$(cat "$work/apt.log" 2>/dev/null || true)
[ "$rc" -le 1 ] || fail "exit code $rc; output:"$'\n'"$out"
expect_no_apt
for label in "C++17 compiler" "CMake >= 3.22" "Ninja" "doctest" "Google Benchmark" "nlohmann/json" "xmllint" \
             "a comma-decimal locale" "pkg-config" "Python prometheus_client" "Python pytest" "clang++" "libFuzzer runtime"; do
  n=$(grep -Fc -e "  [ok]      $label: " -e "  [missing] $label (Debian package " <<<"$out")
  [ "$n" -eq 1 ] || fail "$n lines for '$label' in:"$'\n'"$out"
done
grep -q '^  \[missing\]' <<<"$out" && has_line "kscope setup: check only: nothing installed"

if ((failures)); then
  echo "setup_check_test: $failures failure(s)"
  exit 1
fi
echo "setup_check_test: all scenarios passed"
