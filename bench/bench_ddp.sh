#!/usr/bin/env bash
# Naive against bucketed data parallelism, side by side: the same GPT-2
# training run under mpirun with --ddp naive (comm/ddp_naive.cpp: one
# all-reduce per parameter after the backward) and --ddp bucketed
# (comm/ddp.cpp: gradient buckets all-reduced as the backward finishes them),
# alternately, ROUNDS times, so both see the same machine load. Prints each
# mode's median tokens/s over steps 3.., its collectives per step (from the
# run's "distributed:" line) and the ratio; the losses must agree (at np 2
# bit for bit). On the CPU the all-reduces go over MPI's shared memory and
# there is one core per rank, so there is little to overlap; the gap grows
# with the latency per collective (NCCL across nodes) and the number of
# parameters.
# Usage: bench/bench_ddp.sh [NP] [ROUNDS] [extra train options...]   (needs a build in build/)
set -euo pipefail
cd "$(dirname "$0")/.."
np=${1:-2}
rounds=${2:-3}
shift $(( $# >= 2 ? 2 : $# ))
bash scripts/prepare_data.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run=(./build/models/train --config configs/gpt2-tiny.json --steps 12 --warmup_steps 1 --val_every 0 --sample_every 0
     --log_every 1 "$@")
median_tps() {  # metrics.jsonl -> the median tokens/s of steps 3..
  python3 - "$1" <<'PY'
import json, statistics, sys
v = [r["tokens_per_s"] for r in map(json.loads, open(sys.argv[1])) if "tokens_per_s" in r and r["step"] >= 3]
print(f"{statistics.median(v):.0f}")
PY
}
declare -A tps
for r in $(seq "$rounds"); do
  line=""
  for mode in naive bucketed; do
    bash scripts/mpirun.sh -np "$np" "${run[@]}" --ddp "$mode" --out_dir "$work/$mode" --overwrite >"$work/$mode.log" ||
      { echo "bench_ddp: the $mode run failed:"; tail -5 "$work/$mode.log"; exit 1; }
    t=$(median_tps "$work/$mode/metrics.jsonl")
    tps[$mode]+="$t "
    line+=" $mode $t"
  done
  echo "round $r:$line tokens/s"
done
med() { printf '%s\n' $1 | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
losses() { grep -o '"loss":[^,}]*' "$1/metrics.jsonl"; }
n=$(med "${tps[naive]}") b=$(med "${tps[bucketed]}")
for mode in naive bucketed; do
  echo "$mode: $(grep -m 1 -o 'gradients in .*' "$work/$mode.log" | sed 's/^gradients in //')"
done
[[ $(losses "$work/naive") == "$(losses "$work/bucketed")" ]] && same="identical" || same="NOT identical"
echo "gpt2-tiny, np $np, $(grep -o 'distributed: .* on [a-z]*' "$work/bucketed.log" | sed 's/.* on //'): naive $n tokens/s," \
  "bucketed $b tokens/s, bucketed/naive $(awk -v a="$b" -v c="$n" 'BEGIN{printf "%.2f", a/c}')x; losses $same"
