#!/usr/bin/env bash
# HellaSwag scoring (models/gpt2/hellaswag.h) against a PyTorch computation
# of the same model (scripts/fixtures_gpt2.py's GPT-2 in plain torch, float64)
# on tests/fixtures/hellaswag/hellaswag_mini.jsonl; one ctest entry per case:
#   torch  every example's summed and mean ending losses, predictions and both
#          accuracies, from generate --eval_hellaswag on cpu and emu; bad
#          files refused in one line;
#   dp     train --eval_hellaswag on one process and on two data-parallel
#          ranks (the examples split between them) reports the same
#          accuracies at its validation, generate's (needs MPI).
# Usage: test_hellaswag_cli.sh BUILD_DIR CASE
set -euo pipefail
build=$1
case_name=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mini=$root/tests/fixtures/hellaswag/hellaswag_mini.jsonl

"$build/models/prepare_text" "$work/data" 0.1 /usr/share/games/fortunes >/dev/null
common=(--vocab_size 256 --block_size 48 --n_layer 2 --n_head 2 --n_embd 32 --batch_size 8 --seq_len 48
        --warmup_steps 5 --val_batches 1 --sample_every 0 --device cpu
        --train_bin "$work/data/train.bin" --val_bin "$work/data/val.bin")
"$build/models/train" "${common[@]}" --steps 60 --val_every 0 --out_dir "$work/run" >/dev/null
ck=$work/run/checkpoint
devices=(cpu)
[[ $case_name == torch ]] && devices=(cpu emu)
for dev in "${devices[@]}"; do
  "$build/models/generate" --model "$ck" --eval_hellaswag "$mini" --scores "$work/scores_$dev.jsonl" --device $dev \
    >"$work/out_$dev"
done
n=$(sed -E 's/.*acc_norm [0-9.]+ \(([0-9]+)\).*/\1/' "$work/out_cpu")
case $case_name in
torch)
PYTHONPATH=$root/scripts:$root/.deps/py /usr/bin/python3 - "$ck" "$mini" "$work/scores_cpu.jsonl" \
  "$work/scores_emu.jsonl" <<'PY'
import json, sys
import torch
import torch.nn.functional as F
from safetensors.numpy import load_file
from fixtures_gpt2 import gpt2_logits

ck, mini = sys.argv[1], sys.argv[2]
cfg = json.load(open(f"{ck}/config.json"))
shape = {"vocab_size": cfg["vocab_size"], "block_size": cfg["n_positions"], "n_layer": cfg["n_layer"],
         "n_head": cfg["n_head"], "n_embd": cfg["n_embd"]}
w = {k: torch.from_numpy(v).double() for k, v in load_file(f"{ck}/model.safetensors").items()}
P = shape["block_size"]
want = []
for i, line in enumerate(open(mini, encoding="utf-8")):
    ex = json.loads(line)
    ctx = list(ex["ctx"].encode())  # the bytes tokenizer; an ending is " " + ending (llm.c's render_example)
    sums, avgs = [], []
    for end in ex["endings"]:
        toks = ctx + list((" " + end).encode())
        start = len(ctx)
        if len(toks) > P:  # too long for the window: context tokens go from the start
            cut = len(toks) - P
            toks, start = toks[cut:], max(start - cut, 1)
        logits = gpt2_logits(w, torch.tensor([toks]), shape)
        losses = F.cross_entropy(logits[start - 1:-1], torch.tensor(toks[start:]), reduction="none")
        sums.append(float(losses.sum()))
        avgs.append(float(losses.mean()))
    label = int(ex["label"])
    want.append({"label": label, "pred": min(range(4), key=lambda k: sums[k]),
                 "pred_norm": min(range(4), key=lambda k: avgs[k]), "sum_loss": sums, "avg_loss": avgs})
for path in sys.argv[3:]:
    got = [json.loads(l) for l in open(path)]
    assert len(got) == len(want), (path, len(got))
    for g, r in zip(got, want):
        for key in ("sum_loss", "avg_loss"):
            for a, b in zip(g[key], r[key]):
                assert abs(a - b) <= 1e-4 * abs(b) + 1e-5, f"{path}: example {g['index']} {key}: {g[key]} vs {r[key]}"
        for key in ("label", "pred", "pred_norm"):
            assert g[key] == r[key], f"{path}: example {g['index']} {key}: {g[key]} vs PyTorch's {r[key]}"
print(f"ok: {len(want)} examples' losses and predictions equal PyTorch's (cpu, emu); acc_norm "
      f"{sum(r['pred_norm'] == r['label'] for r in want)}/{len(want)}")
PY
[[ $(sed -E 's/; .*//' "$work/out_cpu") == $(sed -E 's/; .*//' "$work/out_emu") ]] ||
  fail "cpu and emu report differently: $(cat "$work/out_cpu" "$work/out_emu")"

# Bad files: one line naming the file, the line and the key.
bad_hs() {  # bad_hs WHAT JSONL
  printf '%s\n' "$2" >"$work/bad.jsonl"
  local rc=0
  "$build/models/generate" --model "$ck" --eval_hellaswag "$work/bad.jsonl" >/dev/null 2>"$work/err" || rc=$?
  ((rc != 0)) && [[ $(wc -l <"$work/err") -eq 1 ]] && grep -qF -- "$1" "$work/err" ||
    fail "expected one line with '$1', got: $(cat "$work/err")"
}
bad_hs "bad.jsonl:1: label 4294967297 for 2 endings" '{"ctx": "a", "endings": ["b", "c"], "label": 4294967297}'
bad_hs "bad.jsonl:1: no integer \"label\"" '{"ctx": "a", "endings": ["b", "c"], "label": "99999999999"}'
bad_hs "bad.jsonl:1: an empty \"ctx\"" '{"ctx": "", "endings": ["b", "c"], "label": 0}'
bad_hs "bad.jsonl:1: no \"endings\" array" '{"ctx": "a", "endings": ["b"], "label": 0}'
bad_hs "bad.jsonl:1: not a JSON object" '{"ctx": "a",'
echo "ok: bad HellaSwag files refused in one line"
;;

dp)

# train --eval_hellaswag at its validation: one process, then dp 2. The
# weights stay the checkpoint's (lr 1e-30), so both score the same model.
eval_run=("${common[@]}" --init_from "$ck/model.safetensors" --steps 1 --warmup_steps 0 --lr 1e-30 --min_lr 0
          --batch_size 4 --global_batch 8 --eval_hellaswag "$mini")
"$build/models/train" "${eval_run[@]}" --out_dir "$work/np1" >/dev/null
MPIRUN_TIMEOUT=300 bash "$root/scripts/mpirun.sh" -np 2 "$build/models/train" "${eval_run[@]}" --out_dir "$work/np2" \
  >"$work/np2.log" 2>&1 || fail "dp 2 run failed: $(tail -5 "$work/np2.log")"
pick() { grep -o '"val_hellaswag_acc[_a-z]*":[0-9.e-]*' "$1/metrics.jsonl" | sort; }
a=$(pick "$work/np1") b=$(pick "$work/np2")
[[ -n $a && $a == "$b" ]] || fail "dp 2's HellaSwag differs from one process's: '$a' vs '$b'"
grep -q "\"val_hellaswag_acc_norm\":$(awk -v n="$n" 'BEGIN { print n / 10 }')" "$work/np1/metrics.jsonl" ||
  fail "train's acc_norm is not generate's ($n/10): $a"
echo "ok: train --eval_hellaswag: np 2 equals np 1 ($(tr '\n' ' ' <<<"$a")), and generate's"
;;
*) fail "unknown case $case_name" ;;
esac
