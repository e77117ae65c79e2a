#!/usr/bin/env python3
"""A small transformer built from torch's own modules (random weights), with a kscope scope
per module call from one line: kscope.torch.instrument(model) (the lines marked `# kscope`).
Prints the report (host and GPU time per module, the kernels CUPTI attributed to each) and
the diagnosis of its generation loop.

    PYTHONPATH=<prefix>/lib/python3.X/site-packages python3 examples/python/transformer.py [--tokens 32]

Runs on a CUDA device when torch sees one, else on the CPU (host times only). --compile
instruments torch.compile(model) instead: one scope at the compiled boundary, holding the
compiled graph's kernels. Writes transformer_report.json and transformer_report.html beside
it unless --no-files is given.
"""

import argparse
import sys
from collections import OrderedDict

try:
    import torch
    from torch import nn
except ImportError:
    print("transformer.py: this example needs PyTorch (import torch failed)", file=sys.stderr)
    sys.exit(77)  # the test runner's "skipped"

import kscope        # kscope
import kscope.torch  # kscope


class Block(nn.Module):
    """A pre-norm decoder block: causal self-attention and an MLP, each with a residual."""

    def __init__(self, hidden, heads):
        super().__init__()
        self.norm1 = nn.LayerNorm(hidden)
        self.attn = nn.MultiheadAttention(hidden, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(hidden)
        self.mlp = nn.Sequential(OrderedDict(up=nn.Linear(hidden, 4 * hidden), act=nn.GELU(),
                                             down=nn.Linear(4 * hidden, hidden)))

    def forward(self, x, causal):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, attn_mask=causal, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class Transformer(nn.Module):
    def __init__(self, vocab, hidden, heads, layers):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, tokens):
        n = tokens.shape[1]
        causal = torch.triu(torch.full((n, n), float("-inf"), device=tokens.device), diagonal=1)
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, causal)
        return self.head(self.norm(x[:, -1]))


def main():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    # Sizes: a GPU's defaults, and smaller ones on the CPU, where a step would take seconds.
    gpu = device == "cuda"
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=8192 if gpu else 2048)
    parser.add_argument("--hidden", type=int, default=512 if gpu else 128)
    parser.add_argument("--heads", type=int, default=8 if gpu else 4)
    parser.add_argument("--layers", type=int, default=4 if gpu else 2)
    parser.add_argument("--batch", type=int, default=4 if gpu else 1)
    parser.add_argument("--prompt", type=int, default=128 if gpu else 32)
    parser.add_argument("--tokens", type=int, default=16 if gpu else 4)
    parser.add_argument("--compile", action="store_true", help="instrument torch.compile(model)")
    parser.add_argument("--no-files", action="store_true")
    args = parser.parse_args()

    torch.manual_seed(0)
    model = Transformer(args.vocab, args.hidden, args.heads, args.layers).to(device).eval()
    if args.compile:
        if not hasattr(torch, "compile"):
            parser.error(f"--compile needs torch >= 2.0 (this is {torch.__version__})")
        model = torch.compile(model)
    kscope.enable_cupti()                                                         # kscope
    scopes = kscope.torch.instrument(model)                                       # kscope: one scope per module call

    with torch.inference_mode():
        tokens = torch.randint(0, args.vocab, (args.batch, args.prompt), device=device)
        with kscope.scope("prefill"):                                             # kscope
            logits = model(tokens)
        for _ in range(args.tokens):
            with kscope.torch.step():                                             # kscope: the loop's step
                logits = model(tokens)
                tokens = torch.cat([tokens, logits.argmax(-1, keepdim=True)], dim=1)

    scopes.remove()                                                               # kscope
    report = kscope.report()                                                      # kscope
    print(report.text())                                                          # kscope
    print(kscope.diagnose(report).text)                                           # kscope
    # What instrument() promised: a scope per module call under each step (a compiled model:
    # one scope at its boundary).
    root = f"step/{scopes.name}"
    expected = [root] if args.compile else [root, root + "/embed", root + "/blocks.0", root + "/head"]
    missing = [p for p in expected if report.find(p) is None]
    if missing:
        print(f"transformer.py: the report lacks the module scopes {missing}", file=sys.stderr)
        return 1
    if not args.no_files:
        report.write_json("transformer_report.json")
        report.write_html("transformer_report.html")
        print("kscope: wrote transformer_report.json, transformer_report.html")
    return 0


if __name__ == "__main__":
    sys.exit(main())
