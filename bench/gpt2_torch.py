#!/usr/bin/python3
"""The same GPT-2 training step as models/gpt2 (pre-LN, tanh GELU, tied
lm_head, AdamW, clipping) in plain PyTorch, timed on the CPU with the same
thread count, for bench/bench_gpt2_cpu.sh to set beside our engine's figure.
Run with Debian's python3-torch: /usr/bin/python3 bench/gpt2_torch.py --help
Prints one line: "torch tokens/s: N"."""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, C, nh):
        super().__init__()
        self.nh = nh
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.c_attn, self.attn_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.nh, C // self.nh).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.nh)
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + self.attn_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, V, maxT, L, nh, C):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(maxT, C)
        self.h = nn.ModuleList(Block(C, nh) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for b in self.h:
            x = b(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(B * T, -1), targets.reshape(-1))


def main():
    p = argparse.ArgumentParser(description=__doc__)
    for k, d in [("vocab_size", 256), ("block_size", 128), ("n_layer", 4), ("n_head", 4), ("n_embd", 128),
                 ("batch_size", 16), ("seq_len", 128), ("steps", 20), ("warmup", 3), ("threads", 0)]:
        p.add_argument("--" + k, type=int, default=d)
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    m = GPT(a.vocab_size, a.block_size, a.n_layer, a.n_head, a.n_embd)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    data = torch.randint(0, a.vocab_size, (a.steps + a.warmup, a.batch_size, a.seq_len + 1))
    times = []
    for s in range(a.steps + a.warmup):
        t0 = time.perf_counter()
        loss = m(data[s, :, :-1], data[s, :, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        if s >= a.warmup:
            times.append(time.perf_counter() - t0)
    times.sort()
    print(f"torch tokens/s: {a.batch_size * a.seq_len / times[len(times) // 2]:.0f} "
          f"(median of {a.steps} steps, {torch.get_num_threads()} threads, torch {torch.__version__})")


if __name__ == "__main__":
    main()
