#!/usr/bin/env python3
"""bench_torch.py - `make bench`: the same GPT in PyTorch eager, the baseline
our single-rank speed is compared with.

The model of design.md section 4 at the bench config (C=192, L=12, NH=12, T=64,
B=8, V=256): token and position embeddings, pre-LayerNorm blocks (q, k and v as one
C -> 3C linear, as nanoGPT writes it: the same math as our three linears, and
the faster form in eager mode), causal softmax attention, tanh-GELU MLP of width 4C, a final
LayerNorm and an untied lm_head without bias, mean cross-entropy, global-norm
clipping at 1 and torch.optim.AdamW. PyTorch runs in its default eager
configuration on one thread (torch.set_num_threads(1)), as our rank runs on one
BLAS thread. Prints one line per step, `torch step: W ms wall, U ms cpu` (the
thread's CPU time beside the wall clock), so the caller can alternate it with
our bench.

Usage: bench_torch.py ROUNDS STEPS_PER_ROUND
Exit 3 (and one line) when torch is not installed.
"""
import sys
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    print("torch: not installed (Debian: apt-get install python3-torch)")
    sys.exit(3)

V, C, L, NH, T, B = 256, 192, 12, 12, 64, 8


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(C)
        self.qkv = nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)
        self.ln2 = nn.LayerNorm(C)
        self.fc1 = nn.Linear(C, 4 * C)
        self.fc2 = nn.Linear(4 * C, C)
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
        self.register_buffer("mask", mask)

    def forward(self, x):
        h = self.ln1(x)
        hs = C // NH
        q, k, v = (t.view(B, T, NH, hs).transpose(1, 2) for t in self.qkv(h).split(C, dim=2))
        att = (q @ k.transpose(-2, -1)) * (1.0 / hs ** 0.5)
        att = att.masked_fill(~self.mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(V, C)
        self.pos = nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block() for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        self.head = nn.Linear(C, V, bias=False)

    def forward(self, idx, targets):
        x = self.tok(idx) + self.pos(torch.arange(T))
        for b in self.blocks:
            x = b(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, V), targets.view(-1))


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    torch.set_num_threads(1)
    torch.manual_seed(1)
    model = GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), eps=1e-8,
                            weight_decay=0.1)
    idx = torch.randint(0, V, (B, T))
    tgt = torch.randint(0, V, (B, T))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = model(idx, tgt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    for _ in range(3):  # warm-up: the allocator's caches and the first-call paths
        step()
    for r in range(rounds):
        for _ in range(steps):
            w0, c0 = time.perf_counter(), time.thread_time()
            step()
            w1, c1 = time.perf_counter(), time.thread_time()
            print(f"torch step: {(w1 - w0) * 1e3:.2f} ms wall, {(c1 - c0) * 1e3:.2f} ms cpu",
                  flush=True)


if __name__ == "__main__":
    main()
