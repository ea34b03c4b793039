"""GPT-2 reference fixtures for tests/models/test_gpt2_parity.cpp (called by scripts/make_fixtures.py).

Hugging Face `transformers` is not installed, so GPT2LMHeadModel's math is written out in plain torch
(same order of operations as modeling_gpt2.py): pre-LN blocks, LayerNorm eps 1e-5, Conv1D (x @ W + b with
W stored (in, out)), c_attn split into q, k, v along the last dim in that order, heads as view(B, T, NH, HS),
causal softmax of q k^T / sqrt(HS), GELU tanh approximation ("gelu_new"), MLP of 4C, final ln_f, and an
lm_head tied to wte. Parameters use HF's names and layouts ("h.0.attn.c_attn.weight" is (C, 3C)).

gpt2_tiny.safetensors (tiny config, odd sizes on purpose so a transposed or mis-split matrix cannot
have the right shape by accident; std-0.2 weights, non-trivial layernorm gains/biases and biases):
  <HF name>          every weight, f32, HF layout (so the file also loads with load_gpt2_weights)
  ids, targets       (B, T) i32; targets are ids shifted by one, as in language modelling
  logits             (B*T, V) f32 forward output;  loss  () f32 mean cross-entropy
  grad.<HF name>     gradient of loss w.r.t. every weight, HF layout (Conv1D grads are (in, out))
  adamw.losses       (4,) f64: loss before AdamW steps 1, 2, 3 and after step 3 (same batch each step)
  adamw.norms        (3,) f64: the norms clip_grad_norm_(1.0) returned before each step
  metadata: vocab_size, block_size, n_layer, n_head, n_embd, and the AdamW settings as text.
hf_style.safetensors: the same weights in the layout GPT2LMHeadModel.state_dict() has: "transformer."
  on every name, an untied copy of lm_head.weight, and the causal-mask buffers transformer.h.<i>.attn.bias
  (1, 1, P, P) (HF's are bool; F32 here, the engine's reader has no BOOL), metadata {"format": "pt"}.
  Written by the `safetensors` package's save_file when it is importable (so the engine is tested on a
  file Python's safetensors wrote), else by make_fixtures.py's hand-written writer; the run prints which.
gpt2_greedy.safetensors: greedy decoding from the same weights (as GPT2LMHeadModel.generate with
  do_sample=False, the context cropped to the last block_size tokens as nanoGPT's generate does once
  it is longer): prompt (5,) i32, tokens (64,) i32 the continuation, margin () f64 the smallest gap
  between the best and second-best logit over the 64 steps (so an engine in float32 picks the same).

The reference runs in float64 from the float32 weights and is rounded to float32 once (as the op
fixtures), so tolerances in the test budget only the engine's float32 error.
"""
import math
import os

import torch
import torch.nn.functional as F

CFG = {"vocab_size": 37, "block_size": 16, "n_layer": 2, "n_head": 2, "n_embd": 12}
B, T = 2, 7
SEED = 20
ADAMW = {"lr": 1e-2, "betas": (0.9, 0.95), "eps": 1e-8, "weight_decay": 0.1, "max_norm": 1.0, "steps": 3}


def init_weights(cfg=CFG, std=0.2):
    """HF state-dict order and layouts. LayerNorm gains are 1 + N(0, std) so a swapped gain/bias shows."""
    torch.manual_seed(SEED)
    V, P, C = cfg["vocab_size"], cfg["block_size"], cfg["n_embd"]

    def rn(*shape, shift=0.0):
        return torch.randn(shape, dtype=torch.float32) * std + shift

    w = {"wte.weight": rn(V, C), "wpe.weight": rn(P, C)}
    for i in range(cfg["n_layer"]):
        p = f"h.{i}."
        w[p + "ln_1.weight"], w[p + "ln_1.bias"] = rn(C, shift=1.0), rn(C)
        w[p + "attn.c_attn.weight"], w[p + "attn.c_attn.bias"] = rn(C, 3 * C), rn(3 * C)
        w[p + "attn.c_proj.weight"], w[p + "attn.c_proj.bias"] = rn(C, C), rn(C)
        w[p + "ln_2.weight"], w[p + "ln_2.bias"] = rn(C, shift=1.0), rn(C)
        w[p + "mlp.c_fc.weight"], w[p + "mlp.c_fc.bias"] = rn(C, 4 * C), rn(4 * C)
        w[p + "mlp.c_proj.weight"], w[p + "mlp.c_proj.bias"] = rn(4 * C, C), rn(C)
    w["ln_f.weight"], w["ln_f.bias"] = rn(C, shift=1.0), rn(C)
    return w


def batch(cfg=CFG):
    """Token ids and next-token targets from one random sequence of T + 1 tokens per row."""
    torch.manual_seed(SEED + 1)
    seq = torch.randint(0, cfg["vocab_size"], (B, T + 1), dtype=torch.int32)
    return seq[:, :-1].contiguous(), seq[:, 1:].contiguous()


def conv1d(x, w, b):
    """HF's Conv1D: w is (in, out)."""
    return torch.addmm(b, x.reshape(-1, x.shape[-1]), w).view(*x.shape[:-1], w.shape[-1])


def gelu_new(x):
    """HF's NewGELUActivation (the tanh approximation)."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def gpt2_logits(w, ids, cfg=CFG):
    """GPT2LMHeadModel forward: ids (B, T) -> logits (B*T, V)."""
    Bn, Tn = ids.shape
    C, NH = cfg["n_embd"], cfg["n_head"]
    HS = C // NH
    ids = ids.long()
    x = w["wte.weight"][ids] + w["wpe.weight"][torch.arange(Tn)]
    causal = torch.tril(torch.ones(Tn, Tn, dtype=torch.bool))
    for i in range(cfg["n_layer"]):
        p = f"h.{i}."
        h = F.layer_norm(x, (C,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps=1e-5)
        q, k, v = conv1d(h, w[p + "attn.c_attn.weight"], w[p + "attn.c_attn.bias"]).split(C, dim=2)
        q, k, v = (t.view(Bn, Tn, NH, HS).transpose(1, 2) for t in (q, k, v))  # (B, NH, T, HS)
        att = (q @ k.transpose(-1, -2)) / math.sqrt(HS)
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(Bn, Tn, C)
        x = x + conv1d(y, w[p + "attn.c_proj.weight"], w[p + "attn.c_proj.bias"])
        h = F.layer_norm(x, (C,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps=1e-5)
        h = gelu_new(conv1d(h, w[p + "mlp.c_fc.weight"], w[p + "mlp.c_fc.bias"]))
        x = x + conv1d(h, w[p + "mlp.c_proj.weight"], w[p + "mlp.c_proj.bias"])
    x = F.layer_norm(x, (C,), w["ln_f.weight"], w["ln_f.bias"], eps=1e-5)
    return (x @ w["wte.weight"].t()).view(Bn * Tn, -1)  # lm_head tied to wte


def gpt2_loss(w, ids, targets):
    return F.cross_entropy(gpt2_logits(w, ids), targets.long().view(-1))


def f64_leaves(w32):
    return {n: t.double().requires_grad_(True) for n, t in w32.items()}


def adamw_run(w32, ids, targets):
    """torch.optim.AdamW with GPT-2's groups (decay on 2-D+ tensors only), clip_grad_norm_ before each step."""
    w = f64_leaves(w32)
    params = list(w.values())
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": ADAMW["weight_decay"]},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=ADAMW["lr"], betas=ADAMW["betas"], eps=ADAMW["eps"])
    losses, norms = [], []
    for _ in range(ADAMW["steps"]):
        opt.zero_grad(set_to_none=True)
        loss = gpt2_loss(w, ids, targets)
        losses.append(loss.item())
        loss.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(params, max_norm=ADAMW["max_norm"])))
        opt.step()
    with torch.no_grad():
        losses.append(gpt2_loss(w, ids, targets).item())
    return losses, norms


def gpt2_tiny_fixture(out_dir, write_safetensors):
    w32 = init_weights()
    ids, targets = batch()
    w = f64_leaves(w32)
    logits = gpt2_logits(w, ids)
    loss = F.cross_entropy(logits, targets.long().view(-1))
    loss.backward()
    losses, norms = adamw_run(w32, ids, targets)
    assert abs(losses[0] - loss.item()) < 1e-12
    # The test is only meaningful if clipping actually scales the first step and the loss moves.
    assert norms[0] > ADAMW["max_norm"], norms
    tensors = list(w32.items())
    tensors += [("ids", ids), ("targets", targets), ("logits", logits.detach().float()),
                ("loss", loss.detach().float())]
    tensors += [("grad." + n, p.grad.float()) for n, p in w.items()]
    tensors += [("adamw.losses", torch.tensor(losses, dtype=torch.float64)),
                ("adamw.norms", torch.tensor(norms, dtype=torch.float64))]
    meta = {k: str(v) for k, v in CFG.items()}
    meta["adamw"] = ("lr 1e-2, betas (0.9, 0.95), eps 1e-8, weight_decay 0.1 on 2-D+ tensors and 0 on vectors, "
                     "clip_grad_norm_(1.0) before each of 3 steps on the same batch")
    print(f"  gpt2_tiny: loss {loss.item():.6f}, AdamW losses {[round(x, 6) for x in losses]}, "
          f"norms {[round(x, 6) for x in norms]}")
    return write_safetensors(os.path.join(out_dir, "gpt2_tiny.safetensors"), tensors, meta)


GREEDY_PROMPT = [3, 14, 15, 9, 26]


def gpt2_greedy_fixture(out_dir, write_safetensors):
    w = {n: t.double() for n, t in init_weights().items()}
    toks, margins = list(GREEDY_PROMPT), []
    with torch.no_grad():
        for _ in range(64):
            window = torch.tensor([toks[-CFG["block_size"]:]], dtype=torch.int32)
            last = gpt2_logits(w, window)[-1]
            top2 = torch.topk(last, 2).values
            margins.append(float(top2[0] - top2[1]))
            toks.append(int(last.argmax()))
    assert min(margins) > 1e-4, min(margins)
    tensors = [("prompt", torch.tensor(GREEDY_PROMPT, dtype=torch.int32)),
               ("tokens", torch.tensor(toks[len(GREEDY_PROMPT):], dtype=torch.int32)),
               ("margin", torch.tensor(min(margins), dtype=torch.float64))]
    print(f"  gpt2_greedy: {toks[len(GREEDY_PROMPT):][:12]}..., smallest top-2 margin {min(margins):.4g}")
    return write_safetensors(os.path.join(out_dir, "gpt2_greedy.safetensors"), tensors, {"weights": "gpt2_tiny"})


def hf_style_fixture(out_dir, write_safetensors):
    w32 = init_weights()
    P = CFG["block_size"]
    sd = {}
    for i in range(CFG["n_layer"]):  # HF registers the mask buffer first in each attention module
        sd[f"transformer.h.{i}.attn.bias"] = torch.tril(torch.ones(P, P)).view(1, 1, P, P)
    sd.update({"transformer." + n: t for n, t in w32.items()})
    sd["lm_head.weight"] = w32["wte.weight"].clone()  # save_file refuses tensors that share memory
    path = os.path.join(out_dir, "hf_style.safetensors")
    try:
        from safetensors.torch import save_file
    except ImportError:
        print("  hf_style: safetensors package not importable; using the hand-written writer")
        return write_safetensors(path, list(sd.items()), {"format": "pt"})
    print("  hf_style: written by safetensors.torch.save_file")
    save_file(sd, path, metadata={"format": "pt"})
    os.chmod(path, 0o644)  # save_file creates it 0600; keep it like the other fixtures
    return os.path.getsize(path)
