#!/usr/bin/env bash
# Black-box tests of the dataset preparation programs, one ctest entry per
# case (tests/CMakeLists.txt): their files open in the engine's datasets and
# feed the loader (bench/loader reads them), and bad input is a one-line
# error with a non-zero exit and no output written.
# Usage: test_data_cli.sh BUILD_DIR CASE
set -euo pipefail
build=$1
case_name=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# Runs a command expecting failure: exit code $1, message containing $2, one line.
expect_error() {
  local code=$1 want=$2; shift 2
  set +e
  "$@" >"$work/stdout" 2>"$work/stderr"
  local rc=$?
  set -e
  [[ $rc -eq $code ]] || fail "exit $rc (want $code): $*: $(cat "$work/stderr")"
  grep -qF -- "$want" "$work/stderr" || fail "error does not mention '$want': $(cat "$work/stderr")"
  [[ $(wc -l <"$work/stderr") -eq 1 ]] || fail "error is not one line: $(cat "$work/stderr")"
}

case $case_name in
weather)
  "$build/models/prepare_weather" --out "$work/wx" --channels 4 --height 8 --width 16 --steps 12 \
    --train_years 2 --valid_years 1 >"$work/log"
  [[ -f $work/wx/train/2000.h5 && -f $work/wx/train/2001.h5 && -f $work/wx/valid/2002.h5 && -f $work/wx/stats.h5 ]] \
    || fail "missing files: $(ls -R "$work/wx")"
  ls "$work/wx"/*/*.tmp 2>/dev/null && fail "temporary files left"
  # The loader bench opens them through WeatherDataset and reads batches both ways.
  "$build/bench/loader" --dir "$work/wx/train" --stats "$work/wx/stats.h5" --batch 2 --batches 3 --step_ms 1 \
    >"$work/bench" || fail "loader could not read the prepared files: $(cat "$work/bench")"
  grep -q "2 files, 22 samples of 4 -> 4 channels, 8 x 16" "$work/bench" || fail "unexpected dataset: $(head -1 "$work/bench")"
  expect_error 2 "--height" "$build/models/prepare_weather" --out "$work/bad" --height 0
  expect_error 2 "--bogus" "$build/models/prepare_weather" --out "$work/bad" --bogus 1
  [[ ! -e $work/bad/stats.h5 ]] || fail "bad options wrote files"
  ;;
fashion_mnist)
  src=/usr/share/datasets/fashion-mnist
  [[ -f $src/train-images-idx3-ubyte.gz ]] || fail "$src missing (scripts/setup.sh installs dataset-fashion-mnist)"
  "$build/models/prepare_fashion_mnist" --out "$work/fm" >"$work/log"
  grep -q "60000 images 28x28" "$work/log" || fail "unexpected: $(cat "$work/log")"
  grep -q "10000 images 28x28" "$work/log" || fail "unexpected: $(cat "$work/log")"
  # h5py (the independent reader) agrees on shape, labels and the stats.
  /usr/bin/python3 - "$work/fm/train.h5" <<'PY' || fail "h5py check failed"
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    im, lab = f["images"], f["labels"]
    assert im.shape == (60000, 28, 28) and im.dtype == np.uint8, im
    assert lab.shape == (60000,) and set(np.unique(lab[...])) == set(range(10))
    px = im[...].astype(np.float64) / 255
    assert abs(px.mean() - im.attrs["mean"]) < 1e-9 and abs(px.std() - im.attrs["std"]) < 1e-9
PY
  mkdir -p "$work/broken"
  head -c 1000 "$src/train-images-idx3-ubyte.gz" >"$work/broken/train-images-idx3-ubyte.gz"
  cp "$src"/train-labels-idx1-ubyte.gz "$src"/t10k-*.gz "$work/broken/"
  expect_error 1 "train-images-idx3-ubyte.gz" "$build/models/prepare_fashion_mnist" --src "$work/broken" --out "$work/fm_bad"
  [[ ! -e $work/fm_bad/train.h5 && ! -e $work/fm_bad/test.h5 ]] || fail "a broken source wrote files"
  ;;
*)
  fail "unknown case $case_name"
  ;;
esac
echo "ok: $case_name"
