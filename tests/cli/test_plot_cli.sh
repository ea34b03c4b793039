#!/usr/bin/env bash
# Black-box tests of scripts/plot.py, one ctest entry per case
# (tests/CMakeLists.txt): a PNG of the documented pixel size from hand-written
# metrics.jsonl files, from bench/kernels --json and from range logs
# (ENGINE_RANGE_LOG), and bad input (a missing, empty or non-JSON file, no
# training lines, no "results", an untimed range log, nothing to draw) as a
# one-line "plot: ..." error, exit 1, and no PNG.
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

# A range log as ENGINE_RANGE_LOG writes it ("push TIME NAME", "pop TIME",
# microseconds since the epoch) for stage RANK of a 2-stage pipeline: two
# steps of 4 micro-batches, all forwards then all backwards, with the
# point-to-point waits between (rank 1 waits for its activations inside
# forward, a nested range) and ranges the timeline does not draw (layers,
# a DDP bucket launch).
write_pipeline_log() {
  local file=$1 rank=$2 t=$((1700000000000000 + 40 * $2)) s m
  push() { t=$((t + $2)); echo "push $t $1"; }  # NAME, microseconds since the previous event
  pop() { t=$((t + $1)); echo "pop $t"; }
  {
    for s in 1 2; do
      push "step $s" 10
      for m in 0 1 2 3; do
        push data 3; pop 20
        push "forward $m" 2
        if ((rank == 1)); then push "p2p recv act $m" 1; pop 400; fi
        push h.0 1; pop 300; pop 5
        if ((rank == 0)); then push "p2p send act $m, recv grad $((m - 1))" 2; pop 30; fi
      done
      for m in 3 2 1 0; do
        if ((rank == 0)); then push "p2p recv grad $m" 5; pop 250; fi
        push "backward $m" 2; push "h.0 backward" 1; pop 500
        if ((m == 0)); then push "gradient bucket 1 of 1" 1; pop 10; fi
        pop 5
        if ((rank == 1)); then push "p2p send grad $m" 2; pop 30; fi
      done
      push communication 3; pop 40
      push optimizer 5; pop 100
      pop 10
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
timeline)
  for r in 0 1; do write_pipeline_log "$work/pp.log.rank$r" $r; done
  # Given in any order, the rows go by rank: 1.5 in + 0.5 in per row, 15 in wide.
  /usr/bin/python3 "$plot" timeline "$work/pp.log.rank1" "$work/pp.log.rank0" -o "$work/all.png" >"$work/log"
  grep -qxF "wrote $work/all.png (1500 x 250 px)" "$work/log" || fail "unexpected: $(cat "$work/log")"
  [[ $(png_size "$work/all.png") == "1500 x 250" ]] || fail "all.png is $(png_size "$work/all.png")"
  grep -n "^timeline: rank " "$work/log" | cut -d: -f1,3 >"$work/rows"
  [[ $(cat "$work/rows") == $'1: rank 0\n2: rank 1' ]] || fail "rows not in rank order: $(cat "$work/log")"
  grep -q "^timeline: rank 1: .*send / recv / p2p" "$work/log" || fail "no point-to-point waits on rank 1: $(cat "$work/log")"
  # --steps 2:2: the window is rank 0's 'step 2' range, from its push to the last pop.
  /usr/bin/python3 "$plot" timeline "$work"/pp.log.rank* --steps 2:2 --title "pp 2, step 2" -o "$work/step2.png" \
    >"$work/log"
  [[ $(png_size "$work/step2.png") == "1500 x 250" ]] || fail "step2.png is $(png_size "$work/step2.png")"
  want=$(awk '$0 ~ /^push [0-9]+ step 2$/ { a = $2 } END { printf "%.3f", ($2 - a) / 1e3 }' "$work/pp.log.rank0")
  grep -q "^timeline: rank 0: $want ms; forward" "$work/log" || fail "step 2 of rank 0 is not $want ms: $(cat "$work/log")"
  # A file without a .rankN suffix is labelled by its name; a third row is 50 px more.
  cp "$work/pp.log.rank0" "$work/single.log"
  /usr/bin/python3 "$plot" timeline "$work/single.log" "$work"/pp.log.rank* -o "$work/three.png" >"$work/log"
  [[ $(png_size "$work/three.png") == "1500 x 300" ]] || fail "three.png is $(png_size "$work/three.png")"
  grep -q "^timeline: single.log: " "$work/log" || fail "single.log not labelled by its name: $(cat "$work/log")"
  no_leftovers

  expect_plot_error "missing.log.rank0: No such file" timeline "$work/pp.log.rank0" "$work/missing.log.rank0"
  printf '%s\n' "push step 1" "push forward" "pop" "pop" >"$work/old.log"
  expect_plot_error "old.log:1: a range log without times ('push step 1'), written by an older build: re-run with a current build" \
    timeline "$work/old.log"
  printf '%s\n' "push 100 forward 0" "pop 200" "pop 300" >"$work/stray.log"
  expect_plot_error "stray.log:3: a pop with no open range" timeline "$work/stray.log"
  expect_plot_error "pp.log.rank0, $work/pp.log.rank1: nothing to draw in step 3: no range 'step 3' (the log has steps 1 to 2)" \
    timeline "$work"/pp.log.rank* --steps 3:3
  # Step 2 holds only ranges the timeline does not draw (a layer, validation).
  printf '%s\n' "push 100 step 1" "push 110 forward 0" "pop 200" "pop 210" \
    "push 300 step 2" "push 310 h.0" "pop 400" "push 410 validation" "pop 500" "pop 510" >"$work/bare.log"
  expect_plot_error "bare.log: nothing to draw in step 2: no range whose name starts with forward, backward, send, recv, p2p" \
    timeline "$work/pp.log.rank0" "$work/bare.log" --steps 2:2
  # A malformed window is a usage error (exit 2), before anything is read.
  if /usr/bin/python3 "$plot" timeline "$work/pp.log.rank0" --steps 3-5 -o "$work/bad.png" 2>"$work/stderr"; then
    fail "--steps 3-5 was accepted"
  fi
  grep -qF "argument --steps: '3-5': expected A:B" "$work/stderr" || fail "unexpected: $(cat "$work/stderr")"
  [[ ! -e $work/bad.png ]] || fail "a PNG was written despite --steps 3-5"
  no_leftovers
  ;;
*)
  fail "unknown case $case_name"
  ;;
esac
echo "ok: $case_name"
