#!/usr/bin/env bash
# Per-rank memory of the NERSC tutorial's model-parallel shape
# (configs/vit-nersc-mp.json: embed 1024, 12 blocks, patch 8 on 20 x 360 x 720
# fields, 4050 tokens) at (tp, cp) = (1,1), (2,1), (4,1), (1,2), (2,2), from
# one real training step at micro-batch 1 on the CPU: the memory report's
# parameters, weights, gradients and AdamW state (the same accounting on
# every device) and the allocator's peak, from the first line of each run's
# metrics.jsonl; beside them the planned activations per sample on a GPU
# (models/train/memory_plan.h's formula for cuda, which the CPU does not
# measure: its attention keeps the T x T probabilities that FlashAttention
# recomputes). Prints the table of docs/tensor_parallel.md. Slow: each run is
# one forward and backward of about 6 TFLOP on the CPU (minutes), and 1x1
# needs about 12 GB.
# Usage: bash scripts/memory_mp.sh   (env: PRECISION=O0, DATA=/tmp/nersc-mp,
#   OUT=a directory to keep the runs in (default: a temporary one),
#   GRIDS="1 1,2 1,4 1,1 2,2 2": the (tp, cp) to run; runs already in OUT are reused)
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -x build/models/train ]] || { echo "build first: bash scripts/test.sh or cmake --build build" >&2; exit 1; }
prec=${PRECISION:-O0} data=${DATA:-/tmp/nersc-mp}
[[ -f $data/stats.h5 ]] || ./build/models/prepare_weather --nersc --out "$data" --steps 6 --train_years 1 \
  --valid_years 1 >/dev/null
if [[ -n ${OUT:-} ]]; then
  out=$OUT
  mkdir -p "$out"
else
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
IFS=, read -r -a grids <<<"${GRIDS:-1 1,2 1,4 1,1 2,2 2}"
for grid in "${grids[@]}"; do
  read -r tp cp <<<"$grid"
  np=$((tp * cp))
  [[ -f $out/$tp-$cp/metrics.jsonl ]] && grep -q memory_per_rank "$out/$tp-$cp/metrics.jsonl" && continue
  # A step takes minutes here: a long timeout; the machine's cores shared by the ranks.
  MPIRUN_TIMEOUT=${MPIRUN_TIMEOUT:-3600} OMP_NUM_THREADS=$(( np < 2 ? 2 : 1 )) bash scripts/mpirun.sh -np "$np" ./build/models/train --config configs/vit-nersc-mp.json --device cpu \
    --precision "$prec" --train_data "$data/train" --val_data "$data/valid" --stats "$data/stats.h5" \
    --global_batch "$np" --batch_size 1 --tp "$tp" --cp "$cp" --steps 2 --stop_after 1 --warmup_steps 0 \
    --val_batches 1 --data_workers 1 --memory_limit_gb -1 --comm_timeout 0 --out_dir "$out/$tp-$cp" \
    >"$out/$tp-$cp.log" 2>&1 ||
    { echo "tp $tp cp $cp failed: $(grep "error" "$out/$tp-$cp.log" | tail -3)" >&2; exit 1; }
done
python3 - "$out" "$prec" <<'PY'
import json, os, sys
out, prec = sys.argv[1], sys.argv[2]
# The GPU activation plan (memory_plan.cpp, cuda, bf16 at O2/O3, fp32 at O0): per token of this rank.
L, T, C, NH, pp_io = 12, 4050, 1024, 8, 64 * (20 + 20)
def gpu_activations(tp, cp, half):
    A, elem = (32.0, 2.0) if half else (64.0, 4.0)
    block = A * C * (12 / 16 / tp + 4 / 16) + 4 * NH / tp + (2 * cp * C / tp * elem if cp > 1 else 0)
    return T / cp * (L * block + 8 * C + 22 * pp_io)
gb = lambda b: b / 1e9
print(f"| tp x cp | ranks | parameters per rank | weights + grads + AdamW | CPU peak ({prec}, measured) | GPU activations, bf16 (plan) | GPU total, bf16 (plan) |")
print("|---|---|---|---|---|---|---|")
for grid in sorted(d for d in os.listdir(out) if os.path.isfile(os.path.join(out, d, "metrics.jsonl"))):
    tp, cp = map(int, grid.split("-"))
    row = next(json.loads(l) for l in open(os.path.join(out, grid, "metrics.jsonl")) if "memory_per_rank" in l)
    m = row["memory_per_rank"]
    state = m["weights_bytes"] + m["grads_bytes"] + m["optimizer_bytes"]
    act = gpu_activations(tp, cp, True)
    gpu_state = m["parameters"] * (4 + 2 + 4 + 8)  # fp32 master + bf16 copy + fp32 grads + AdamW
    print(f"| {tp} x {cp} | {tp * cp} | {m['parameters'] / 1e6:.1f}M | {gb(state):.2f} GB | {gb(m['peak_bytes']):.2f} GB "
          f"| {gb(act):.2f} GB | {gb(gpu_state + act):.2f} GB |")
PY
