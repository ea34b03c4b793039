#!/usr/bin/env bash
# --optimizer adamw, adamw8bit and adafactor side by side, one run: gpt2-tiny
# (configs/gpt2-tiny.json, 600 steps) and the Fashion-MNIST ViT
# (configs/vit-fmnist.json, 6000 steps), each optimizer with the config's lr,
# schedule and weight decay (Adafactor in the external-lr mode). Prints a
# table: final validation loss (and accuracy), its gap to AdamW, the mean step
# time of the second half, and the optimizer's state in bytes per parameter:
# all of it as the memory report measured it (metrics.jsonl's
# memory_per_rank), and that of the matrices the optimizer compresses (8-bit
# codes and scales; Adafactor's rows and columns) from the checkpoint's
# optimizer.safetensors; then draws docs/img/optimizers_{gpt2,vit}.png.
# SUMMARY_ONLY=1: the table and plots from an earlier run's files.
# Usage: bench/bench_optimizers.sh [THREADS] [OUT]  (a build in build/, or TRAIN=path/to/train;
# ~1 h on 1 thread)
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-$(nproc)}
out=${2:-out/bench_optimizers}
source scripts/cpu_env.sh
bash scripts/prepare_data.sh
[[ -f data/fashion-mnist/train.h5 ]] || ./build/models/prepare_fashion_mnist >/dev/null
train=${TRAIN:-./build/models/train}
export OMP_NUM_THREADS=$threads
opts=(adamw adamw8bit adafactor)
for o in "${opts[@]}"; do
  for m in gpt2-tiny vit-fmnist; do
    [[ ${SUMMARY_ONLY:-0} == 1 ]] && continue
    extra=(); [[ $m == gpt2-tiny ]] && extra=(--sample_every 0)
    "$train" --config "configs/$m.json" --optimizer "$o" --out_dir "$out/$m-$o" --overwrite "${extra[@]}" \
      >"$out.$m-$o.log" 2>&1 || { echo "bench: $m $o failed: $(tail -3 "$out.$m-$o.log")"; exit 1; }
  done
done
/usr/bin/python3 - "$out" "$threads" "${opts[@]}" <<'PY'
import json, math, struct, sys
out, threads, opts = sys.argv[1], sys.argv[2], sys.argv[3:]


def compressed(path):
    """Bytes per element of the state of the tensors stored compressed: 8-bit codes + scales, or factored."""
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    ent = {k: v for k, v in json.loads(b[8:8 + n]).items() if k != "__metadata__"}
    size = lambda v: v["data_offsets"][1] - v["data_offsets"][0]
    nbytes = elems = 0
    for k, v in ent.items():
        kind, _, i = k.rpartition(".")
        if kind == "exp_avg_sq_row":  # factored: (batch x) rows x cols elements
            col = ent[f"exp_avg_sq_col.{i}"]
            elems += math.prod(v["shape"]) * col["shape"][-1]
            nbytes += size(v) + size(col)
        elif kind == "exp_avg_absmax":  # quantized: both moments' codes and scales
            elems += math.prod(ent[f"exp_avg.{i}"]["shape"])
            nbytes += sum(size(ent[f"{m}.{i}"]) for m in ("exp_avg", "exp_avg_sq", "exp_avg_absmax", "exp_avg_sq_absmax"))
    return f"{nbytes / elems:.3f}" if elems else "-"


print(f"optimizers, {threads} thread(s) (OpenBLAS kernels as scripts/cpu_env.sh sets them)")
print(f"{'model':11s} {'optimizer':10s} {'val loss':>9s} {'vs adamw':>9s} {'accuracy':>9s} {'step ms':>8s} "
      f"{'state B/param':>14s} {'compressed':>11s}")
for m in ("gpt2-tiny", "vit-fmnist"):
    base = None
    for o in opts:
        lines = [json.loads(l) for l in open(f"{out}/{m}-{o}/metrics.jsonl")]
        val = [l for l in lines if "val_loss" in l][-1]
        steps = [l for l in lines if "loss" in l and "step" in l]
        mem = next(l["memory_per_rank"] for l in lines if "memory_per_rank" in l)
        rate_key = "tokens_per_s" if "tokens_per_s" in steps[-1] else "images_per_s"
        items = 16 * 128 if m == "gpt2-tiny" else 128  # tokens or images per step (the configs' global batch)
        half = steps[len(steps) // 2:]
        ms = 1000.0 * sum(items / s[rate_key] for s in half) / len(half)
        if base is None:
            base = val["val_loss"]
        acc = f"{100 * val['val_accuracy']:.2f}%" if "val_accuracy" in val else "-"
        gap = 100.0 * (val["val_loss"] - base) / base
        print(f"{m:11s} {o:10s} {val['val_loss']:9.4f} {gap:+8.2f}% {acc:>9s} {ms:8.1f} "
              f"{mem['optimizer_bytes'] / mem['parameters']:14.3f} "
              f"{compressed(f'{out}/{m}-{o}/checkpoint/optimizer.safetensors'):>11s}")
PY
for m in gpt2-tiny vit-fmnist; do
  /usr/bin/python3 scripts/plot.py metrics "$out/$m-adamw/metrics.jsonl" "$out/$m-adamw8bit/metrics.jsonl" \
    "$out/$m-adafactor/metrics.jsonl" --labels adamw,adamw8bit,adafactor -o "docs/img/optimizers_${m%%-*}.png"
done
