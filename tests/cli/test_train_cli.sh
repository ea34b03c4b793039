#!/usr/bin/env bash
# Black-box tests of the train and prepare_text programs, one ctest entry per
# case (tests/CMakeLists.txt): bit-exact resume, same seed -> same losses,
# a real short training run on the fortunes corpus, and bad input (each a
# non-zero exit, a one-line error naming the file or key, and no out_dir).
# Usage: test_train_cli.sh BUILD_DIR CASE
set -euo pipefail
build=$1
case_name=$2
train=$build/models/train
prep=$build/models/prepare_text
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
corpus=/usr/share/games/fortunes

fail() { echo "FAIL: $*"; exit 1; }

# A small deterministic corpus (the fortunes text) as byte tokens.
make_data() {
  [[ -d $corpus ]] || fail "$corpus missing (scripts/setup.sh installs the fortunes package)"
  "$prep" "$work/data" 0.1 "$corpus" >/dev/null
}

# Tiny model, few steps: the options every run below shares.
common=(--vocab_size 256 --block_size 32 --n_layer 2 --n_head 2 --n_embd 32 --batch_size 4 --seq_len 32
        --warmup_steps 2 --val_every 0 --sample_every 0 --val_batches 2 --sample_tokens 8 --device cpu
        --train_bin "$work/data/train.bin" --val_bin "$work/data/val.bin")

# Training losses ("loss" lines of metrics.jsonl) exactly as written.
losses() { grep -o '"loss":[^,]*' "$1/metrics.jsonl"; }
# losses_close RUN_A RUN_B REL: every step's losses within REL of A's (relative), else the pairs that differ.
losses_close() {
  paste <(losses "$1" | cut -d: -f2) <(losses "$2" | cut -d: -f2) |
    awk -v rel="$3" '{ d = $1 - $2; if (d < 0) d = -d; if (d > rel * $1) { print "loss differs: " $0; bad = 1 } } END { exit bad }'
}

train_args=("${common[@]}")
source "$(dirname "$0")/expect_error.sh"

case $case_name in
  resume_bitexact)
    make_data
    "$train" "${common[@]}" --steps 10 --out_dir "$work/a" >/dev/null
    "$train" "${common[@]}" --steps 10 --stop_after 4 --out_dir "$work/b" >/dev/null
    [[ -f $work/b/checkpoint/model.safetensors ]] || fail "no checkpoint after stop_after"
    "$train" "${common[@]}" --steps 10 --resume --out_dir "$work/b" >/dev/null
    diff <(losses "$work/a") <(losses "$work/b") || fail "resumed losses differ from the uninterrupted run"
    [[ $(losses "$work/a" | wc -l) -eq 10 ]] || fail "expected 10 loss lines"
    cmp "$work/a/checkpoint/model.safetensors" "$work/b/checkpoint/model.safetensors" ||
      fail "final weights differ"
    echo "ok: 10 steps straight == 4 + resume + 6, bit for bit (losses and final weights)"
    ;;
  keep_checkpoints)
    # --keep_checkpoints 3 with a save every 2 steps: the last three saves
    # stay as checkpoints/step_NNNNNN (hard links of the latest's files),
    # older ones go; --resume_from a kept step re-runs the steps after it
    # with the losses the run had there, bit for bit.
    make_data
    "$train" "${common[@]}" --steps 12 --checkpoint_every 2 --keep_checkpoints 3 --out_dir "$work/a" >/dev/null
    kept=$(cd "$work/a/checkpoints" && echo *)
    [[ $kept == "step_000008 step_000010 step_000012" ]] || fail "kept: '$kept', expected steps 8, 10, 12"
    grep -q '"step": 10' "$work/a/checkpoints/step_000010/state.json" || fail "step_000010 is not step 10"
    [[ $(stat -c %h "$work/a/checkpoints/step_000012/model.safetensors") -ge 2 ]] ||
      fail "step_000012 is a copy, not a hard link of checkpoint/'s file"
    cmp "$work/a/checkpoints/step_000012/model.safetensors" "$work/a/checkpoint/model.safetensors"
    before=$(losses "$work/a" | tail -n 4)
    "$train" "${common[@]}" --steps 12 --checkpoint_every 2 --keep_checkpoints 3 --resume \
      --resume_from "$work/a/checkpoints/step_000008" --out_dir "$work/a" >"$work/log"
    grep -q "^resumed from $work/a/checkpoints/step_000008 at step 8$" "$work/log" ||
      fail "the run did not resume from step_000008: $(grep resumed "$work/log")"
    after=$(losses "$work/a" | tail -n 4)
    [[ -n $before && $before == "$after" ]] || fail "steps 9-12 from step_000008: '$after', the run had '$before'"
    cmp "$work/a/checkpoints/step_000012/model.safetensors" "$work/a/checkpoint/model.safetensors"
    expect_config_error "config: resume_from $work/x needs --resume" "${common[@]}" --steps 4 --resume_from "$work/x"
    expect_config_error "config: keep_checkpoints must be >= 0" --steps 4 --keep_checkpoints -1
    echo "ok: three kept checkpoints; from step 8 the run repeats its losses bit for bit"
    ;;
  resume_fp16)
    # O2-fp16 (f16 rounding with dynamic loss scaling; on the cpu, rounding
    # emulation): the loss scale and its clean-step count travel in the
    # checkpoint, so the resumed run matches the uninterrupted one bit for bit.
    # A huge initial scale makes the first steps overflow and back off, so the
    # stop lands mid back-off: a resume that forgot the scale would skip
    # steps the uninterrupted run did not, and its losses would differ.
    make_data
    fp16=(--precision O2-fp16 --loss_scale_init 1e7 --steps 10)
    "$train" "${common[@]}" "${fp16[@]}" --out_dir "$work/a" >"$work/log_a"
    skips=$(grep -c "step skipped" "$work/log_a" || true)
    [[ $skips -ge 4 && $skips -le 8 ]] || fail "expected the large scale to overflow 4 to 8 of 10 steps, got $skips"
    "$train" "${common[@]}" "${fp16[@]}" --stop_after 3 --out_dir "$work/b" >/dev/null
    grep -q '"loss_scaler"' "$work/b/checkpoint/state.json" || fail "no loss scaler state in the checkpoint"
    "$train" "${common[@]}" "${fp16[@]}" --resume --out_dir "$work/b" >/dev/null
    diff <(losses "$work/a") <(losses "$work/b") || fail "resumed O2-fp16 losses differ"
    echo "ok: O2-fp16 ($skips overflow skips) 10 steps straight == 3 + resume + 7, bit for bit"
    ;;
  optimizers)
    # --optimizer adamw8bit and adafactor (docs/optimizers.md): a stopped and
    # resumed run equals the uninterrupted one bit for bit (the 8-bit codes
    # and scales, Adafactor's row and column statistics travel in the
    # checkpoint); resuming with another optimizer is one line naming both and
    # leaves the checkpoint as it was; on emu, O3 (the step captured and
    # replayed) equals eager O2 bit for bit, and O2-fp16's overflow skips
    # leave the state alone.
    make_data
    for opt in adamw8bit "adafactor --adafactor_beta1 0.9 --adafactor_relative_step true --adafactor_scale_parameter true"; do
      read -r -a o <<<"--optimizer $opt"
      name=${o[1]}
      "$train" "${common[@]}" "${o[@]}" --steps 10 --out_dir "$work/$name.a" >"$work/log"
      grep -q "^optimizer: $name" "$work/log" || fail "no optimizer line: $(grep optimizer "$work/log")"
      grep -q "optimizer state .* $name: " "$work/log" || fail "no memory line for $name"
      "$train" "${common[@]}" "${o[@]}" --steps 10 --stop_after 4 --out_dir "$work/$name.b" >/dev/null
      "$train" "${common[@]}" "${o[@]}" --steps 10 --resume --out_dir "$work/$name.b" >/dev/null
      diff <(losses "$work/$name.a") <(losses "$work/$name.b") || fail "$name: resumed losses differ"
      cmp "$work/$name.a/checkpoint/model.safetensors" "$work/$name.b/checkpoint/model.safetensors" ||
        fail "$name: final weights differ"
      cmp "$work/$name.a/checkpoint/optimizer.safetensors" "$work/$name.b/checkpoint/optimizer.safetensors" ||
        fail "$name: final optimizer state differs"
      echo "ok: $name: 10 steps straight == 4 + resume + 6, bit for bit (losses, weights, optimizer state)"
    done
    grep -q '"U8"' "$work/adamw8bit.a/checkpoint/optimizer.safetensors" || fail "no 8-bit codes in the checkpoint"
    sum=$(md5sum <"$work/adamw8bit.b/checkpoint/optimizer.safetensors")
    if "$train" "${common[@]}" --optimizer adafactor --steps 10 --resume --out_dir "$work/adamw8bit.b" \
      >"$work/stdout" 2>"$work/stderr"; then
      fail "resuming an adamw8bit checkpoint with adafactor was accepted"
    fi
    grep -q "trained with optimizer adamw8bit, this run asks for adafactor" "$work/stderr" ||
      fail "bad message: $(cat "$work/stderr")"
    [[ $(wc -l <"$work/stderr") -eq 1 ]] || fail "not one line: $(cat "$work/stderr")"
    [[ $(md5sum <"$work/adamw8bit.b/checkpoint/optimizer.safetensors") == "$sum" ]] || fail "checkpoint changed"
    echo "ok: $(cat "$work/stderr")"
    small=(--n_layer 1 --batch_size 2 --seq_len 16 --block_size 16 --val_batches 1 --sample_tokens 4 --device emu
           --grad_accum 2 --steps 4)
    for name in adamw8bit adafactor; do
      "$train" "${common[@]}" "${small[@]}" --optimizer $name --precision O2 --out_dir "$work/$name.o2" >/dev/null
      "$train" "${common[@]}" "${small[@]}" --optimizer $name --precision O3 --out_dir "$work/$name.o3" >"$work/log"
      grep -q "captured as a CUDA graph" "$work/log" || fail "$name: O3 on emu did not report the graph capture"
      [[ "$(losses "$work/$name.o2")" == "$(losses "$work/$name.o3")" ]] || fail "$name: O3 losses differ from O2"
      cmp -s "$work/$name.o2/checkpoint/optimizer.safetensors" "$work/$name.o3/checkpoint/optimizer.safetensors" ||
        fail "$name: O3 optimizer state differs from O2's"
      # 1e7 overflows the first 3 steps (observed); the 4th updates. (1e6 did
      # while the weight gradients were fp16 products; written in fp32 now,
      # only the activations' fp16 gradients overflow.)
      "$train" "${common[@]}" "${small[@]}" --optimizer $name --precision O2-fp16 --loss_scale_init 1e7 \
        --out_dir "$work/$name.f16" >"$work/log"
      skips=$(grep -c "step skipped" "$work/log" || true)
      [[ $skips -ge 1 && $skips -le 3 ]] || fail "$name: expected 1 to 3 of 4 steps skipped, got $skips"
      echo "ok: $name on emu: O3 replays == eager O2 bit for bit; O2-fp16 skips overflowing steps"
    done
    ;;
  same_seed)
    make_data
    "$train" "${common[@]}" --steps 5 --out_dir "$work/a" >/dev/null
    "$train" "${common[@]}" --steps 5 --out_dir "$work/b" >/dev/null
    "$train" "${common[@]}" --steps 5 --seed 7 --out_dir "$work/c" >/dev/null
    diff <(losses "$work/a") <(losses "$work/b") || fail "same seed, different losses"
    ! diff -q <(losses "$work/a") <(losses "$work/c") >/dev/null || fail "different seeds, same losses"
    echo "ok: same seed -> same losses; another seed -> other losses"
    ;;
  real_training)
    # 300 steps of a 2-layer model on English text. Byte-level loss starts
    # at ln(256) = 5.55; bigram statistics alone reach ~3.3, so a validation
    # loss below 3.0 means the model learned more than letter frequencies.
    make_data
    "$train" "${common[@]}" --steps 300 --lr 3e-3 --batch_size 8 --val_every 300 --val_batches 8 \
      --out_dir "$work/r" >"$work/log"
    first=$(grep -m1 -o '"val_loss":[0-9.e+-]*' "$work/r/metrics.jsonl" | cut -d: -f2)
    last=$(grep -o '"val_loss":[0-9.e+-]*' "$work/r/metrics.jsonl" | tail -1 | cut -d: -f2)
    echo "val loss $first -> $last"
    awk -v f="$first" -v l="$last" 'BEGIN { exit !(f > 5.3 && f < 5.8 && l < 3.0) }' ||
      fail "val loss did not fall from ~ln(256) to below 3.0"
    grep -q -- "---- sample at step 300" "$work/log" || fail "no sample printed"
    grep -q "total .* 16.00 B/param" "$work/log" || fail "no memory report with 16 B/param for fp32 AdamW"
    # MFU against the measured SGEMM peak: named at start-up, and in (0, 1]
    # on every step it is reported. A peak measured while other processes
    # load the machine (ctest -j) can be exceeded later; then train measures
    # once more and, if still exceeded, switches MFU off for the rest of the
    # run, says so, and reports null (docs/train.md): allowed, but only after
    # that message, from some step to the end, and never a value above 1.
    grep -q "^peak for MFU: cpu: measured OpenBLAS SGEMM" "$work/log" || fail "the peak used is not named"
    off=0; grep -q "MFU off: " "$work/log" && off=1
    python3 - "$work/r/metrics.jsonl" "$off" <<'PY' || fail "an MFU outside (0, 1], or null without the switch-off"
import json, sys
m = [json.loads(l)["mfu"] for l in open(sys.argv[1]) if '"loss"' in l]
switched_off = sys.argv[2] == "1"
on = m[:m.index(None)] if None in m else m
assert m and (on or switched_off), "no MFU reported at all"
assert all(0 < x <= 1 for x in on), [x for x in on if not 0 < x <= 1][:5]
assert all(x is None for x in m[len(on):]), "MFU came back after being switched off"
assert switched_off == (len(on) < len(m)), "null MFU without the 'MFU off' message, or the message without nulls"
print(f"MFU in (0, 1] on {len(on)} of {len(m)} steps" + (f": {min(on):.3f} .. {max(on):.3f}" if on else "") +
      (" (then switched off, as announced)" if len(on) < len(m) else ""))
PY
    ;;
  bad_input)
    make_data
    printf 'abc' >"$work/odd.bin"
    expect_error "odd byte count" --train_bin "$work/odd.bin"
    printf '\x01\x00\x00\x01' >"$work/big.bin"  # ids 1 and 256
    expect_error "token id 256 at position 1" --train_bin "$work/big.bin"
    expect_error "unknown option '--lrr' (did you mean 'lr'?)" --lrr 0.1
    expect_error "command line: option '--lr' must be a number, got 'fast'" --lr fast
    expect_config_error "command line: option '--steps' must be an integer, got '1e3' (write 1000)" --steps 1e3
    expect_config_error "command line: option '--steps' must be an integer, got '5.5'" --steps 5.5
    expect_error "unknown precision 'O4'" --precision O4
    echo '{"n_layers": 2}' >"$work/typo.json"
    expect_error "unknown key 'n_layers' (did you mean 'n_layer'?)" --config "$work/typo.json"
    echo '{"steps": "ten"}' >"$work/type.json"
    expect_error "type.json: key 'steps' must be an integer, got \"ten\"" --config "$work/type.json"
    expect_error "seq_len 64 must be in [1, block_size = 32]" --seq_len 64
    expect_error "missing.bin" --train_bin "$work/missing.bin"
    # Faults in the options say what to change, without a source location.
    expect_config_error "train: error: config: warmup_steps (30) must not exceed steps (5)" --warmup_steps 30 --steps 5
    expect_config_error "unknown option '--lrr'" --lrr 0.1
    expect_config_error "key 'steps' must be an integer" --config "$work/type.json"
    # A path that is not UTF-8 (the configuration is JSON): said so, naming the option.
    expect_config_error "command line: the value of option '--tensorboard' is not UTF-8 text (byte 2)" \
      --tensorboard "tb$(printf '\xe9')x"
    expect_config_error "config: n_head = 2 does not divide by tp = 3" --tp 3
    # In a log (stdout and stderr to one file, as under Slurm): the start-up
    # lines come before the error, which is the last line.
    if "$train" "${common[@]}" --train_bin "$work/missing.bin" --out_dir "$work/m" >"$work/log" 2>&1; then
      fail "a missing data file was accepted"
    fi
    grep -q "^config:" "$work/log" || fail "no start-up lines in the log: $(cat "$work/log")"
    [[ $(tail -n 1 "$work/log") == "train: error: "*missing.bin* ]] || fail "the error is not the log's last line: $(cat "$work/log")"
    # A truncated checkpoint: resume must refuse it before writing anything.
    "$train" "${common[@]}" --steps 2 --out_dir "$work/t" >/dev/null
    f=$work/t/checkpoint/model.safetensors
    head -c $(( $(stat -c %s "$f") - 100 )) "$f" >"$f.cut" && mv "$f.cut" "$f"
    before=$(md5sum "$work/t/metrics.jsonl")
    if "$train" "${common[@]}" --steps 4 --resume --out_dir "$work/t" >/dev/null 2>"$work/stderr"; then
      fail "resume from a truncated checkpoint succeeded"
    fi
    grep -q "model.safetensors" "$work/stderr" || fail "error does not name the file: $(cat "$work/stderr")"
    [[ $before == $(md5sum "$work/t/metrics.jsonl") ]] || fail "metrics changed by a failed resume"
    echo "ok: $(cat "$work/stderr")"
    ;;
  emu_device)
    # The same tiny run on the emu device (the hand-written CUDA kernels,
    # emulated) and on the cpu: the first losses agree to fp32 summation-order
    # noise (1e-4 relative), and the emu run writes a loadable checkpoint.
    make_data
    small=(--n_layer 1 --batch_size 2 --seq_len 16 --block_size 16 --val_batches 1 --sample_tokens 4)
    "$train" "${common[@]}" "${small[@]}" --steps 3 --out_dir "$work/c" >/dev/null
    "$train" "${common[@]}" "${small[@]}" --steps 3 --device emu --out_dir "$work/e" >"$work/log"
    [[ -f $work/e/checkpoint/model.safetensors ]] || fail "no checkpoint from the emu run"
    losses_close "$work/c" "$work/e" 1e-4 ||
      fail "emu losses differ from cpu losses"
    echo "ok: emu and cpu losses agree: $(losses "$work/e" | tr '\n' ' ')"
    ;;
  o3_graph)
    # --precision O3 on emu: the step is captured once (step 2) and replayed
    # (the emulator records and replays it like a GPU); every loss and the
    # checkpoint's weights equal the eager O2 run's, bit for bit. With
    # grad_accum 2, so each replay takes two new micro-batches.
    make_data
    small=(--n_layer 1 --batch_size 2 --seq_len 16 --block_size 16 --val_batches 1 --sample_tokens 4 --device emu
           --grad_accum 2 --steps 4)
    "$train" "${common[@]}" "${small[@]}" --precision O2 --out_dir "$work/o2" >/dev/null
    "$train" "${common[@]}" "${small[@]}" --precision O3 --out_dir "$work/o3" >"$work/log"
    grep -q "captured as a CUDA graph" "$work/log" || fail "O3 on emu did not report the graph capture"
    [[ "$(losses "$work/o2")" == "$(losses "$work/o3")" ]] || fail "O3 losses differ from O2: $(losses "$work/o3")"
    cmp -s "$work/o2/checkpoint/model.safetensors" "$work/o3/checkpoint/model.safetensors" ||
      fail "O3 weights differ from O2's"
    echo "ok: O3 (graph replays) matches O2 (eager) exactly: $(losses "$work/o3" | tr '\n' ' ')"
    ;;
  attention_mma)
    # GPT-2 with head size 64 (n_embd 128, 2 heads) trained on emu at O3
    # (the step captured and replayed) with our attention on tensor cores
    # (--attention ours) and on CUDA cores (ours_cuda_cores): the step
    # profile shows which kernels ran, and the losses of the two agree to
    # bf16 noise: 0.5% of the loss over 6 steps (measured: 1e-4; P and dS
    # rounded to bf16 before their products, as FlashAttention-2 does).
    make_data
    small=(--n_layer 1 --n_embd 128 --n_head 2 --batch_size 2 --seq_len 32 --val_batches 1 --device emu
           --precision O3 --steps 6 --kernel_profile 1)
    "$train" "${common[@]}" "${small[@]}" --out_dir "$work/tc" >"$work/log_tc"
    "$train" "${common[@]}" "${small[@]}" --attention ours_cuda_cores --out_dir "$work/cc" >"$work/log_cc"
    for run in tc cc; do
      grep -q "captured as a CUDA graph" "$work/log_$run" || fail "$run: O3 on emu did not report the graph capture"
    done
    tc_json=$(cat "$work/tc/kernel_profile.json") cc_json=$(cat "$work/cc/kernel_profile.json")
    [[ $tc_json == *'"attention_forward_mma"'* && $tc_json == *'"attention_backward_mma"'* ]] ||
      fail "--attention ours did not run the tensor-core kernels"
    [[ $cc_json != *'_mma"'* && $cc_json == *'"attention_forward"'* ]] ||
      fail "--attention ours_cuda_cores ran a tensor-core kernel"
    losses_close "$work/tc" "$work/cc" 0.005 ||
      fail "tensor-core attention losses differ from the CUDA-core ones"
    echo "ok: GPT-2 trains alike with the tensor-core and CUDA-core attention: $(losses "$work/tc" | tr '\n' ' ')"
    ;;
  gemm_mma)
    # --gemm mma: GPT-2 trained on emu at O3 with our tensor-core GEMM for
    # every bf16 product (the step profile's "gemm ... mma" rows: forward
    # with its bias, GELU and residual epilogues, both gradients, the fp32
    # weight gradients with their bias gradients) against the default
    # executor; losses agree to bf16 noise (0.5% over 6 steps). Bad
    # combinations are one-line errors.
    make_data
    small=(--n_layer 1 --n_embd 64 --n_head 2 --batch_size 2 --seq_len 32 --val_batches 1 --device emu
           --precision O3 --steps 6 --kernel_profile 1)
    "$train" "${common[@]}" "${small[@]}" --gemm mma --out_dir "$work/mma" >"$work/log_mma"
    "$train" "${common[@]}" "${small[@]}" --out_dir "$work/def" >"$work/log_def"
    grep -q "captured as a CUDA graph" "$work/log_mma" || fail "O3 with --gemm mma was not captured"
    mma_rows=$(grep -c '"name": "gemm .* mma"' "$work/mma/kernel_profile.json" || true)
    def_rows=$(grep -c '"name": "gemm .* mma"' "$work/def/kernel_profile.json" || true)
    ((mma_rows >= 8)) || fail "--gemm mma: $mma_rows tensor-core GEMM rows in the profile (expected every product's)"
    ((def_rows == 0)) || fail "the default ran $def_rows tensor-core GEMM rows"
    losses_close "$work/mma" "$work/def" 0.005 ||
      fail "--gemm mma losses differ from the default executor's"
    train_args=("${common[@]}" --steps 2)
    expect_config_error "config: gemm mma runs bf16/fp16 products only: precision O2, O2-fp16 or O3 (got O0)" \
      --device emu --gemm mma
    expect_config_error "config: gemm mma is a GPU kernel: device emu or cuda" --precision O2 --gemm mma
    expect_config_error "gemm 'cutlass': cublaslt or mma" --gemm cutlass
    echo "ok: --gemm mma trains as the default executor does ($mma_rows tensor-core GEMM rows): $(losses "$work/mma" | tr '\n' ' ')"
    ;;
  llmc_shards)
    # llm.c's token shards, written here by Python as llm.c's
    # dev/data/data_common.py writes them (a header of 256 little-endian
    # int32s: magic 20240520, version 1, the token count; then uint16
    # tokens): the fortunes training tokens cut into three shards train as
    # the one headerless file does, bit for bit, named by a glob (llm.c's
    # -i) or by their directory. A shard whose header disagrees with its
    # size, and a pattern that matches nothing, are one-line errors.
    make_data
    python3 - "$work/data/train.bin" "$work/shards" <<'PY'
import array, os, struct, sys
toks = array.array("H")
toks.frombytes(open(sys.argv[1], "rb").read())
os.makedirs(sys.argv[2])
n = len(toks)
cuts = [0, n // 3, 2 * n // 3 + 7, n]
for i in range(3):
    part = toks[cuts[i]:cuts[i + 1]]
    header = [0] * 256
    header[0], header[1], header[2] = 20240520, 1, len(part)
    with open(os.path.join(sys.argv[2], f"fortunes_train_{i:06d}.bin"), "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(part.tobytes())
PY
    "$train" "${common[@]}" --steps 4 --out_dir "$work/flat" >/dev/null
    "$train" "${common[@]}" --steps 4 --train_bin "$work/shards/fortunes_train_*.bin" --out_dir "$work/glob" >"$work/log"
    grep -q "fortunes_train_\*.bin: 3 files, .* tokens (llm.c shards)" "$work/log" ||
      fail "the run does not describe its shards: $(grep -m1 "tokens" "$work/log")"
    "$train" "${common[@]}" --steps 4 --train_bin "$work/shards" --out_dir "$work/dir" >/dev/null
    for run in glob dir; do
      [[ "$(losses "$work/flat")" == "$(losses "$work/$run")" ]] ||
        fail "$run: llm.c shards train unlike the headerless file: $(losses "$work/$run" | tr '\n' ' ')"
    done
    # More shards than the soft limit on open files (each stays open): the
    # limit is raised towards the hard one; under a hard limit too low, one line.
    python3 - "$work/data/train.bin" "$work/many" <<'PY'
import array, os, struct, sys
toks = array.array("H")
toks.frombytes(open(sys.argv[1], "rb").read())
os.makedirs(sys.argv[2])
for i in range(40):
    part = toks[i * 2000:(i + 1) * 2000]
    with open(os.path.join(sys.argv[2], f"many_train_{i:06d}.bin"), "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, len(part), *([0] * 253)))
        f.write(part.tobytes())
PY
    (ulimit -Sn 32 && "$train" "${common[@]}" --steps 2 --train_bin "$work/many" --out_dir "$work/many_run" >/dev/null) ||
      fail "40 shards under a soft limit of 32 open files did not train"
    train_args=("${common[@]}" --steps 2)
    (ulimit -n 32 && expect_error "40 token files to keep open, more than this process may (ulimit -n 32)" \
      --train_bin "$work/many") || fail "a hard limit of 32 open files: $(cat "$work/stderr")"
    expect_error "fortunes_none_*.bin: the pattern matches no file" --train_bin "$work/shards/fortunes_none_*.bin"
    truncate -s -2 "$work/shards/fortunes_train_000001.bin"
    expect_error "fortunes_train_000001.bin: its llm.c header says" --train_bin "$work/shards"
    echo "ok: llm.c shards (a glob, a directory) train as the headerless file: $(losses "$work/glob" | tr '\n' ' ')"
    ;;
  lr_schedule)
    # --lr_schedule as metrics.jsonl records each step's lr: wsd over 10
    # steps, 2 of warmup, its decay over the last half (steps 5..9, 0-based:
    # 1 - sqrt of (step - 5) / 5); constant keeps lr after the warmup. A bad
    # name and fraction are one-line errors.
    make_data
    sched=(--steps 10 --warmup_steps 2 --lr 1e-3 --min_lr 1e-4)
    "$train" "${common[@]}" "${sched[@]}" --lr_schedule wsd --wsd_decay_fraction 0.5 --out_dir "$work/wsd" >/dev/null
    "$train" "${common[@]}" "${sched[@]}" --lr_schedule constant --out_dir "$work/const" >/dev/null
    python3 - "$work/wsd/metrics.jsonl" "$work/const/metrics.jsonl" <<'PY'
import json, math, sys
def lrs(path):
    return [r["lr"] for r in map(json.loads, open(path)) if "loss" in r and "lr" in r]
def want_wsd(step):  # 0-based optimizer step
    if step < 2:
        return 1e-3 * (step + 1) / 2
    if step < 5:
        return 1e-3
    return 1e-4 + (1 - math.sqrt((step - 5) / 5)) * 9e-4
got = lrs(sys.argv[1])
assert len(got) == 10, got
for i, lr in enumerate(got):
    assert abs(lr - want_wsd(i)) < 1e-9, (i, lr, want_wsd(i))
const = lrs(sys.argv[2])
assert const[2:] == [1e-3] * 8, const
print("ok: wsd", ["%.3g" % x for x in got])
PY
    train_args=("${common[@]}" --steps 2)
    expect_config_error "lr_schedule 'step': cosine, linear, constant or wsd" --lr_schedule step
    expect_config_error "config: wsd_decay_fraction must be in [0, 1], got 1.5" --wsd_decay_fraction 1.5
    ;;
  profile)
    # The profiler's ranges (engine/profile.h), logged on the host with their
    # times: every step, phase and layer range opens and closes in order (a
    # cpu run and an emu run at O3, where the replayed step is one "graph replay" range);
    # --profile_steps opens and closes the profiler's window at the steps
    # asked; malformed windows are one-line errors.
    make_data
    now_us() { date +%s%6N; }  # the clock the log uses (system_clock), in microseconds since the epoch
    # check_ranges LOG START END NAME...: every line is "push TIME NAME" or
    # "pop TIME" with TIME within the run (START to END); then, on LOG.plain
    # (the log without its times), nesting and the names that must appear.
    check_ranges() {
      local log=$1 plain=$1.plain
      [[ -s $log ]] || fail "no range log $log"
      if grep -Evx -m1 '(push [0-9]+ .+|pop [0-9]+)' "$log" >"$work/untimed"; then
        fail "$log: a line without its time: $(cat "$work/untimed")"
      fi
      awk -v lo="$2" -v hi="$3" '$2 + 0 < lo + 0 || $2 + 0 > hi + 0 { print "line " NR ": time " $2 " outside the run"; exit 1 }' \
        "$log" || fail "$log: times outside the run ($2 to $3)"
      sed -E 's/^(push|pop) [0-9]+/\1/' "$log" >"$plain"
      awk '$1 == "push" { stack[++n] = substr($0, 6) } $1 == "pop" { if (n == 0) { print "pop with nothing open at line " NR; exit 1 } n-- }
           END { if (n != 0) { print n " range(s) left open: " stack[n]; exit 1 } }' "$plain" || fail "ranges do not nest: $log"
      for name in "${@:4}"; do grep -qxF "push $name" "$plain" || fail "no '$name' range in $log"; done
    }
    start=$(now_us)
    ENGINE_RANGE_LOG=$work/cpu.log "$train" "${common[@]}" --steps 3 --profile_steps 2:3 --out_dir "$work/p" >"$work/log"
    check_ranges "$work/cpu.log" "$start" "$(now_us)" "step 1" "step 3" data forward backward communication optimizer \
      embeddings h.0 h.1 lm_head loss "h.1 backward" "h.0 backward" "embeddings backward" checkpoint
    grep -q "profiler: recording steps 2 to 3" "$work/log" || fail "the window did not open at step 2: $(cat "$work/log")"
    grep -q "profiler: stopped after step 3" "$work/log" || fail "the window did not close after step 3"
    grep -qF "plot: /usr/bin/python3 scripts/plot.py metrics $work/p/metrics.jsonl" "$work/log" || fail "no plot command at the end"
    # The backward of a layer runs after the next layer's backward (reverse order).
    [[ $(grep -m1 -n "push h.1 backward" "$work/cpu.log.plain" | cut -d: -f1) -lt \
       $(grep -m1 -n "push h.0 backward" "$work/cpu.log.plain" | cut -d: -f1) ]] || fail "layer backward ranges out of order"
    small=(--n_layer 1 --batch_size 2 --seq_len 16 --block_size 16 --val_batches 1 --device emu --steps 3)
    start=$(now_us)
    ENGINE_RANGE_LOG=$work/emu.log "$train" "${common[@]}" "${small[@]}" --precision O3 --out_dir "$work/e" >/dev/null
    check_ranges "$work/emu.log" "$start" "$(now_us)" "step 1" "step 3" "graph replay" forward backward optimizer \
      "h.0 backward"
    # A run resumed inside the window opens it at its first step; one that
    # stops inside it closes it after its last.
    "$train" "${common[@]}" --steps 6 --stop_after 2 --profile_steps 2:5 --out_dir "$work/w" >"$work/log"
    grep -q "profiler: recording steps 2 to 5" "$work/log" || fail "window 2:5 did not open at 2: $(cat "$work/log")"
    grep -q "profiler: stopped after step 2" "$work/log" || fail "a run stopping inside the window did not close it"
    "$train" "${common[@]}" --steps 6 --resume --profile_steps 2:5 --out_dir "$work/w" >"$work/log"
    grep -q "profiler: recording steps 3 to 5" "$work/log" || fail "the resumed run did not open the window at 3"
    grep -q "profiler: stopped after step 5" "$work/log" || fail "the resumed run did not close the window after 5"
    expect_error "profile_steps '3-5': expected A:B" --steps 10 --profile_steps 3-5
    expect_error "profile_steps '5:2'" --steps 10 --profile_steps 5:2
    expect_error "profile_steps '0:2'" --steps 10 --profile_steps 0:2
    expect_error "profile_steps '2:11': expected A:B, steps A to B (1-based, inclusive) with 1 <= A <= B <= 10" \
      --steps 10 --profile_steps 2:11
    echo "ok: ranges nest and close on cpu and emu O3; the profiler window opens at 2 and closes after 3"
    ;;
  attention_cudnn)
    # --attention cudnn where it cannot run: an error saying why, before
    # anything is written; never a silent fallback to our kernel.
    make_data
    expect_error "attention 'flash': ours, ours_cuda_cores or cudnn" --attention flash
    expect_error "attention cudnn runs in bf16/fp16 only: precision O2, O2-fp16 or O3 (got O0)" --attention cudnn
    expect_error "n_embd / n_head = 12: head size 12 is not a multiple of 8" --attention cudnn --precision O2 \
      --n_embd 24 --n_head 2
    expect_error "attention cudnn needs the cuda device" --attention cudnn --precision O2
    expect_error "attention cudnn needs the cuda device (cuDNN runs on NVIDIA GPUs); this run is on emu" \
      --attention cudnn --precision O3 --device emu
    echo "ok: --attention cudnn off a GPU is refused with its reason"
    ;;
  attention_cudnn_gpu)
    # On a GPU (skipped without one): GPT-2 trained with cuDNN's attention at
    # O2 and O3 against our attention at O2 (head size 64: our tensor-core
    # kernels), samples (which run ours) and the final checkpoint included.
    # bf16 runs of different kernels agree to bf16 noise, 2% of the loss over
    # 12 steps.
    if ! nvidia-smi -L >/dev/null 2>&1; then echo "skipped: no CUDA device answers"; exit 0; fi
    make_data
    gpu=(--device cuda --steps 12 --sample_every 6 --n_embd 128 --n_head 2)
    "$train" "${common[@]}" "${gpu[@]}" --precision O2 --out_dir "$work/ours" >/dev/null
    "$train" "${common[@]}" "${gpu[@]}" --precision O2 --attention cudnn --out_dir "$work/cudnn" >"$work/log"
    grep -q "sample at step 12" "$work/log" || fail "no sample from the cudnn run"
    [[ -f $work/cudnn/checkpoint/model.safetensors ]] || fail "no checkpoint from the cudnn run"
    losses_close "$work/ours" "$work/cudnn" 0.02 ||
      fail "cudnn attention losses differ from ours"
    "$train" "${common[@]}" "${gpu[@]}" --precision O3 --attention cudnn --out_dir "$work/o3" >"$work/log"
    grep -q "captured as a CUDA graph" "$work/log" || fail "O3 with cudnn attention was not captured"
    losses_close "$work/cudnn" "$work/o3" 1e-3 ||
      fail "O3 (graph) losses differ from O2 with cudnn attention"
    echo "ok: cudnn attention trains like ours at O2 and the same under an O3 graph"
    ;;
  *) fail "unknown case $case_name" ;;
esac
