#!/usr/bin/env bash
# Side-by-side CPU training throughput: the same GPT-2 config and step
# (forward, backward, clip, AdamW) in this engine and in PyTorch
# (bench/gpt2_torch.py, Debian's python3-torch), the same thread count, run
# alternately so both see the same machine load. Prints tokens/s of each per
# round, then the medians, their ratio, and the engine's model FLOP/s
# (6N + 12 L C T per token, train's MFU numerator) as a share of the SGEMM
# rate this machine measures (train measures it at startup, engine/peaks.cpp;
# the best of the rounds is used: on a shared machine one measurement can
# be low and flatter the share), with the OpenBLAS kernel family and the
# vector exp's ISA.
# Usage: bench/bench_gpt2_cpu.sh [THREADS] [ROUNDS] [SHAPE]   (needs a build in build/)
#   SHAPE: tiny (default) or l6, bench/gpt2_shapes.sh
#   PyTorch: .deps/torch2's 2.15 where scripts/setup.sh --torch2 installed it,
#   else Debian's (/usr/bin/python3, 1.13). BUILD_DIR (build) and PYTHON name
#   another build or interpreter (a machine whose PyTorch is in a venv).
# Both use the same OpenBLAS kernels: OPENBLAS_CORETYPE is set from the CPU's
# flags when unset (scripts/cpu_env.sh), as scripts/train.sh does; a preset
# one is kept (and named in the output).
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-$(nproc)}
rounds=${2:-3}
shape=${3:-tiny}
source scripts/cpu_env.sh
source bench/gpt2_shapes.sh
build=${BUILD_DIR:-build}
py=/usr/bin/python3
[[ -x .deps/torch2/bin/python ]] && py=.deps/torch2/bin/python
py=${PYTHON:-$py}
command -v "$py" >/dev/null && "$py" -c "import torch" 2>/dev/null ||
  { echo "bench: PyTorch missing from $py: bash scripts/setup.sh --torch2 (2.15) or apt-get install python3-torch"; exit 1; }
bash scripts/prepare_data.sh
export OMP_NUM_THREADS=$threads
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
med() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# Model FLOPs per token, as models/gpt2 counts them: 6 (12 L C^2 + V C) + 12 L C T.
opt() {
  local i
  for ((i = 0; i < ${#cfg[@]}; i++)); do [[ ${cfg[i]} == "--$1" ]] && echo "${cfg[i + 1]}"; done
  return 0
}
fpt=$(awk -v L="$(opt n_layer)" -v C="$(opt n_embd)" -v V="$(opt vocab_size)" -v T="$(opt seq_len)" \
  'BEGIN { printf "%.0f", 6 * (12 * L * C * C + V * C) + 12 * L * C * T }')
ours=() peaks=() theirs=()
for r in $(seq "$rounds"); do
  # Engine: median of steps 4..23 (the first steps warm the allocator cache).
  "$build/models/train" "${cfg[@]}" "${run_opts[@]}" --steps 23 --log_every 1 --out_dir "$tmp/out" --overwrite > "$tmp/train.log"
  awk '/^step +[0-9]+\/23/ { split($2, s, "/"); if (s[1] > 3) print $13 }' "$tmp/train.log" > "$tmp/tok"
  t=$(med $(cat "$tmp/tok"))
  g=$(grep -m1 '^peak for MFU: ' "$tmp/train.log" | awk '{print $(NF - 1)}')
  "$py" bench/gpt2_torch.py "${cfg[@]}" --steps 20 --threads "$threads" > "$tmp/torch.log"
  p=$(awk '{print $3}' "$tmp/torch.log")
  echo "round $r: engine $t tokens/s, torch $p tokens/s; SGEMM measured at $g GFLOP/s"
  ours+=("$t") peaks+=("$g") theirs+=("$p")
done
o=$(med "${ours[@]}") p=$(med "${theirs[@]}")
peak=$(printf '%s\n' "${peaks[@]}" | sort -g | tail -n 1)
echo "gpt2 $shape_name, $threads threads; $(grep '^blas:' "$tmp/train.log" | cut -d' ' -f2-)"
echo "SGEMM $(grep -m1 '^peak for MFU: ' "$tmp/train.log" | grep -o '[0-9]*x[0-9]*x[0-9]*'): best of the rounds $peak GFLOP/s"
awk -v o="$o" -v f="$fpt" -v g="$peak" 'BEGIN { printf "engine %d tokens/s x %.2f MFLOP/token = %.1f GFLOP/s, %.1f%% of the SGEMM rate\n", o, f / 1e6, o * f / 1e9, 100 * o * f / 1e9 / g }'
echo "torch $p tokens/s ($(grep -o 'torch [0-9][^)]*' "$tmp/torch.log")); engine/torch $(awk -v a="$o" -v b="$p" 'BEGIN{printf "%.2f", a/b}')x"
