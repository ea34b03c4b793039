#!/usr/bin/python3
"""The same GPT-2 training step as models/gpt2 (pre-LN, tanh GELU, tied
lm_head, AdamW, clipping) in plain PyTorch, timed on the CPU with the same
thread count, for bench/bench_gpt2_cpu.sh to set beside our engine's figure.
Run with Debian's python3-torch: /usr/bin/python3 bench/gpt2_torch.py --help
Prints one line: "torch tokens/s: N"."""
import argparse
import time

import torch

from gpt2_torch_gpu import GPT  # the one model of both baselines (its attention spelled out here: sdpa False)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    for k, d in [("vocab_size", 256), ("block_size", 128), ("n_layer", 4), ("n_head", 4), ("n_embd", 128),
                 ("batch_size", 16), ("seq_len", 128), ("steps", 20), ("warmup", 3), ("threads", 0)]:
        p.add_argument("--" + k, type=int, default=d)
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    m = GPT(a.vocab_size, a.block_size, a.n_layer, a.n_head, a.n_embd, sdpa=False)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    data = torch.randint(0, a.vocab_size, (a.steps + a.warmup, a.batch_size, a.seq_len + 1))
    times = []
    for s in range(a.steps + a.warmup):
        t0 = time.perf_counter()
        loss = m(data[s, :, :-1], data[s, :, 1:], a.vocab_size)
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
