#!/usr/bin/env bash
# Where a CPU training step's time goes: `perf record` (self time, sampled at
# 999 Hz) over a whole `train` run at one of bench_gpt2_cpu.sh's shapes, then
# a table of the symbols above 0.5% and a summary by kind (the SGEMM kernel,
# OpenBLAS's packing and beta passes, the engine's own kernels, libmvec's exp,
# libm, the OpenMP runtime, libc's memmove/memset, the OS kernel).
# Usage: bench/profile_gpt2_cpu.sh [THREADS] [SHAPE] [TRAIN]
#   SHAPE: tiny (default; 4 layers of 128, B16 T128, vocab 256) or
#          l6 (6 layers of 192, 6 heads, B8 T256, vocab 320)
#   TRAIN: the train binary (default build/models/train), to profile another build.
# Needs perf (Debian's linux-perf) and root or kernel.perf_event_paranoid <= 1.
# The run is 60 steps; its start (model init, the SGEMM peak measurement, the
# first touch of the allocator's memory: most of the OS kernel's share) is in
# the table too.
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-$(nproc)}
shape=${2:-tiny}
train=${3:-./build/models/train}
source scripts/cpu_env.sh
source bench/gpt2_shapes.sh
command -v perf > /dev/null || { echo "profile: perf missing: apt-get install linux-perf"; exit 1; }
[[ -x $train ]] || { echo "profile: $train is not an executable (build first: cmake --build build)"; exit 1; }
bash scripts/prepare_data.sh > /dev/null
export OMP_NUM_THREADS=$threads
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
perf record -F 999 -o "$tmp/perf.data" -- "$train" "${cfg[@]}" "${run_opts[@]}" --steps 60 --log_every 20 --out_dir "$tmp/out" \
  > "$tmp/train.log" 2> "$tmp/perf.log" || { cat "$tmp/perf.log" "$tmp/train.log"; exit 1; }
perf report -i "$tmp/perf.data" --no-children --sort dso,symbol --stdio --percent-limit 0.01 \
  > "$tmp/report.txt" 2> "$tmp/report.log" || { cat "$tmp/report.log"; exit 1; }
speed=$(grep 'tok/s' "$tmp/train.log" | tail -n 1 | grep -o '[0-9]* tok/s | [^|]*' || true)
echo "gpt2 $shape_name, $(grep -m1 '^blas:' "$tmp/train.log" | cut -d' ' -f2-): $speed(step 60)"
# perf's lines: "  12.34%  dso  [.] symbol"; the same symbol from several
# instantiations (two clones of a template) is added up.
awk -v OFS='\t' '/^ +[0-9.]+%/ {
    pct = $1; sub(/%/, "", pct); dso = $2; sym = $0; sub(/^.*\] /, "", sym); sub(/[ -]+$/, "", sym)
    if (dso == "[kernel.kallsyms]") sym = "(OS kernel)"
    else if (dso ~ /^libgomp/) sym = "(OpenMP runtime)"
    else if (sym ~ /^0x/) sym = "(" dso ")"
    if (sym ~ /^eng::/) { gsub(/\(anonymous namespace\)::/, "", sym); sub(/\(.*$/, "", sym); sub(/<.*>/, "", sym) }
    self[sym] += pct
    if (sym ~ /^sgemm_(small_)?kernel/) kind = "OpenBLAS SGEMM kernels"
    else if (sym ~ /^eng::cpu::.*(sgemm_tile<|sgemm_run|pack_b|sgemm_avx512)/) kind = "the engine's AVX-512 GEMM (tiles, packing B)"
    else if (dso ~ /openblas/) kind = "OpenBLAS packing and beta passes"
    else if (dso ~ /^libmvec/) kind = "libmvec (vector exp)"
    else if (dso ~ /^libm\./) kind = "libm (scalar math)"
    else if (dso ~ /^libgomp/) kind = "OpenMP runtime"
    else if (sym ~ /^__mem(move|cpy|set)/) kind = "libc memmove/memset"
    else if (dso == "[kernel.kallsyms]") kind = "OS kernel (page faults, scheduling)"
    else if (sym ~ /^eng::/) kind = "engine kernels and code"
    else kind = "other"
    bykind[kind] += pct
  }
  END {
    print "| self % | symbol |"; print "|---:|---|"
    for (s in self) if (self[s] >= 0.5) printf "| %.1f | %s |\n", self[s], s | "sort -t\"|\" -k2 -rn"
    close("sort -t\"|\" -k2 -rn")
    print ""; print "| % | kind |"; print "|---:|---|"
    for (k in bykind) printf "| %.1f | %s |\n", bykind[k], k | "sort -t\"|\" -k2 -rn"
  }' "$tmp/report.txt"
