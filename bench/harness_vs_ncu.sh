#!/usr/bin/env bash
# The harness against Nsight Compute: the median kscope measures for the 4 GiB copy
# kernel (cold L2, CUDA events, no profiler) against the median of ncu's
# gpu__time_duration.sum for the same kernel, with ncu's clock control off so both see
# the GPU's normal boost behaviour. Passes when they agree within 3 %.
#
#   bench/harness_vs_ncu.sh [BUILD_DIR] [LAUNCHES]
#     BUILD_DIR  default: build (needs bench/harness_gpu_bench)
#     LAUNCHES   kernels profiled by ncu, default 20 (the first is dropped as warm-up)
# Needs ncu on PATH (or NCU=/path/to/ncu) and python3 for the CSV.
set -euo pipefail
build=${1:-build}
launches=${2:-20}
bin=$build/bench/harness_gpu_bench
ncu=${NCU:-ncu}
if [ ! -x "$bin" ]; then
  echo "harness_vs_ncu.sh: $bin not found (build the harness_gpu_bench target)" >&2
  exit 2
fi
if ! command -v "$ncu" >/dev/null 2>&1; then
  echo "harness_vs_ncu.sh: ncu not found (set NCU=/path/to/ncu)" >&2
  exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

harness_line=$("$bin" --repro copy4g)
echo "kscope harness (copy 4 GiB, cold): median_s ci95_lo ci95_hi ci99_lo ci99_hi stop = $harness_line"

"$ncu" --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
  -k regex:copy_kernel "$bin" --ncu-copy "$launches" > "$work/ncu.csv" 2> "$work/ncu.err" || {
  echo "harness_vs_ncu.sh: ncu failed:" >&2
  cat "$work/ncu.err" >&2
  exit 2
}

python3 - "$work/ncu.csv" "$harness_line" <<'PY'
import csv, statistics, sys
path, harness_line = sys.argv[1], sys.argv[2]
harness_s = float(harness_line.split()[0])
scale = {"ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6, "ms": 1e-3, "msecond": 1e-3,
         "s": 1.0, "second": 1.0}
rows = []
with open(path, newline="") as f:
    lines = [l for l in f if l.startswith('"')]  # ncu prints its own log lines before the CSV
for row in csv.DictReader(lines):
    if row.get("Metric Name") != "gpu__time_duration.sum":
        continue
    unit = row.get("Metric Unit", "ns").strip()
    value = float(row["Metric Value"].replace(",", ""))
    rows.append(value * scale.get(unit, 1e-9))
if len(rows) < 2:
    sys.exit("no gpu__time_duration.sum rows in the ncu output")
ncu_s = statistics.median(rows[1:])
diff = harness_s / ncu_s - 1
print(f"ncu gpu__time_duration.sum: median {ncu_s * 1e3:.4f} ms over {len(rows) - 1} launches "
      f"(min {min(rows[1:]) * 1e3:.4f}, max {max(rows[1:]) * 1e3:.4f})")
print(f"kscope harness median {harness_s * 1e3:.4f} ms: {100 * diff:+.2f} % vs ncu -> "
      f"{'PASS' if abs(diff) <= 0.03 else 'FAIL'} (tolerance 3 %)")
sys.exit(0 if abs(diff) <= 0.03 else 1)
PY
