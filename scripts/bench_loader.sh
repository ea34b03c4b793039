#!/usr/bin/env bash
# Loader figures side by side in one run (docs/data.md): writes a NERSC-like
# weather year (20 channels, float32) once, then runs bench/loader (our loader,
# the page-cache limit, data wait) and bench/loader_h5py.py (h5py + NumPy) on
# the same files and batch shape. Extra arguments go to both.
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
