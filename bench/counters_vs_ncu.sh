#!/usr/bin/env bash
# kscope's hardware counters against Nsight Compute's on five kernels (GPU machine with ncu).
#
#   bench/counters_vs_ncu.sh [output-dir]
#
# Builds bench/counters_vs_ncu.cu, runs it (kscope's range profiler, default metric set,
# user replay, each pass starting with kscope's L2 sweep; and the DRAM metrics alone under
# kernel replay),
# then runs it again with --plain under `ncu --metrics ...` and prints, per kernel, kscope's
# and ncu's DRAM bytes read and written (they must agree within 3 %), FP32 FLOPs
# (2 n^3 for the hand-written GEMMs) and the speed-of-light pair with kscope's verdict.
# Before each kernel, in both runs, a scrub kernel reads twice the L2's size, so the L2
# holds no dirty line of an earlier kernel, and ncu runs with --cache-control none; a third
# ncu run with its default (--cache-control all) is printed for the record.
# Exit status 0 = every DRAM comparison (both replays) within 3 %. Logs in the output directory.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT_DIR=${1:-${ROOT}/build-counters-vs-ncu}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NCU=${NCU:-$(command -v ncu || echo "${CUDA_HOME}/bin/ncu")}
ARCH=${ARCH:-90}
# ncu's clock control: "base" (ncu's default) locks the SM and memory clocks to base for the
# profiled kernel; "none" leaves them as the application runs, as kscope's profiler does.
NCU_CLOCK_CONTROL=${NCU_CLOCK_CONTROL:-base}
mkdir -p "${OUT_DIR}"
# BIN=path/to/counters_vs_ncu uses a binary built elsewhere (same source) instead.
if [[ -z "${BIN:-}" ]]; then
  BIN="${OUT_DIR}/counters_vs_ncu"
  "${CUDA_HOME}/bin/nvcc" -O2 -std=c++17 -arch="sm_${ARCH}" -I"${ROOT}/include" -DKSCOPE_HAS_CUDA=1 \
    "${ROOT}/bench/counters_vs_ncu.cu" -o "${BIN}" -lcublas -ldl -lpthread
fi
"${BIN}" > "${OUT_DIR}/kscope.txt" 2>&1
# Two ncu runs: the byte comparison with exactly the two DRAM metrics (one pass: nothing
# of ncu's own replay is in them), then the FP instruction counts and speed of light.
BYTES=dram__bytes_read.sum,dram__bytes_write.sum
SOL=sm__sass_thread_inst_executed_op_ffma_pred_on.sum,sm__sass_thread_inst_executed_op_fadd_pred_on.sum,sm__sass_thread_inst_executed_op_fmul_pred_on.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed
for set in BYTES SOL; do
  "${NCU}" --csv --print-units base --cache-control none --clock-control "${NCU_CLOCK_CONTROL}" --metrics "${!set}" \
    -k 'regex:copy_floats|saxpy|naive_sgemm|tiled_sgemm|gemm' "${BIN}" --plain > "${OUT_DIR}/ncu_${set}.csv" 2> "${OUT_DIR}/ncu_${set}.err"
done
# For the record: the bytes with ncu's default cache control (it flushes the caches first).
"${NCU}" --csv --print-units base --cache-control all --clock-control "${NCU_CLOCK_CONTROL}" --metrics "${BYTES}" \
  -k 'regex:copy_floats|saxpy|naive_sgemm|tiled_sgemm|gemm' "${BIN}" --plain > "${OUT_DIR}/ncu_FLUSH.csv" 2> "${OUT_DIR}/ncu_FLUSH.err"
python3 - "${OUT_DIR}/kscope.txt" "${OUT_DIR}/ncu_BYTES.csv" "${OUT_DIR}/ncu_SOL.csv" "${OUT_DIR}/ncu_FLUSH.csv" <<'PY'
import csv, sys, collections
labels = ["copy", "saxpy", "naive_sgemm", "tiled_sgemm", "cublas_sgemm"]
ks = collections.defaultdict(dict); verdict = {}; kr = {}
for line in open(sys.argv[1]):
    p = line.split()
    if p[:1] == ["KSCOPE"] and len(p) == 4:
        try: ks[p[1]][p[2]] = float(p[3])
        except ValueError: pass
    elif p[:1] == ["KREPLAY"] and len(p) == 4:
        kr.setdefault(p[1], {})[p[2]] = float(p[3])
    elif p[:1] == ["VERDICT"]:
        verdict[p[1]] = line.split(" ", 2)[2].strip()
    elif "unavailable" in line: print(line.strip())
def ncu_kernels(path):
    rows = [r for r in csv.reader(l for l in open(path) if l.startswith('"'))]
    if not rows: print("no ncu rows in", path); sys.exit(1)
    head, rows = rows[0], rows[1:]
    ID, NAME, MET, VAL = head.index("ID"), head.index("Kernel Name"), head.index("Metric Name"), head.index("Metric Value")
    per_id = collections.OrderedDict()
    for r in rows:
        per_id.setdefault(r[ID], {"name": r[NAME]})[r[MET]] = float(r[VAL].replace(",", ""))
    kernels = list(per_id.values())
    if len(kernels) < len(labels): print("ncu profiled", len(kernels), "kernels in", path, "expected", len(labels)); sys.exit(1)
    return kernels[-len(labels):]  # the warm-up cuBLAS call is not profiled in --plain mode; keep the last five
kernels = [dict(b, **s) for b, s in zip(ncu_kernels(sys.argv[2]), ncu_kernels(sys.argv[3]))]
flushed = ncu_kernels(sys.argv[4])
ok = True
print(f"{'kernel':14} {'metric':24} {'kscope':>16} {'ncu':>16} {'diff':>8}")
for label, n in zip(labels, kernels):
    k = ks[label]
    for m in ["dram__bytes_read.sum", "dram__bytes_write.sum"]:
        a, b = k.get(m, float("nan")), n.get(m, float("nan"))
        d = (a - b) / b if b else float("nan")
        if not abs(d) <= 0.03: ok = False
        print(f"{label:14} {m:24} {a:16.0f} {b:16.0f} {100*d:7.2f}%")
    wb = k.get("kscope__dram_bytes_write_back.sum", float("nan"))
    print(f"{label:14} {'write-back after (kscope)':24} {wb:16.0f} {'':>16}  write + write-back {k.get('dram__bytes_write.sum', float('nan')) + wb:.0f}")
    nf = 2 * n.get("sm__sass_thread_inst_executed_op_ffma_pred_on.sum", 0) + n.get("sm__sass_thread_inst_executed_op_fadd_pred_on.sum", 0) + n.get("sm__sass_thread_inst_executed_op_fmul_pred_on.sum", 0)
    print(f"{label:14} {'fp32 FLOPs':24} {k.get('fp32_flops', float('nan')):16.0f} {nf:16.0f}")
    print(f"{label:14} {'SM % / memory % (ncu)':24} {n.get('sm__throughput.avg.pct_of_peak_sustained_elapsed', float('nan')):16.1f} {n.get('gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed', float('nan')):16.1f}")
    if label in kr:
        for m, what in [("dram__bytes_read.sum", "read, kernel replay"), ("dram__bytes_write.sum", "write, kernel replay")]:
            a, b = kr[label].get(m, float("nan")), n.get(m, float("nan"))
            d = (a - b) / b if b else float("nan")
            if not abs(d) <= 0.03: ok = False
            print(f"{label:14} {what:24} {a:16.0f} {b:16.0f} {100*d:7.2f}%")
    f = flushed[labels.index(label)]
    print(f"{label:14} {'ncu --cache-control all':24} read {f.get('dram__bytes_read.sum', float('nan')):.0f} write {f.get('dram__bytes_write.sum', float('nan')):.0f}  (for the record)")
    print(f"{label:14} kscope: {verdict.get(label, '-')}")
print("DRAM within 3 %:", "yes" if ok else "NO")
sys.exit(0 if ok else 1)
PY
