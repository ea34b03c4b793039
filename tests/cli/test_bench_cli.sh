#!/usr/bin/env bash
# Black-box tests of bench scripts that a GPU run depends on but CI can run
# on the cpu, one ctest entry per case (tests/CMakeLists.txt):
#   torch_gpt2   bench/gpt2_torch_gpu.py (PyTorch's GPT-2, the baseline
#                bench/gpu_stage.sh sets beside train on the same card) on a
#                tiny shape on the cpu, on our token file: a line per step
#                with a finite loss near ln(V) at the start, the closing
#                "torch tokens/s" line; a token id past the vocabulary is
#                one line naming the file. bench/gpu_stage.sh and
#                scripts/gpu_call.sh parse; gpu_call.sh without the
#                carried .gpu/ is one line saying so.
# Usage: test_bench_cli.sh BUILD_DIR CASE   (exit 77: skipped, no python3-torch)
set -euo pipefail
build=$1
case_name=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
py=/usr/bin/python3

case $case_name in
  torch_gpt2)
    "$py" -c "import torch, numpy" 2>/dev/null || { echo "skipped: no python3-torch"; exit 77; }
    "$build/models/prepare_text" "$work/data" 0.1 /usr/share/games/fortunes >/dev/null
    tiny=(--vocab_size 256 --block_size 32 --n_layer 2 --n_head 2 --n_embd 32 --batch_size 4 --seq_len 32
          --grad_accum 2 --steps 2 --warmup 1 --device cpu --train_bin "$work/data/train.bin")
    "$py" "$root/bench/gpt2_torch_gpu.py" "${tiny[@]}" >"$work/log" 2>&1 || fail "$(tail -5 "$work/log")"
    out=$(cat "$work/log")
    [[ $(grep -c "^step [0-9]*: loss" "$work/log") -eq 3 ]] || fail "not 3 step lines: $out"
    first=$(sed -n 's/^step 1: loss \([0-9.]*\),.*/\1/p' "$work/log")
    # ln 256 = 5.545: an untrained model's loss on 256 byte classes.
    "$py" -c "import sys; l = float(sys.argv[1]); sys.exit(0 if 5.0 < l < 6.2 else 1)" "$first" ||
      fail "first loss $first is not near ln(256): $out"
    [[ $(tail -1 "$work/log") == "torch tokens/s: "*"(median of 2 steps, 4 x 32 x 2, cpu, torch "* ]] ||
      fail "no closing tokens/s line: $out"
    if "$py" "$root/bench/gpt2_torch_gpu.py" "${tiny[@]}" --vocab_size 100 >"$work/bad" 2>&1; then
      fail "a token id past the vocabulary was accepted"
    fi
    grep -q "gpt2_torch_gpu: $work/data/train.bin holds id .* >= vocab_size 100" "$work/bad" ||
      fail "bad message: $(cat "$work/bad")"
    [[ $(wc -l <"$work/bad") -eq 1 ]] || fail "not one line: $(cat "$work/bad")"
    bash -n "$root/bench/gpu_stage.sh" || fail "bench/gpu_stage.sh does not parse"
    bash -n "$root/scripts/gpu_call.sh" || fail "scripts/gpu_call.sh does not parse"
    # Without the carried .gpu/ (fetch-debs.sh), the call says so in one line.
    local_copy=$work/repo
    mkdir -p "$local_copy/scripts" && cp "$root/scripts/gpu_call.sh" "$local_copy/scripts/"
    if bash "$local_copy/scripts/gpu_call.sh" >"$work/nogpu" 2>&1; then fail "gpu_call.sh ran without .gpu/"; fi
    grep -q "gpu_call: no .gpu/on-gpu.sh" "$work/nogpu" || fail "bad message: $(cat "$work/nogpu")"
    echo "ok: $(tail -1 "$work/log")"
    ;;
  *)
    fail "unknown case $case_name"
    ;;
esac
