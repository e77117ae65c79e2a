#!/bin/sh
# ctest's run of one libFuzzer target (tests/fuzz/CMakeLists.txt, tests <name>_smoke):
# a fixed number of inputs from the seeds, with a fixed seed, so that every CI run proves
# the target builds and passes its checks under ASan+UBSan and fuzzes a little.
#   run_fuzz.sh FUZZER RUNS WORK_DIR SEED_DIR DICT [WHY_NOT_BUILT]
# An empty FUZZER means it was not built: prints WHY_NOT_BUILT and exits 77 (ctest:
# Skipped). New inputs go to WORK_DIR/corpus, emptied first, never into the seed
# directory; a finding stops the run, fails the test and is left in WORK_DIR/artifacts/.
set -u
fuzzer=$1 runs=$2 work=$3 seeds=$4 dict=$5 why=${6:-}
if [ -z "$fuzzer" ]; then
  echo "kscope fuzz: SKIPPED: libFuzzer target not built: ${why:-KSCOPE_FUZZ is off}"
  exit 77
fi
rm -rf "$work" && mkdir -p "$work/corpus" "$work/artifacts" || exit 1
set -- -runs="$runs" -seed=1 -timeout=30 -rss_limit_mb=2048 -print_final_stats=1 \
  -error_exitcode=1 -timeout_exitcode=1 -artifact_prefix="$work/artifacts/"
[ -n "$dict" ] && set -- "$@" -dict="$dict"
"$fuzzer" "$@" "$work/corpus" "$seeds"
status=$?
if [ "$status" -ne 0 ]; then
  # libFuzzer's own default exit code for a finding is 77, ctest's Skipped: never pass it on.
  echo "kscope fuzz: FAILED (exit $status): the input is in $work/artifacts/; replay it with $fuzzer FILE"
  [ "$status" -eq 77 ] && status=1
fi
exit "$status"
