#!/usr/bin/env bash
# The batch scripts of scripts/slurm on a real one-node Slurm started for
# the test (scripts/slurm/local_cluster.sh: Debian's slurmctld and slurmd,
# srun --mpi=pmix starting Open MPI's ranks directly), each against the
# same run under scripts/mpirun.sh: the losses must be equal.
#   train_cpu.sbatch      2 tasks, dp 2
#   train_dp.sbatch       2 tasks, dp 2 (its GPU request overridden: --gpus-per-node=0 --device cpu)
#   train_dp_tp.sbatch    2 tasks, tp 2 (likewise)
#   a task that fails     ends the job: sbatch --wait fails, the log has the error
# Exit 77 (skipped) where Slurm is missing or its daemons cannot run here.
# Usage: test_slurm.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
cluster=$work/slurm
cleanup() {
  bash "$root/scripts/slurm/local_cluster.sh" stop "$cluster" || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

rc=0
PORT=$((20000 + $$ % 20000)) bash "$root/scripts/slurm/local_cluster.sh" start "$cluster" || rc=$?
[[ $rc -eq 0 ]] || exit "$rc"
export SLURM_CONF=$cluster/slurm.conf TRAIN=$build/models/train

"$build/models/prepare_text" "$work/data" 0.1 /usr/share/games/fortunes >/dev/null
run=(--vocab_size 256 --block_size 32 --n_layer 2 --n_head 2 --n_embd 32 --batch_size 2 --seq_len 32 --warmup_steps 2
     --val_every 3 --sample_every 0 --val_batches 2 --steps 6 --global_batch 4 --device cpu
     --train_bin "$work/data/train.bin" --val_bin "$work/data/val.bin")
losses() { grep -o '"\(loss\|val_loss\)":[^,}]*' "$1/metrics.jsonl"; }
no_gpu=(--gpus-per-node=0 --ntasks-per-node=2 --cpus-per-task=1)

cd "$root"  # the scripts run from the repository root, as sbatch's users submit them
for case in cpu dp dp_tp; do
  extra=()
  [[ $case == dp_tp ]] && extra=(--tp 2)
  opts=()
  [[ $case != cpu ]] && opts=("${no_gpu[@]}")
  timeout 300 sbatch --wait -o "$work/$case.log" ${opts[@]+"${opts[@]}"} "scripts/slurm/train_$case.sbatch" \
    "${run[@]}" --out_dir "$work/$case" >/dev/null || fail "sbatch train_$case.sbatch failed: $(tail -5 "$work/$case.log")"
  timeout 300 bash scripts/mpirun.sh -np 2 "$build/models/train" "${run[@]}" ${extra[@]+"${extra[@]}"} \
    --out_dir "$work/$case.mpirun" >/dev/null
  n=$(losses "$work/$case" | wc -l)
  [[ $(grep -c '"loss"' "$work/$case/metrics.jsonl") -eq 6 ]] || fail "train_$case: expected 6 training losses"
  diff <(losses "$work/$case") <(losses "$work/$case.mpirun") >/dev/null ||
    fail "train_$case.sbatch's losses differ from mpirun's: $(diff <(losses "$work/$case") <(losses "$work/$case.mpirun"))"
  grep -q "distributed: 2 ranks" "$work/$case.log" || fail "train_$case: not 2 ranks: $(head -20 "$work/$case.log")"
  echo "ok: sbatch train_$case.sbatch == mpirun -np 2 $(echo ${extra[@]+"${extra[@]}"}) ($n losses, bit for bit)"
done

# One task failing ends the job, with the error in the job's log.
if timeout 120 sbatch --wait -o "$work/bad.log" scripts/slurm/train_cpu.sbatch "${run[@]}" --warmup_steps 30 \
  --out_dir "$work/bad" >/dev/null 2>&1; then
  fail "a job whose train failed succeeded"
fi
grep -q "train: error: config: warmup_steps (30) must not exceed steps (6)" "$work/bad.log" ||
  fail "no error line in the job's log: $(cat "$work/bad.log")"
echo "ok: a failing job fails sbatch --wait, its log says why"
