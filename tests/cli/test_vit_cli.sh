#!/usr/bin/env bash
# Black-box tests of `train --model vit` on the HDF5 datasets, one ctest
# entry per case (tests/CMakeLists.txt): short runs that must learn (Fashion-
# MNIST accuracy well above chance, a weather forecast that beats
# persistence), bit-exact resume through the loader and sampler, the same
# losses with any number of reader threads, the O3 graph fed by the loader
# on emu, and bad input (a one-line error naming the option or file, and no
# out_dir).
# Usage: test_vit_cli.sh BUILD_DIR CASE
set -euo pipefail
build=$1
case_name=$2
train=$build/models/train
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# A small synthetic weather set: 2 training years, 1 validation year.
make_weather() {
  "$build/models/prepare_weather" --out "$work/wx" --height "${1:-16}" --width "${2:-32}" --steps "${3:-60}" >/dev/null
}
weather=(--model vit --dataset weather --train_data "$work/wx/train" --val_data "$work/wx/valid"
         --stats "$work/wx/stats.h5" --device cpu --warmup_steps 2)
# A tiny model on the small weather set: what the exactness cases share.
tiny=("${weather[@]}" --patch 4 --n_layer 1 --n_head 2 --n_embd 16 --batch_size 2 --grad_accum 2
      --val_every 0 --val_batches 1)

# Training losses ("loss" lines of metrics.jsonl) exactly as written.
losses() { grep -o '"loss":[^,]*' "$1/metrics.jsonl"; }
# The last value of a metrics key.
last() { grep -o "\"$2\":[^,}]*" "$1/metrics.jsonl" | tail -1 | cut -d: -f2; }

source "$(dirname "$0")/expect_error.sh"

case $case_name in
  fmnist_short)
    # 300 steps of 64 images (a third of an epoch) on the real Fashion-MNIST;
    # validation on the whole test set. Chance is 10%; this run got 75.0% (2026-11-23).
    "$build/models/prepare_fashion_mnist" --out "$work/fm" >/dev/null
    "$train" --model vit --train_data "$work/fm/train.h5" --val_data "$work/fm/test.h5" --patch 7 --n_layer 2 \
      --n_head 4 --n_embd 64 --batch_size 64 --steps 300 --warmup_steps 20 --lr 4e-3 --min_lr 2e-4 \
      --val_every 0 --val_batches 1000 --log_every 50 --device cpu --out_dir "$work/out" >"$work/log"
    acc=$(last "$work/out" val_accuracy)
    echo "test accuracy after 300 steps: $acc"
    python3 -c "import sys; sys.exit(0 if $acc >= 0.65 else 1)" || fail "accuracy $acc below 0.65"
    grep -q "accuracy .*% on 9984 images" "$work/log" || fail "no accuracy line: $(grep val "$work/log")"
    grep -q "img/s .* data wait [0-9.]* ms ([0-9.]*%) [0-9.]* MB/s" "$work/log" || fail "no data figures in progress"
    grep -q '"data_wait_ms":' "$work/out/metrics.jsonl" || fail "no data_wait_ms in metrics"
    ;;
  weather_short)
    # The forecast must beat persistence (predicting the input for dt later)
    # on the lat-weighted RMSE, averaged over the channels.
    make_weather
    "$train" "${weather[@]}" --patch 4 --n_layer 2 --n_head 4 --n_embd 64 --batch_size 16 --steps 150 \
      --lr 2e-3 --min_lr 2e-4 --val_every 0 --val_batches 8 --out_dir "$work/out" >"$work/log"
    ratio=$(last "$work/out" val_rmse_vs_persistence)
    echo "validation rmse / persistence rmse after 150 steps: $ratio ($(grep "val loss" "$work/log" | tail -1))"
    python3 -c "import sys; sys.exit(0 if $ratio < 0.9 else 1)" || fail "rmse/persistence $ratio not below 0.9"
    grep -q '"val_acc":\[' "$work/out/metrics.jsonl" || fail "no ACC in metrics"
    ;;
  timm)
    # timm's VisionTransformer, built from the checkpoint's config.json,
    # loads model.safetensors strictly and gives the engine's validation
    # loss and accuracy on the same 512 test images (tests/cli/timm_check.py).
    "$build/models/prepare_fashion_mnist" --out "$work/fm" >/dev/null
    "$train" --model vit --train_data "$work/fm/train.h5" --val_data "$work/fm/test.h5" --patch 7 --n_layer 2 \
      --n_head 4 --n_embd 32 --batch_size 64 --steps 20 --warmup_steps 5 --val_every 0 --val_batches 8 \
      --device cpu --out_dir "$work/out" >/dev/null
    root=$(cd "$(dirname "$0")/../.." && pwd)
    PYTHONPATH=$root/.deps/py /usr/bin/python3 "$root/tests/cli/timm_check.py" "$work/out" "$work/fm/test.h5" 512
    ;;
  nersc_layout)
    # The tutorial's stats/ directory of NumPy files: prepare_weather's equal
    # stats.h5 as NumPy reads them, and files np.save wrote train exactly as
    # the HDF5 stats file does (losses and validation metrics).
    make_weather 8 16 20
    /usr/bin/python3 - "$work/wx" <<'PY' || fail "stats/*.npy differ from stats.h5"
import sys, h5py, numpy as np
d = sys.argv[1]
with h5py.File(d + "/stats.h5") as f:
    mean, std, clim = f["mean"][:], f["std"][:], f["climatology"][:]
C = mean.size
assert np.array_equal(np.load(d + "/stats/global_means.npy"), mean.reshape(1, C, 1, 1))
assert np.array_equal(np.load(d + "/stats/global_stds.npy"), std.reshape(1, C, 1, 1))
assert np.array_equal(np.load(d + "/stats/time_means.npy"), clim[None])
import os
os.makedirs(d + "/np_stats")
np.save(d + "/np_stats/global_means.npy", mean.astype(np.float64).reshape(1, C, 1, 1))
np.save(d + "/np_stats/global_stds.npy", std.reshape(1, C, 1, 1))
np.save(d + "/np_stats/time_means.npy", clim[None])
PY
    run=("${tiny[@]}" --steps 6 --val_every 3)
    for s in stats.h5 stats np_stats; do
      "$train" "${run[@]}" --stats "$work/wx/$s" --out_dir "$work/$s" >/dev/null
      grep -o '"\(loss\|val_loss\|val_rmse\|val_acc\)":[^a-z]*' "$work/$s/metrics.jsonl" >"$work/$s.vals"
    done
    [[ -s $work/stats.h5.vals ]] || fail "no losses"
    cmp "$work/stats.h5.vals" "$work/stats.vals" || fail "--stats stats/ differs from --stats stats.h5"
    cmp "$work/stats.h5.vals" "$work/np_stats.vals" || fail "np.save's files differ from stats.h5"
    echo "ok: stats.h5, prepare_weather's stats/ and np.save's files give the same $(wc -l <"$work/stats.vals") values"
    ;;
  resume_bitexact)
    make_weather 8 16 20
    "$train" "${tiny[@]}" --steps 10 --out_dir "$work/a" >/dev/null
    "$train" "${tiny[@]}" --steps 10 --stop_after 4 --out_dir "$work/b" >/dev/null
    grep -q '"epoch": 0' "$work/b/checkpoint/state.json" || fail "no sampler epoch in state.json"
    "$train" "${tiny[@]}" --steps 10 --resume --out_dir "$work/b" >/dev/null
    diff <(losses "$work/a") <(losses "$work/b") || fail "resumed losses differ from the uninterrupted run"
    cmp "$work/a/checkpoint/model.safetensors" "$work/b/checkpoint/model.safetensors" || fail "final weights differ"
    # 38 samples, 4 per step: 9 steps per epoch, so the 10 steps cross an epoch.
    grep -q '"epoch": 1' "$work/b/checkpoint/state.json" || fail "the run did not cross an epoch"
    echo "ok: 10 steps straight == 4 + resume + 6, bit for bit, across an epoch boundary"
    if "$train" "${tiny[@]}" --steps 10 --batch_size 1 --resume --out_dir "$work/b" 2>"$work/err" >/dev/null; then
      fail "resume with another global batch was accepted"
    fi
    grep -q "global batch of 4 images" "$work/err" || fail "unclear error: $(cat "$work/err")"
    ;;
  workers)
    # Reader threads change when samples are read, never which: the losses
    # are the same with none (reads on the training thread) or three.
    make_weather 8 16 20
    "$train" "${tiny[@]}" --steps 6 --data_workers 0 --out_dir "$work/w0" >/dev/null
    "$train" "${tiny[@]}" --steps 6 --data_workers 3 --read_path hdf5 --out_dir "$work/w3" >/dev/null
    diff <(losses "$work/w0") <(losses "$work/w3") || fail "losses depend on the reader threads or the read path"
    echo "ok: 0 workers (pread) == 3 workers (H5Dread), bit for bit"
    ;;
  emu_o3)
    # The loader's device double buffer feeding a captured CUDA graph: the
    # O3 step (replayed from step 2) gives the eager O2 step's losses exactly.
    make_weather 8 16 20
    "$train" "${tiny[@]}" --steps 4 --device emu --precision O2 --out_dir "$work/o2" >/dev/null
    "$train" "${tiny[@]}" --steps 4 --device emu --precision O3 --out_dir "$work/o3" >"$work/log"
    grep -q "captured as a CUDA graph" "$work/log" || fail "O3 did not capture a graph"
    diff <(losses "$work/o2") <(losses "$work/o3") || fail "O3 replays differ from eager O2"
    echo "ok: emu O3 (graph replays fed by the loader) == emu O2 eager, bit for bit"
    ;;
  bad_input)
    make_weather 8 16 20
    expect_error "patch 5 must divide the image 8 x 16" "${tiny[@]}" --patch 5
    expect_error "config: patch: not read by model gpt2" --patch 8
    expect_error "config: train_bin: not read by model vit" "${tiny[@]}" --train_bin x.bin
    expect_error "dataset weather needs stats" "${tiny[@]}" --stats ""
    expect_error "config: dataset 'video'" "${tiny[@]}" --dataset video
    expect_error "$work/missing" "${tiny[@]}" --train_data "$work/missing"
    expect_error "$work/wx/train/2000.h5" --model vit --train_data "$work/wx/train/2000.h5" --device cpu
    expect_error "channel 9" "${tiny[@]}" --in_channels 0-2,9
    expect_error "read_path 'mmap'" "${tiny[@]}" --read_path mmap
    ;;
  bad_data)
    # A NaN in the fields is named by file, dataset and index, not reported
    # as a divergence of the loss.
    make_weather 8 16 20
    /usr/bin/python3 -c 'import h5py, sys; f = h5py.File(sys.argv[1], "r+"); f["fields"][3, 1, 2, 5] = float("nan")' \
      "$work/wx/train/2001.h5"
    if "$train" "${tiny[@]}" --steps 40 --out_dir "$work/nan" >/dev/null 2>"$work/err"; then
      fail "trained on a NaN"
    fi
    grep -qF "$work/wx/train/2001.h5: dataset 'fields': NaN at index (3, 1, 2, 5)" "$work/err" ||
      fail "unexpected message: $(cat "$work/err")"
    [[ $(wc -l <"$work/err") -eq 1 ]] || fail "not one line: $(cat "$work/err")"
    echo "ok: $(cat "$work/err")"
    # A file cut short while training reads it through H5Dread (chunked
    # fields): an error, never batches of zeros.
    make_weather 8 16 20
    for f in "$work"/wx/train/*.h5; do
      /usr/bin/python3 -c '
import h5py, sys
with h5py.File(sys.argv[1], "r+") as f:
    data = f["fields"][...]
    del f["fields"]
    f.create_dataset("fields", data=data, chunks=(1,) + data.shape[1:])' "$f"
    done
    "$train" "${tiny[@]}" --steps 100000 --read_path hdf5 --out_dir "$work/cut" >/dev/null 2>"$work/err" &
    job=$!
    for _ in $(seq 600); do
      [[ -f $work/cut/metrics.jsonl ]] && (( $(grep -c '"loss"' "$work/cut/metrics.jsonl" || true) >= 3 )) && break
      sleep 0.1
    done
    for f in "$work"/wx/train/*.h5; do truncate -s $(( $(stat -c %s "$f") * 2 / 5 )) "$f"; done
    for _ in $(seq 300); do kill -0 $job 2>/dev/null || break; sleep 0.1; done
    if kill -0 $job 2>/dev/null; then kill $job; fail "training went on 30 s after its files were cut"; fi
    if wait $job; then fail "training succeeded on cut files"; fi
    grep -qE "train/200[01].h5: dataset 'fields': the file shrank from [0-9]+ to [0-9]+ bytes since it was opened" \
      "$work/err" || fail "unexpected message: $(cat "$work/err")"
    echo "ok: $(cat "$work/err")"
    ;;
  *)
    fail "unknown case $case_name"
    ;;
esac
