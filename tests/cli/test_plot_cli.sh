#!/usr/bin/env bash
# Black-box tests of scripts/plot.py, one ctest entry per case
# (tests/CMakeLists.txt): a PNG of the documented pixel size from hand-written
# metrics.jsonl files and from bench/kernels --json, and bad input (a missing,
# empty or non-JSON file, no training lines, no "results") as a one-line
# "plot: ..." error, exit 1, and no PNG.
# Usage: test_plot_cli.sh BUILD_DIR CASE
set -euo pipefail
build=$1
case_name=$2
plot=$(cd "$(dirname "$0")/../.." && pwd)/scripts/plot.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# expect_error.sh runs "$train" ... --out_dir OUT ARGS and checks that OUT was
# not created: this adapter makes OUT plot.py's -o, so "no out_dir" means "no
# PNG", and records the exit status, which must be 1 (2 is a usage error).
plot_run() {
  local out=$2 rc=0
  shift 2
  /usr/bin/python3 "$plot" "$@" -o "$out" || rc=$?
  echo "$rc" >"$work/rc"
  return "$rc"
}
# shellcheck disable=SC2034  # read by expect_error.sh
train=plot_run
source "$(dirname "$0")/expect_error.sh"
expect_plot_error() {
  expect_error "$@"
  [[ $(cat "$work/rc") -eq 1 ]] || fail "exit $(cat "$work/rc") (want 1): $*"
  [[ $(cat "$work/stderr") == "plot: "* ]] || fail "error does not start with 'plot: ': $(cat "$work/stderr")"
}

# Width x height of a PNG, from its IHDR chunk (bytes 16-23, big-endian).
png_size() {
  /usr/bin/python3 -c 'import struct, sys; d = open(sys.argv[1], "rb").read(24)
assert d[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"; print("%d x %d" % struct.unpack(">II", d[16:24]))' "$1"
}

# No temporary file (.plot-*.png) may be left beside an output.
no_leftovers() {
  [[ -z $(find "$work" -name '.plot-*') ]] || fail "temporary files left: $(find "$work" -name '.plot-*')"
}

# A GPT-2 metrics.jsonl as models/train writes it: val at step 0 and every 5,
# training lines with mfu (null where the peak is unknown).
write_metrics() {
  local file=$1 mfu=$2
  mkdir -p "$(dirname "$file")"
  {
    echo '{"step":0,"val_loss":5.55}'
    for s in 1 2 3 4 5 6 7 8 9 10; do
      echo "{\"flops_per_s\":6.5e9,\"grad_norm\":1.5,\"loss\":$(awk "BEGIN{print 5.5 - 0.2 * $s}"),\"lr\":0.001,\"mem_peak_bytes\":6545408,\"mfu\":$mfu,\"step\":$s,\"tokens_per_s\":$((7000 + 10 * s))}"
      ((s % 5)) || echo "{\"step\":$s,\"val_loss\":$(awk "BEGIN{print 5.6 - 0.2 * $s}")}"
    done
  } >"$file"
}

case $case_name in
metrics)
  write_metrics "$work/o0/metrics.jsonl" 0.04
  write_metrics "$work/o2/metrics.jsonl" null
  /usr/bin/python3 "$plot" metrics "$work/o0/metrics.jsonl" "$work/o2/metrics.jsonl" -o "$work/loss.png" >"$work/log"
  grep -qxF "wrote $work/loss.png (1500 x 450 px)" "$work/log" || fail "unexpected: $(cat "$work/log")"
  [[ $(png_size "$work/loss.png") == "1500 x 450" ]] || fail "loss.png is $(png_size "$work/loss.png")"
  # A ViT run: images/s, every mfu null, an accuracy key; explicit labels.
  printf '%s\n' '{"step":1,"loss":2.3,"images_per_s":410.5,"mfu":null,"data_wait_ms":0.4,"data_mb_per_s":55}' \
    '{"step":2,"loss":2.1,"images_per_s":420.5,"mfu":null,"data_wait_ms":0.3,"data_mb_per_s":56}' \
    '{"step":2,"val_loss":2.2,"accuracy":0.31}' >"$work/vit.jsonl"
  /usr/bin/python3 "$plot" metrics "$work/vit.jsonl" "$work/o0/metrics.jsonl" --labels vit,gpt2 -o "$work/vit.png" >/dev/null
  [[ $(png_size "$work/vit.png") == "1500 x 450" ]] || fail "vit.png is $(png_size "$work/vit.png")"
  no_leftovers

  # A last line still being written (no newline yet) is skipped with a
  # warning, as train --resume drops it; a whole line that is not JSON is an error.
  printf '%s\n%s' '{"step":1,"loss":5.5}' '{"step":2,"lo' >"$work/torn.jsonl"
  /usr/bin/python3 "$plot" metrics "$work/torn.jsonl" -o "$work/torn.png" >/dev/null 2>"$work/stderr" \
    || fail "a torn last line failed the plot: $(cat "$work/stderr")"
  grep -qxF "plot: $work/torn.jsonl:2: skipped a torn last line" "$work/stderr" || fail "unexpected: $(cat "$work/stderr")"
  [[ -s $work/torn.png ]] || fail "no torn.png"
  rm "$work/torn.png"
  printf '%s\n' '{"step":1,"loss":5.5}' '{"step":2,"lo' '{"step":3,"loss":5.3}' >"$work/bad.jsonl"
  expect_plot_error "bad.jsonl:2: not JSON" metrics "$work/bad.jsonl"
  printf '%s\n' '{"step":1,"loss":5.5}' '{"step":2,"lo' >"$work/bad_last.jsonl"
  expect_plot_error "bad_last.jsonl:2: not JSON" metrics "$work/bad_last.jsonl"
  : >"$work/empty.jsonl"
  expect_plot_error "empty.jsonl: empty file" metrics "$work/o0/metrics.jsonl" "$work/empty.jsonl"
  expect_plot_error "missing.jsonl: No such file" metrics "$work/missing.jsonl"
  echo '{"step":0,"val_loss":5.5}' >"$work/val_only.jsonl"
  expect_plot_error "val_only.jsonl: no training lines" metrics "$work/val_only.jsonl"
  # An output directory that does not exist.
  if /usr/bin/python3 "$plot" metrics "$work/o0/metrics.jsonl" -o "$work/no/such/dir.png" 2>"$work/stderr"; then
    fail "wrote into a directory that does not exist"
  fi
  grep -qxF "plot: $work/no/such/dir.png: cannot write (No such file or directory)" "$work/stderr" \
    || fail "unexpected: $(cat "$work/stderr")"
  no_leftovers
  ;;
roofline)
  "$build/bench/kernels" --quick --filter layernorm --json "$work/kernels.json" >"$work/bench_log" \
    || fail "bench/kernels failed: $(tail -3 "$work/bench_log")"
  # The cpu rows carry what the roofline needs: a time, bytes and flops.
  /usr/bin/python3 - "$work/kernels.json" <<'PY' || fail "no cpu row with median_ms, bytes and flops"
import json, sys
rows = json.load(open(sys.argv[1]))["results"]
assert any(r["impl"] == "cpu" and r["median_ms"] > 0 and r["bytes"] > 0 and r["flops"] > 0 for r in rows)
PY
  # The cpu panel alone: 700 x 550 on any machine.
  /usr/bin/python3 "$plot" roofline "$work/kernels.json" --impl cpu -o "$work/cpu.png" >"$work/log"
  grep -qxF "wrote $work/cpu.png (700 x 550 px)" "$work/log" || fail "unexpected: $(cat "$work/log")"
  [[ $(png_size "$work/cpu.png") == "700 x 550" ]] || fail "cpu.png is $(png_size "$work/cpu.png")"
  # Every device: a second 700 px panel when a GPU answered (known peaks or timed GPU rows).
  /usr/bin/python3 "$plot" roofline "$work/kernels.json" -o "$work/all.png" >"$work/log"
  want=$(/usr/bin/python3 - "$work/kernels.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
gpu = "gpu_peaks" in d["machine"] or any(r["impl"] not in ("cpu", "emu") and r["median_ms"] > 0 and r["bytes"] > 0
                                         and r["flops"] > 0 for r in d["results"])
print("1400 x 550" if gpu else "700 x 550")
PY
)
  [[ $(png_size "$work/all.png") == "$want" ]] || fail "all.png is $(png_size "$work/all.png"), want $want"
  no_leftovers

  echo '{"machine": {"gpu": ""}, "notes": []}' >"$work/no_results.json"
  expect_plot_error 'no_results.json: not a bench/kernels --json file' roofline "$work/no_results.json"
  printf '{"machine": {},\n "results": [,]}\n' >"$work/broken.json"
  expect_plot_error "broken.json:2: not JSON" roofline "$work/broken.json"
  no_leftovers
  ;;
*)
  fail "unknown case $case_name"
  ;;
esac
echo "ok: $case_name"
