#!/usr/bin/env bash
# Loader figures side by side in one run (docs/data.md): writes a NERSC-like
# weather year (20 channels, float32) once, then runs bench/loader (our loader,
# the page-cache limit, data wait) and bench/loader_h5py.py (h5py + NumPy) on
# the same files and batch shape. Extra arguments go to both. Then the data
# wait of real training steps: `train --model vit` on the same files with 0
# and TRAIN_WORKERS (2) reader threads, the progress line's last interval.
# Usage: bash scripts/bench_loader.sh [--batch 8] [--batches 40] [--workers 4]
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -x build/bench/loader && -x build/models/prepare_weather ]] || { echo "build first: bash scripts/test.sh or cmake --build build" >&2; exit 1; }
out=${BENCH_LOADER_DIR:-/tmp/engine_bench_loader_data}
if [[ ! -f $out/stats.h5 ]]; then
  ./build/models/prepare_weather --out "$out" --channels 20 --height 180 --width 360 --steps 48 \
    --train_years 1 --valid_years 1 >/dev/null
fi
./build/bench/loader --dir "$out/train" --stats "$out/stats.h5" "$@"
echo
/usr/bin/python3 bench/loader_h5py.py "$out/train" "$out/stats.h5" "$@"
echo
echo "train --model vit on the same files (8 samples of 20 x 180 x 360 per step, a small ViT), steps 21-30:"
for w in 0 "${TRAIN_WORKERS:-2}"; do
  line=$(./build/models/train --model vit --dataset weather --train_data "$out/train" --val_data "$out/valid" \
    --stats "$out/stats.h5" --patch 20 --n_layer 2 --n_head 4 --n_embd 64 --batch_size 8 --steps 30 \
    --warmup_steps 2 --val_every 0 --val_batches 1 --log_every 10 --device cpu --data_workers "$w" \
    --out_dir "$out/train_out" --overwrite | grep "^step *30/30" || echo "(no step 30 line: see $out/train_out)")
  echo "data_workers $w: ${line#*| norm}"
done
