#!/usr/bin/env python3
"""kscope's verdict beside Nsight Compute's, per kernel class (issue 28).

    verdict_vs_ncu.py DIR [--cases "copy stencil ..."]   # markdown on stdout
    verdict_vs_ncu.py --self-test                        # the parsers on hand-made input

DIR holds, per case, kscope_<case>.txt (bench/verdict_vs_ncu.cu --kscope) and
ncu_<case>.csv (`ncu --csv --page raw ... --plain`); bench/verdict_vs_ncu.sh writes both.

Nsight Compute's side is derived from its raw numbers with the rule the brief of issue 28
states, not from kscope's code:
  - the units: DRAM, L2, L1 (memory side); the tensor, FMA, ALU, FP64 and load/store pipes
    (SM side), each the "% of peak" metric named in UNITS (first one present);
  - the memory side is the highest of gpu__compute_memory_throughput and its units, the SM
    side the highest of sm__throughput and its pipes;
  - memory-bound when the memory side is >= 60 % and >= the SM side; compute-bound when the
    SM side is higher and >= 60 %; latency-bound otherwise;
  - the unit: the highest unit of the winning side (of both sides when latency-bound);
  - the top stall: the largest reason (not "selected") of the first stall-metric family the
    CSV holds (STALL_FAMILIES), as a share of all its reasons.
Agreement: the same class and, for memory and compute, the same unit; for latency, the same
top stall when both sides have stalls. Two of kscope's documented rules
(evidence/metrics.hpp) can name another unit than "the highest"; a row they explain is
marked yes* with the rule, so it is never silently counted as a plain agreement.
Exit status: 0 when every row agrees (yes or yes*), 1 otherwise, 2 on bad input.
"""
import argparse
import csv
import os
import re
import sys
import tempfile

AT_ROOF_PCT = 60.0
FILLS_MARGIN = 1.25  # kscope: DRAM at its roof stays the limit while L2 / L1 read within 25 % above

CASES = ["copy", "stencil", "transpose", "tensor_gemm", "fp32_gemm", "barrier", "tiny"]

# (key, label, side, metric names in preference order). The same names read kscope's values.
UNITS = [
    ("dram", "DRAM", "memory", ["dram__throughput.avg.pct_of_peak_sustained_elapsed",
                                "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"]),
    ("l2", "L2", "memory", ["lts__throughput.avg.pct_of_peak_sustained_elapsed",
                            "lts__t_sectors.avg.pct_of_peak_sustained_elapsed"]),
    ("l1", "L1", "memory", ["l1tex__throughput.avg.pct_of_peak_sustained_active",
                            "l1tex__throughput.avg.pct_of_peak_sustained_elapsed",
                            "l1tex__data_pipe_lsu_wavefronts.avg.pct_of_peak_sustained_elapsed"]),
    ("tensor", "tensor pipe", "sm", ["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
                                     "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed",
                                     "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed",
                                     "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
                                     "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
                                     "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"]),
    ("fma", "FMA pipe", "sm", ["sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"]),
    ("alu", "ALU pipe", "sm", ["sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active"]),
    ("fp64", "FP64 pipe", "sm", ["sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active"]),
    ("lsu", "load/store pipe", "sm", ["sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active"]),
]
ROLLUPS = {"memory": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
           "sm": "sm__throughput.avg.pct_of_peak_sustained_elapsed"}
LABEL = {key: label for key, label, _, _ in UNITS}
SIDE = {key: side for key, _, side, _ in UNITS}

# kscope's finding.where (spaces as '_') -> unit key. The FP32 / FP16 pipe is named from the
# instruction mix when no pipe utilisation was measured: those instructions run on the FMA pipe.
KSCOPE_WHERE = {"DRAM": "dram", "L2": "l2", "L1": "l1", "tensor_pipe": "tensor", "FMA_pipe": "fma",
                "FP32_pipe": "fma", "FP16_pipe": "fma", "ALU_pipe": "alu", "FP64_pipe": "fp64",
                "load/store_pipe": "lsu"}

# Stall-reason metric families, the first one the CSV holds wins: PC-sampling counts (what
# kscope samples too), then the per-issue / per-warp ratios of the WarpStateStats section.
STALL_FAMILIES = [
    ("smsp__pcsamp_warps_issue_stalled_*",
     re.compile(r"^smsp__pcsamp_warps_issue_stalled_(?P<r>[a-z0-9_]+?)(?P<ni>_not_issued)?(?:\.sum)?$")),
    ("smsp__average_warp_latency_issue_stalled_*",
     re.compile(r"^smsp__average_warp_latency_issue_stalled_(?P<r>[a-z0-9_]+?)(?P<ni>_not_issued)?"
                r"(?:\.(?:ratio|pct|sum))?$")),
    ("smsp__average_warps_issue_stalled_*_per_issue_active.ratio",
     re.compile(r"^smsp__average_warps_issue_stalled_(?P<r>[a-z0-9_]+?)(?P<ni>_not_issued)?_per_issue_active\.ratio$")),
    ("smsp__warp(s)_issue_stalled_*_per_warp_active.pct",
     re.compile(r"^smsp__warps?_issue_stalled_(?P<r>[a-z0-9_]+?)(?P<ni>_not_issued)?_per_warp_active\.pct$")),
]
STALL_ALIAS = {"no_instruction": "no_instructions"}


def number(text):
    """A CSV cell as a float ("1,234.5" -> 1234.5), or None."""
    try:
        return float(text.strip().replace(",", ""))
    except (ValueError, AttributeError):
        return None


def read_ncu_csv(path):
    """The first profiled kernel of an ncu CSV: (kernel name, {metric: value}), or (None, why).

    The raw page: a header row of column names (the metric names after the launch columns),
    a row of units (empty ID), then one row per kernel. ncu's own log lines are not quoted and
    are skipped. The details page (Metric Name / Metric Value rows) is read too."""
    try:
        with open(path, errors="replace") as f:
            lines = [line for line in f if line.startswith('"')]
    except OSError as e:
        return None, str(e)
    rows = list(csv.reader(lines))
    if not rows:
        return None, "no CSV rows (ncu failed or matched no kernel)"
    head = rows[0]
    col = {name: i for i, name in enumerate(head)}
    id_col = col.get("ID", 0)
    name_col = col.get("Kernel Name")
    data = [r for r in rows[1:] if len(r) > id_col and number(r[id_col]) is not None]
    if not data:
        return None, "no kernel rows in the CSV"
    if "Metric Name" in col and "Metric Value" in col:  # details page: one row per metric
        first = data[0][id_col]
        values = {}
        for r in data:
            if r[id_col] == first:
                v = number(r[col["Metric Value"]])
                if v is not None:
                    values[r[col["Metric Name"]]] = v
        return (data[0][name_col] if name_col is not None else "?"), values
    row = data[0]
    values = {}
    for name, i in col.items():
        if i < len(row):
            v = number(row[i])
            if v is not None:
                values[name] = v
    return (row[name_col] if name_col is not None else "?"), values


def unit_values(values):
    """{unit key: (metric, value)} for the units whose metric is present."""
    out = {}
    for key, _, _, names in UNITS:
        for n in names:
            if n in values:
                out[key] = (n, values[n])
                break
    return out


def ncu_stalls(values):
    """[(reason, share)] largest first, "selected" and the _not_issued twins left out, from the
    first family present; and that family's name pattern (to say which)."""
    for label, family in STALL_FAMILIES:
        reasons = {}
        for name, v in values.items():
            m = family.match(name)
            if m and not m.group("ni"):
                key = STALL_ALIAS.get(m.group("r"), m.group("r"))
                reasons[key] = reasons.get(key, 0.0) + v
        total = sum(v for v in reasons.values() if v > 0)
        if len(reasons) >= 2 and total > 0:
            shares = sorted(((r, v / total) for r, v in reasons.items() if r != "selected" and v > 0),
                            key=lambda rv: -rv[1])
            return shares, label
    return [], None


def ncu_verdict(values):
    """Nsight Compute's class, unit key and unit value, from the raw values."""
    units = unit_values(values)
    side_top = {}
    for side in ("memory", "sm"):
        vals = [v for k, (_, v) in units.items() if SIDE[k] == side]
        if ROLLUPS[side] in values:
            vals.append(values[ROLLUPS[side]])
        side_top[side] = max(vals) if vals else None
    mem, sm = side_top["memory"], side_top["sm"]
    if mem is None and sm is None:
        return "undetermined", None, None
    mem_v = mem if mem is not None else float("-inf")
    sm_v = sm if sm is not None else float("-inf")
    if mem_v >= AT_ROOF_PCT and mem_v >= sm_v:
        cls, side = "memory", "memory"
    elif sm_v >= AT_ROOF_PCT and sm_v > mem_v:
        cls, side = "compute", "sm"
    else:
        cls, side = "latency", None
    candidates = [(v, k) for k, (_, v) in units.items() if side is None or SIDE[k] == side]
    if not candidates:
        return cls, None, None
    value, key = max(candidates)
    return cls, key, value


def read_kscope(path):
    """kscope's lines for one case: verdict, unit key, text, {metric: value}, [(reason, share)], notes."""
    out = {"class": None, "unit": None, "where": None, "text": "", "values": {}, "stalls": [], "notes": [], "last": ""}
    try:
        with open(path, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError as e:
        out["notes"].append(str(e))
        return out
    verdict = re.compile(r"^KSCOPE case=(\S+) class=(\S+) unit=(\S+) text=(.*)$")
    metric = re.compile(r"^KSCOPE_METRIC case=\S+ name=(\S+) value=(\S+)$")
    stall = re.compile(r"^KSCOPE_STALL case=\S+ reason=(\S+) share=(\S+)$")
    for line in lines:
        m = verdict.match(line)
        if m:
            out["class"], out["where"], out["text"] = m.group(2), m.group(3), m.group(4)
            out["unit"] = KSCOPE_WHERE.get(m.group(3))
            continue
        m = metric.match(line)
        if m and number(m.group(2)) is not None:
            out["values"][m.group(1)] = number(m.group(2))
            continue
        m = stall.match(line)
        if m and number(m.group(2)) is not None:
            out["stalls"].append((m.group(1), number(m.group(2))))
            continue
        if line.startswith("KSCOPE_NOTE"):
            out["notes"].append(line.split(" ", 2)[-1])
    out["stalls"].sort(key=lambda rv: -rv[1])
    out["last"] = next((line.strip() for line in reversed(lines) if line.strip()), "")
    return out


def agreement(k, n_class, n_unit, n_units, k_stall, n_stall):
    """'yes', 'yes* (rule)', or 'no (what)'."""
    if k["class"] is None:
        return "no (kscope gave no verdict)"
    if n_class == "undetermined":
        return "no (ncu values missing)"
    if k["class"] != n_class:
        tensor = n_units.get("tensor", float("nan"))
        if k["class"] == "compute" and k["unit"] == "tensor" and n_class == "memory" and tensor >= AT_ROOF_PCT:
            return "yes* (tensor roof)"
        return "no (class)"
    if n_class == "latency":
        if k_stall and n_stall and k_stall != n_stall:
            return "no (top stall)"
        return "yes"
    if k["unit"] == n_unit:
        return "yes"
    dram = n_units.get("dram", float("nan"))
    top = n_units.get(n_unit, float("nan"))
    if k["unit"] == "dram" and n_unit in ("l2", "l1") and dram >= AT_ROOF_PCT and top <= FILLS_MARGIN * dram:
        return "yes* (DRAM fills)"
    return "no (unit)"


def pct(v):
    return "-" if v is None else "%.1f" % v


def compare(directory, cases):
    rows, throughputs, details, all_agree = [], [], [], True
    for case in cases:
        k = read_kscope(os.path.join(directory, "kscope_%s.txt" % case))
        kernel, values = read_ncu_csv(os.path.join(directory, "ncu_%s.csv" % case))
        if kernel is None:
            why, values = values, {}
        n_class, n_unit, n_value = ncu_verdict(values)
        n_units = {key: v for key, (_, v) in unit_values(values).items()}
        stalls, family = ncu_stalls(values)
        n_stall = stalls[0][0] if stalls else None
        k_stall = k["stalls"][0][0] if k["stalls"] else None
        agree = agreement(k, n_class, n_unit, n_units, k_stall, n_stall)
        all_agree = all_agree and agree.startswith("yes")
        k_unit = LABEL.get(k["unit"], k["where"] or "-") if k["where"] not in (None, "-") else "-"
        rows.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            case, k["class"] or "-", k_unit, n_class,
            "%s (%s)" % (LABEL[n_unit], pct(n_value)) if n_unit else "-",
            "%s %.0f%%" % (k_stall, 100 * k["stalls"][0][1]) if k_stall else "-",
            "%s %.0f%%" % (n_stall, 100 * stalls[0][1]) if n_stall else "-",
            agree))
        k_units = {key: v for key, (_, v) in unit_values(k["values"]).items()}
        pairs = [(k["values"].get(ROLLUPS[side]), values.get(ROLLUPS[side])) for side in ("sm", "memory")]
        pairs += [(k_units.get(key), n_units.get(key)) for key, _, _, _ in UNITS]
        cells = ["%s / %s" % (pct(kv), pct(nv)) for kv, nv in pairs]
        throughputs.append("| %s | %s |" % (case, " | ".join(cells)))
        details.append("- **%s** kscope: %s" % (case, k["text"] or "no verdict line; its output ends: " +
                                                 (k["last"] or "(empty)")[:300]))
        details.append(("  ncu profiled `%s`" % kernel) if kernel else "  ncu: %s" % why)
        if family:
            details.append("  ncu stalls (`%s`): %s" % (family, ", ".join(
                "%s %.0f%%" % (r, 100 * s) for r, s in stalls[:3])))
    out = ["| case | kscope class | kscope unit | ncu class | ncu top unit (value) | kscope top stall | "
           "ncu top stall | agree? |",
           "|---|---|---|---|---|---|---|---|"] + rows
    footnotes = {
        "yes* (tensor roof)": "kscope's rule: a tensor pipe at its roof (>= 60 %) makes the kernel compute-bound "
                              "whatever L1 / L2 read, their figure being the MMA operands' traffic; ncu's highest "
                              "unit is on the memory side.",
        "yes* (DRAM fills)": "kscope's rule: DRAM at its roof stays the limit while L2 or L1 reads within 25 % above "
                             "it (every DRAM byte also passes through them); ncu's highest unit is that level.",
    }
    out += [""] + ["- %s: %s" % (key, note) for key, note in footnotes.items()
                   if any(row.endswith("| %s |" % key) for row in rows)]
    out += ["", "Every row: %s." % ("agrees" if all_agree else "NOT all agree"), "",
            "Throughputs, % of peak, kscope / ncu:", "",
            "| case | SM | Mem | " + " | ".join(label for _, label, _, _ in UNITS) + " |",
            "|---|" + "---|" * (2 + len(UNITS))]
    out += throughputs + ["", "Details:", ""] + details
    return "\n".join(out) + "\n", all_agree


# ---------------------------------------------------------------------------------------
# Self-test: hand-made input in the formats the programs write.

SAMPLE_NCU = '''==PROF== Connected to process 4242 (verdict_vs_ncu)
==PROF== Profiling "vvn_copy": 0%....50%....100% - 48 passes
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","dram__throughput.avg.pct_of_peak_sustained_elapsed","gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed","gpu__time_duration.sum","l1tex__throughput.avg.pct_of_peak_sustained_active","lts__throughput.avg.pct_of_peak_sustained_elapsed","sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active","sm__throughput.avg.pct_of_peak_sustained_elapsed","smsp__pcsamp_warps_issue_stalled_barrier","smsp__pcsamp_warps_issue_stalled_barrier_not_issued","smsp__pcsamp_warps_issue_stalled_long_scoreboard","smsp__pcsamp_warps_issue_stalled_selected","smsp__average_warps_issue_stalled_wait_per_issue_active.ratio"
"","","","","","","","","","","","%","%","ns","%","%","%","%","","","","","inst"
"0","4242","verdict_vs_ncu","127.0.0.1","vvn_copy(const float4 *, float4 *, unsigned long)","1","7","(256, 1, 1)","(1056, 1, 1)","0","9.0","88.12","88.12","1,234,567","35.5","71.03","2.1","12.7","10","5","9,000","1,000","3.2"
'''
SAMPLE_KSCOPE = '''KSCOPE_NOTE case=copy counters: collected; 21 passes
KSCOPE_METRIC case=copy name=lts__throughput.avg.pct_of_peak_sustained_elapsed value=72.000
KSCOPE_METRIC case=copy name=dram__throughput.avg.pct_of_peak_sustained_elapsed value=63.000
KSCOPE_STALL case=copy reason=long_scoreboard share=0.8100
KSCOPE_STALL case=copy reason=lg_throttle share=0.0500
KSCOPE case=copy class=memory unit=DRAM text=memory-bound: DRAM at 63% of its peak (...)
'''
SAMPLE_BARRIER_NCU = '''"ID","Kernel Name","sm__throughput.avg.pct_of_peak_sustained_elapsed","gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed","smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio","smsp__average_warps_issue_stalled_wait_per_issue_active.ratio","smsp__average_warps_issue_stalled_selected_per_issue_active.ratio"
"","","%","%","ratio","ratio","ratio"
"0","vvn_barrier(float *, int, int)","3.5","0.4","120.5","3.9","1"
'''
SAMPLE_BARRIER_KSCOPE = '''KSCOPE_STALL case=barrier reason=barrier share=0.9500
KSCOPE case=barrier class=latency unit=- text=latency-bound: ...
'''
SAMPLE_GEMM_NCU = '''"ID","Kernel Name","sm__throughput.avg.pct_of_peak_sustained_elapsed","gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed","l1tex__throughput.avg.pct_of_peak_sustained_active","sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"
"","","%","%","%","%"
"0","nvjet_hsh_256x128_64x4_2x1_v_bz_coopA_NNN","85.2","80.1","91.0","88.4"
'''
SAMPLE_GEMM_KSCOPE = '''KSCOPE case=tensor_gemm class=compute unit=tensor_pipe text=compute-bound: ...
'''


def self_test():
    with tempfile.TemporaryDirectory() as d:
        for name, text in [("ncu_copy.csv", SAMPLE_NCU), ("kscope_copy.txt", SAMPLE_KSCOPE),
                           ("ncu_barrier.csv", SAMPLE_BARRIER_NCU), ("kscope_barrier.txt", SAMPLE_BARRIER_KSCOPE),
                           ("ncu_tensor_gemm.csv", SAMPLE_GEMM_NCU), ("kscope_tensor_gemm.txt", SAMPLE_GEMM_KSCOPE)]:
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        kernel, values = read_ncu_csv(os.path.join(d, "ncu_copy.csv"))
        assert kernel.startswith("vvn_copy"), kernel
        assert values["gpu__time_duration.sum"] == 1234567.0, values  # thousands separators
        assert values["lts__throughput.avg.pct_of_peak_sustained_elapsed"] == 71.03
        assert ncu_verdict(values)[:3] == ("memory", "dram", 88.12), ncu_verdict(values)
        stalls, family = ncu_stalls(values)  # pcsamp family first; _not_issued and selected out
        assert stalls[0][0] == "long_scoreboard" and abs(stalls[0][1] - 9000 / 10010) < 1e-9, stalls
        assert family == "smsp__pcsamp_warps_issue_stalled_*", family
        _, bvalues = read_ncu_csv(os.path.join(d, "ncu_barrier.csv"))
        assert ncu_verdict(bvalues)[0] == "latency"
        assert ncu_stalls(bvalues)[0][0][0] == "barrier"
        _, gvalues = read_ncu_csv(os.path.join(d, "ncu_tensor_gemm.csv"))
        assert ncu_verdict(gvalues)[:2] == ("memory", "l1"), ncu_verdict(gvalues)  # the brief's rule, literally
        k = read_kscope(os.path.join(d, "kscope_copy.txt"))
        assert k["class"] == "memory" and k["unit"] == "dram" and k["stalls"][0][0] == "long_scoreboard"
        table, all_agree = compare(d, ["copy", "barrier", "tensor_gemm"])
        lines = table.splitlines()
        assert lines[2].endswith("| yes |"), lines[2]
        assert lines[3].endswith("| yes |"), lines[3]
        assert lines[4].endswith("| yes* (tensor roof) |"), lines[4]
        assert all_agree
        # A hand-made disagreement: kscope names L2 where ncu's DRAM is the top unit.
        with open(os.path.join(d, "kscope_copy.txt"), "w") as f:
            f.write(SAMPLE_KSCOPE.replace("unit=DRAM", "unit=L2"))
        table, all_agree = compare(d, ["copy"])
        assert "| no (unit) |" in table and not all_agree, table
        # A missing ncu file is a row, not a crash.
        table, all_agree = compare(d, ["stencil"])
        assert "| stencil | - | - | undetermined |" in table and not all_agree, table
    print("verdict_vs_ncu.py self-test: ok")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", nargs="?", help="kscope_<case>.txt and ncu_<case>.csv files")
    parser.add_argument("--cases", default=" ".join(CASES), help="cases, in table order")
    parser.add_argument("--self-test", action="store_true", help="check the parsers on hand-made input")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    if not args.directory:
        parser.error("a directory is needed (or --self-test)")
    table, all_agree = compare(args.directory, args.cases.split())
    sys.stdout.write(table)
    return 0 if all_agree else 1


if __name__ == "__main__":
    sys.exit(main())
