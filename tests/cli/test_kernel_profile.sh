#!/usr/bin/env bash
# Black-box tests of train --kernel_profile (models/train/step_profile.h),
# one ctest entry per case (tests/CMakeLists.txt):
#   gpt2     GPT-2 (small shapes) on emu at O2 and O3 (the profiled step runs
#            eagerly, the capture after it) and O0 with grad_accum 2: the
#            table is printed, kernel_profile.json holds it, and its GEMM and
#            attention FLOPs and GELU bytes equal the figures computed from
#            the model's shape (kernel_profile_check.py); the run's losses
#            equal the same run without the profile, bit for bit.
#   vit      the ViT on emu: every GEMM row's FLOPs from its shape, the totals.
#   model    the GPT-2 124M step (B 8 x 1024, O3) on emu in count-only mode:
#            its FLOPs as the gpt2 case checks them, on the real shapes, and
#            its attention on the tensor-core kernels. (The
#            model's check against the H100's measured step is a unit test:
#            "gpu model: GPT-2 124M's recorded step ...", tests/engine.)
#   errors   a step outside the run, the cpu device, an unknown GPU: one line each.
# Usage: test_kernel_profile.sh BUILD_DIR CASE
set -euo pipefail
build=$1
case_name=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
train=$build/models/train
check=$root/tests/cli/kernel_profile_check.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$build/models/prepare_text" "$work/data" 0.1 /usr/share/games/fortunes >/dev/null
data=(--train_bin "$work/data/train.bin" --val_bin "$work/data/val.bin")
# L 2, C 32, V 256, B 2, T 32, 2 heads.
gpt2=(--vocab_size 256 --block_size 32 --n_layer 2 --n_head 2 --n_embd 32 --batch_size 2 --seq_len 32
      --warmup_steps 1 --val_every 0 --sample_every 0 --val_batches 1 --device emu "${data[@]}")
losses() { grep -o '"loss":[^,}]*' "$1/metrics.jsonl"; }

case $case_name in
  gpt2)
    for p in O2 O3 O0; do
      accum=1 elem=2
      [[ $p == O0 ]] && accum=2 elem=4
      "$train" "${gpt2[@]}" --precision $p --grad_accum $accum --steps 4 --out_dir "$work/ref$p" >/dev/null
      "$train" "${gpt2[@]}" --precision $p --grad_accum $accum --steps 4 --kernel_profile 2 \
        --out_dir "$work/prof$p" >"$work/log$p"
      out=$(cat "$work/log$p")
      [[ $out == *"kernel profile of step 2 on emu at $p"* ]] || fail "$p: no table header: $(head -c 2000 "$work/log$p")"
      [[ $out == *"modelled step on an H100 SXM"* ]] || fail "$p: no modelled step line"
      [[ $(losses "$work/ref$p") == "$(losses "$work/prof$p")" ]] || fail "$p: the profile changed the losses"
      python3 "$check" "$work/prof$p/kernel_profile.json" gpt2 2 32 256 2 32 2 $elem $accum ||
        fail "$p: $(cat "$work/prof$p/kernel_profile.json" | head -c 3000)"
    done
    grep -q "captured as a CUDA graph" "$work/logO3" || fail "O3: the step was never captured after the profile"
    ;;
  vit)
    # The weather ViT's shape on a small synthetic set (tests/cli/test_vit_cli.sh's tiny model).
    "$build/models/prepare_weather" --out "$work/wx" --height 16 --width 32 --steps 60 >/dev/null
    "$train" --model vit --dataset weather --train_data "$work/wx/train" --val_data "$work/wx/valid" \
      --stats "$work/wx/stats.h5" --patch 4 --n_layer 1 --n_head 2 --n_embd 16 --batch_size 2 --grad_accum 2 \
      --val_every 0 --val_batches 1 --device emu --precision O2 --steps 3 --warmup_steps 1 --kernel_profile 2 \
      --out_dir "$work/vit" >"$work/log" || fail "vit: $(tail -3 "$work/log")"
    grep -q "kernel profile of step 2 on emu at O2" "$work/log" || fail "vit: no table"
    python3 "$check" "$work/vit/kernel_profile.json" totals
    ;;
  model)
    # GPT-2 124M's step on emu in count-only mode (nothing runs, a launch is
    # counted): the real shapes' GEMM and attention FLOPs as computed here.
    # The lm_head's GEMMs run over the vocabulary padded to 50304 (a
    # multiple of 64: GPT2Config::pad_vocab_to), so no GEMM is unaligned.
    ENGINE_EMU_COUNT_ONLY=1 "$train" --config "$root/configs/gpt2-124M.json" "${data[@]}" --device emu \
      --precision O3 --batch_size 8 --grad_accum 1 --steps 2 --warmup_steps 1 --val_every 0 --sample_every 0 --val_batches 1 \
      --checkpoint_every 0 --kernel_profile 1 --out_dir "$work/m124" >"$work/log" || fail "124M: $(tail -3 "$work/log")"
    grep -q "^emu: count-only" "$work/log" || fail "124M: count-only mode not said"
    python3 "$check" "$work/m124/kernel_profile.json" gpt2 12 768 50304 8 1024 12 2 1
    if grep -q "unaligned" "$work/log"; then fail "124M: an unaligned GEMM in the step"; fi
    # Head size 64 in bf16: our attention on tensor cores, forward and backward.
    json=$(cat "$work/m124/kernel_profile.json")
    [[ $json == *'"attention_forward_mma"'* && $json == *'"attention_backward_mma"'* ]] ||
      fail "124M: the attention did not run on the tensor-core kernels"
    ;;
  errors)
    source "$root/tests/cli/expect_error.sh"
    train_args=("${gpt2[@]}" --steps 4)
    expect_config_error "config: kernel_profile 9: expected a step from 1 to steps (4)" --kernel_profile 9
    expect_config_error "config: kernel_profile on the cpu device: the cpu launches no GPU kernels" \
      --device cpu --kernel_profile 2
    expect_config_error "model_gpu 'v100': expected h100, h200 or a100" --kernel_profile 2 --model_gpu v100
    ;;
  *) fail "unknown case $case_name" ;;
esac
echo "ok: $case_name"
