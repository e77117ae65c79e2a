#!/usr/bin/env python3
"""Writes a large, valid kscope.report/1 file for measuring the JSON reader.

    python3 tests/fuzz/make_large_report.py out.json 20            # about 20 MB
    python3 tests/fuzz/make_large_report.py out.json 20 --compact  # no whitespace: denser

The scopes are copies of the fixture tests/data/multigpu_rank0.json (host-only and
GPU scopes, CUPTI activity on two devices, tags), arranged as a tree four levels deep
and written as kscope writes reports (one-space indentation), so the numbers measured
with it are those of a real report of that size.
"""
import copy
import json
import os
import sys


def main():
    args = [a for a in sys.argv[1:] if a != "--compact"]
    compact = len(args) != len(sys.argv) - 1
    if len(args) != 2:
        sys.exit("usage: make_large_report.py OUT.json MEGABYTES [--compact]")
    out_path, megabytes = args[0], float(args[1])
    layout = {"separators": (",", ":")} if compact else {"indent": 1}
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "data", "multigpu_rank0.json")) as f:
        template = json.load(f)
    host_scope, gpu_scope = template["scopes"][0], template["scopes"][1]
    activity = gpu_scope["gpu_activity"]
    device = {"device": 0, "kernel_count": 40, "kernel_ns": 45000, "busy_ns": 45000,
              "comm_kernel_count": 20, "comm_ns": 40000}
    activity["devices"] = [dict(device, device=0), dict(device, device=1)]
    doc = copy.deepcopy(template)
    doc["scopes"] = []
    target = megabytes * 1e6
    per_scope = len(json.dumps(gpu_scope, **layout)) * 0.75  # host and GPU scopes alternate
    count = max(1, int(target / per_scope))
    path = []
    for i in range(count):
        depth = 1 + i % 4
        del path[depth - 1:]
        name = "phase_%d" % i
        path.append(name)
        scope = copy.deepcopy(gpu_scope if i % 2 else host_scope)
        scope.update(id=i + 1, parent=0 if depth == 1 else i, name=name, path="/".join(path), depth=depth)
        scope["tags"] = [{"key": "dtype", "value": "bf16", "count": 20},
                         {"key": "batch", "value": str(i % 7), "count": 20}]
        doc["scopes"].append(scope)
    doc["cupti"]["top_kernels"] = [
        {"name": "kernel_%d" % k, "mangled_name": "_Z8kernel_%di" % k, "calls": 100 + k, "total_ns": 1000000 + k,
         "median_ns": 10000.5, "min_ns": 9000, "max_ns": 12000, "grid": [128, 1, 1], "block": [256, 1, 1],
         "registers_per_thread": 32, "static_shared_bytes": 0, "dynamic_shared_bytes": 4096,
         "launch_config_varies": False, "communication": False} for k in range(50)]
    with open(out_path, "w") as f:
        json.dump(doc, f, **layout)
        f.write("\n")


if __name__ == "__main__":
    main()
