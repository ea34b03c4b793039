"""Vision Transformer reference fixture for tests/models/test_vit_parity.cpp (called by scripts/make_fixtures.py).

timm is not installed, so the ViT's math is written out in plain torch, step for step as models/vit/vit.cpp
computes it:
  patchify      images (B, C, H, W) -> (B, h, w, C, p, p) -> (B, N, C*p*p): patches in row-major order, each
                flattened (channel, row, column)
  patch embed   x @ W^T + b with W (embed, C*p*p). This is timm's PatchEmbed Conv2d(C, embed, p, stride p) with
                its weight (embed, C, p, p) reshaped to (embed, C*p*p); patch_embed() checks that against F.conv2d.
  + pos_embed.weight (N, embed)
  depth pre-LN blocks, LayerNorm eps 1e-6:
                x += proj(attn(qkv(norm1(x)))), qkv split into q, k, v along the last dim in that order, heads as
                view(B, N, NH, HS), NON-causal softmax(q k^T / sqrt(HS)) v;
                x += fc2(gelu_tanh(fc1(norm2(x))))  (GELU's tanh approximation, the engine's gelu)
  final norm, then one of two heads:
  classify      the tokens' mean, Linear -> logits (B, classes); loss = mean cross-entropy against labels (B)
  dense         Linear per token -> (B, N, p*p*Co), each token's values in (p1, p2, c) order, reshaped to
                (B, h, w, p, p, Co), permuted to (B, Co, h, p, w, p), reshaped to (B, Co, H, W) (the NERSC
                tutorial's head); loss = MSE against targets (B, Co, H, W)

vit_tiny.safetensors holds both heads, every tensor under the prefix "classify." or "dense.":
  <engine name>      every weight, f32, in the engine's names and layouts (ViT::named_parameters():
                     patch_embed.proj.weight, pos_embed.weight, blocks.0.norm1.weight, blocks.0.attn.qkv.weight,
                     ..., norm.weight, head.weight, head.bias)
  images             (B, C, H, W) f32 input
  targets            classify: labels (B) i32; dense: (B, Co, H, W) f32
  out                forward output: logits (B, classes) or the field (B, Co, H, W)
  loss               () f32
  grad.<name>        gradient of loss w.r.t. every weight
  metadata: "heads" = "classify,dense"; "<head>.<field>" for the engine's ViTConfig fields (in_channels, img_h,
  img_w, patch, embed, depth, heads, mlp_ratio, classes / out_channels) and "<head>.batch".
Sizes are small and odd on purpose (h != w, C*p*p != embed, head size != patch) so that a transposed matrix,
a swapped h/w or a mis-split qkv cannot have the right shape by accident; std-0.2 weights, LayerNorm gains
1 + N(0, 0.2), non-zero biases. The reference runs in float64 from the float32 weights and is rounded to
float32 once, so the test's tolerances budget only the engine's float32 error.
"""
import math
import os

import torch
import torch.nn.functional as F

CONFIGS = {
    "classify": {"in_channels": 2, "img_h": 12, "img_w": 8, "patch": 4, "embed": 12, "depth": 2, "heads": 3,
                 "mlp_ratio": 4, "classes": 5, "batch": 3},
    "dense": {"in_channels": 3, "img_h": 8, "img_w": 12, "patch": 4, "embed": 12, "depth": 2, "heads": 2,
              "mlp_ratio": 4, "out_channels": 2, "batch": 2},
}
SEED = 30
LN_EPS = 1e-6


def tokens(cfg):
    return (cfg["img_h"] // cfg["patch"]) * (cfg["img_w"] // cfg["patch"])


def head_outputs(kind, cfg):
    return cfg["classes"] if kind == "classify" else cfg["patch"] ** 2 * cfg["out_channels"]


def init_weights(kind, cfg, std=0.2):
    """Engine names, in ViT::named_parameters() order. LayerNorm gains are 1 + N(0, std) so a swapped
    gain/bias shows; torch.nn.Linear layout (out, in)."""
    C, N, E, R = cfg["in_channels"], tokens(cfg), cfg["embed"], cfg["mlp_ratio"]
    pp = cfg["patch"] ** 2

    def rn(*shape, shift=0.0):
        return torch.randn(shape, dtype=torch.float32) * std + shift

    w = {"patch_embed.proj.weight": rn(E, C * pp), "patch_embed.proj.bias": rn(E), "pos_embed.weight": rn(N, E)}
    for i in range(cfg["depth"]):
        p = f"blocks.{i}."
        w[p + "norm1.weight"], w[p + "norm1.bias"] = rn(E, shift=1.0), rn(E)
        w[p + "attn.qkv.weight"], w[p + "attn.qkv.bias"] = rn(3 * E, E), rn(3 * E)
        w[p + "attn.proj.weight"], w[p + "attn.proj.bias"] = rn(E, E), rn(E)
        w[p + "norm2.weight"], w[p + "norm2.bias"] = rn(E, shift=1.0), rn(E)
        w[p + "mlp.fc1.weight"], w[p + "mlp.fc1.bias"] = rn(R * E, E), rn(R * E)
        w[p + "mlp.fc2.weight"], w[p + "mlp.fc2.bias"] = rn(E, R * E), rn(E)
    w["norm.weight"], w["norm.bias"] = rn(E, shift=1.0), rn(E)
    K = head_outputs(kind, cfg)
    w["head.weight"], w["head.bias"] = rn(K, E), rn(K)
    return w


def batch(kind, cfg):
    """Images N(0, 1); classify: labels in [0, classes); dense: targets N(0, 1)."""
    B, C, H, W = cfg["batch"], cfg["in_channels"], cfg["img_h"], cfg["img_w"]
    images = torch.randn(B, C, H, W, dtype=torch.float32)
    if kind == "classify":
        return images, torch.randint(0, cfg["classes"], (B,), dtype=torch.int32)
    return images, torch.randn(B, cfg["out_channels"], H, W, dtype=torch.float32)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def linear(x, w, b):
    return x @ w.t() + b


def patchify(x, p):
    """(B, C, H, W) -> (B, h, w, C, p, p) -> (B, N, C*p*p)."""
    B, C, H, W = x.shape
    h, w = H // p, W // p
    return x.reshape(B, C, h, p, w, p).permute(0, 2, 4, 1, 3, 5).reshape(B, h * w, C * p * p)


def patch_embed(w, images, p):
    """The patch embedding as the engine's GEMM, checked against timm's Conv2d(kernel = stride = p) form."""
    x = linear(patchify(images, p), w["patch_embed.proj.weight"], w["patch_embed.proj.bias"])
    with torch.no_grad():
        E, C = x.shape[-1], images.shape[1]
        conv = F.conv2d(images, w["patch_embed.proj.weight"].reshape(E, C, p, p), w["patch_embed.proj.bias"],
                        stride=p)
        assert torch.allclose(conv.flatten(2).transpose(1, 2), x, rtol=0, atol=1e-12)
    return x


def unpatchify(t, p, Co, H, W):
    """(B, N, p*p*Co), each token's values in (p1, p2, c) order -> (B, h, w, p, p, Co) -> (B, Co, h, p, w, p)
    -> (B, Co, H, W)."""
    B, h, w = t.shape[0], H // p, W // p
    return t.reshape(B, h, w, p, p, Co).permute(0, 5, 1, 3, 2, 4).reshape(B, Co, H, W)


def vit_forward(kind, cfg, w, images):
    E, NH, p = cfg["embed"], cfg["heads"], cfg["patch"]
    HS = E // NH
    B = images.shape[0]
    N = tokens(cfg)
    x = patch_embed(w, images, p) + w["pos_embed.weight"]
    for i in range(cfg["depth"]):
        b = f"blocks.{i}."
        h = F.layer_norm(x, (E,), w[b + "norm1.weight"], w[b + "norm1.bias"], eps=LN_EPS)
        q, k, v = linear(h, w[b + "attn.qkv.weight"], w[b + "attn.qkv.bias"]).split(E, dim=-1)
        q, k, v = (t.reshape(B, N, NH, HS).transpose(1, 2) for t in (q, k, v))  # (B, NH, N, HS)
        att = ((q @ k.transpose(-1, -2)) / math.sqrt(HS)).softmax(dim=-1)  # no mask: every token sees every token
        y = (att @ v).transpose(1, 2).reshape(B, N, E)
        x = x + linear(y, w[b + "attn.proj.weight"], w[b + "attn.proj.bias"])
        h = F.layer_norm(x, (E,), w[b + "norm2.weight"], w[b + "norm2.bias"], eps=LN_EPS)
        h = gelu_tanh(linear(h, w[b + "mlp.fc1.weight"], w[b + "mlp.fc1.bias"]))
        x = x + linear(h, w[b + "mlp.fc2.weight"], w[b + "mlp.fc2.bias"])
    x = F.layer_norm(x, (E,), w["norm.weight"], w["norm.bias"], eps=LN_EPS)
    if kind == "classify":
        return linear(x.mean(dim=1), w["head.weight"], w["head.bias"])
    return unpatchify(linear(x, w["head.weight"], w["head.bias"]), p, cfg["out_channels"], cfg["img_h"],
                      cfg["img_w"])


def vit_loss(kind, out, targets):
    if kind == "classify":
        return F.cross_entropy(out, targets.long())
    return F.mse_loss(out, targets.double())


def vit_tiny_fixture(out_dir, write_safetensors):
    torch.manual_seed(SEED)
    tensors, meta = [], {"heads": ",".join(CONFIGS)}
    for kind, cfg in CONFIGS.items():
        w32 = init_weights(kind, cfg)
        images, targets = batch(kind, cfg)
        w = {n: t.double().requires_grad_(True) for n, t in w32.items()}
        out = vit_forward(kind, cfg, w, images.double())
        loss = vit_loss(kind, out, targets)
        loss.backward()
        pre = kind + "."
        tensors += [(pre + n, t) for n, t in w32.items()]
        tensors += [(pre + "images", images), (pre + "targets", targets), (pre + "out", out.detach().float()),
                    (pre + "loss", loss.detach().float())]
        tensors += [(pre + "grad." + n, p.grad.float()) for n, p in w.items()]
        meta.update({pre + k: str(v) for k, v in cfg.items()})
        print(f"  vit_tiny {kind}: out {tuple(out.shape)}, loss {loss.item():.6f}, {len(w)} parameters")
    return write_safetensors(os.path.join(out_dir, "vit_tiny.safetensors"), tensors, meta)
