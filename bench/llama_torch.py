"""The Llama training step (forward, backward, clip, AdamW) in PyTorch with
Hugging Face's LlamaForCausalLM (fp32, SDPA attention unless --attention eager), timed on the CPU
with a given thread count, for bench/bench_llama_cpu.sh to set beside the
engine's figure. Needs PyTorch 2 and transformers:
  PYTHONPATH=.deps/hf .deps/torch2/bin/python bench/llama_torch.py --help
Prints one line: "torch tokens/s: N (...)"."""
import argparse
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def main():
    p = argparse.ArgumentParser(description=__doc__)
    for k, d in [("vocab_size", 256), ("block_size", 128), ("n_layer", 4), ("n_head", 4), ("n_kv_head", 2),
                 ("n_embd", 128), ("ffn_hidden", 352), ("batch_size", 16), ("seq_len", 128), ("steps", 20),
                 ("warmup", 3), ("threads", 0)]:
        p.add_argument("--" + k, type=int, default=d)
    p.add_argument("--attention", default="sdpa", help="sdpa (transformers' default on PyTorch 2) or eager")
    a, _ = p.parse_known_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=a.vocab_size, hidden_size=a.n_embd, intermediate_size=a.ffn_hidden,
                      num_hidden_layers=a.n_layer, num_attention_heads=a.n_head, num_key_value_heads=a.n_kv_head,
                      max_position_embeddings=a.block_size, attn_implementation=a.attention, use_cache=False)
    m = LlamaForCausalLM(cfg).float()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    data = torch.randint(0, a.vocab_size, (a.steps + a.warmup, a.batch_size, a.seq_len + 1))
    times = []
    for s in range(a.steps + a.warmup):
        t0 = time.perf_counter()
        logits = m(input_ids=data[s, :, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, a.vocab_size), data[s, :, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        if s >= a.warmup:
            times.append(time.perf_counter() - t0)
    times.sort()
    print(f"torch tokens/s: {a.batch_size * a.seq_len / times[len(times) // 2]:.0f} "
          f"(median of {a.steps} steps, {torch.get_num_threads()} threads, torch {torch.__version__}, "
          f"transformers {__import__('transformers').__version__}, {a.attention} attention)")


if __name__ == "__main__":
    main()
