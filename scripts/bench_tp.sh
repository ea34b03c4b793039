#!/usr/bin/env bash
# Tensor-parallel figures side by side in one run (docs/bench.md): the
# layers at tp = 1 vs tp = 2 (bench/tp_layers), then GPT-2 tokens/s on the
# grids dp x tp = 1x1, 2x1, 1x2 (and 1x2 sequence parallel) with the same
# global batch: the mean of tokens_per_s over steps 6..STEPS of metrics.jsonl.
# On this CPU machine tp is a correctness tool (two ranks share two cores);
# the same script on a GPU node shows what tp buys there (DEVICE=cuda).
# Usage: bash scripts/bench_tp.sh   (env: STEPS=30, DEVICE=cpu, CONFIG=configs/gpt2-tiny.json)
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -x build/bench/tp_layers && -x build/models/train ]] || { echo "build first: bash scripts/test.sh or cmake --build build" >&2; exit 1; }
[[ -f data/fortunes/train.bin ]] || bash scripts/prepare_data.sh >/dev/null
steps=${STEPS:-30} dev=${DEVICE:-cpu} cfg=${CONFIG:-configs/gpt2-tiny.json}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
bash scripts/mpirun.sh -np 2 ./build/bench/tp_layers --device "$dev"
echo
echo "GPT-2 ($cfg) tokens/s, global batch 16, steps 6-$steps, $dev:"
run() {  # NAME NP ARGS...
  local name=$1 np=$2; shift 2
  bash scripts/mpirun.sh -np "$np" ./build/models/train --config "$cfg" --device "$dev" --steps "$steps" \
    --warmup_steps 5 --val_every 0 --sample_every 0 --val_batches 1 "$@" --out_dir "$out/$name" >/dev/null
  python3 - "$name" "$out/$name/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[2])]
t = [r["tokens_per_s"] for r in rows if "tokens_per_s" in r and r["step"] > 5]
print(f"  {sys.argv[1]:<22} {sum(t) / len(t):9.0f} tok/s  (mean of {len(t)} steps)")
PY
}
run "1x1" 1
run "2x1 (dp 2)" 2
run "1x2 (tp 2)" 2 --tp 2
run "1x2 (tp 2, seq. par.)" 2 --tp 2 --sequence_parallel
