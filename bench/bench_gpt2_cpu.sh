#!/usr/bin/env bash
# Side-by-side CPU training throughput: the same GPT-2 config and step
# (forward, backward, clip, AdamW) in this engine and in PyTorch
# (bench/gpt2_torch.py, Debian's python3-torch), the same thread count, run
# alternately so both see the same machine load. Prints tokens/s of each and
# the ratio. Usage: bench/bench_gpt2_cpu.sh [THREADS] [ROUNDS]   (needs a build in build/)
# Both use the same OpenBLAS kernels: OPENBLAS_CORETYPE is set from the CPU's
# flags when unset (scripts/cpu_env.sh), as scripts/train.sh does.
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-$(nproc)}
rounds=${2:-3}
source scripts/cpu_env.sh
[[ -x /usr/bin/python3 ]] && /usr/bin/python3 -c "import torch" 2>/dev/null ||
  { echo "bench: PyTorch missing: bash scripts/setup.sh --torch"; exit 1; }
bash scripts/prepare_data.sh
cfg=(--vocab_size 256 --block_size 128 --n_layer 4 --n_head 4 --n_embd 128 --batch_size 16 --seq_len 128)
export OMP_NUM_THREADS=$threads
ours=() theirs=()
for r in $(seq "$rounds"); do
  # Engine: median tokens/s of steps 4..23 (the first steps warm the allocator cache).
  t=$(./build/models/train "${cfg[@]}" --device cpu --steps 23 --warmup_steps 1 --val_every 0 --sample_every 0 \
        --val_batches 1 --sample_tokens 1 --log_every 1 --out_dir /tmp/bench_gpt2_cpu --overwrite |
      awk '/^step +[0-9]+\/23/ { split($2, s, "/"); if (s[1] > 3) print $13 }' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  p=$(/usr/bin/python3 bench/gpt2_torch.py "${cfg[@]}" --steps 20 \
        --threads "$threads" | awk '{print $3}')
  echo "round $r: engine $t tokens/s, torch $p tokens/s"
  ours+=("$t"); theirs+=("$p")
done
med() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
o=$(med "${ours[@]}"); p=$(med "${theirs[@]}")
echo "gpt2 4x128 B=16 T=128, $threads threads, OpenBLAS ${OPENBLAS_CORETYPE:-auto}: engine $o tokens/s, torch $p tokens/s, ratio $(awk -v a="$o" -v b="$p" 'BEGIN{printf "%.2f", a/b}')x"
