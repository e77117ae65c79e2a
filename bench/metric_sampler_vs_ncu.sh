#!/usr/bin/env bash
# PM sampling against Nsight Compute, and its cost (GPU machine with ncu).
#
#   bench/metric_sampler_vs_ncu.sh [output-dir]
#
# Builds bench/metric_sampler_vs_ncu.cu and runs it: the workload's time with sampling off,
# with the defaults and at 20 µs continuously (ratios of medians), then the sampled values
# of a DRAM-bound copy and a cuBLAS HGEMM phase. Then runs the same kernels under ncu and
# prints, side by side, the sampled DRAM throughput % and tensor-pipe % per phase with
# ncu's per-kernel values (mean over the profiled launches). Logs in the output directory.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT_DIR=${1:-${ROOT}/build-metric-sampler-vs-ncu}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NCU=${NCU:-$(command -v ncu || echo "${CUDA_HOME}/bin/ncu")}
ARCH=${ARCH:-90}
mkdir -p "${OUT_DIR}"
BIN=${BIN:-"${OUT_DIR}/metric_sampler_vs_ncu"}
if [[ ! -x "${BIN}" ]]; then
  "${CUDA_HOME}/bin/nvcc" -O2 -std=c++17 -arch="sm_${ARCH}" -I"${ROOT}/include" -DKSCOPE_HAS_CUDA=1 \
    "${ROOT}/bench/metric_sampler_vs_ncu.cu" -o "${BIN}" -ldl -lpthread
fi
"${BIN}" > "${OUT_DIR}/kscope.txt" 2>&1
METRICS=dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum
"${NCU}" --csv --print-units base --metrics "${METRICS}" -k 'regex:copy_float4|gemm|xmma|sm90' \
  "${BIN}" --plain > "${OUT_DIR}/ncu.csv" 2> "${OUT_DIR}/ncu.err" || true
python3 - "${OUT_DIR}/kscope.txt" "${OUT_DIR}/ncu.csv" <<'PY'
import csv, sys, collections
ks = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    p = line.split()
    if p[:2] == ["PMBENCH", "overhead"] or p[:2] == ["PMBENCH", "sampler:"]:
        print(line.rstrip())
    elif p[:2] == ["PMBENCH", "phase"] and len(p) == 5:
        try: ks[p[2]][p[3]] = float(p[4])
        except ValueError: pass
rows = [r for r in csv.reader(l for l in open(sys.argv[2]) if l.startswith('"'))]
head, body = rows[0], rows[1:]
col = {n: i for i, n in enumerate(head)}
per = collections.defaultdict(lambda: collections.defaultdict(list))
for r in body:
    name = r[col["Kernel Name"]]
    phase = "copy" if "copy_float4" in name else "hgemm"
    try: per[phase][r[col["Metric Name"]]].append(float(r[col["Metric Value"]].replace(",", "")))
    except ValueError: pass
for phase in ("copy", "hgemm"):
    for metric in ("dram__throughput.avg.pct_of_peak_sustained_elapsed",
                   "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"):
        v = per[phase].get(metric, [])
        n = sum(v) / len(v) if v else float("nan")
        s = ks[phase].get(metric, float("nan"))
        print(f"PMBENCH compare {phase:5s} {metric:66s} sampled {s:7.2f}  ncu {n:7.2f}  diff {s - n:+6.2f} pt")
PY
