#!/usr/bin/env bash
# Pipeline parallelism on CPU ranks, side by side in one run (docs/bench.md):
# GPT-2 (8 blocks, 128 wide, micro-batches of 4 x 64 tokens) at pp 1, 2 and 4
# (dp 1, tp 1) with m micro-batches per step, for each: the step time (the
# median of steps 3..STEPS, from metrics.jsonl's tokens_per_s), the stages'
# measured idle share (train's "stages idle" line: the part of each rank's
# pipeline time not spent in its passes, averaged over the ranks) and the
# ideal bubble (pp - 1) / (m + pp - 1). One thread per rank; a pp larger than
# the machine's cores puts ranks on shared cores, so its figures are marked
# and mean little (PP="1 2" skips them).
# Usage: bash scripts/bench_pp.sh   (env: PP="1 2 4", M="1 2 4 8", STEPS=12, SCHEDULE=1f1b)
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -x build/models/train ]] || { echo "build first: bash scripts/test.sh or cmake --build build" >&2; exit 1; }
[[ -f data/fortunes/train.bin ]] || bash scripts/prepare_data.sh >/dev/null
pps=${PP:-1 2 4} ms=${M:-1 2 4 8} steps=${STEPS:-12} sched=${SCHEDULE:-1f1b}
cores=$(nproc)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
model=(--n_layer 8 --n_head 4 --n_embd 128 --block_size 64 --seq_len 64 --batch_size 4 --vocab_size 256
       --steps "$steps" --warmup_steps 1 --val_every 0 --val_batches 1 --sample_every 0 --device cpu
       --pp_schedule "$sched")
echo "GPT-2 8 x 128, micro-batch 4 x 64 tokens, cpu, $sched, $cores cores, one thread per rank; steps 3-$steps:"
printf "  %-4s %-4s %12s %12s %12s %s\n" pp m "ms/step" "idle" "bubble" ""
for pp in $pps; do
  for m in $ms; do
    name="pp$pp-m$m"
    OMP_NUM_THREADS=1 bash scripts/mpirun.sh -np "$pp" ./build/models/train "${model[@]}" --pp "$pp" \
      --global_batch $((4 * m)) --out_dir "$out/$name" >"$out/$name.log"
    python3 - "$out/$name/metrics.jsonl" "$out/$name.log" "$pp" "$m" "$cores" <<'PY'
import json, re, statistics, sys
metrics, log, pp, m, cores = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rows = [json.loads(l) for l in open(metrics)]
tps = [r["tokens_per_s"] for r in rows if "tokens_per_s" in r and r["step"] > 2]
ms_step = 4 * 64 * m / statistics.median(tps) * 1e3
idle = re.search(r"stages idle ([0-9.]+)%", open(log).read())
bubble = (pp - 1) / (m + pp - 1) * 100
print(f"  {pp:<4} {m:<4} {ms_step:12.1f} {(idle.group(1) + '%') if idle else '-':>12} {bubble:11.1f}%"
      + ("  (ranks > cores: shared cores)" if pp > cores else ""))
PY
  done
done
