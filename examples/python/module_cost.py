#!/usr/bin/env python3
"""What a module scope costs per module call: kscope.torch.instrument() on a model of many
trivial modules, against the same model without hooks and with hooks that do nothing
(torch's own price for calling hooks at all).

    PYTHONPATH=python KSCOPE_LIBRARY=build/python/libkscope_c.so python3 examples/python/module_cost.py

Prints one line per variant: microseconds per module call (the median of --repeats runs of
--calls forwards through --modules modules each). "kscope hooks" less "empty hooks" is
kscope's part; "empty hooks" less "no hooks" is torch's hook dispatch. On a CUDA device the
kscope variants also record CUDA events on torch's current stream (stream="current"), and
the "host only" variant shows the cost without them.
"""

import argparse
import statistics
import sys
import time

try:
    import torch
except ImportError:
    print("module_cost.py: this example needs PyTorch (import torch failed)", file=sys.stderr)
    sys.exit(77)

import kscope
import kscope.torch


class Tiny(torch.nn.Module):
    """As little forward as a module can have: the cost measured is the call's."""

    def forward(self, x):
        return x


class Wide(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Tiny() for _ in range(n))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def per_call_us(model, x, calls, modules, repeats):
    """Median over `repeats` of the time per module call, in microseconds."""
    for _ in range(3):
        model(x)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            model(x)
        samples.append((time.perf_counter() - start) / (calls * (modules + 1)) * 1e6)
    return statistics.median(samples)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", type=int, default=100)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = torch.zeros(1, device=device)
    model = Wide(args.modules).to(device)
    n = (args.calls, args.modules, args.repeats)

    results = {"no hooks": per_call_us(model, x, *n)}
    empty = []
    for m in model.modules():
        empty.append(m.register_forward_pre_hook(lambda module, inputs: None))
        empty.append(m.register_forward_hook(lambda module, inputs, output: None))
    results["empty hooks"] = per_call_us(model, x, *n)
    for h in empty:
        h.remove()
    if device == "cuda":
        with kscope.torch.instrument(model, name="cost_host", stream=None):
            results["kscope hooks, host only"] = per_call_us(model, x, *n)
    with kscope.torch.instrument(model, name="cost"):
        results["kscope hooks" + (", CUDA events" if device == "cuda" else "")] = per_call_us(model, x, *n)

    print(f"torch {torch.__version__} on {device}; {args.modules + 1} module calls per forward; "
          f"median of {args.repeats} runs of {args.calls} forwards")
    base = results["no hooks"]
    for variant, us in results.items():
        extra = "" if variant == "no hooks" else f"  (+{us - base:.2f} us)"
        print(f"  {variant:28s} {us:7.2f} us per module call{extra}")
    print(f"  kscope's own part: {results[list(results)[-1]] - results['empty hooks']:.2f} us per module call")
    s = kscope.report().find("cost")
    if s is not None:
        print(f"  scopes recorded: {s['calls']} root calls")
    return 0


if __name__ == "__main__":
    sys.exit(main())
