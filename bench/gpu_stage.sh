#!/usr/bin/env bash
# shellcheck disable=SC2317  # the runs are functions, called by name from RUNS
# The project's stage of a run on a lent GPU machine (the last stage of the
# shared on-gpu.sh; docs/gpu.md). It sees B (the build dir), W (a work dir),
# OUT, MODE and STAGE_DEADLINE, and prints to project.log. What it measures,
# for the step profile (docs/profiling.md) and the step model's check:
#   1. the GPT-2 124M step (B 8 x 1024, O3) profiled on cuda, our attention
#      (the tensor-core kernels at head size 64) and cuDNN's: --kernel_profile 3 (step 3 eager and warm, the capture
#      after it), each call timed with CUDA events, and the replayed step's
#      time beside it; the JSON tables are copied to OUT;
#   2. the same step modelled from the emulator (bench/gpu_step_model.sh is
#      the no-GPU form of it): the model's figures beside the measured ones;
#   3. tokens/s at the config's micro-batch (64 x 1024, grad_accum 8: 524,288
#      tokens a step; bench/gpu_microbatch_model.sh chose it), cuDNN's
#      attention, O3: the metrics file is copied to OUT;
#   4. PyTorch's GPT-2 on the same card, token ids and step
#      (bench/gpt2_torch_gpu.py: torch.compile, SDPA, bf16 autocast, fused
#      AdamW; 64 x 1024 x 8, or 32 x 1024 x 16 if 64 runs out of memory), and
#      the ratio of the two medians (steps after the first two);
#   5. stage 1's profiled step with every kernel ours: the tensor-core
#      attention and GEMM (--gemm mma);
#   6. run 3 again with cuBLASLt's algorithms timed per shape
#      (ENGINE_CUBLASLT_TUNE=1), when time is left.
#   7. (asked for by name only) throughput-ours: run 3 with our tensor-core
#      attention; profile-cudnn-b64: stage 1's profile at the config's
#      micro-batch, 64 x 1024; profile-config: the config's whole step (64 x
#      1024 x 8) profiled, its replay and tokens/s; generate: GPT-2 124M's tokens/s in the
#      generate program (fp32, 256 new tokens) with and without its KV cache
#      (docs/generate.md), from a one-step checkpoint; llama: the Llama
#      3.2 1B shape (configs/llama3.2-1b.json, B 4 x 2048, O3, recompute)
#      with step 3 profiled and its tokens/s (docs/llama.md); llama-kernels:
#      the workbench's rmsnorm, swiglu and rope rows on the card;
#      llama-cudnn: that step profiled with cuDNN's grouped attention; ladders: every
#      rung of the layernorm and softmax ladders beside ours and cuDNN's,
#      GB/s at the workbench's full shapes (docs/kernels/layernorm.md,
#      softmax.md); optimizers: the workbench's AdamW, 8-bit AdamW and
#      Adafactor steps, GB/s at its full shapes (docs/optimizers.md);
#      attention: the workbench's tensor-core attention rows (mma) beside
#      cuDNN's, forward and backward (docs/kernels/attention.md);
#      throughput-bias-apart, profile-bias-apart-b64: run 3 and the B 64
#      profile with the bias gradients apart from their GEMMs
#      (ENGINE_BIAS_GRAD=apart, docs/kernels/gemm.md); throughput-bias-fused,
#      profile-bias-fused-b64: the same with c_fc's from the DGELU GEMM's
#      DGELU_BGRAD epilogue (ENGINE_BIAS_GRAD=fused); throughput-ce-cached,
#      profile-ce-cached-b64: the same with the cross-entropy's one-buffer
#      form (ENGINE_CROSS_ENTROPY=cached, docs/kernels/cross_entropy.md);
#      profile-ln-staged-b64: the B 64 profile with layernorm's
#      register-staged backward, the default before the prefetching one
#      (ENGINE_LAYERNORM_BACKWARD=staged, docs/kernels/layernorm.md);
#      ncu-b64: Nsight Compute's sections for layer 3's and the loss's
#      kernels of a B 64 micro-step (docs/profiling.md).
#      run_torch prints every throughput run's ratio to PyTorch's.
# RUNS names the runs to make, made in the order it names them (default:
# profile-cudnn profile-ours profile-all-ours throughput torch tuned, the
# cheap profiles first; a later call of the same task names only what is
# still owed, what matters most first: torch's ratio needs throughput before
# it). Each run gets what is left before STAGE_DEADLINE; one stopped there is
# a note. The
# step is modelled on the card it runs on (--model_gpu from nvidia-smi's
# name). The device tool brings back 8 files at most: the logs, JSON tables
# and metrics files go back as one archive, OUT/project-files.tar.gz.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
B=${B:-build}
W=${W:-$(mktemp -d)}
OUT=${OUT:-$W/out}
mkdir -p "$W" "$OUT"
left() { echo $((${STAGE_DEADLINE:-$(($(date +%s) + 300))} - $(date +%s) - 10)); }
corpus=/usr/share/games/fortunes
[[ -n ${P:-} && -d $P/usr/share/games/fortunes ]] && corpus=$P/usr/share/games/fortunes
"$B/models/prepare_text" "$W/stage-data" 0.1 "$corpus" >/dev/null || { echo "prepare_text failed"; exit 1; }
data=(--train_bin "$W/stage-data/train.bin" --val_bin "$W/stage-data/val.bin")
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null) || gpu_name=""
case $gpu_name in
  *H200*) model_gpu=h200 ;;
  *A100*) model_gpu=a100 ;;
  *) model_gpu=h100 ;;
esac
echo "card: ${gpu_name:-unknown}; the step modelled on: $model_gpu"
files=$W/project-files
mkdir -p "$files"
read -r -a runs <<<"${RUNS:-profile-cudnn profile-ours profile-all-ours throughput torch tuned}"
rc=0
# train_124m NAME MIN_SECONDS ARGS...: GPT-2 124M (or CONFIG) at O3 on cuda with what is
# left before the deadline (at least MIN_SECONDS, else a note), into
# $W/NAME and $W/NAME.log; a run stopped at its limit is a note, a failure
# sets rc and prints its last line. Returns 1 when it did not run or failed.
train_124m() {
  local name=$1 min=$2 t
  shift 2
  t=$(left)
  if ((t < min)); then
    echo "note: no time left for the $name run"
    return 1
  fi
  echo "+ train ${CONFIG:-gpt2-124M} O3 $* (limit ${t}s)"
  timeout -k 5 "$t" "$B/models/train" --config "$root/configs/${CONFIG:-gpt2-124M}.json" "${data[@]}" --device cuda --precision O3 \
    --warmup_steps 2 --val_every 0 --val_batches 1 --sample_every 0 --checkpoint_every 0 "$@" --out_dir "$W/$name" \
    >"$W/$name.log" 2>&1
  case $? in
    0) ;;
    124 | 137) echo "note: the $name run hit its limit" ;;
    *)
      rc=1
      echo "note: the $name run failed: $(tail -1 "$W/$name.log")"
      return 1
      ;;
  esac
}
# profile NAME ARGS...: the 124M step (B 8 x 1024) with step 3 profiled; its table to the log.
profile() {
  local name=$1
  shift
  train_124m "$name" 40 --batch_size "${BATCH:-8}" --grad_accum 1 --steps 5 --kernel_profile 3 --model_gpu "$model_gpu" "$@" ||
    return 0
  sed -n '/^kernel profile of step/,/^modelled step on/p; /graph replay of the same step/p' "$W/$name.log"
  tail -3 "$W/$name.log"
  cp "$W/$name.log" "$files/" 2>/dev/null
  cp "$W/$name/kernel_profile.json" "$files/kernel_profile_${name#profile-}.json" 2>/dev/null || true
  rm -rf "$W/$name/checkpoint"  # the 1B shape's is 15 GB: the disk holds 64
}
run_profile_cudnn() { profile profile-cudnn --attention cudnn; }
run_profile_ours() { profile profile-ours --attention ours; }
# Every kernel ours: the tensor-core attention and GEMM (--gemm mma).
run_profile_all_ours() { profile profile-all-ours --attention ours --gemm mma; }
# throughput_run NAME ARGS...: the config's micro-batch (64 x 1024, grad_accum 8), O3: tokens/s.
throughput_run() {
  local name=$1
  shift
  train_124m "$name" 60 --steps 8 --log_every 1 "$@" || return 1
  grep -E "^memory plan|^step " "$W/$name.log" | tail -6
  cp "$W/$name.log" "$files/" 2>/dev/null
  cp "$W/$name/metrics.jsonl" "$files/${name}_metrics.jsonl" 2>/dev/null || true
}
run_throughput_ours() { throughput_run throughput-ours --attention ours; }
# generate's tokens/s on the card, KV cache and the window path (weights from one step).
run_generate() {
  train_124m generate-ckpt 60 --batch_size 1 --seq_len 64 --grad_accum 1 --steps 1 --warmup_steps 0 --precision O0 || return 0
  for cache in "" --no_kv_cache; do
    echo "+ generate $cache (256 tokens)"
    timeout -k 5 "$(left)" "$B/models/generate" --model "$W/generate-ckpt/checkpoint" --device cuda --tokenizer ids \
      --prompt_ids 50256 --max_tokens 256 --ignore_eot $cache 2>&1 >/dev/null | tail -2
  done
}
run_profile_cudnn_b64() { BATCH=64 profile profile-cudnn-b64 --attention cudnn; }
# The config's whole step (64 x 1024 x 8) with step 3 profiled: its events' sum and
# its replay beside the steps' tokens/s, for what the step spends outside its kernels.
run_profile_config() {
  train_124m profile-config 60 --steps 5 --log_every 1 --kernel_profile 3 --model_gpu "$model_gpu" --attention cudnn ||
    return 0
  grep -E "^total|^modelled step on|graph replay of the same step|^step " "$W/profile-config.log"
  cp "$W/profile-config.log" "$files/" 2>/dev/null
  # bench/gpu_forecast.py's starting step (tests/fixtures/kernel_profile_gpt2_124m_h200_config.json's rows)
  cp "$W/profile-config/kernel_profile.json" "$files/kernel_profile_config.json" 2>/dev/null || true
}
# The Llama 3.2 1B shape: its step profiled (our grouped attention), its tokens/s; the block's kernels alone.
run_llama() {
  CONFIG=llama3.2-1b BATCH=4 profile profile-llama --log_every 1 --tokenizer ids
  grep -E "^step " "$W/profile-llama.log" | tail -2
}
run_llama_kernels() {
  echo "+ bench/kernels --filter rmsnorm, swiglu, rope"
  for f in rmsnorm swiglu rope; do timeout -k 5 60 "$B/bench/kernels" --filter "$f" 2>&1 | grep -E " cuda "; done
}
run_llama_cudnn() {
  CONFIG=llama3.2-1b BATCH=4 profile profile-llama-cudnn --log_every 1 --tokenizer ids --attention cudnn
  grep -E "^step " "$W/profile-llama-cudnn.log" | tail -2
}
# The ladders' rungs on the card: GB/s of each step from naive to ours (and cuDNN's).
run_ladders() {
  for f in layernorm softmax_fwd; do
    echo "+ bench/kernels --filter $f --impl naive,warp,vec,unfused,ours,cudnn"
    timeout -k 5 120 "$B/bench/kernels" --filter "$f" --impl naive,warp,vec,unfused,ours,cudnn 2>&1 | grep -E " (cuda|cudnn)"
  done
}
# The optimizers' kernels alone (adamw_step, adamw8bit_step, adafactor_step): GB/s.
run_optimizers() {
  echo "+ bench/kernels --filter ada"
  timeout -k 5 120 "$B/bench/kernels" --filter ada 2>&1 | grep -E " cuda "
}
# The tensor-core attention alone beside cuDNN's (attention_fwd, attention_bwd): TFLOP/s.
run_attention() {
  echo "+ bench/kernels --filter attention --impl mma,cudnn"
  timeout -k 5 180 "$B/bench/kernels" --filter attention --impl mma,cudnn 2>&1 | grep -E " (cuda|cudnn)|ratio"
}
# The config's micro-batch (64 x 1024, grad_accum 8), cuDNN's attention: tokens/s.
run_throughput() { throughput_run throughput --attention cudnn; }
# PyTorch's GPT-2 on the same card and token ids, the same 524,288 tokens a step.
torch_run() {  # B ACCUM: into $W/torch.log; 0 when it ran to the end
  local t
  t=$(left)
  if ((t < 120)); then
    echo "note: no time left for PyTorch's GPT-2 ($t s)"
    return 2
  fi
  echo "+ bench/gpt2_torch_gpu.py --batch_size $1 --grad_accum $2 (limit ${t}s)"
  timeout -k 5 "$t" python3 "$root/bench/gpt2_torch_gpu.py" --train_bin "$W/stage-data/train.bin" --device cuda \
    --batch_size "$1" --grad_accum "$2" --steps 6 --warmup 2 >"$W/torch.log" 2>&1
}
run_torch() {
  local torch_rc
  torch_run 64 8
  torch_rc=$?
  if ((torch_rc != 0 && torch_rc != 2)) && grep -qi "out of memory\|OutOfMemoryError" "$W/torch.log"; then
    echo "note: PyTorch's GPT-2 ran out of memory at 64 x 1024: 32 x 1024 x 16"
    torch_run 32 16
    torch_rc=$?
  fi
  if ((torch_rc == 0)); then
    tail -3 "$W/torch.log"
    cp "$W/torch.log" "$files/torch_gpt2.log"
    # Every throughput run made so far (the default first, then each variant) over PyTorch's.
    python3 - "$W" "$W/torch.log" <<'PY' || true
import glob, json, os, re, statistics, sys
torch = float(re.search(r"torch tokens/s: (\d+)", open(sys.argv[2]).read()).group(1))
for m in sorted(glob.glob(os.path.join(sys.argv[1], "throughput*", "metrics.jsonl"))):
    ours = [json.loads(l) for l in open(m) if '"tokens_per_s"' in l]
    if not ours:
        continue
    ours = statistics.median(r["tokens_per_s"] for r in ours[2:] or ours)
    name = os.path.basename(os.path.dirname(m))
    print(f"{name} / PyTorch: {ours:.0f} / {torch:.0f} tokens/s = {ours / torch:.3f}x")
PY
  elif ((torch_rc != 2)); then
    echo "note: PyTorch's GPT-2 failed (rc $torch_rc): $(tail -2 "$W/torch.log")"
    cp "$W/torch.log" "$files/torch_gpt2.log" 2>/dev/null
  fi
}
# Ours again with cuBLASLt's candidates timed per shape (off by default: docs/kernels/gemm.md).
run_tuned() { ENGINE_CUBLASLT_TUNE=1 throughput_run throughput-tuned --attention cudnn; }
# The bias gradients apart from their dW GEMMs (ENGINE_BIAS_GRAD=apart, docs/kernels/gemm.md):
# tokens/s at the config's micro-batch, and a B 64 micro-step profiled beside profile-cudnn-b64.
run_throughput_bias_apart() { ENGINE_BIAS_GRAD=apart throughput_run throughput-bias-apart --attention cudnn; }
run_profile_bias_apart_b64() { ENGINE_BIAS_GRAD=apart BATCH=64 profile profile-bias-apart-b64 --attention cudnn; }
# The same, with c_fc's bias gradient from the GEMM that makes its gradient
# (ENGINE_BIAS_GRAD=fused: cuBLASLt's DGELU_BGRAD), the other three apart.
run_throughput_bias_fused() { ENGINE_BIAS_GRAD=fused throughput_run throughput-bias-fused --attention cudnn; }
run_profile_bias_fused_b64() { ENGINE_BIAS_GRAD=fused BATCH=64 profile profile-bias-fused-b64 --attention cudnn; }
# The cross-entropy's one-buffer form, the default before the prefetching one
# (ENGINE_CROSS_ENTROPY=cached, docs/kernels/cross_entropy.md): the A/B beside throughput.
run_throughput_ce_cached() { ENGINE_CROSS_ENTROPY=cached throughput_run throughput-ce-cached --attention cudnn; }
run_profile_ce_cached_b64() { ENGINE_CROSS_ENTROPY=cached BATCH=64 profile profile-ce-cached-b64 --attention cudnn; }
# Layernorm's register-staged backward, the default before the prefetching one
# (ENGINE_LAYERNORM_BACKWARD=staged, docs/kernels/layernorm.md): its B 64 rows beside profile-cudnn-b64's.
run_profile_ln_staged_b64() { ENGINE_LAYERNORM_BACKWARD=staged BATCH=64 profile profile-ln-staged-b64 --attention cudnn; }
# Nsight Compute on layer 3 and the loss of a B 64 micro-step (the bias
# gradients fused, cuDNN's attention; O2: eager, the captured step's
# kernels), step 3 alone (--profile_steps; not the last step, whose end
# holds the validation and the sample): each kernel's speed of light,
# occupancy, launch, warp stalls and memory workload, for what limits the kernels
# the step profile can only time (layernorm's backward at 52% of HBM, the
# cross-entropy at 66%, the GEMMs with epilogues). The whole report to the
# files, its key lines to the log.
run_ncu_b64() {
  local t rc
  if ! command -v ncu >/dev/null; then
    echo "note: no ncu on this machine"
    return 0
  fi
  t=$(left)
  if ((t < 150)); then
    echo "note: no time left for the ncu run ($t s)"
    return 0
  fi
  echo "+ ncu: train B 64 O2, step 3's h.3 and loss kernels (limit ${t}s)"
  ENGINE_BIAS_GRAD=fused timeout -k 5 "$t" ncu --profile-from-start off --nvtx --nvtx-include "h.3/" \
    --nvtx-include "h.3 backward/" --nvtx-include "loss/" --nvtx-include "loss backward/" --section SpeedOfLight \
    --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis \
    "$B/models/train" --config "$root/configs/gpt2-124M.json" "${data[@]}" --device cuda --precision O2 \
    --batch_size 64 --grad_accum 1 --steps 4 --warmup_steps 1 --val_every 0 --val_batches 1 --sample_every 0 \
    --checkpoint_every 0 --profile_steps 3:3 --attention cudnn --out_dir "$W/ncu-b64" >"$W/ncu-b64.log" 2>&1
  rc=$?
  echo "ncu: rc $rc"  # a note, not the stage's failure: ncu may lack the counters' permission
  grep -E "Context [0-9]+, Stream|Duration|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per Thread|Warp Cycles Per Issued|==ERROR==|ERR_NVGPUCTRPERM" \
    "$W/ncu-b64.log" | cut -c1-160 | awk 'NR <= 300'
  cp "$W/ncu-b64.log" "$files/" 2>/dev/null
  rm -rf "$W/ncu-b64/checkpoint"
}
for r in "${runs[@]}"; do
  if ! declare -F "run_${r//-/_}" >/dev/null; then
    echo "note: no run named $r"
    rc=1
    continue
  fi
  echo "== $r ($(left) s left)"
  "run_${r//-/_}"
done
tar -czf "$OUT/project-files.tar.gz" -C "$W" project-files && echo "files: OUT/project-files.tar.gz ($(ls "$files" | wc -l))"
exit $rc
