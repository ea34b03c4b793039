#!/usr/bin/env bash
# The batch scripts of scripts/slurm on a real one-node Slurm started for
# the test (scripts/slurm/local_cluster.sh: Debian's slurmctld and slurmd,
# srun --mpi=pmix starting Open MPI's ranks directly), each against the
# same run under scripts/mpirun.sh: the losses must be equal.
#   train_cpu.sbatch      2 tasks, dp 2
#   train_dp.sbatch       2 tasks, dp 2 (its GPU request overridden: --gpus-per-node=0 --device cpu)
#   train_dp_tp.sbatch    2 tasks, tp 2 (likewise)
#   a task that fails     ends the job: sbatch --wait fails, the log has the error
# and, with CASE requeue, a job stopped by its scheduler continues by itself:
#   scancel --signal=USR1  train saves a checkpoint and exits 75, the script
#                         requeues the job, the requeued job resumes (--resume auto)
#   a time limit          the script's --signal (here USR1 55 s before a 1-minute
#                         limit) does the same, once per limit, until the run ends
#   each ends with the losses of the uninterrupted run under mpirun, bit for bit.
# Slurm holds a requeued job for cred_expire seconds (Reason=BeginTime; 10
# on the test's cluster, scripts/slurm/local_cluster.sh).
# Exit 77 (skipped) where Slurm is missing or its daemons cannot run here.
# Usage: test_slurm.sh BUILD_DIR [batch|requeue]
set -euo pipefail
build=$(cd "$1" && pwd)
case_name=${2:-batch}
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

if [[ $case_name == requeue ]]; then
  source "$root/tests/cli/run_watch.sh"  # wait_steps
  # follow JOBID LOG: until the job completes (300 s at most); fails if it ends any other way.
  follow() {
    local info state
    for _ in $(seq 1500); do
      info=$(scontrol show job "$1" 2>/dev/null || true)
      state=$(grep -o 'JobState=[A-Z_]*' <<<"$info" || true)
      case $state in
        JobState=COMPLETED) restarts=$(grep -o 'Restarts=[0-9]*' <<<"$info" | cut -d= -f2); return 0 ;;
        # Passing states: SIGNALING while slurmctld delivers --signal (a poll
        # that lands in that window used to fail the test), STAGE_OUT after the run.
        JobState=PENDING | JobState=RUNNING | JobState=REQUEUED | JobState=COMPLETING | JobState=CONFIGURING | \
          JobState=SIGNALING | JobState=STAGE_OUT | "") ;;
        *) fail "job $1 ended $state: $(grep -v '^step' "$2" | tail -5)" ;;
      esac
      sleep 0.2
    done
    fail "job $1 still not done after 300 s"
  }
  long=("${run[@]}" --steps 40 --val_every 0)
  timeout 300 bash scripts/mpirun.sh -np 2 "$build/models/train" "${long[@]}" --out_dir "$work/ref" >/dev/null
  # scancel --signal=USR1 while the job runs.
  jid=$(ENGINE_FAULT=sleep:100 sbatch --parsable -o "$work/rq.log" scripts/slurm/train_cpu.sbatch "${long[@]}" \
    --out_dir "$work/rq")
  wait_steps "$work/rq" 3
  scancel --signal=USR1 "$jid"
  follow "$jid" "$work/rq.log"
  [[ $restarts -ge 1 ]] || fail "scancel --signal=USR1: the job was not requeued"
  for line in "stopped by SIGUSR1 at step" "requeueing job $jid (restart 1)" "resume auto: $work/rq holds a checkpoint"; do
    grep -qF "$line" "$work/rq.log" || fail "scancel --signal=USR1: no '$line' in the job's log"
  done
  [[ $(losses "$work/rq") == "$(losses "$work/ref")" ]] || fail "scancel --signal=USR1: the losses differ from mpirun's"
  echo "ok: scancel --signal=USR1: stopped at $(grep -o 'stopped by SIGUSR1 at step [0-9]*' "$work/rq.log"), requeued $restarts time(s), 40 losses == mpirun's bit for bit"
  # A time limit: the signal is due 5 s into each run, sent within ~30 s of
  # that (slurmctld's periodic check); 40 steps of 1 s need two runs or more.
  jid=$(ENGINE_FAULT=sleep:1000 sbatch --parsable --time=1 --signal=USR1@55 -o "$work/tl.log" \
    scripts/slurm/train_cpu.sbatch "${long[@]}" --out_dir "$work/tl")
  follow "$jid" "$work/tl.log"
  [[ $restarts -ge 1 ]] || fail "time limit: the job was not requeued"
  [[ $(grep -c "^stopped by SIGUSR1 at step" "$work/tl.log") -eq $restarts ]] ||
    fail "time limit: $restarts requeues but $(grep -c "^stopped by SIGUSR1" "$work/tl.log") stops"
  [[ $(losses "$work/tl") == "$(losses "$work/ref")" ]] || fail "time limit: the losses differ from mpirun's"
  echo "ok: a 1-minute time limit: stopped ahead of it $restarts time(s) ($(grep -o 'stopped by SIGUSR1 at step [0-9]*' "$work/tl.log" | grep -o '[0-9]*$' | paste -sd, -)), requeued, 40 losses == mpirun's bit for bit"
  exit 0
fi

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
