#!/usr/bin/env bash
# Black-box tests of a run stopped by its scheduler (models/train/run_stop.h),
# one ctest entry per case (tests/CMakeLists.txt):
#   single   SIGTERM, SIGINT and SIGUSR1 each stop a run at a step boundary
#            with a checkpoint and exit status 75, and --resume auto then
#            ends with the uninterrupted run's losses bit for bit; a second
#            signal exits at once; the final checkpoint is written before the
#            closing sample, which a signal then ends at once; the
#            --checkpoint_minutes clock saves without checkpoint_every;
#            --resume auto starts a fresh run where there is no checkpoint.
#   emu      the GPU step's loop (emu, O3: CUDA-graph replays) stops and resumes alike.
#   mpirun   under mpirun -np 2: a signal that reaches one rank only stops
#            both at the same step; SIGUSR1 sent to mpirun (which forwards
#            it) likewise; each resumed run equals the uninterrupted one.
# A slow step (ENGINE_FAULT=sleep:MS, models/train/train_dist.h) gives the
# signal time to land mid-run; the references run at full speed (the sleep
# changes no number).
# Usage: test_signal_cli.sh BUILD_DIR CASE
set -euo pipefail
build=$1
case_name=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
train=$build/models/train
work=$(mktemp -d)
jobs_started=()
cleanup() {
  for pid in ${jobs_started[@]+"${jobs_started[@]}"}; do kill -9 "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
export MPIRUN_TIMEOUT=300
mpi() { bash "$root/scripts/mpirun.sh" "$@"; }

"$build/models/prepare_text" "$work/data" 0.1 /usr/share/games/fortunes >/dev/null
common=(--vocab_size 256 --block_size 32 --n_layer 2 --n_head 2 --n_embd 32 --batch_size 4 --seq_len 32
        --warmup_steps 2 --val_every 0 --sample_every 0 --val_batches 2 --sample_tokens 8 --device cpu
        --train_bin "$work/data/train.bin" --val_bin "$work/data/val.bin" --steps 40)
source "$(dirname "$0")/run_watch.sh"  # steps_in, state_step, wait_steps
losses() { grep -o '"loss":[^,}]*' "$1/metrics.jsonl"; }
# stopped_ok NAME RC LOG DIR: status 75, the stop line once, its step saved.
stopped_ok() {
  local name=$1 rc=$2 log=$3 dir=$4
  [[ $rc -eq 75 ]] || fail "$name: exit status $rc, not 75: $(tail -3 "$log")"
  local line
  line=$(grep "^stopped by " "$log" || true)
  [[ $(grep -c "^stopped by " "$log") -eq 1 ]] || fail "$name: not one stop line: $(tail -5 "$log")"
  [[ $line =~ ^stopped\ by\ (SIG[A-Z0-9]+)\ at\ step\ ([0-9]+):\ checkpoint\ at\ $dir/checkpoint\ \(--resume\ continues\;\ exit\ status\ 75\)$ ]] ||
    fail "$name: unexpected stop line: $line"
  stop_sig=${BASH_REMATCH[1]} stop_step=${BASH_REMATCH[2]}
  [[ $(state_step "$dir") -eq $stop_step ]] || fail "$name: checkpoint at step $(state_step "$dir"), not $stop_step"
  [[ $(steps_in "$dir") -eq $stop_step ]] || fail "$name: $(steps_in "$dir") steps in metrics.jsonl, not $stop_step"
}

case $case_name in
  single)
    "$train" "${common[@]}" --out_dir "$work/ref" >/dev/null
    for sig in TERM INT USR1; do
      dir=$work/$sig
      ENGINE_FAULT=sleep:100 "$train" "${common[@]}" --out_dir "$dir" >"$work/log" 2>"$work/err" &
      pid=$!
      jobs_started+=($pid)
      wait_steps "$dir" 3
      kill -$sig $pid
      rc=0
      wait $pid || rc=$?
      stopped_ok "SIG$sig" $rc "$work/log" "$dir"
      [[ $stop_sig == SIG$sig && $stop_step -lt 40 ]] || fail "SIG$sig: stopped by $stop_sig at step $stop_step"
      grep -qxF "train: stop signal received: finishing this step, then a checkpoint (signal again to exit at once)" \
        "$work/err" || fail "SIG$sig: no notice on stderr: $(cat "$work/err")"
      "$train" "${common[@]}" --resume auto --out_dir "$dir" >"$work/log2"
      grep -qxF "resume auto: $dir holds a checkpoint: continuing it" "$work/log2" || fail "SIG$sig: no resume auto line"
      [[ $(losses "$dir") == "$(losses "$work/ref")" ]] || fail "SIG$sig: the resumed run's losses differ"
      echo "ok: SIG$sig stopped the run at step $stop_step with a checkpoint (exit 75); --resume auto ended it with the uninterrupted run's 40 losses bit for bit"
    done

    # A second signal before the step ends: the default action, at once, and
    # no checkpoint (none was due yet). Each step sleeps 4 s first, so both
    # signals land in step 2's sleep even when this script notices step 1
    # late (an ASan build beside other tests took over 1.7 s once, with 2 s).
    ENGINE_FAULT=sleep:4000 "$train" "${common[@]}" --out_dir "$work/twice" >/dev/null 2>"$work/err" &
    pid=$!
    jobs_started+=($pid)
    wait_steps "$work/twice" 1
    kill -TERM $pid
    sleep 0.3
    kill -TERM $pid 2>/dev/null || fail "two SIGTERMs: the run ended before the second one (step 1 noticed over 3.7 s late?)"
    rc=0
    wait $pid || rc=$?
    [[ $rc -eq 143 ]] || fail "two SIGTERMs: exit status $rc, not 143 (killed by SIGTERM)"
    [[ ! -e $work/twice/checkpoint ]] || fail "two SIGTERMs: a checkpoint was written"
    echo "ok: a second SIGTERM ends the run at once (status 143), no checkpoint"

    # The final checkpoint comes before the closing sample; a signal during
    # that sample ends it at once (nothing is left to save).
    "$train" "${common[@]}" --steps 3 --sample_tokens 1000000 --out_dir "$work/final" >/dev/null 2>&1 &
    pid=$!
    jobs_started+=($pid)
    for _ in $(seq 600); do
      [[ -f $work/final/checkpoint/state.json ]] && break
      sleep 0.1
    done
    [[ $(state_step "$work/final") -eq 3 ]] || fail "no final checkpoint before the closing sample"
    kill -TERM $pid
    rc=0
    wait $pid || rc=$?
    [[ $rc -eq 143 ]] || fail "SIGTERM during the closing sample: exit status $rc, not 143"
    [[ $(state_step "$work/final") -eq 3 ]] || fail "the final checkpoint changed"
    echo "ok: the final checkpoint (step 3) is written before a 1M-token closing sample, which SIGTERM ends at once"

    # --checkpoint_minutes: checkpoints by wall time without checkpoint_every;
    # after kill -9, --resume continues from the clock's latest.
    ENGINE_FAULT=sleep:100 "$train" "${common[@]}" --checkpoint_minutes 0.005 --out_dir "$work/clock" >/dev/null &
    pid=$!
    jobs_started+=($pid)
    wait_steps "$work/clock" 12
    kill -9 $pid
    wait $pid 2>/dev/null || true
    step=$(state_step "$work/clock")
    (( step >= 3 && step < 40 )) || fail "--checkpoint_minutes 0.005: the checkpoint is at step $step"
    "$train" "${common[@]}" --resume --out_dir "$work/clock" >/dev/null
    [[ $(losses "$work/clock") == "$(losses "$work/ref")" ]] || fail "--checkpoint_minutes: the resumed losses differ"
    echo "ok: --checkpoint_minutes 0.005 saved step $step by the clock; after kill -9 the resumed run equals the uninterrupted one"

    # --resume auto where there is no checkpoint: a fresh run; where only an
    # earlier run's metrics are, refused as a fresh run is.
    "$train" "${common[@]}" --steps 2 --resume auto --out_dir "$work/auto" >"$work/log"
    grep -qxF "resume auto: no checkpoint in $work/auto: a fresh run" "$work/log" || fail "no fresh-run line"
    [[ $(steps_in "$work/auto") -eq 2 ]] || fail "--resume auto (fresh): $(steps_in "$work/auto") steps"
    mkdir -p "$work/metrics_only"
    cp "$work/auto/metrics.jsonl" "$work/metrics_only/"
    if "$train" "${common[@]}" --resume auto --out_dir "$work/metrics_only" >/dev/null 2>"$work/err"; then
      fail "--resume auto replaced an earlier run's metrics"
    fi
    grep -qF "$work/metrics_only holds an earlier run (metrics.jsonl with 4 lines): --overwrite" "$work/err" ||
      fail "unexpected message: $(cat "$work/err")"
    if "$train" "${common[@]}" --resume auto --overwrite --out_dir "$work/auto" >/dev/null 2>"$work/err"; then
      fail "--resume auto --overwrite accepted"
    fi
    grep -qF "resume and overwrite together" "$work/err" || fail "unexpected message: $(cat "$work/err")"
    if "$train" "${common[@]}" --resume maybe --out_dir "$work/auto" >/dev/null 2>"$work/err"; then
      fail "--resume maybe accepted"
    fi
    grep -qF "option '--resume' must be true, false or auto, got 'maybe'" "$work/err" ||
      fail "unexpected message: $(cat "$work/err")"
    echo "ok: --resume auto starts a fresh run where there is no checkpoint, and refuses what a fresh run refuses"
    ;;
  mpirun)
    mpi -np 2 "$train" "${common[@]}" --out_dir "$work/ref" >/dev/null
    # A signal that reaches rank 1 alone, at the start of step 5: both ranks
    # stop after step 5, rank 0 says so once.
    rc=0
    ENGINE_FAULT=signal:1:5:USR1 mpi -np 2 "$train" "${common[@]}" --out_dir "$work/one" >"$work/log" 2>&1 || rc=$?
    stopped_ok "SIGUSR1 on rank 1" $rc "$work/log" "$work/one"
    [[ $stop_sig == SIGUSR1 && $stop_step -eq 5 ]] || fail "rank 1's SIGUSR1: stopped by $stop_sig at step $stop_step"
    mpi -np 2 "$train" "${common[@]}" --resume auto --out_dir "$work/one" >/dev/null
    [[ $(losses "$work/one") == "$(losses "$work/ref")" ]] || fail "rank 1's SIGUSR1: the resumed losses differ"
    echo "ok: SIGUSR1 to rank 1 alone stopped both ranks at step 5 (exit 75); the resumed run equals the uninterrupted one"
    # SIGUSR1 sent to mpirun, which forwards it to every rank.
    ENGINE_FAULT=sleep:100 bash "$root/scripts/mpirun.sh" -np 2 "$train" "${common[@]}" --out_dir "$work/fwd" \
      >"$work/log" 2>&1 &
    pid=$!  # timeout's (scripts/mpirun.sh execs it); mpirun is its child
    jobs_started+=($pid)
    wait_steps "$work/fwd" 3
    mpirun_pid=$(pgrep -P $pid -x mpirun) || fail "no mpirun under $pid"
    kill -USR1 "$mpirun_pid"
    rc=0
    wait $pid || rc=$?
    stopped_ok "SIGUSR1 to mpirun" $rc "$work/log" "$work/fwd"
    mpi -np 2 "$train" "${common[@]}" --resume auto --out_dir "$work/fwd" >/dev/null
    [[ $(losses "$work/fwd") == "$(losses "$work/ref")" ]] || fail "SIGUSR1 to mpirun: the resumed losses differ"
    echo "ok: SIGUSR1 to mpirun stopped both ranks at step $stop_step (exit 75); the resumed run equals the uninterrupted one"
    ;;
  emu)
    # The GPU step's loop (emu: the CUDA kernels emulated; O3: the step a
    # captured graph after one eager step) stops the same way, and resumes
    # bit for bit.
    emu=(--device emu --precision O3 --steps 5)
    "$train" "${common[@]}" "${emu[@]}" --out_dir "$work/ref" >/dev/null
    rc=0
    ENGINE_FAULT=signal:0:3:TERM "$train" "${common[@]}" "${emu[@]}" --out_dir "$work/e" >"$work/log" 2>&1 || rc=$?
    stopped_ok "SIGTERM on emu at O3" $rc "$work/log" "$work/e"
    [[ $stop_step -eq 3 ]] || fail "emu: stopped at step $stop_step, not 3"
    grep -q "every step from now on is one graph replay" "$work/log" || fail "emu: the step was not a graph replay"
    "$train" "${common[@]}" "${emu[@]}" --resume auto --out_dir "$work/e" >/dev/null
    [[ $(losses "$work/e") == "$(losses "$work/ref")" ]] || fail "emu: the resumed losses differ"
    echo "ok: emu at O3 (graph replays) stopped by SIGTERM at step 3 (exit 75); the resumed run equals the uninterrupted one"
    ;;
  *)
    fail "unknown case $case_name"
    ;;
esac
