#!/usr/bin/env bash
# Black-box tests of what train does to protect a user's data and machine,
# one ctest entry per case (tests/CMakeLists.txt): an out_dir holding an
# earlier run is never overwritten by a fresh one; a second job on a live
# out_dir is refused by its lock; a resume killed at any moment loses no
# metrics; a full disk stops the run at once with the file and the reason,
# keeping the latest checkpoint; the start-up memory check refuses a batch
# that cannot fit and names one that does; a failed allocation is one line;
# mistyped flags and damaged checkpoints are blamed precisely; loaded weights
# and optimizer state that no training produces are refused by name; a data
# file rewritten under a run, and a uint32 shard's id past the vocabulary, are named errors.
# Usage: test_safety_cli.sh BUILD_DIR CASE
set -euo pipefail
build=$1
case_name=$2
train=$build/models/train
prep=$build/models/prepare_text
work=$(mktemp -d)
mounted=""
jobs_started=()  # background trains a failing case must not leave running
cleanup() {
  for pid in ${jobs_started[@]+"${jobs_started[@]}"}; do kill -9 "$pid" 2>/dev/null || true; done
  [[ -z $mounted ]] || umount "$mounted" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$prep" "$work/data" 0.1 /usr/share/games/fortunes >/dev/null
common=(--vocab_size 256 --block_size 32 --n_layer 2 --n_head 2 --n_embd 32 --batch_size 4 --seq_len 32
        --warmup_steps 2 --val_every 0 --sample_every 0 --val_batches 2 --sample_tokens 8 --device cpu
        --train_bin "$work/data/train.bin" --val_bin "$work/data/val.bin")
source "$(dirname "$0")/run_watch.sh"  # steps_in, state_step, wait_steps

case $case_name in
  out_dir)
    "$train" "${common[@]}" --steps 30 --stop_after 20 --out_dir "$work/x" >/dev/null
    before=$(cat "$work/x/metrics.jsonl" "$work/x/checkpoint/"* | md5sum)
    # A fresh run into it: refused in one line, nothing of the earlier run touched.
    if "$train" "${common[@]}" --steps 30 --stop_after 3 --out_dir "$work/x" >/dev/null 2>"$work/err"; then
      fail "a fresh run replaced an earlier run's checkpoint"
    fi
    grep -qF "$work/x holds an earlier run (checkpoint/ at step 20 of 30, metrics.jsonl with 21 lines, tb/ with 1 event file): --resume to continue it, --overwrite to delete it and start again, or another --out_dir" \
      "$work/err" || fail "unexpected message: $(cat "$work/err")"
    [[ $(wc -l <"$work/err") -eq 1 ]] || fail "not one line: $(cat "$work/err")"
    [[ $(cat "$work/x/metrics.jsonl" "$work/x/checkpoint/"* | md5sum) == "$before" ]] || fail "the earlier run changed"
    echo "ok: $(cat "$work/err")"
    # --resume and --overwrite together: refused too.
    if "$train" "${common[@]}" --steps 30 --resume --overwrite --out_dir "$work/x" >/dev/null 2>"$work/err"; then
      fail "--resume --overwrite accepted"
    fi
    grep -qF "choose one" "$work/err" || fail "unexpected message: $(cat "$work/err")"
    # --resume continues it; --overwrite starts again from nothing.
    "$train" "${common[@]}" --steps 30 --resume --out_dir "$work/x" >/dev/null
    [[ $(steps_in "$work/x") -eq 30 ]] || fail "resume: $(steps_in "$work/x") steps in metrics.jsonl, not 30"
    "$train" "${common[@]}" --steps 30 --stop_after 3 --overwrite --out_dir "$work/x" >/dev/null
    [[ $(steps_in "$work/x") -eq 3 ]] || fail "overwrite: $(steps_in "$work/x") steps in metrics.jsonl, not 3"
    [[ $(state_step "$work/x") -eq 3 ]] || fail "overwrite: the checkpoint is at step $(state_step "$work/x"), not 3"
    echo "ok: --resume continues the run, --overwrite starts it again"
    # Only a metrics history (a run killed before its first checkpoint): nothing to resume.
    mkdir -p "$work/h"
    cp "$work/x/metrics.jsonl" "$work/h/"
    if "$train" "${common[@]}" --steps 30 --out_dir "$work/h" >/dev/null 2>"$work/err"; then
      fail "a fresh run replaced an earlier run's metrics"
    fi
    grep -qF "$work/h holds an earlier run (metrics.jsonl with 4 lines): --overwrite to delete it and start again, or another --out_dir" \
      "$work/err" || fail "unexpected message: $(cat "$work/err")"
    echo "ok: $(cat "$work/err")"
    # Only TensorBoard event files: a fresh run would draw its curves over theirs.
    mkdir -p "$work/e/tb"
    cp "$work/x/tb/"events.out.tfevents.* "$work/e/tb/"
    if "$train" "${common[@]}" --steps 30 --out_dir "$work/e" >/dev/null 2>"$work/err"; then
      fail "a fresh run went on over an earlier run's event files"
    fi
    grep -qF "$work/e holds an earlier run (tb/ with 1 event file)" "$work/err" || fail "unexpected message: $(cat "$work/err")"
    echo "ok: $(cat "$work/err")"
    ;;
  lock)
    # A live job holds its out_dir: a second one is refused naming the first.
    "$train" "${common[@]}" --steps 100000 --warmup_steps 10 --out_dir "$work/l" >/dev/null 2>&1 &
    first=$!
    jobs_started+=($first)
    wait_steps "$work/l" 2
    for mode in "" --overwrite --resume; do
      if "$train" "${common[@]}" --steps 100000 --warmup_steps 10 $mode --out_dir "$work/l" >/dev/null \
           2>"$work/err"; then
        kill -9 $first
        fail "a second job ($mode) ran on a live out_dir"
      fi
      grep -qF "$work/l is in use by another run (pid $first on host $(hostname) since" "$work/err" ||
        { kill -9 $first; fail "unexpected message ($mode): $(cat "$work/err")"; }
    done
    echo "ok: $(cat "$work/err")"
    # kill -9 leaves no stale lock: the kernel drops it with the process.
    "$train" "${common[@]}" --steps 100000 --warmup_steps 10 --checkpoint_every 5 --out_dir "$work/m" >/dev/null &
    second=$!
    jobs_started+=($second)
    wait_steps "$work/m" 6
    kill -9 $first $second
    wait $first $second 2>/dev/null || true
    "$train" "${common[@]}" --steps 100000 --warmup_steps 10 --stop_after 2 --resume --out_dir "$work/m" \
      >/dev/null 2>"$work/err" || fail "resume after kill -9: $(cat "$work/err")"
    echo "ok: after kill -9 the out_dir is free again (resumed from step $(( $(state_step "$work/m") - 2 )))"
    ;;
  metrics_kill)
    # A resume rewrites metrics.jsonl up to its checkpoint's step. Killed
    # while doing so, it must leave the history whole: the old file or the
    # new, never a cut one. A long history makes the rewrite take a while,
    # and kills land at several moments of it.
    "$train" "${common[@]}" --steps 40 --stop_after 20 --out_dir "$work/k" >/dev/null
    python3 - "$work/k/metrics.jsonl" <<'PY'
import json, sys
path = sys.argv[1]
lines = open(path).read().splitlines()
with open(path, "a") as f:  # 300k more validation lines at step 0: kept by every rewrite
    for i in range(300000):
        f.write(json.dumps({"step": 0, "val_loss": 5.0, "note": i}) + "\n")
PY
    want=$(wc -l <"$work/k/metrics.jsonl")
    for delay in 0.2 0.4 0.6 0.8 1.0 1.5; do
      "$train" "${common[@]}" --steps 40 --resume --out_dir "$work/k" >/dev/null 2>&1 &
      pid=$!
      jobs_started+=($pid)
      sleep $delay
      kill -9 $pid 2>/dev/null || true
      wait $pid 2>/dev/null || true
      have=$(python3 -c '
import json, sys
n = 0
for l in open(sys.argv[1]):
    try:
        n += json.loads(l).get("step", 0) <= 20
    except ValueError:  # a torn line: lost history
        pass
print(n)' "$work/k/metrics.jsonl")
      [[ $have -eq $want ]] || fail "killed $delay s into a resume: $have of $want lines up to step 20 left"
    done
    "$train" "${common[@]}" --steps 40 --resume --out_dir "$work/k" >/dev/null
    [[ $(steps_in "$work/k") -eq 40 ]] || fail "$(steps_in "$work/k") steps after the last resume, not 40"
    echo "ok: 6 resumes killed at 0.2 to 1.5 s lost none of the $want lines; the 7th completed all 40 steps"
    ;;
  disk_full)
    # A real full disk where this test may mount a small tmpfs (root): the
    # run resumes with 24 kB left, its metrics fill them, and it must stop
    # at that step, naming the file and the reason; the checkpoint it then
    # tries to save cannot fit either, so the previous one must stay whole.
    # Elsewhere a file-size limit (ulimit -f; writes past it fail with EFBIG,
    # SIGXFSZ ignored) stops metrics.jsonl alone: that last save succeeds.
    small=(--n_layer 1 --n_embd 8 --steps 100000 --warmup_steps 10 --log_every 1000)
    dir=$work/full
    mkdir -p "$dir"
    if mount -t tmpfs -o size=1m tmpfs "$dir" 2>/dev/null; then
      mounted=$dir
      "$train" "${common[@]}" "${small[@]}" --stop_after 50 --out_dir "$dir/run" >/dev/null
      dd if=/dev/zero of="$dir/filler" bs=4k 2>/dev/null || true  # until the disk is full
      truncate -s -24k "$dir/filler"
      if "$train" "${common[@]}" "${small[@]}" --resume --out_dir "$dir/run" >"$work/out" 2>"$work/err"; then
        fail "the run went on with a full disk"
      fi
      grep -qE "^train: error: $dir/run/(metrics.jsonl|tb/events.out.tfevents.[^:]*): write failed: No space left on device: the run stops at step [0-9]+; .*checkpoint at step [0-9]+ not saved: .*No space left on device; $dir/run/checkpoint keeps the previous one \(free space, then --resume\)$" \
        "$work/err" || fail "unexpected message: $(cat "$work/err")"
      saved=50
      # A fresh run on the full disk has no checkpoint to go back to: the
      # advice is --overwrite, not a --resume that would find nothing.
      truncate -s -8k "$dir/filler"
      if "$train" "${common[@]}" "${small[@]}" --out_dir "$dir/fresh" >/dev/null 2>"$work/err2"; then
        fail "a fresh run went on with a full disk"
      fi
      grep -qE "^train: error: .*: the run stops at step [0-9]+; checkpoint at step [0-9]+ not saved: .* \(free space, then start again with --overwrite\)$" \
        "$work/err2" || fail "unexpected message (fresh run): $(cat "$work/err2")"
      echo "ok: $(cat "$work/err2")"
      rm -rf "$dir/fresh"
    else
      if (trap '' XFSZ; ulimit -f 160; exec "$train" "${common[@]}" "${small[@]}" --checkpoint_every 50 \
            --out_dir "$dir/run") >"$work/out" 2>"$work/err"; then
        fail "the run went on past the file-size limit"
      fi
      grep -qE "^train: error: $dir/run/(metrics.jsonl|tb/events.out.tfevents.[^:]*): write failed: File too large: the run stops at step [0-9]+; checkpoint saved at step [0-9]+ \(free space, then --resume\)$" \
        "$work/err" || fail "unexpected message: $(cat "$work/err")"
      saved=$(grep -oE 'stops at step [0-9]+' "$work/err" | grep -oE '[0-9]+$')
    fi
    [[ $(wc -l <"$work/err") -eq 1 ]] || fail "not one line: $(cat "$work/err")"
    stopped=$(grep -oE 'stops at step [0-9]+' "$work/err" | grep -oE '[0-9]+$')
    have=$(steps_in "$dir/run")
    (( stopped <= have + 1 )) || fail "stopped at step $stopped, $((stopped - have)) steps after the metrics stopped"
    step=$(state_step "$dir/run")
    [[ $step -eq $saved ]] || fail "the checkpoint is at step $step, expected $saved"
    [[ ! -e $dir/run/checkpoint.tmp ]] || fail "a partial checkpoint.tmp was left behind"
    echo "ok: $(cat "$work/err")"
    # A log that cannot be written (stdout on a full device) stops the run as well.
    if "$train" "${common[@]}" "${small[@]}" --out_dir "$work/log" >/dev/full 2>"$work/err"; then
      fail "the run went on with its log failing"
    fi
    grep -qF "train: error: standard output: write failed: No space left on device: the run stops at step 1; checkpoint saved at step 1" \
      "$work/err" || fail "unexpected message: $(cat "$work/err")"
    [[ $(state_step "$work/log") -eq 1 ]] || fail "no checkpoint at step 1"
    echo "ok: $(cat "$work/err")"
    ;;
  memory)
    # A batch that cannot fit is refused before the first step, naming the
    # figure and a batch that fits; that batch then runs within the limit.
    if "$train" "${common[@]}" --steps 2 --batch_size 256 --memory_limit_gb 0.03 --out_dir "$work/big" \
         >/dev/null 2>"$work/err"; then
      fail "a batch over the memory limit ran"
    fi
    grep -qE "^train: error: memory: batch_size 256 plans [0-9.]+ MB on cpu .*, more than the [0-9.]+ MB it can have \(--memory_limit_gb\) less 6% for the step's temporaries and the allocator's rounding; batch_size [0-9]+ fits" \
      "$work/err" || fail "unexpected message: $(cat "$work/err")"
    [[ $(wc -l <"$work/err") -eq 1 && ! -e $work/big ]] || fail "not one line, or out_dir made: $(cat "$work/err")"
    echo "ok: $(cat "$work/err")"
    fits=$(grep -oE 'batch_size [0-9]+ fits' "$work/err" | grep -oE '[0-9]+')
    (( fits >= 2 && fits < 256 )) || fail "suggested batch_size $fits"
    "$train" "${common[@]}" --steps 2 --batch_size "$fits" --memory_limit_gb 0.03 --out_dir "$work/fits" >/dev/null
    peak=$(python3 -c '
import json, sys
for l in open(sys.argv[1]):
    j = json.loads(l)
    if "memory_per_rank" in j: print(j["memory_per_rank"]["peak_bytes"])' "$work/fits/metrics.jsonl")
    (( peak <= 30000000 )) || fail "batch_size $fits peaked at $peak bytes, over the 0.03 GB limit"
    (( peak >= 15000000 )) || fail "batch_size $fits peaked at $peak bytes: the suggestion wastes half the limit"
    echo "ok: batch_size $fits ran and peaked at $peak bytes of 30000000"
    ;;
  alloc_fails)
    # With the check off and the address space capped (ulimit -v), the
    # allocation that fails is one line naming the device and the size.
    # Not under ASan, which needs terabytes of address space for its shadow.
    libs=$(ldd "$train" 2>/dev/null || true)
    if [[ $libs == *libasan* ]]; then echo "skipped: ASan build (ulimit -v)"; exit 0; fi
    if (ulimit -v 3000000; exec "$train" "${common[@]}" --steps 2 --batch_size 20000 --global_batch 0 \
          --val_bin "$work/data/train.bin" --memory_limit_gb -1 --out_dir "$work/a") >/dev/null 2>"$work/err"; then
      fail "20000 sequences ran in 3 GB of address space"
    fi
    grep -qE "^train: error: .*(out of memory on cpu: cannot allocate [0-9.]+ MiB more|out of host memory \(std::bad_alloc\))" \
      "$work/err" || fail "unexpected message: $(cat "$work/err")"
    [[ $(wc -l <"$work/err") -eq 1 ]] || fail "not one line: $(cat "$work/err")"
    echo "ok: $(cat "$work/err")"
    # The same batch with the check on: refused before the first step, naming ulimit -v.
    if (ulimit -v 3000000; exec "$train" "${common[@]}" --steps 2 --batch_size 20000 --global_batch 0 \
          --val_bin "$work/data/train.bin" --out_dir "$work/b") >/dev/null 2>"$work/err"; then
      fail "20000 sequences passed the memory check in 3 GB"
    fi
    grep -qE "^train: error: memory: batch_size 20000 plans .*\(ulimit -v\) less 6% for the step's temporaries and the allocator's rounding; batch_size [0-9]+ fits" "$work/err" ||
      fail "unexpected message: $(cat "$work/err")"
    echo "ok: $(cat "$work/err")"
    # The batch it names runs under the same limit: training, validation and
    # the closing sample (the address space of OpenBLAS's buffers and the
    # threads' arenas is taken before the check and counted).
    fits=$(grep -oE 'batch_size [0-9]+ fits' "$work/err" | grep -oE '[0-9]+')
    (ulimit -v 3000000; exec "$train" "${common[@]}" --steps 2 --batch_size "$fits" --global_batch 0 \
       --val_bin "$work/data/train.bin" --sample_tokens 32 --out_dir "$work/c") >/dev/null 2>"$work/err" ||
      fail "the suggested batch_size $fits failed under the same ulimit -v: $(cat "$work/err")"
    echo "ok: the suggested batch_size $fits ran under the same ulimit -v 3000000"
    # A limit that leaves no room for the compute threads: refused, not a hang inside OpenBLAS.
    if (ulimit -v 1300000; OMP_NUM_THREADS=2 exec timeout 60 "$train" "${common[@]}" --steps 2 --out_dir "$work/d") >/dev/null \
         2>"$work/err"; then
      fail "ran with 1.3 GB of address space"
    fi
    grep -qE "^train: error: (memory: ulimit -v leaves [0-9.]+ MB of address space; the [0-9]+ compute thread\(s\) take up to|out of memory on cpu|out of host memory)" \
      "$work/err" || fail "unexpected message: $(cat "$work/err")"
    echo "ok: $(cat "$work/err")"
    ;;
  flags)
    # A mistyped bare flag is blamed on itself, not on the value after it.
    if "$train" "${common[@]}" --resum --lr 0.001 --out_dir "$work/f" >/dev/null 2>"$work/err"; then
      fail "--resum accepted"
    fi
    grep -qF "command line: unknown option '--resum' (did you mean 'resume'?)" "$work/err" ||
      fail "unexpected message: $(cat "$work/err")"
    echo "ok: $(cat "$work/err")"
    # A negative step in state.json is a damaged checkpoint.
    "$train" "${common[@]}" --steps 6 --stop_after 3 --out_dir "$work/s" >/dev/null
    python3 - "$work/s/checkpoint/state.json" <<'PY'
import json, sys
state = json.load(open(sys.argv[1]))
state["step"] = -7
json.dump(state, open(sys.argv[1], "w"))
PY
    if "$train" "${common[@]}" --steps 6 --resume --out_dir "$work/s" >/dev/null 2>"$work/err"; then
      fail "step -7 resumed"
    fi
    grep -qF "checkpoint/state.json: step -7 is negative" "$work/err" || fail "unexpected message: $(cat "$work/err")"
    echo "ok: $(cat "$work/err")"
    # --optimizer sgd with --device auto where no GPU answers: auto is the cpu, where sgd runs.
    if ! nvidia-smi -L >/dev/null 2>&1; then
      "$train" "${common[@]}" --device auto --optimizer sgd --steps 2 --out_dir "$work/sgd" >/dev/null 2>"$work/err" ||
        fail "--optimizer sgd with --device auto on a machine without a GPU: $(cat "$work/err")"
      echo "ok: --optimizer sgd runs with --device auto where no GPU answers"
    fi
    # --init_from a directory or a text file: said as such.
    if "$train" "${common[@]}" --init_from "$work/s" --out_dir "$work/i" >/dev/null 2>"$work/err"; then
      fail "--init_from a directory accepted"
    fi
    grep -qxF "train: error: $work/s: a directory; a .safetensors file is expected (a checkpoint's model.safetensors)" \
      "$work/err" || fail "unexpected message: $(cat "$work/err")"
    echo "ok: $(cat "$work/err")"
    if "$train" "${common[@]}" --init_from "$work/s/metrics.jsonl" --out_dir "$work/i" >/dev/null 2>"$work/err"; then
      fail "--init_from a text file accepted"
    fi
    grep -qF "train: error: $work/s/metrics.jsonl: not a safetensors file" "$work/err" ||
      fail "unexpected message: $(cat "$work/err")"
    echo "ok: $(cat "$work/err")"
    ;;
  data_changed)
    # A token file cut and grown back to its size under a running job (the
    # probe's `truncate -s 100000 f; truncate -s $size f`): an error naming it,
    # never training on zeros.
    cp "$work/data/train.bin" "$work/tr.bin"
    touch -d "1 hour ago" "$work/tr.bin"  # its later modification is then another time, whatever the clock's grain
    size=$(stat -c %s "$work/tr.bin")
    ENGINE_FAULT=sleep:100 "$train" "${common[@]}" --steps 100 --train_bin "$work/tr.bin" --out_dir "$work/t" \
      >/dev/null 2>"$work/err" &
    pid=$!
    jobs_started+=($pid)
    wait_steps "$work/t" 3
    # Both cuts within microseconds; a read that lands between them sees the
    # shrunk file, which is the same error said as such (the unit tests in
    # tests/io/test_token_file.cpp hold each case apart).
    python3 -c 'import os, sys; os.truncate(sys.argv[1], 100000); os.truncate(sys.argv[1], int(sys.argv[2]))' \
      "$work/tr.bin" "$size"
    rc=0
    wait $pid || rc=$?
    [[ $rc -eq 1 ]] || fail "a regrown token file: exit status $rc"
    grep -qE "^train: error: $work/tr.bin: (the file was modified since it was opened \(at [0-9:.]+ UTC, size $size -> $size bytes\): rewritten in place while a run reads it\? Restore it, then --resume|the file shrank from $size to 100000 bytes since it was opened .*)$" \
      "$work/err" || fail "unexpected message: $(cat "$work/err")"
    echo "ok: $(cat "$work/err")"
    # A Llama 3 llm.c shard (magic 20240801, version 7: uint32 tokens) is
    # read as uint32 ids (version 1 trains: train_cli.llmc_shards): its id
    # 70000 is named, where uint16 reads would have seen 4464 and 1.
    python3 - "$work/shard.bin" <<'PY'
import struct, sys
header = struct.pack("<256i", 20240801, 7, 1000, *([0] * 253))
open(sys.argv[1], "wb").write(header + struct.pack("<1000I", *([7] * 999 + [70000])))
PY
    if "$train" "${common[@]}" --vocab_size 65536 --train_bin "$work/shard.bin" --out_dir "$work/s" >/dev/null \
         2>"$work/err"; then
      fail "a uint32 shard's id 70000 passed a vocabulary of 65536"
    fi
    grep -qxF "train: error: $work/shard.bin: token id 70000 at position 999 is outside the vocabulary [0, 65536)" \
      "$work/err" || fail "unexpected message: $(cat "$work/err")"
    echo "ok: $(cat "$work/err")"
    ;;
  loaded_numbers)
    # Numbers a run starts from that no training produces: refused before the
    # first step, naming the file, the tensor and the element, not "loss is
    # nan (diverged: lower lr?)" steps later.
    poke() {  # FILE TENSOR INDEX VALUE: one float32 of a safetensors file changed in place
      python3 - "$@" <<'PY'
import json, struct, sys
path, name, index, value = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
with open(path, "r+b") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    entry = json.loads(f.read(n))[name]
    assert entry["dtype"] == "F32", entry
    f.seek(8 + n + entry["data_offsets"][0] + 4 * index)
    f.write(struct.pack("<f", value))
PY
    }
    refused_with() {  # NAME PATTERN ARGS...: the run fails with one line matching PATTERN (grep -E)
      local name=$1 pattern=$2
      shift 2
      if "$train" "${common[@]}" "$@" >/dev/null 2>"$work/err"; then fail "$name: accepted"; fi
      grep -qE "^train: error: $pattern" "$work/err" || fail "$name: unexpected message: $(cat "$work/err")"
      [[ $(wc -l <"$work/err") -eq 1 ]] || fail "$name: not one line: $(cat "$work/err")"
      echo "ok: $name: $(cat "$work/err")"
    }
    for opt in adamw adamw8bit adafactor; do
      "$train" "${common[@]}" --steps 6 --stop_after 3 --optimizer $opt --out_dir "$work/$opt" >/dev/null
      cp -r "$work/$opt/checkpoint" "$work/$opt.good"
    done
    ck=$work/adamw/checkpoint
    poke "$ck/model.safetensors" wte.weight 5 nan
    refused_with "NaN weight, --resume" "$ck/model.safetensors: parameter '[a-z_.]*wte[a-z_.]*' holds nan at element 5 of 8192: a damaged file" \
      --steps 6 --resume --out_dir "$work/adamw"
    refused_with "NaN weight, --init_from" "$ck/model.safetensors: parameter '[a-z_.]*wte[a-z_.]*' holds nan at element 5 of 8192" \
      --steps 6 --init_from "$ck/model.safetensors" --out_dir "$work/init"
    rm -rf "$ck" && cp -r "$work/adamw.good" "$ck"
    poke "$ck/optimizer.safetensors" exp_avg_sq.1 7 -0.5
    refused_with "negative second moment (adamw)" "$ck/optimizer.safetensors: optimizer state 'exp_avg_sq.1' holds -0.5 at element 7 of 1024 \(second moments and scales are >= 0\)" \
      --steps 6 --resume --out_dir "$work/adamw"
    ck=$work/adamw8bit/checkpoint
    poke "$ck/optimizer.safetensors" exp_avg_sq_absmax.0 3 -1
    refused_with "negative 8-bit scale" "$ck/optimizer.safetensors: optimizer state 'exp_avg_sq_absmax.0' holds -1 at element 3 of 32" \
      --steps 6 --optimizer adamw8bit --resume --out_dir "$work/adamw8bit"
    ck=$work/adafactor/checkpoint
    poke "$ck/optimizer.safetensors" exp_avg_sq_row.0 0 -2
    refused_with "negative Adafactor row" "$ck/optimizer.safetensors: optimizer state 'exp_avg_sq_row.0' holds -2 at element 0 of 256" \
      --steps 6 --optimizer adafactor --resume --out_dir "$work/adafactor"
    # Each left whole, the same checkpoints resume.
    rm -rf "$work/adamw8bit/checkpoint" && cp -r "$work/adamw8bit.good" "$work/adamw8bit/checkpoint"
    "$train" "${common[@]}" --steps 6 --optimizer adamw8bit --resume --out_dir "$work/adamw8bit" >/dev/null ||
      fail "the undamaged 8-bit checkpoint did not resume"
    # Options torch.optim refuses, refused at parse time like lr.
    refused_with "--beta1 1" "config: beta1 = 1: in \[0, 1\)" --beta1 1 --out_dir "$work/b"
    refused_with "--beta2 1" "config: beta2 = 1: in \[0, 1\)" --beta2 1 --out_dir "$work/b"
    refused_with "--beta2 2" "config: beta2 = 2: in \[0, 1\)" --beta2 2 --out_dir "$work/b"
    refused_with "--beta1 -0.5" "config: beta1 = -0.5: in \[0, 1\)" --beta1 -0.5 --out_dir "$work/b"
    refused_with "--weight_decay -1" "config: weight_decay = -1: must be >= 0" --weight_decay -1 --out_dir "$work/b"
    [[ ! -e $work/b && ! -e $work/init ]] || fail "a refused run created its out_dir"
    ;;
  *)
    fail "unknown case $case_name"
    ;;
esac
