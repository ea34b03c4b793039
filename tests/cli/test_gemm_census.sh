#!/usr/bin/env bash
# bench/gemm_census.c preloaded into a short CPU training run: its table must
# list the products the model's shapes imply, and show the engine's thread
# split (kernels/gemm/blas_gemm.cpp) from outside. With 2 layers, C = 64 and
# B x T = 4 x 32 = 128 rows, a block's qkv projection is a 128 x 192 x 64
# product (NT: x W^T, the bias in C, beta 1) in every forward, and its
# weight gradient a 192 x 64 x 128 one (TN: dY^T x) in every backward.
# At 1 thread those run whole; at 2, the engine cuts C's longer side in
# two: 128 x 96 x 64 and 96 x 64 x 128 tiles, twice the calls, and the
# whole shapes never reach OpenBLAS. At B = 16 (512 rows) the weight
# gradient's K is long enough (512 > 2 x 192) to be split along K instead:
# two 192 x 64 x 256 products, and no tiles of it. An unwritable
# GEMM_CENSUS_OUT is a one-line error and exit 1. On a CPU with AVX-512 the
# NN and NT products are the engine's own kernel's (kernels/gemm/
# sgemm_avx512.cpp), which reports itself to the census (by = engine) while
# the TN ones stay OpenBLAS's; ENGINE_CPU_GEMM=openblas gives all of them to
# OpenBLAS.
# Usage: test_gemm_census.sh BUILD_DIR
set -euo pipefail
build=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
corpus=/usr/share/games/fortunes
fail() { echo "FAIL: $*"; exit 1; }
[[ -d $corpus ]] || fail "$corpus missing (scripts/setup.sh installs the fortunes package)"
"$build/models/prepare_text" "$work/data" 0.1 "$corpus" > /dev/null
lib=$(realpath "$build/bench/libgemm_census.so")
steps=3

run() {  # run THREADS BATCH [TAG]: the census table of a short run, census$1-$2$3.txt
  local out=$work/census$1-$2${3:-}.txt
  OMP_NUM_THREADS=$1 GEMM_CENSUS_OUT="$out" LD_PRELOAD="$lib" "$build/models/train" \
    --vocab_size 256 --block_size 32 --n_layer 2 --n_head 2 --n_embd 64 --batch_size "$2" --seq_len 32 \
    --steps $steps --warmup_steps 1 --val_every 0 --sample_every 0 --val_batches 1 --sample_tokens 1 --device cpu \
    --train_bin "$work/data/train.bin" --val_bin "$work/data/val.bin" --out_dir "$work/out$1-$2${3:-}" > "$work/log" 2>&1 ||
    { cat "$work/log"; fail "train with the census at $1 thread(s), batch $2"; }
  [[ -s $out ]] || fail "no census table at $1 thread(s), batch $2"
}
calls() {  # calls FILE OP M N K [BY]: the calls of that shape, both betas, by either kernel or by BY
  awk -v op="$2" -v m="$3" -v n="$4" -v k="$5" -v by="${6:-}" \
    '$1 == op && $2 == m && $3 == n && $4 == k && (by == "" || $10 == by) { c += $6 } END { print c + 0 }' "$1"
}

run 1 4
run 2 4
run 2 16
head -n 1 "$work/census1-4.txt" > "$work/header"
[[ $(cat "$work/header") == "op M N K beta calls ms % GFLOP/s by" ]] || fail "header: $(cat "$work/header")"
# The shares add up to 100% (each row rounded to 0.1).
total=$(awk 'NR > 1 && !/^#/ { s += $8 } END { printf "%.0f", s }' "$work/census1-4.txt")
((total >= 99 && total <= 101)) || fail "shares add up to $total%"

qkv1=$(calls "$work/census1-4.txt" NT 128 192 64) dw1=$(calls "$work/census1-4.txt" TN 192 64 128)
# Every forward runs it once per layer (training steps, and evaluation's).
((qkv1 >= 2 * steps && qkv1 % 2 == 0)) || fail "qkv forward 128x192x64: $qkv1 calls (want a multiple of 2 layers, >= $((2 * steps)))"
((dw1 == 2 * steps)) || fail "qkv weight gradient 192x64x128: $dw1 calls (want 2 layers x $steps steps)"

[[ $(calls "$work/census2-4.txt" NT 128 192 64) == 0 ]] || fail "2 threads: the whole qkv product reached OpenBLAS"
[[ $(calls "$work/census2-4.txt" TN 192 64 128) == 0 ]] || fail "2 threads: the whole weight gradient reached OpenBLAS"
qkv2=$(calls "$work/census2-4.txt" NT 128 96 64) dw2=$(calls "$work/census2-4.txt" TN 96 64 128)
((qkv2 == 2 * qkv1)) || fail "2 threads: $qkv2 tiles of 128x96x64 (want 2 x $qkv1)"
((dw2 == 2 * dw1)) || fail "2 threads: $dw2 tiles of 96x64x128 (want 2 x $dw1)"
dwk=$(calls "$work/census2-16.txt" TN 192 64 256)
((dwk == 2 * 2 * steps)) || fail "2 threads, B = 16: $dwk K halves of 192x64x256 (want 2 x 2 layers x $steps steps)"
[[ $(calls "$work/census2-16.txt" TN 192 64 512) == 0 ]] || fail "2 threads, B = 16: the whole weight gradient ran"
[[ $(calls "$work/census2-16.txt" TN 96 64 512) == 0 ]] || fail "2 threads, B = 16: the weight gradient ran as tiles"
# Which kernel ran them: the engine's on an AVX-512 CPU (NN, NT), OpenBLAS
# for TN; and OpenBLAS for all with ENGINE_CPU_GEMM=openblas.
cpuinfo=$(cat /proc/cpuinfo)
if [[ $cpuinfo =~ avx512f ]]; then
  [[ $(calls "$work/census1-4.txt" NT 128 192 64 engine) == "$qkv1" ]] || fail "AVX-512: the qkv forward did not run on the engine's kernel"
  [[ $(calls "$work/census1-4.txt" TN 192 64 128 openblas) == "$dw1" ]] || fail "AVX-512: the weight gradient did not run on OpenBLAS"
fi
ENGINE_CPU_GEMM=openblas run 1 4 -openblas
[[ $(calls "$work/census1-4-openblas.txt" NT 128 192 64 openblas) == "$qkv1" ]] ||
  fail "ENGINE_CPU_GEMM=openblas: the qkv forward did not run on OpenBLAS"
engine_rows=$(awk 'NR > 1 && $10 == "engine"' "$work/census1-4-openblas.txt")
[[ -z $engine_rows ]] || fail "ENGINE_CPU_GEMM=openblas: the engine's kernel ran $engine_rows"
# A census file that cannot be written: a one-line error naming it, exit 1
# (at the first product, not after the whole run).
rc=0
GEMM_CENSUS_OUT="$work/no/such/dir/census.txt" LD_PRELOAD="$lib" "$build/models/train" --device cpu \
  --vocab_size 256 --block_size 32 --n_layer 1 --n_head 2 --n_embd 32 --batch_size 2 --seq_len 32 --steps 1 --warmup_steps 1 \
  --train_bin "$work/data/train.bin" --val_bin "$work/data/val.bin" --out_dir "$work/bad" > "$work/bad.log" 2>&1 || rc=$?
((rc == 1)) || fail "unwritable GEMM_CENSUS_OUT: exit $rc (want 1)"
grep -q "gemm_census: cannot write GEMM_CENSUS_OUT=$work/no/such/dir/census.txt" "$work/bad.log" ||
  fail "unwritable GEMM_CENSUS_OUT: $(cat "$work/bad.log")"
echo "gemm census: qkv $qkv1 calls, its weight gradient $dw1; at 2 threads, tiles of half of C, twice as many; at B = 16 its K halves"
