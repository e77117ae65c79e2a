#!/usr/bin/env python3
"""A PyTorch generation loop instrumented with kscope: the lines marked `# kscope` are all
it takes (docs/python.md). Prints the report (per-phase host and GPU time, the kernels
CUPTI attributed to each phase) and the serving diagnosis.

    PYTHONPATH=<prefix>/lib/python3.X/site-packages python3 examples/python/generate.py [--tokens 64]

Runs on a CUDA device when torch sees one, else on the CPU (host times only). Writes
generate_report.json, generate_report.html and generate_trace.json beside it unless
--no-files is given.
"""

import argparse
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("generate.py: this example needs PyTorch (import torch failed)", file=sys.stderr)
    sys.exit(77)  # the test runner's "skipped"

import kscope  # kscope


class TinyLM(torch.nn.Module):
    """A decoder-only transformer, small enough to run anywhere."""

    def __init__(self, vocab=4096, hidden=512, heads=8, layers=4):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, hidden)
        layer = torch.nn.TransformerEncoderLayer(hidden, heads, 4 * hidden, batch_first=True, norm_first=True)
        self.blocks = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = torch.nn.Linear(hidden, vocab)

    def forward(self, tokens):
        n = tokens.shape[1]
        causal = torch.triu(torch.full((n, n), float("-inf"), device=tokens.device), diagonal=1)
        return self.head(self.blocks(self.embed(tokens), mask=causal)[:, -1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=4)
    parser.add_argument("--prompt", type=int, default=128)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--no-files", action="store_true")
    args = parser.parse_args()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = TinyLM().to(device).eval()
    params = sum(p.numel() for p in model.parameters())
    kscope.enable_cupti()                                                       # kscope
    with torch.inference_mode():
        for request in range(args.requests):
            tokens = torch.randint(0, 4096, (1, args.prompt), device=device)
            with kscope.scope("prefill", stream="current", work=(2 * params * args.prompt, 4 * params)):  # kscope
                logits = model(tokens)
            for _ in range(args.tokens):
                with kscope.scope("step"):                                      # kscope
                    with kscope.scope("decode", stream="current", work=(2 * params * tokens.shape[1], 4 * params)):  # kscope
                        logits = model(tokens)
                    with kscope.scope("sample", stream="current"):              # kscope
                        next_token = torch.multinomial(F.softmax(logits, dim=-1), 1)
                    with kscope.scope("d2h"):                                   # kscope
                        if next_token.item() == 0:  # an end-of-sequence check: the host waits here
                            break
                    tokens = torch.cat([tokens, next_token], dim=1)

    report = kscope.report()                                                    # kscope
    print(report.text())                                                        # kscope
    print(kscope.diagnose(report).text)                                         # kscope
    if not args.no_files:
        report.write_json("generate_report.json")
        report.write_html("generate_report.html")
        report.write_trace("generate_trace.json")
        print("kscope: wrote generate_report.json, generate_report.html, generate_trace.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
