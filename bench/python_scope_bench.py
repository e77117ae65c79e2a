#!/usr/bin/env python3
"""What a kscope scope costs from Python, against what Python programs use today.

    PYTHONPATH=<prefix>/lib/python3.X/site-packages python3 bench/python_scope_bench.py [--json out.json]

Part 1, open + close of one scope (ns per iteration of a loop whose body is only the scope):
    plain context manager, contextlib.nullcontext (the floor of a `with`),
    kscope.scope("x") (a new object per `with`, as written inline), a reused kscope.scope object,
    a @kscope.scope function call against a plain call, kscope disabled (KSCOPE=0 at run time),
    and with PyTorch: torch.cuda.nvtx.range_push/pop, torch.cuda.nvtx.range(), and
    torch.profiler.record_function (no profiler running: its everyday cost), and on a GPU a
    kscope stream scope on torch's current stream.
  Every variant is timed in the same rounds, interleaved (A B C ... A B C ...), so a machine
  whose load changes affects all alike; the table gives the median and the minimum over rounds.

Part 2, with PyTorch: a small decode loop (examples/python/generate.py's model), the step time
without kscope, with kscope scopes, and with scopes and CUPTI on, in alternating blocks of steps.
On a GPU each step ends in the token's copy to the host, so the step time is the GPU's.
"""

import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import time

import kscope


class PlainContext:
    __slots__ = ()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def plain_function():
    return None


@kscope.scope("bench_decorated")
def decorated_function():
    return None


def make_variants(torch, on_gpu):
    reused = kscope.scope("bench_reused")

    def empty(n):
        for _ in range(n):
            pass

    def plain(n):
        for _ in range(n):
            with PlainContext():
                pass

    def nullcontext(n):
        for _ in range(n):
            with contextlib.nullcontext():
                pass

    def inline_scope(n):
        for _ in range(n):
            with kscope.scope("bench_inline"):
                pass

    def reused_scope(n):
        for _ in range(n):
            with reused:
                pass

    def decorated(n):
        for _ in range(n):
            decorated_function()

    def plain_call(n):
        for _ in range(n):
            plain_function()

    def disabled(n):
        kscope.set_enabled(False)
        try:
            for _ in range(n):
                with kscope.scope("bench_disabled"):
                    pass
        finally:
            kscope.set_enabled(True)

    variants = {
        "empty loop body": empty,
        "plain context manager (class)": plain,
        "contextlib.nullcontext()": nullcontext,
        "kscope.scope('x') inline": inline_scope,
        "kscope.scope, one object reused": reused_scope,
        "plain function call": plain_call,
        "@kscope.scope function call": decorated,
        "kscope.scope inline, kscope disabled": disabled,
    }
    if torch is not None:
        nvtx = torch.cuda.nvtx
        record_function = torch.profiler.record_function
        try:  # a CPU-only torch build has no NVTX
            nvtx.range_push("probe")
            nvtx.range_pop()
            has_nvtx = True
        except (AttributeError, RuntimeError):
            has_nvtx = False

        def nvtx_push_pop(n):
            for _ in range(n):
                nvtx.range_push("bench")
                nvtx.range_pop()

        def nvtx_range(n):
            for _ in range(n):
                with nvtx.range("bench"):
                    pass

        def record(n):
            for _ in range(n):
                with record_function("bench"):
                    pass

        if has_nvtx:
            variants.update({
                "torch.cuda.nvtx.range_push + range_pop": nvtx_push_pop,
                "with torch.cuda.nvtx.range()": nvtx_range,
            })
        variants["with torch.profiler.record_function()"] = record
        if on_gpu:
            stream = torch.cuda.current_stream()

            def stream_scope(n):
                for _ in range(n):
                    with kscope.scope("bench_stream", stream=stream):
                        pass

            def current_scope(n):
                for _ in range(n):
                    with kscope.scope("bench_current", stream="current"):
                        pass

            variants.update({
                "kscope.scope(stream=torch stream) inline": stream_scope,
                "kscope.scope(stream='current') inline": current_scope,
            })
    return variants


def measure_open_close(variants, iterations, rounds):
    per_variant = {name: [] for name in variants}
    for name, fn in variants.items():  # one untimed pass each: first calls, registrations
        fn(1000)
    for _ in range(rounds):
        for name, fn in variants.items():
            start = time.perf_counter_ns()
            fn(iterations)
            per_variant[name].append((time.perf_counter_ns() - start) / iterations)
    return {name: dict(median_ns=statistics.median(v), min_ns=min(v)) for name, v in per_variant.items()}


def decode_loop(torch, steps, blocks, hidden, layers):
    """Step times of a small decode loop: bare, with kscope scopes, with scopes and CUPTI."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "python"))
    from generate import TinyLM  # the example's model

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = TinyLM(hidden=hidden, layers=layers).to(device).eval()
    import torch.nn.functional as F

    def run(instrumented, n):
        times = []
        tokens = torch.randint(0, 4096, (1, 64), device=device)
        for _ in range(n):
            start = time.perf_counter_ns()
            if instrumented:
                with kscope.scope("step"):
                    with kscope.scope("decode", stream="current"):
                        logits = model(tokens)
                    with kscope.scope("sample", stream="current"):
                        token = torch.argmax(F.softmax(logits, dim=-1), dim=-1, keepdim=True)
                    with kscope.scope("d2h"):
                        token.item()
            else:
                logits = model(tokens)
                token = torch.argmax(F.softmax(logits, dim=-1), dim=-1, keepdim=True)
                token.item()
            times.append(time.perf_counter_ns() - start)
        return times

    results = {}
    with torch.inference_mode():
        run(True, 20)  # warm-up: kernels, allocator, kscope's sites
        bare, scoped = [], []
        for _ in range(blocks):  # alternating blocks: drift hits both alike
            bare += run(False, steps)
            scoped += run(True, steps)
        results["without kscope"] = bare
        results["kscope scopes"] = scoped
        if kscope.enable_cupti():  # cannot be turned off again: measured last
            run(True, 20)
            cupti_bare, cupti_scoped = [], []
            for _ in range(blocks):
                cupti_bare += run(False, steps)
                cupti_scoped += run(True, steps)
            results["kscope scopes + CUPTI"] = cupti_scoped
            results["without scopes, CUPTI on"] = cupti_bare
    return device, {name: dict(median_us=statistics.median(v) / 1e3, p90_us=sorted(v)[int(0.9 * len(v))] / 1e3,
                               steps=len(v)) for name, v in results.items()}


def machine():
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return dict(python=sys.version.split()[0], cpu=cpu, cores=os.cpu_count(), kscope=kscope.version(),
                load_average=os.getloadavg() if hasattr(os, "getloadavg") else None)


def main():
    parser = argparse.ArgumentParser(description="kscope's Python scope cost")
    parser.add_argument("--iterations", type=int, default=20000, help="scopes per timed loop")
    parser.add_argument("--rounds", type=int, default=21, help="interleaved rounds")
    parser.add_argument("--steps", type=int, default=50, help="decode steps per block")
    parser.add_argument("--blocks", type=int, default=6, help="alternating blocks per decode variant")
    parser.add_argument("--hidden", type=int, help="decode model width (default 512 on a GPU, 128 on the CPU)")
    parser.add_argument("--layers", type=int, help="decode model layers (default 4 on a GPU, 2 on the CPU)")
    parser.add_argument("--json", help="also write the numbers here")
    args = parser.parse_args()

    try:
        import torch
    except ImportError:
        torch = None
    on_gpu = bool(torch is not None and torch.cuda.is_available())
    info = machine()
    info["torch"] = torch.__version__ if torch is not None else None
    info["gpu"] = torch.cuda.get_device_name() if on_gpu else None

    costs = measure_open_close(make_variants(torch, on_gpu), args.iterations, args.rounds)
    print(f"kscope {info['kscope']}, Python {info['python']}, torch {info['torch'] or '(not installed)'}, "
          f"{info['gpu'] or 'no GPU'}; {info['cpu']}, {info['cores']} cores, load {info['load_average']}")
    print(f"\nopen + close, ns per iteration ({args.rounds} interleaved rounds of {args.iterations})\n")
    print(f"| {'variant':44s} | median ns | min ns |")
    print(f"|{'-' * 46}|----------:|-------:|")
    for name, c in costs.items():
        print(f"| {name:44s} | {c['median_ns']:9.0f} | {c['min_ns']:6.0f} |")
    out = dict(machine=info, open_close=costs)
    if torch is not None:
        hidden = args.hidden or (512 if on_gpu else 128)
        layers = args.layers or (4 if on_gpu else 2)
        device, steps = decode_loop(torch, args.steps, args.blocks, hidden, layers)
        print(f"\ndecode step of examples/python/generate.py's model (hidden {hidden}, {layers} layers, "
              f"prompt 64 tokens) on {device}\n")
        print(f"| {'variant':28s} | median us | p90 us | steps |")
        print(f"|{'-' * 30}|----------:|-------:|------:|")
        for name, s in steps.items():
            print(f"| {name:28s} | {s['median_us']:9.1f} | {s['p90_us']:6.1f} | {s['steps']:5d} |")
        out["decode_step"] = dict(device=device, hidden=hidden, layers=layers, variants=steps)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
