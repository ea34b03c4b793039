#!/usr/bin/env bash
# The GPT-2 124M training step (micro-batch 8 x 1024, O3, grad_accum 1)
# modelled on a GPU, without one: train runs one step on the emulator in
# count-only mode (kernels checked and counted, not run; ENGINE_EMU_COUNT_ONLY)
# with --kernel_profile, and the step model (engine/gpu_model.cpp) times
# every call from its bytes and FLOPs. Prints the profile table, then one
# line per attention: launches, GB, GFLOP, modelled ms, and for the h100
# model the step the H100 measured on 2026-11-26, before the changes of
# docs/gpu.md's "Removing the waste" (the model's check against that step is
# a unit test on its recorded kernels).
# Takes about a minute (the 124M model's initialisation on the host).
# Usage: bash bench/gpu_step_model.sh [BUILD_DIR] [h100|h200|a100] [extra train options...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
gpu=${2:-h100}
shift $(($# < 2 ? $# : 2))
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$build/models/prepare_text" "$work/data" 0.1 /usr/share/games/fortunes >/dev/null
ENGINE_EMU_COUNT_ONLY=1 "$build/models/train" --config "$root/configs/gpt2-124M.json" \
  --train_bin "$work/data/train.bin" --val_bin "$work/data/val.bin" --device emu --precision O3 --batch_size 8 \
  --grad_accum 1 --steps 3 --warmup_steps 1 --val_every 0 --sample_every 0 --val_batches 1 --checkpoint_every 0 \
  --kernel_profile 2 --model_gpu "$gpu" --out_dir "$work/run" "$@" >"$work/log"
sed -n '/^kernel profile of step/,/^modelled step on/p' "$work/log"
# The micro-batch the summary names: 8 unless the extra options set another.
batch=8
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case ${args[i]} in
    --batch_size) batch=${args[i + 1]:-8} ;;
    --batch_size=*) batch=${args[i]#--batch_size=} ;;
  esac
done
python3 - "$work/run/kernel_profile.json" "$gpu" "$batch" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
rows = p["rows"]
launches = sum(r["launches"] for r in rows)
gb = sum(r["bytes"] for r in rows) / 1e9
gflop = sum(r["flops"] for r in rows) / 1e9
# The step the H100 SXM measured before the changes (docs/gpu.md): 8 x 1024 tokens at 195k and 68.9k tokens/s.
measured = {"model_ms_cudnn_attention": 8192 / 195e3 * 1e3, "model_ms": 8192 / 68.9e3 * 1e3}
# cuDNN runs each attention call as one launch (launches_cudnn_attention), ours as one to three.
for key, label, n in (("model_ms_cudnn_attention", "cuDNN attention", int(p["launches_cudnn_attention"])),
                      ("model_ms", "our attention", launches)):
    line = f"GPT-2 124M, B {sys.argv[3]} x 1024, O3, {label}: {n} launches, {gb:.2f} GB, {gflop:.0f} GFLOP, modelled {p[key]:.1f} ms on {sys.argv[2]}"
    if sys.argv[2] == "h100" and sys.argv[3] == "8":
        line += f" (the H100 measured {measured[key]:.1f} ms before the changes of docs/gpu.md)"
    print(line)
EOF
