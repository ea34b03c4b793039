#!/usr/bin/env bash
# GPT-2 124M's micro-batch on an 80 GB GPU, chosen without one: for
# B = 8, 16, 32 and 64 sequences of 1024 tokens, train's memory plan (the
# planned peak: weights, gradients, AdamW state and B samples' activations,
# models/train/memory_plan.h) and the step model (engine/gpu_model.cpp, from
# count-only emu runs as bench/gpu_step_model.sh). A step of 524,288 tokens
# (GPT-2's 0.5M, llm.c's) is 512 / B micro-batches and one optimizer step:
# the micro-batch's time is a step at grad_accum 2 less one at grad_accum 1
# (so the later micro-batches' gradient adds count), the optimizer's the rest.
# The model times every GEMM at the one measured cuBLASLt rate whatever its
# size, so it sees what B changes in launches, optimizer and fixed costs per
# token, not the GEMMs' better efficiency at larger B: the GPU run owes that.
# Takes several minutes (eight count-only runs).
# Usage: bash bench/gpu_microbatch_model.sh [BUILD_DIR] [h100|h200|a100] [GPU_GB]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
gpu=${2:-h100}
gpu_gb=${3:-80}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$build/models/prepare_text" "$work/data" 0.1 /usr/share/games/fortunes >/dev/null
run() {  # B ACCUM: the profile's JSON and the log, in $work/B.ACCUM
  ENGINE_EMU_COUNT_ONLY=1 "$build/models/train" --config "$root/configs/gpt2-124M.json" \
    --train_bin "$work/data/train.bin" --val_bin "$work/data/val.bin" --device emu --precision O3 --batch_size "$1" \
    --grad_accum "$2" --steps 3 --warmup_steps 1 --val_every 0 --sample_every 0 --val_batches 1 \
    --checkpoint_every 0 --memory_limit_gb -1 --kernel_profile 2 --model_gpu "$gpu" --out_dir "$work/$1.$2/run" \
    >"$work/$1.$2.log"
}
for B in 8 16 32 64; do
  run "$B" 1
  run "$B" 2
done
python3 - "$work" "$gpu" "$gpu_gb" <<'PY'
import json, re, sys
work, gpu, gpu_gb = sys.argv[1], sys.argv[2], float(sys.argv[3])
tokens = 524288
print(f"GPT-2 124M, O3, cuDNN attention, modelled on {gpu}; a step of {tokens} tokens; {gpu_gb:.0f} GB less the plan's 6%")
print(f"{'B':>3} {'accum':>5} {'planned GB':>10} {'fits':>4} {'ms/micro':>9} {'ms/opt':>7} {'ms/step':>8} {'tokens/s':>9} {'launches/step':>13}")
for B in (8, 16, 32, 64):
    p1 = json.load(open(f"{work}/{B}.1/run/kernel_profile.json"))
    p2 = json.load(open(f"{work}/{B}.2/run/kernel_profile.json"))
    l1 = int(p1["launches_cudnn_attention"])  # cuDNN's attention: one launch a call
    l2 = int(p2["launches_cudnn_attention"])
    micro = p2["model_ms_cudnn_attention"] - p1["model_ms_cudnn_attention"]
    opt = p1["model_ms_cudnn_attention"] - micro
    accum = tokens // (B * 1024)
    step = accum * micro + opt
    log = open(f"{work}/{B}.1.log").read()
    planned = float(re.search(r"batch_size \d+ plans ([0-9.]+) GB", log).group(1))
    fits = planned * 1.06 <= gpu_gb
    launches = accum * (l2 - l1) + (2 * l1 - l2)
    print(f"{B:>3} {accum:>5} {planned:>10.1f} {'yes' if fits else 'no':>4} {micro:>9.2f} {opt:>7.2f} {step:>8.1f} "
          f"{tokens / step * 1e3:>9.0f} {launches:>13}")
PY
