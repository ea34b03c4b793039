#!/usr/bin/env bash
# The Llama 3.2 1B training step (configs/llama3.2-1b.json: 16 layers, 2048
# wide, 32 heads on 8 K/V heads, MLP 8192, tied head, B 4 x 2048, 64
# micro-batches: 524,288 tokens, O3, recompute) modelled on a GPU without one,
# as bench/gpu_step_model.sh models GPT-2's: train runs on the emulator in
# count-only mode (ENGINE_EMU_COUNT_ONLY) with --kernel_profile, and the
# step model (engine/gpu_model.cpp) times every call. The whole 1.2B model
# would take 20 GB of host memory to build, so the step is modelled at 2
# and 4 layers and extended linearly to 16 (the blocks are alike: each
# layer costs the difference / 2; the embedding, head and loss the rest).
# Prints the 2-layer profile table, then per attention: the step's ms,
# tokens/s and model FLOP/s. About two minutes.
# Usage: bash bench/llama_step_model.sh [BUILD_DIR] [h100|h200|a100]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
gpu=${2:-h100}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$build/models/prepare_text" "$work/data" 0.1 /usr/share/games/fortunes >/dev/null
for L in 2 4; do
  ENGINE_EMU_COUNT_ONLY=1 "$build/models/train" --config "$root/configs/llama3.2-1b.json" --n_layer $L \
    --train_bin "$work/data/train.bin" --val_bin "$work/data/val.bin" --tokenizer ids --device emu --precision O3 \
    --steps 3 --warmup_steps 1 --val_every 0 --sample_every 0 --val_batches 1 --checkpoint_every 0 \
    --kernel_profile 2 --model_gpu "$gpu" --out_dir "$work/L$L" >"$work/L$L.log"
done
sed -n '/^kernel profile of step/,/^modelled step on/p' "$work/L2.log"
python3 - "$work/L2/kernel_profile.json" "$work/L4/kernel_profile.json" "$gpu" <<'PY'
import json, sys
p2, p4 = (json.load(open(f)) for f in sys.argv[1:3])
tokens, layers = 64 * 4 * 2048, 16
# Model FLOPs per token, as models/llama counts them (llama_flops_per_token).
C, HS, NH, NKV, F, V, T = 2048, 64, 32, 8, 8192, 50257, 2048
per_token = 6 * (layers * (C * HS * (NH + 2 * NKV) + C * C + 3 * C * F) + V * C) + 12 * layers * C * T
for key, label in (("model_ms", "our grouped attention"), ("model_ms_cudnn_attention", "cuDNN's in its place")):
    layer = (p4[key] - p2[key]) / 2
    step = p2[key] - 2 * layer + layers * layer
    tps = tokens / step * 1e3
    print(f"Llama 3.2 1B, 524,288 tokens a step, O3, recompute, {label}: {step:.0f} ms modelled on {sys.argv[3]} "
          f"({layer:.1f} ms a layer, {p2[key] - 2 * layer:.1f} ms the rest): {tps / 1e3:.1f}k tokens/s, "
          f"{per_token * tps / 1e12:.0f} TFLOP/s of model FLOPs")
PY
