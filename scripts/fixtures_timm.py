#!/usr/bin/python3
"""Writes tests/fixtures/vit_timm/ with timm itself, for tests/models/test_vit_timm.cpp:
  config.json        the engine's checkpoint config.json for a small ViT classifier
                     (what models/vit/vit_io.cpp's vit_config_json writes, timm's argument names)
  model.safetensors  timm's VisionTransformer built from that config.json, its parameters drawn
                     at random (seed 0; norms and biases too, so every tensor matters), saved
                     from its state_dict() by the safetensors package: the names and shapes
                     timm's strict load wants
  io.safetensors     images (3, C, H, W) and timm's logits for them (computed in float64 from
                     the float32 weights, then rounded once)
The test loads model.safetensors into the engine's ViT (every tensor used, none left over),
compares its logits with timm's, and checks that the engine saves exactly timm's tensors.

Rerun (Debian's torch from scripts/setup.sh, timm and safetensors from scripts/fetch_pydeps.sh):
  PYTHONPATH=.deps/py /usr/bin/python3 scripts/fixtures_timm.py
"""
import json
import os

import safetensors.torch
import timm
import timm.layers
import torch
from timm.models.vision_transformer import VisionTransformer

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "vit_timm")

# The engine's config.json for ViTConfig{in_channels 2, img 8 x 12, patch 4, embed 16, depth 2,
# heads 2, mlp_ratio 4, classify, 5 classes}.
config = {"architecture": "vit", "img_size": [8, 12], "patch_size": 4, "in_chans": 2, "embed_dim": 16,
          "depth": 2, "num_heads": 2, "mlp_ratio": 4.0, "act_layer": "gelu_tanh", "head": "classify",
          "num_classes": 5, "global_pool": "avg", "class_token": False, "fc_norm": False}


def build(cfg):
    """timm's model from the config.json keys, as docs/data.md shows a user doing it."""
    return VisionTransformer(img_size=cfg["img_size"], patch_size=cfg["patch_size"], in_chans=cfg["in_chans"],
                             num_classes=cfg["num_classes"], embed_dim=cfg["embed_dim"], depth=cfg["depth"],
                             num_heads=cfg["num_heads"], mlp_ratio=cfg["mlp_ratio"], global_pool=cfg["global_pool"],
                             class_token=cfg["class_token"], fc_norm=cfg["fc_norm"],
                             act_layer=timm.layers.get_act_layer(cfg["act_layer"]))


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    model = build(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.randn(p.shape) * 0.3 + (1.0 if name.endswith("norm1.weight") or name.endswith("norm2.weight")
                                                 or name == "norm.weight" else 0.0))
    sd = {k: v.contiguous() for k, v in model.state_dict().items()}
    safetensors.torch.save_file(sd, os.path.join(OUT, "model.safetensors"))
    # A strict load of the file just written, as a user would: every key, every shape.
    check = build(config)
    check.load_state_dict(safetensors.torch.load_file(os.path.join(OUT, "model.safetensors")), strict=True)
    images = torch.randn(3, config["in_chans"], *config["img_size"])
    with torch.no_grad():
        logits = check.double().eval()(images.double()).float()
    safetensors.torch.save_file({"images": images, "logits": logits}, os.path.join(OUT, "io.safetensors"))
    with open(os.path.join(OUT, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    print(f"timm {timm.__version__}, torch {torch.__version__}: {len(sd)} tensors; logits {logits.tolist()}")


if __name__ == "__main__":
    main()
