#!/usr/bin/env bash
# Checks that kscope's CUPTI kernel times agree with Nsight Compute's (GPU machine with ncu).
#
#   bench/cupti_vs_ncu.sh [output-dir]
#
# 1. builds bench/cupti_vs_ncu.cu with nvcc (header-only kscope; cudart linked, CUPTI
#    dlopen'ed — exactly how a user builds it);
# 2. runs it plainly: kscope owns CUPTI and prints the median duration of 20 ~200 us
#    spin kernels (KSCOPE_CUPTI_KERNEL_NS). SPIN=globaltimer (default) spins on the
#    wall-clock %globaltimer, so the kernel lasts 200 us even if ncu --clock-control none
#    lets the SM clock drift between the two runs; SPIN=clock64 spins a cycle count;
# 3. runs the same binary under `ncu --clock-control none --metrics gpu__time_duration.sum`:
#    it must finish (exit 0) and print kscope's degraded-mode warning
#    (KSCOPE_WARNING: CUPTI owned by another tool (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_...));
# 4. compares the median of ncu's gpu__time_duration.sum over the same 20 kernels with
#    kscope's median: they must agree within 3 %.
# Exit status 0 = all checks passed. Logs in the output directory.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT_DIR=${1:-${ROOT}/build-cupti-vs-ncu}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NVCC=${NVCC:-${CUDA_HOME}/bin/nvcc}
NCU=${NCU:-$(command -v ncu || echo "${CUDA_HOME}/bin/ncu")}
ARCH=${ARCH:-90}
COUNT=20
WARMUP=5
SPIN=${SPIN:-globaltimer}  # or clock64: a cycle count, which follows the SM clock
TOLERANCE=0.03

mkdir -p "${OUT_DIR}"
BIN="${OUT_DIR}/cupti_vs_ncu"
CUDA_LIB_DIR="${CUDA_HOME}/lib64"
[ -d "${CUDA_LIB_DIR}" ] || CUDA_LIB_DIR="${CUDA_HOME}/lib"

echo "== building ${BIN}"
"${NVCC}" -O2 -std=c++17 -arch="sm_${ARCH}" -I"${ROOT}/include" \
  -DKSCOPE_HAS_CUDA=1 -DKSCOPE_CUDA_LIBRARY_DIR="\"${CUDA_LIB_DIR}\"" \
  "${ROOT}/bench/cupti_vs_ncu.cu" -o "${BIN}" -ldl -lpthread

echo "== plain run (kscope owns CUPTI)"
"${BIN}" --count "${COUNT}" --warmup "${WARMUP}" --spin "${SPIN}" | tee "${OUT_DIR}/plain.log"
if grep -q '^SKIP' "${OUT_DIR}/plain.log"; then
  echo "SKIP: no CUDA device"
  exit 77
fi
KSCOPE_NS=$(sed -n 's/^KSCOPE_CUPTI_KERNEL_NS median=\([0-9.]*\).*/\1/p' "${OUT_DIR}/plain.log")
if [ -z "${KSCOPE_NS}" ]; then
  echo "FAIL: the plain run printed no CUPTI kernel time (is CUPTI available?)"
  exit 1
fi

echo "== run under ncu (ncu owns CUPTI; kscope must degrade)"
set +e
"${NCU}" --clock-control none --metrics gpu__time_duration.sum --print-units base --csv \
  --kernel-name regex:spin_kernel --launch-skip "${WARMUP}" --launch-count "${COUNT}" \
  "${BIN}" --count "${COUNT}" --warmup "${WARMUP}" --spin "${SPIN}" > "${OUT_DIR}/ncu.log" 2>&1
NCU_STATUS=$?
set -e
cat "${OUT_DIR}/ncu.log"
if [ "${NCU_STATUS}" -ne 0 ]; then
  echo "FAIL: the binary (or ncu) failed under ncu with status ${NCU_STATUS}"
  exit 1
fi
if ! grep -q '^KSCOPE_WARNING: CUPTI' "${OUT_DIR}/ncu.log"; then
  echo "FAIL: no degraded-mode warning under ncu"
  exit 1
fi
if ! grep -q '^KSCOPE_WARNING: CUPTI owned by another tool (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED' "${OUT_DIR}/ncu.log"; then
  echo "NOTE: kscope degraded under ncu, but not with CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (see the warning above)"
fi

python3 - "${OUT_DIR}/ncu.log" "${KSCOPE_NS}" "${TOLERANCE}" <<'EOF'
import csv, statistics, sys
log, kscope_ns, tolerance = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
rows = [line for line in open(log, encoding="utf-8", errors="replace") if line.startswith('"')]
scale = {"ns": 1.0, "nsecond": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6, "second": 1e9, "s": 1e9}
values = []
for row in csv.DictReader(rows):
    if row.get("Metric Name") != "gpu__time_duration.sum" or "spin_kernel" not in row.get("Kernel Name", ""):
        continue
    value = float(row["Metric Value"].replace(",", ""))
    values.append(value * scale.get(row.get("Metric Unit", "ns").strip(), 1.0))
if not values:
    print("FAIL: no gpu__time_duration.sum rows for spin_kernel in the ncu output")
    sys.exit(1)
ncu_ns = statistics.median(values)
diff = (kscope_ns - ncu_ns) / ncu_ns
print(f"kscope CUPTI median {kscope_ns:.0f} ns, ncu gpu__time_duration.sum median {ncu_ns:.0f} ns "
      f"over {len(values)} kernels: difference {diff * 100:+.2f} % (tolerance {tolerance * 100:.0f} %)")
if abs(diff) > tolerance:
    print("FAIL: kscope and ncu disagree")
    sys.exit(1)
print("PASS")
EOF
