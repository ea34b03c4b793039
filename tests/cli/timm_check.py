"""timm loads a ViT checkpoint the engine wrote, as it is, and agrees with
the engine: builds timm's VisionTransformer from the checkpoint's
config.json, load_state_dict(strict=True) of its model.safetensors, and
computes the loss and accuracy of the first N test images (the engine's
validation set, in file order, normalised as io/image_dataset does:
pixels / 255, then (v - mean) / std with the `images` attributes). They
must equal the engine's last val_loss and val_accuracy in metrics.jsonl.

Usage: timm_check.py OUT_DIR TEST_H5 N
Exit 0 with "ok: ..."; 1 and what differs; 77 when torch or timm is missing.
"""
import json
import sys

try:
    import h5py
    import numpy as np
    import safetensors.torch
    import timm
    import timm.layers
    import torch
    import torch.nn.functional as F
    from timm.models.vision_transformer import VisionTransformer
except ImportError as e:
    print(f"skipped: {e} (scripts/setup.sh installs torch; scripts/fetch_pydeps.sh timm)")
    sys.exit(77)


def main():
    out, test_h5, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    cfg = json.load(open(f"{out}/checkpoint/config.json"))
    model = VisionTransformer(img_size=cfg["img_size"], patch_size=cfg["patch_size"], in_chans=cfg["in_chans"],
                              num_classes=cfg["num_classes"], embed_dim=cfg["embed_dim"], depth=cfg["depth"],
                              num_heads=cfg["num_heads"], mlp_ratio=cfg["mlp_ratio"], global_pool=cfg["global_pool"],
                              class_token=cfg["class_token"], fc_norm=cfg["fc_norm"],
                              act_layer=timm.layers.get_act_layer(cfg["act_layer"]))
    model.load_state_dict(safetensors.torch.load_file(f"{out}/checkpoint/model.safetensors"), strict=True)
    model.eval()
    with h5py.File(test_h5) as f:
        images, labels = f["images"], f["labels"]
        x = images[:n].astype(np.float64) / 255.0
        x = (x - images.attrs.get("mean", 0.0)) / images.attrs.get("std", 1.0)
        y = torch.tensor(labels[:n].astype(np.int64))
    x = torch.tensor(x, dtype=torch.float32).reshape(n, cfg["in_chans"], *cfg["img_size"])
    with torch.no_grad():
        logits = model(x)
    loss = F.cross_entropy(logits, y).item()
    acc = (logits.argmax(1) == y).double().mean().item()
    val = [json.loads(line) for line in open(f"{out}/metrics.jsonl") if "val_loss" in line][-1]
    print(f"timm {timm.__version__}: loss {loss:.6f} accuracy {acc:.4f} on {n} images; "
          f"the engine's {val['val_loss']:.6f} {val['val_accuracy']:.4f}")
    # float32 both ways, different summation orders: 1e-5 relative is ~100 ulps of the loss.
    if abs(loss - val["val_loss"]) > 1e-5 * abs(val["val_loss"]) or abs(acc - val["val_accuracy"]) > 1e-9:
        print("FAIL: timm's loss or accuracy differs from the engine's")
        sys.exit(1)
    print("ok: timm's strict load of the checkpoint gives the engine's validation loss and accuracy")


if __name__ == "__main__":
    main()
