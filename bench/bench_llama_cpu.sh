#!/usr/bin/env bash
# Side-by-side CPU training throughput of configs/llama-tiny.json's shape:
# the engine's train --model llama and Hugging Face's LlamaForCausalLM in
# PyTorch 2 (bench/llama_torch.py: fp32, SDPA attention as transformers picks it, the same step:
# forward, backward, clip, AdamW), the same thread count and batch, run
# alternately so both see the same machine load. Prints tokens/s of each per
# round, then the medians and their ratio.
# Usage: bench/bench_llama_cpu.sh [THREADS] [ROUNDS]   (needs a build in build/,
#   and .deps/torch2 (scripts/fetch_torch2.sh) with transformers (.deps/hf))
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-$(nproc)}
rounds=${2:-3}
source scripts/cpu_env.sh
build=${BUILD_DIR:-build}
py=${PYTHON:-.deps/torch2/bin/python}
export PYTHONPATH=.deps/hf${PYTHONPATH:+:$PYTHONPATH}
"$py" -c "import torch, transformers" 2>/dev/null ||
  { echo "bench: PyTorch 2 with transformers missing from $py: bash scripts/fetch_torch2.sh (and scripts/setup.sh)"; exit 1; }
bash scripts/prepare_data.sh
export OMP_NUM_THREADS=$threads
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
med() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
shape=(--vocab_size 256 --block_size 128 --n_layer 4 --n_head 4 --n_kv_head 2 --n_embd 128 --ffn_hidden 352
  --batch_size 16 --seq_len 128)
ours=() theirs=()
for r in $(seq "$rounds"); do
  # Engine: median of steps 4..23 (the first steps warm the allocator cache).
  "$build/models/train" --model llama "${shape[@]}" --global_batch 16 --steps 23 --warmup_steps 2 --val_every 0 \
    --val_batches 1 --sample_every 0 --log_every 1 --device cpu --out_dir "$tmp/out" --overwrite true >"$tmp/train.log"
  awk '/^step +[0-9]+\/23/ { split($2, s, "/"); if (s[1] > 3) print $13 }' "$tmp/train.log" >"$tmp/tok"
  t=$(med $(cat "$tmp/tok"))
  "$py" bench/llama_torch.py "${shape[@]}" --steps 20 --threads "$threads" >"$tmp/torch.log"
  p=$(awk '{print $3}' "$tmp/torch.log")
  echo "round $r: engine $t tokens/s, torch $p tokens/s"
  ours+=("$t") theirs+=("$p")
done
o=$(med "${ours[@]}") p=$(med "${theirs[@]}")
echo "llama-tiny, $threads threads; $(grep '^blas:' "$tmp/train.log" | cut -d' ' -f2-)"
echo "engine $o tokens/s; torch $p tokens/s ($(grep -o 'torch [0-9][^)]*' "$tmp/torch.log")); engine/torch $(awk -v a="$o" -v b="$p" 'BEGIN{printf "%.2f", a/b}')x"
