#!/usr/bin/env bash
# Where a CPU training step's GEMM time goes, by shape: runs `train` at one
# of bench_gpt2_cpu.sh's shapes with bench/gemm_census.c preloaded and
# prints its table (transposes in row-major terms, M x N x K, beta 0 or 1,
# calls, milliseconds, share of all GEMM time, GFLOP/s, and which kernel ran
# it: openblas, or engine for kernels/gemm/sgemm_avx512.cpp), the most time
# first. ENGINE_CPU_GEMM=openblas in the environment gives every product to
# OpenBLAS (the table before the engine's kernel).
# Compare each row's GFLOP/s with the SGEMM rate `train` prints ("peak for
# MFU"): at THREADS > 1 the rows are the engine's tiles, each on one thread,
# so compare with that rate divided by THREADS.
# Usage: bench/gemm_census.sh [THREADS] [SHAPE] [STEPS] [ROWS]
#   SHAPE: tiny (default) or l6 (bench/gpt2_shapes.sh); STEPS (default 20)
#   includes the first steps and `train`'s SGEMM measurement; ROWS (default
#   25) rows of the table.
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-$(nproc)}
shape=${2:-tiny}
steps=${3:-20}
rows=${4:-25}
source scripts/cpu_env.sh
source bench/gpt2_shapes.sh
build=${BUILD_DIR:-build}
lib=$build/bench/libgemm_census.so
[[ -f $lib && -x $build/models/train ]] || { echo "gemm_census: $lib or $build/models/train missing: build first (cmake --build $build)"; exit 1; }
bash scripts/prepare_data.sh > /dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
OMP_NUM_THREADS=$threads GEMM_CENSUS_OUT="$tmp/census.txt" LD_PRELOAD="$(realpath "$lib")" \
  "$build/models/train" "${cfg[@]}" "${run_opts[@]}" --steps "$steps" --log_every "$steps" --out_dir "$tmp/out" > "$tmp/train.log" 2>&1 ||
  { cat "$tmp/train.log"; exit 1; }
echo "gpt2 $shape_name, $(grep -m1 '^blas:' "$tmp/train.log" | cut -d' ' -f2-), $steps steps"
grep -m1 '^peak for MFU: ' "$tmp/train.log" || true
awk -v rows="$rows" 'NR == 1 { print "| op | M | N | K | beta | calls | ms | % | GFLOP/s | by |"; print "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"; next }
  /^#/ { note = $0; next }
  { if (++n <= rows) printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10 }
  END { if (n > rows) printf "(%d more shapes)\n", n - rows; if (note != "") print note }' "$tmp/census.txt"
