"""Llama reference fixtures for tests/models/test_llama_parity.cpp, made by Hugging Face's own
LlamaForCausalLM (transformers, pinned in .deps/hf) on PyTorch 2.x (scripts/fetch_torch2.sh):

    scripts/fetch_torch2.sh && PYTHONPATH=.deps/hf .deps/torch2/bin/python scripts/fixtures_llama.py

Two small random models, each a directory that save_pretrained wrote (model.safetensors and
config.json, float32), sizes odd on purpose so a mis-split q | k | v or gate | up cannot have
the right shape by accident:
  tests/fixtures/llama/tiny/     untied lm_head, 4 query heads on 2 K/V heads, rope_theta 10000
  tests/fixtures/llama/llama3/   tied embeddings, multi-query (4 heads on 1), rope_theta 500000 with
                                 Llama 3's rope_scaling (original context 16: head size 8's
                                 frequencies fall in the smoothed and the divided bands; the kept
                                 band is tests/ops/test_llama_ops.cpp's)
and in each, reference.safetensors:
  ids, targets     (B, T) i32, targets the ids shifted by one
  logits           (B*T, V) f32, loss () f32: LlamaForCausalLM in float64 from the float32 weights
                   (model.double(); its rotary angles stay fp32, as transformers computes them)
  grad.<HF name>   d loss / d every weight (float64, rounded once)
  adamw.losses     (6,) f64: the loss before AdamW steps 1..5 and after step 5 (same batch)
  adamw.norms      (5,) f64: clip_grad_norm_(1.0) before each step
AdamW: lr 1e-2, betas (0.9, 0.95), eps 1e-8, weight decay 0.1 on matrices only (GPT-2's groups).
"""
import os

import torch
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "llama")
B, T = 2, 24
ADAMW = {"lr": 1e-2, "betas": (0.9, 0.95), "eps": 1e-8, "weight_decay": 0.1, "max_norm": 1.0, "steps": 5}

CASES = {
    "tiny": dict(vocab_size=61, hidden_size=24, intermediate_size=40, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=32, rms_norm_eps=1e-5, rope_theta=10000.0,
                 tie_word_embeddings=False),
    "llama3": dict(vocab_size=53, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=1, max_position_embeddings=32, rms_norm_eps=1e-6, rope_theta=500000.0,
                   rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                 "high_freq_factor": 4.0, "original_max_position_embeddings": 16},
                   tie_word_embeddings=True),
}


def build(name, seed):
    torch.manual_seed(seed)
    cfg = LlamaConfig(**CASES[name], initializer_range=0.2, attn_implementation="eager")
    model = LlamaForCausalLM(cfg).float()
    with torch.no_grad():  # norms away from one, so a missing weight shows
        for n, p in model.named_parameters():
            if n.endswith("norm.weight"):
                p.copy_(1.0 + 0.3 * torch.randn_like(p))
    return model


def loss_of(model, ids, targets):
    logits = model(input_ids=ids.long()).logits
    return logits, torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.long().view(-1))


def fixture(name, seed):
    out = os.path.join(OUT, name)
    model = build(name, seed)
    model.save_pretrained(out, safe_serialization=True)
    for extra in ("generation_config.json",):
        if os.path.exists(os.path.join(out, extra)):
            os.remove(os.path.join(out, extra))
    torch.manual_seed(seed + 1)
    seq = torch.randint(0, CASES[name]["vocab_size"], (B, T + 1), dtype=torch.int32)
    ids, targets = seq[:, :-1].contiguous(), seq[:, 1:].contiguous()
    ref = {"ids": ids, "targets": targets}
    m64 = build(name, seed).double()  # the same weights, float64
    logits, loss = loss_of(m64, ids, targets)
    loss.backward()
    ref["logits"] = logits.reshape(B * T, -1).float().detach()
    ref["loss"] = loss.float().detach().reshape(())
    for n, p in m64.named_parameters():
        if p.grad is not None:
            ref["grad." + n] = p.grad.float().contiguous()
    m64.zero_grad(set_to_none=True)
    params = [p for p in m64.parameters()]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": ADAMW["weight_decay"]},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=ADAMW["lr"], betas=ADAMW["betas"], eps=ADAMW["eps"])
    losses, norms = [], []
    for _ in range(ADAMW["steps"]):
        opt.zero_grad(set_to_none=True)
        _, l = loss_of(m64, ids, targets)
        losses.append(l.item())
        l.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(params, max_norm=ADAMW["max_norm"])))
        opt.step()
    with torch.no_grad():
        losses.append(loss_of(m64, ids, targets)[1].item())
    ref["adamw.losses"] = torch.tensor(losses, dtype=torch.float64)
    ref["adamw.norms"] = torch.tensor(norms, dtype=torch.float64)
    save_file(ref, os.path.join(out, "reference.safetensors"),
              metadata={"torch": torch.__version__, "transformers": __import__("transformers").__version__})
    print(f"{out}: loss {loss.item():.6f}, {len(ref)} tensors")


if __name__ == "__main__":
    fixture("tiny", 41)
    fixture("llama3", 43)
