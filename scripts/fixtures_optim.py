"""Optimizer fixtures for tests/engine/test_optim_extra.cpp (called by scripts/make_fixtures.py).

optim_adafactor.safetensors: transformers.optimization.Adafactor itself (PyTorch), 5 steps on three
  tensors: a (7, 13) matrix and a (3, 5, 6) tensor (factored; weight decay in their group) and an (11,)
  vector (full second moment, no decay), each step with fresh gradients.
    p.<i>              initial parameter i;  g.<s>.<i>  its gradient at step s (0-based)
    <mode>.p.<i>       parameter i after the 5 steps
    <mode>.<state>.<i> transformers' state after them: exp_avg_sq_row / exp_avg_sq_col, exp_avg_sq, exp_avg
  modes (metadata "<mode>" holds the settings as JSON):
    external   lr 1e-2, relative_step off, scale_parameter off, no beta1, weight decay 0.1
               (what Hugging Face's single-GPU guide recommends)
    relative   lr None, relative_step on, scale_parameter on, beta1 0.9, weight decay 0.01
    warmup     relative_step on with warmup_init, scale_parameter on, no beta1, no decay
optim_adamw8bit.safetensors: 8-bit AdamW with block-wise quantization written in NumPy from the paper
  (Dettmers et al. 2022) and bitsandbytes' documented method, not from the engine: the dynamic maps
  from their definition (create_dynamic_map: 7 exponent bits, signed and unsigned), blocks of 256,
  one absmax per block, nearest-entry rounding (ties to the lower entry), tensors under 4096 elements
  in fp32. Every operation in float32 in the engine's order (NumPy float32 ops round like C++ floats).
    map.signed, map.unsigned (256) f32;  p.<i>, g.<s>.<i>;  out.p.<i> after 3 steps, for a (5000,)
    vector, a (64, 64) matrix with weight decay 0.1, and (300,) and (4095,) vectors kept in fp32
    out.exp_avg.<i>, out.exp_avg_sq.<i>  u8 codes (n) or f32 moments (small tensors)
    out.exp_avg_absmax.<i>, out.exp_avg_sq_absmax.<i>  f32 (blocks)
    rt.x (1000) f32 in [-1, 1], rt.signed / rt.unsigned: the codes of x and |x| (round-trip check)
Rerun: /usr/bin/python3 scripts/make_fixtures.py adafactor adamw8bit
(needs torch and transformers with its Adafactor: pip install "transformers==4.36.2" for Debian's torch 1.13)
"""
import json

import numpy as np
import torch

STEPS = 5
STEPS_8BIT = 3


def adafactor_fixture(write, out_dir):
    from transformers.optimization import Adafactor

    torch.manual_seed(26)
    shapes = [(7, 13), (3, 5, 6), (11,)]
    init = [torch.randn(s) * 0.5 for s in shapes]
    grads = [[torch.randn(s) * (0.1 + 0.3 * i) for i, s in enumerate(shapes)] for _ in range(STEPS)]
    tensors = [(f"p.{i}", p) for i, p in enumerate(init)]
    tensors += [(f"g.{s}.{i}", g) for s, gs in enumerate(grads) for i, g in enumerate(gs)]
    modes = {
        "external": dict(lr=1e-2, relative_step=False, scale_parameter=False, warmup_init=False, beta1=None,
                         weight_decay=0.1),
        "relative": dict(lr=None, relative_step=True, scale_parameter=True, warmup_init=False, beta1=0.9,
                         weight_decay=0.01),
        "warmup": dict(lr=None, relative_step=True, scale_parameter=True, warmup_init=True, beta1=None,
                       weight_decay=0.0),
    }
    meta = {}
    for mode, kw in modes.items():
        params = [p.clone().requires_grad_(True) for p in init]
        wd = kw.pop("weight_decay")
        opt = Adafactor([{"params": params[:2], "weight_decay": wd}, {"params": params[2:], "weight_decay": 0.0}],
                        **kw)
        kw["weight_decay"] = wd
        meta[mode] = json.dumps(kw)
        for s in range(STEPS):
            for p, g in zip(params, grads[s]):
                p.grad = g.clone()
            opt.step()
        for i, p in enumerate(params):
            tensors.append((f"{mode}.p.{i}", p.detach()))
            for k, v in opt.state[p].items():
                if torch.is_tensor(v) and v.dim() > 0:
                    tensors.append((f"{mode}.{k}.{i}", v))
    return write(out_dir + "/optim_adafactor.safetensors", tensors, meta)


def dynamic_map(signed):
    data = []
    for i in range(7):
        k = 2 ** i + 1 if signed else 2 ** (i + 1) + 1
        b = np.linspace(0.1, 1.0, k)
        means = (b[:-1] + b[1:]) / 2.0
        data += list(10.0 ** (i - 6) * means)
        if signed:
            data += list(-(10.0 ** (i - 6)) * means)
    data += [0.0, 1.0]
    assert len(data) == 256
    return np.sort(np.array(data, dtype=np.float64).astype(np.float32))


def nearest(table, x):
    lo = np.searchsorted(table, x, side="left")  # first entry >= x
    lo_c = np.clip(lo, 1, 255)
    below, above = table[lo_c - 1], table[lo_c]
    pick = np.where(x - below <= above - x, lo_c - 1, lo_c)
    return np.where(lo == 0, 0, np.where(lo == 256, 255, pick)).astype(np.uint8)


def adamw8bit_fixture(write, out_dir):
    f32 = np.float32
    rng = np.random.default_rng(8)
    smap, umap = dynamic_map(True), dynamic_map(False)
    shapes = [(5000,), (64, 64), (300,), (4095,)]  # odd blocks; 4096 is quantized, 4095 is not
    decay_of = [0.0, 0.1, 0.0, 0.0]
    lr, b1, b2, eps = 1e-2, f32(0.9), f32(0.95), f32(1e-8)
    init = [(rng.standard_normal(s) * 0.5).astype(f32) for s in shapes]
    grads = [[(rng.standard_normal(s) * (0.05 + 0.2 * i)).astype(f32) for i, s in enumerate(shapes)]
             for _ in range(STEPS_8BIT)]
    tensors = [("map.signed", smap), ("map.unsigned", umap)]
    tensors += [(f"p.{i}", p) for i, p in enumerate(init)]
    tensors += [(f"g.{s}.{i}", g) for s, gs in enumerate(grads) for i, g in enumerate(gs)]
    for i, shape in enumerate(shapes):
        p = init[i].reshape(-1).copy()
        n = p.size
        quant = n >= 4096
        blocks = (n + 255) // 256
        m8, v8 = np.zeros(n, np.uint8), np.zeros(n, np.uint8)
        am, av = np.zeros(blocks, f32), np.zeros(blocks, f32)
        m, v = np.zeros(n, f32), np.zeros(n, f32)
        for s in range(STEPS_8BIT):
            t = s + 1
            decay = f32(1.0 - lr * decay_of[i])
            step_size = f32(lr / (1.0 - 0.9 ** t))
            sqrt_bc2 = f32(np.sqrt(1.0 - 0.95 ** t))
            g = grads[s][i].reshape(-1)
            if quant:
                m = smap[m8] * np.repeat(am, 256)[:n]
                v = umap[v8] * np.repeat(av, 256)[:n]
            m = b1 * m + (f32(1) - b1) * g
            v = b2 * v + (f32(1) - b2) * g * g
            p = p * decay - step_size * m / (np.sqrt(v) / sqrt_bc2 + eps)
            if quant:
                pad = blocks * 256 - n
                am = np.abs(np.concatenate([m, np.zeros(pad, f32)])).reshape(blocks, 256).max(axis=1)
                av = np.concatenate([v, np.zeros(pad, f32)]).reshape(blocks, 256).max(axis=1)
                ram, rav = np.repeat(am, 256)[:n], np.repeat(av, 256)[:n]
                with np.errstate(invalid="ignore", divide="ignore"):
                    m8 = nearest(smap, np.where(ram > 0, m / np.where(ram > 0, ram, 1), f32(0)).astype(f32))
                    v8 = nearest(umap, np.where(rav > 0, v / np.where(rav > 0, rav, 1), f32(0)).astype(f32))
        tensors.append((f"out.p.{i}", p.reshape(shape)))
        if quant:
            tensors += [(f"out.exp_avg.{i}", m8), (f"out.exp_avg_sq.{i}", v8), (f"out.exp_avg_absmax.{i}", am),
                        (f"out.exp_avg_sq_absmax.{i}", av)]
        else:
            tensors += [(f"out.exp_avg.{i}", m.reshape(shape)), (f"out.exp_avg_sq.{i}", v.reshape(shape))]
    x = rng.uniform(-1, 1, 1000).astype(f32)
    tensors += [("rt.x", x), ("rt.signed", nearest(smap, x)), ("rt.unsigned", nearest(umap, np.abs(x)))]
    meta = {"settings": json.dumps(dict(lr=lr, betas=[0.9, 0.95], eps=1e-8, weight_decay=decay_of, steps=STEPS_8BIT))}
    return write(out_dir + "/optim_adamw8bit.safetensors",
                 [(k, torch.from_numpy(np.ascontiguousarray(v))) for k, v in tensors], meta)
