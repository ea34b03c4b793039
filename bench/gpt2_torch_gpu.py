#!/usr/bin/env python3
"""GPT-2 in plain PyTorch as its users train it on a GPU, the baseline our
train is set beside on the same card (bench/gpu_stage.sh): pre-LN blocks,
tanh GELU, the lm_head tied to wte over the vocabulary padded to a multiple
of 64 (as llm.c and nanoGPT), causal attention through
F.scaled_dot_product_attention, bf16 autocast, fused AdamW (lr 6e-4, betas
0.9/0.95, weight decay 0.1 on 2-D weights), clipping at 1.0, torch.compile,
trained on the token ids of one of our token files (little-endian uint16,
io/token_file.h), micro-batches summed over grad_accum.
What the installed PyTorch lacks (Debian's 1.13 on a CPU: no SDPA, no
compile, no fused AdamW) falls back to the plain form and is said in the
last line.
Its Block and GPT are also bench/gpt2_torch.py's (the cpu baseline).
Prints one line per step ("step N: ms, tokens/s") and a last line:
"torch tokens/s: N (median of S steps, B x T x grad_accum, ...)".
Usage: python3 bench/gpt2_torch_gpu.py --train_bin FILE [--device cuda] [--batch_size 64 --grad_accum 8] ..."""
import argparse
import math
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, C, nh, sdpa):
        super().__init__()
        self.nh, self.sdpa = nh, sdpa
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.c_attn, self.attn_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.nh, C // self.nh).transpose(1, 2) for t in (q, k, v))
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.nh)
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            y = att.masked_fill(~mask, float("-inf")).softmax(-1) @ v
        x = x + self.attn_proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, V, maxT, L, nh, C, sdpa):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(maxT, C)
        self.h = nn.ModuleList(Block(C, nh, sdpa) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        for name, p in self.named_parameters():  # GPT-2's initialisation
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * L) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx, targets, V):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for b in self.h:
            x = b(x)
        logits = self.ln_f(x) @ self.wte.weight.t()  # the padded width; the loss over the real V
        return F.cross_entropy(logits[..., :V].reshape(B * T, V).float(), targets.reshape(-1))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # The model's shape, as train's options name it (configs/gpt2-124M.json's).
    for k, d in [("vocab_size", 50257), ("block_size", 1024), ("n_layer", 12), ("n_head", 12), ("n_embd", 768)]:
        p.add_argument("--" + k, type=int, default=d)
    p.add_argument("--batch_size", type=int, default=64, help="sequences a micro-batch")
    p.add_argument("--seq_len", type=int, default=1024, help="tokens a sequence")
    p.add_argument("--grad_accum", type=int, default=8, help="micro-batches a step")
    p.add_argument("--steps", type=int, default=8, help="steps timed")
    p.add_argument("--warmup", type=int, default=2, help="steps run first and not timed (compilation)")
    p.add_argument("--compile", type=int, default=1, help="1: torch.compile the model (where it exists)")
    p.add_argument("--train_bin", required=True, help="a token file of ours (flat little-endian uint16)")
    p.add_argument("--device", default="cuda")
    a = p.parse_args()
    dev = torch.device(a.device)
    tokens = np.fromfile(a.train_bin, dtype="<u2").astype(np.int64)
    need = a.batch_size * a.seq_len + 1
    if tokens.size < need:
        raise SystemExit(f"gpt2_torch_gpu: {a.train_bin} holds {tokens.size} tokens, a micro-batch needs {need}")
    if int(tokens.max()) >= a.vocab_size:
        raise SystemExit(f"gpt2_torch_gpu: {a.train_bin} holds id {int(tokens.max())} >= vocab_size {a.vocab_size}")
    tokens = torch.from_numpy(tokens)

    torch.manual_seed(0)
    sdpa = hasattr(F, "scaled_dot_product_attention")
    Vp = (a.vocab_size + 63) // 64 * 64
    model = GPT(Vp, a.block_size, a.n_layer, a.n_head, a.n_embd, sdpa).to(dev)
    decay = [q for q in model.parameters() if q.dim() >= 2]
    rest = [q for q in model.parameters() if q.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}]
    fused = dev.type == "cuda" and "fused" in torch.optim.AdamW.__init__.__code__.co_varnames
    opt = torch.optim.AdamW(groups, lr=6e-4, betas=(0.9, 0.95), eps=1e-8, **({"fused": True} if fused else {}))
    compiled = bool(a.compile) and hasattr(torch, "compile")
    step_model = torch.compile(model) if compiled else model
    bf16 = dev.type == "cuda" or hasattr(torch, "compile")  # CPU autocast of 1.13 is too partial to time
    pos = 0

    def batch():
        nonlocal pos
        n = a.batch_size * a.seq_len
        if pos + n + 1 > tokens.numel():
            pos = 0
        chunk = tokens[pos:pos + n + 1]
        pos += n
        x, y = chunk[:-1].view(a.batch_size, a.seq_len), chunk[1:].view(a.batch_size, a.seq_len)
        return x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    times = []
    for s in range(a.warmup + a.steps):
        sync()
        t0 = time.perf_counter()
        for _ in range(a.grad_accum):
            x, y = batch()
            with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=bf16):
                loss = step_model(x, y, a.vocab_size) / a.grad_accum
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync()
        dt = time.perf_counter() - t0
        tok = a.batch_size * a.seq_len * a.grad_accum
        print(f"step {s + 1}: loss {loss.item() * a.grad_accum:.4f}, {dt * 1e3:.1f} ms, {tok / dt:.0f} tokens/s",
              flush=True)
        if s >= a.warmup:
            times.append(dt)
    times.sort()
    tok = a.batch_size * a.seq_len * a.grad_accum
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    print(f"torch tokens/s: {tok / times[len(times) // 2]:.0f} (median of {a.steps} steps, "
          f"{a.batch_size} x {a.seq_len} x {a.grad_accum}, {name}, torch {torch.__version__}, "
          f"compile {'on' if compiled else 'off'}, SDPA {'on' if sdpa else 'off'}, fused AdamW "
          f"{'on' if fused else 'off'}, bf16 autocast {'on' if bf16 else 'off'})")


if __name__ == "__main__":
    main()
