#!/usr/bin/env bash
# The TensorBoard event files of real runs, read back by TensorBoard's own
# reader (tests/cli/tb_check.py, the tensorboard package from PyPI) and
# checked against metrics.jsonl; one ctest entry per case.
#   gpt2_resume  a run stopped at step 4, resumed to 7, then resumed again
#                from step 4 (as after a crash whose last checkpoint was 4):
#                every tag has steps 1..10 once, with the values of
#                metrics.jsonl, which equal an uninterrupted run's;
#                --tensorboard DIR and off; --overwrite deletes tb/'s files.
#   weather      validation's per-channel RMSE and ACC under val/rmse/channel_<c>.
# Usage: test_tensorboard.sh BUILD_DIR CASE   (exit 77: skipped, no tensorboard package)
set -euo pipefail
build=$1
case_name=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
train=$build/models/train
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
check() { PYTHONPATH=$root/.deps/py /usr/bin/python3 "$root/tests/cli/tb_check.py" "$@"; }
events() { find "$1" -name 'events.out.tfevents.*' | wc -l; }

# Skip (77) before any work when the reader is missing.
PYTHONPATH=$root/.deps/py /usr/bin/python3 -c "import tensorboard" 2>/dev/null ||
  { echo "skipped: no tensorboard package (scripts/fetch_pydeps.sh installs it)"; exit 77; }

case $case_name in
  gpt2_resume)
    "$build/models/prepare_text" "$work/data" 0.1 /usr/share/games/fortunes >/dev/null
    run=(--vocab_size 256 --block_size 32 --n_layer 2 --n_head 2 --n_embd 32 --batch_size 4 --seq_len 32
         --warmup_steps 2 --val_every 3 --sample_every 0 --val_batches 2 --device cpu --steps 10
         --train_bin "$work/data/train.bin" --val_bin "$work/data/val.bin")
    "$train" "${run[@]}" --out_dir "$work/a" >/dev/null
    check "$work/a"
    "$train" "${run[@]}" --stop_after 4 --out_dir "$work/b" >/dev/null
    cp -r "$work/b/checkpoint" "$work/ckpt4"
    "$train" "${run[@]}" --resume --stop_after 3 --out_dir "$work/b" >/dev/null
    # A crash after step 7 whose last checkpoint was step 4: steps 5-7 run again.
    rm -rf "$work/b/checkpoint" && cp -r "$work/ckpt4" "$work/b/checkpoint"
    "$train" "${run[@]}" --resume --out_dir "$work/b" >/dev/null
    [[ $(events "$work/b/tb") -eq 3 ]] || fail "expected 3 event files (one per run), got $(events "$work/b/tb")"
    check "$work/b"
    diff <(grep -o '"loss":[^,]*' "$work/a/metrics.jsonl") <(grep -o '"loss":[^,]*' "$work/b/metrics.jsonl") ||
      fail "the resumed run's losses differ from the uninterrupted run's"
    # Elsewhere, and off.
    "$train" "${run[@]}" --steps 3 --tensorboard "$work/elsewhere" --out_dir "$work/c" >/dev/null
    [[ ! -e $work/c/tb && $(events "$work/elsewhere") -eq 1 ]] || fail "--tensorboard DIR not honoured"
    check "$work/c" "$work/elsewhere"
    "$train" "${run[@]}" --steps 3 --tensorboard off --out_dir "$work/d" >/dev/null
    [[ ! -e $work/d/tb ]] || fail "--tensorboard off wrote $work/d/tb"
    # --overwrite starts the curves afresh: the earlier run's files go, a note beside them stays.
    touch "$work/a/tb/notes.txt"
    "$train" "${run[@]}" --steps 3 --overwrite --out_dir "$work/a" >/dev/null
    [[ $(events "$work/a/tb") -eq 1 && -f $work/a/tb/notes.txt ]] || fail "--overwrite left $(ls "$work/a/tb")"
    check "$work/a"
    echo "ok: stop, resume, crash-resume: one curve per tag; --tensorboard DIR, off; --overwrite"
    ;;
  weather)
    "$build/models/prepare_weather" --out "$work/wx" --height 8 --width 16 --steps 20 >/dev/null
    "$train" --model vit --dataset weather --train_data "$work/wx/train" --val_data "$work/wx/valid" \
      --stats "$work/wx/stats.h5" --device cpu --warmup_steps 2 --patch 4 --n_layer 1 --n_head 2 --n_embd 16 \
      --batch_size 2 --steps 4 --val_every 2 --val_batches 1 --out_dir "$work/out" >/dev/null
    check "$work/out"
    grep -q '"val_rmse":\[' "$work/out/metrics.jsonl" || fail "no per-channel RMSE in metrics.jsonl"
    ;;
  *) fail "unknown case $case_name" ;;
esac
