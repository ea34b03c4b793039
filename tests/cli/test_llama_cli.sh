#!/usr/bin/env bash
# train --model llama from outside.
#   run: a small Llama trains (the loss falls); stopped at step 4 and resumed
#     it repeats the uninterrupted run's losses bit for bit; --init_from a
#     LlamaForCausalLM directory takes its shape from config.json (a key set
#     otherwise is one line naming the file); where PyTorch 2 and
#     transformers are (.deps/torch2, .deps/hf), LlamaForCausalLM loads the
#     checkpoint with no missing or unexpected key and its loss on the first
#     validation batch equals the run's last validation loss; Llama 3's
#     uint32 llm.c shards train a vocabulary past 65,536.
#   dist: dp 2, ZeRO-1, tp 2 (with sequence parallelism), cp 2, pp 2 and
#     np 4's tp 2 x pp 2 and dp 2 x tp 2 each equal one process; a tp 2
#     checkpoint resumes under pp 2.
# Usage: test_llama_cli.sh BUILD_DIR run|dist
set -euo pipefail
build=$1
mode=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
train=$build/models/train
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$build/models/prepare_text" "$work/data" 0.1 /usr/share/games/fortunes >/dev/null
common=(--model llama --vocab_size 256 --block_size 32 --n_layer 2 --n_head 4 --n_kv_head 2 --n_embd 32
  --ffn_hidden 64 --seq_len 32 --global_batch 8 --steps 8 --warmup_steps 2 --val_every 4 --val_batches 1
  --sample_every 0 --device cpu --train_bin "$work/data/train.bin" --val_bin "$work/data/val.bin")
losses() {  # the training losses of a metrics.jsonl, one per line (full precision)
  /usr/bin/python3 -c 'import json,sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if "loss" in r: print(r["step"], repr(r["loss"]))' "$1"
}

if [[ $mode == run ]]; then
  "$train" "${common[@]}" --batch_size 8 --out_dir "$work/a" >"$work/a.log" 2>&1 || fail "train: $(tail -3 "$work/a.log")"
  grep -q "^model: Llama 2 layers, 4 heads on 2 K/V heads, 32 wide, MLP 64, untied head" "$work/a.log" ||
    fail "no model line: $(grep model: "$work/a.log")"
  losses "$work/a/metrics.jsonl" >"$work/a.losses"
  first=$(head -1 "$work/a.losses" | cut -d' ' -f2)
  last=$(tail -1 "$work/a.losses" | cut -d' ' -f2)
  /usr/bin/python3 -c "import sys; sys.exit(0 if $last < $first - 0.3 else 1)" ||
    fail "the loss did not fall: $first -> $last"
  "$train" "${common[@]}" --batch_size 8 --stop_after 4 --out_dir "$work/b" >/dev/null 2>&1
  "$train" "${common[@]}" --batch_size 8 --resume true --out_dir "$work/b" >"$work/b.log" 2>&1 ||
    fail "resume: $(tail -3 "$work/b.log")"
  losses "$work/b/metrics.jsonl" >"$work/b.losses"
  cmp -s "$work/a.losses" "$work/b.losses" || fail "resumed losses differ: $(diff "$work/a.losses" "$work/b.losses")"
  echo "ok: the loss falls ($first -> $last); stopped at 4 and resumed, steps 5-8 repeat bit for bit"

  # --init_from a transformers directory: the shape from its config.json, ids below its 61 tokens.
  hf=$root/tests/fixtures/llama/tiny
  /usr/bin/python3 -c 'import random, struct, sys
random.seed(3)
for name, n in (("train", 4000), ("val", 1000)):
    open(sys.argv[1] + "/" + name + ".bin", "wb").write(struct.pack("<%dH" % n, *[random.randrange(61) for _ in range(n)]))' \
    "$work"
  small=(--model llama --seq_len 16 --batch_size 2 --steps 2 --warmup_steps 1 --val_every 0 --val_batches 1
    --sample_every 0 --device cpu --train_bin "$work/train.bin" --val_bin "$work/val.bin" --init_from "$hf")
  "$train" "${small[@]}" --out_dir "$work/c" >"$work/c.log" 2>&1 || fail "init_from: $(tail -3 "$work/c.log")"
  grep -q "^model: Llama 2 layers, 4 heads on 2 K/V heads, 24 wide, MLP 40, untied head" "$work/c.log" ||
    fail "init_from did not take config.json's shape: $(grep model: "$work/c.log")"
  if "$train" "${small[@]}" --n_embd 32 --out_dir "$work/d" >"$work/d.log" 2>&1; then fail "a conflicting n_embd ran"; fi
  grep -q "config: n_embd = 32 but .*tests/fixtures/llama/tiny/config.json says 24" "$work/d.log" ||
    fail "no one-line conflict error: $(cat "$work/d.log")"
  echo "ok: --init_from takes the shape of the transformers directory; a conflicting key is one line"

  # Llama 3's llm.c shards (uint32 ids): a vocabulary past 65,536 trains.
  /usr/bin/python3 -c 'import random, struct, sys
random.seed(5)
for name, n in (("big_train", 3000), ("big_val", 600)):
    toks = [random.randrange(70001) for _ in range(n)]
    open(sys.argv[1] + "/" + name + "_000000.bin", "wb").write(struct.pack("<256i", 20240801, 7, n, *([0] * 253)) + struct.pack("<%dI" % n, *toks))' \
    "$work"
  "$train" --model llama --vocab_size 70001 --block_size 16 --n_layer 1 --n_head 2 --n_kv_head 1 --n_embd 16 \
    --ffn_hidden 32 --seq_len 16 --batch_size 2 --steps 2 --warmup_steps 1 --val_every 0 --val_batches 1 \
    --sample_every 0 --tokenizer ids --device cpu --train_bin "$work/big_train_000000.bin" \
    --val_bin "$work/big_val_000000.bin" --out_dir "$work/big" >"$work/big.log" 2>&1 || fail "uint32: $(tail -3 "$work/big.log")"
  grep -q "^data: .*big_train_000000.bin (3000 tokens, an llm.c shard)" "$work/big.log" ||
    fail "no data line: $(grep data: "$work/big.log")"
  echo "ok: Llama 3's uint32 shards train a vocabulary of 70,001"

  py=$root/.deps/torch2/bin/python
  if [[ -x $py ]] && PYTHONPATH=$root/.deps/hf "$py" -c 'import transformers' 2>/dev/null; then
    want=$(/usr/bin/python3 -c 'import json,sys
print([json.loads(l) for l in open(sys.argv[1]) if "val_loss" in l][-1]["val_loss"])' "$work/a/metrics.jsonl")
    PYTHONPATH=$root/.deps/hf "$py" - "$work/a/checkpoint" "$work/data/val.bin" "$want" <<'PY' || fail "transformers"
import sys, numpy as np, torch
from transformers import LlamaForCausalLM
model, info = LlamaForCausalLM.from_pretrained(sys.argv[1], output_loading_info=True)
bad = {k: v for k, v in info.items() if v}
assert not bad, f"loading info: {bad}"
d = np.fromfile(sys.argv[2], dtype=np.uint16).astype(np.int64)
B, T = 8, 32
x = torch.tensor(np.stack([d[b * T:b * T + T] for b in range(B)]))
y = torch.tensor(np.stack([d[b * T + 1:b * T + T + 1] for b in range(B)]))
with torch.no_grad():
    loss = torch.nn.functional.cross_entropy(model(input_ids=x).logits.reshape(B * T, -1), y.reshape(-1)).item()
want = float(sys.argv[3])
assert abs(loss - want) <= 1e-5 * abs(want), f"transformers' loss {loss} vs the run's {want}"
print(f"ok: LlamaForCausalLM loads the checkpoint (no missing or unexpected keys); loss {loss:.6f} = the run's {want:.6f}")
PY
  else
    echo "skip: no .deps/torch2 with transformers (scripts/fetch_torch2.sh): the transformers load is not checked here"
  fi
elif [[ $mode == dist ]]; then
  "$train" "${common[@]}" --batch_size 8 --out_dir "$work/one" >/dev/null 2>&1 || fail "one process"
  losses "$work/one/metrics.jsonl" >"$work/one.losses"
  # Each grid's 8 losses against one process's: the same samples, the sums
  # over ranks in another order (float32 noise, 1e-5 relative).
  same() {
    /usr/bin/python3 - "$work/one.losses" "$1" <<'PY'
import sys
a = [float(l.split()[1]) for l in open(sys.argv[1])]
b = [float(l.split()[1]) for l in open(sys.argv[2])]
assert len(a) == len(b) == 8, (len(a), len(b))
for s, (x, y) in enumerate(zip(a, b), 1):
    assert abs(x - y) <= 1e-5 * abs(x), f"step {s}: {x} vs {y}"
PY
  }
  run() {  # run NAME NP ARGS...: trains on NP ranks into $work/NAME
    local name=$1 np=$2
    shift 2
    MPIRUN_TIMEOUT=300 bash "$root/scripts/mpirun.sh" -np "$np" "$train" "${common[@]}" "$@" --out_dir "$work/$name" \
      >"$work/$name.log" 2>&1 || fail "$name: $(tail -3 "$work/$name.log")"
  }
  check() {
    losses "$work/$1/metrics.jsonl" >"$work/$1.losses"
    same "$work/$1.losses" || fail "$1 differs from one process"
  }
  run dp2 2 --batch_size 4 && check dp2
  run zero 2 --batch_size 4 --zero 1 && check zero
  run tp2 2 --batch_size 8 --tp 2 && check tp2
  grep -q "tensor parallel over 2 ranks: .* (2 heads, 1 K/V heads, vocabulary padded to 256)" "$work/tp2.log" ||
    fail "no tp summary: $(grep model: "$work/tp2.log")"
  run sp2 2 --batch_size 8 --tp 2 --sequence_parallel true && check sp2
  run cp2 2 --batch_size 8 --cp 2 && check cp2
  run pp2 2 --batch_size 8 --pp 2 && check pp2
  run tp2pp2 4 --batch_size 8 --tp 2 --pp 2 --pp_schedule afab && check tp2pp2
  run dp2tp2 4 --batch_size 4 --tp 2 && check dp2tp2
  echo "ok: dp 2, ZeRO-1, tp 2, tp 2 + sequence parallel, cp 2, pp 2, tp 2 x pp 2 and dp 2 x tp 2 equal one process"
  # A checkpoint of a tp 2 run resumes under pp 2 and ends where one process does.
  run moved 2 --batch_size 8 --tp 2 --stop_after 4
  run moved 2 --batch_size 8 --pp 2 --resume true
  check moved
  echo "ok: stopped at step 4 under tp 2, resumed under pp 2: the losses of one process"
else
  fail "mode run or dist, got $mode"
fi
