#!/usr/bin/env bash
# The generate program from outside: greedy decoding of a Hugging Face-layout
# GPT-2 directory (the fixture's weights as GPT2LMHeadModel.state_dict() has
# them, config.json beside) gives PyTorch's 64 tokens
# (tests/fixtures/gpt2_greedy.safetensors) with and without the KV cache, on
# cpu and emu; a checkpoint from train continues a text prompt the same with
# and without the cache; sampling is reproducible from its seed; bad input is
# one line and a non-zero exit.
# Usage: test_generate_cli.sh BUILD_DIR
set -euo pipefail
build=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
gen=$build/models/generate
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

hf=$work/hf
mkdir "$hf"
cp "$root/tests/fixtures/hf_style.safetensors" "$hf/model.safetensors"
cat >"$hf/config.json" <<'JSON'
{"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": 37, "n_positions": 16, "n_ctx": 16,
 "n_layer": 2, "n_head": 2, "n_embd": 12, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-05}
JSON
want=$(/usr/bin/python3 - "$root/tests/fixtures/gpt2_greedy.safetensors" <<'PY'
import json, struct, sys
d = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", d[:8])[0]
h = json.loads(d[8:8 + n])
def ints(name):
    a, b = h[name]["data_offsets"]
    raw = d[8 + n + a:8 + n + b]
    return list(struct.unpack(f"<{len(raw) // 4}i", raw))
print(" ".join(map(str, ints("prompt") + ints("tokens"))))
PY
)
prompt=$(cut -d' ' -f1-5 <<<"$want")
for dev in cpu emu; do
  for cache in "" --no_kv_cache; do
    got=$("$gen" --model "$hf" --prompt_ids "$prompt" --temperature 0 --max_tokens 64 --tokenizer ids --device $dev \
      $cache 2>"$work/err")
    [[ $(echo $got) == "$want" ]] || fail "$dev $cache: greedy tokens differ from PyTorch's: $got"
    grep -q "^generate: 64 tokens in .* tokens/s (.*kv cache, $dev, ids)" "$work/err" ||
      fail "no tokens/s line: $(cat "$work/err")"
  done
done
echo "ok: greedy decoding of a Hugging Face directory equals PyTorch's 64 tokens (cpu, emu; with and without the cache)"

# A train checkpoint (bytes), continued from a text prompt.
"$build/models/prepare_text" "$work/data" 0.1 /usr/share/games/fortunes >/dev/null
"$build/models/train" --vocab_size 256 --block_size 32 --n_layer 2 --n_head 2 --n_embd 32 --batch_size 8 --seq_len 32 \
  --steps 60 --warmup_steps 5 --val_every 0 --val_batches 1 --sample_every 0 --device cpu \
  --train_bin "$work/data/train.bin" --val_bin "$work/data/val.bin" --out_dir "$work/run" >/dev/null
ck=$work/run/checkpoint
a=$("$gen" --model "$ck" --prompt "The " --temperature 0 --max_tokens 80 2>/dev/null)
b=$("$gen" --model "$ck" --prompt "The " --temperature 0 --max_tokens 80 --no_kv_cache 2>/dev/null)
[[ $a == "$b" ]] || fail "greedy text differs with and without the KV cache (80 tokens, block 32): '$a' vs '$b'"
[[ $a == $'\nThe '* ]] || fail "the output does not start with the prompt: '$a'"
s1=$("$gen" --model "$ck" --prompt "Q" --top_k 20 --top_p 0.9 --seed 7 --max_tokens 40 --num_samples 2 2>/dev/null)
s2=$("$gen" --model "$ck" --prompt "Q" --top_k 20 --top_p 0.9 --seed 7 --max_tokens 40 --num_samples 2 2>/dev/null)
[[ $s1 == "$s2" ]] || fail "the same seed sampled differently"
[[ $(grep -c '^---- sample [12] ----' <<<"$s1") == 2 ]] || fail "--num_samples 2 printed: $s1"
echo "ok: a train checkpoint continues its prompt alike with and without the cache; seeds reproduce"

expect_error() {  # expect_error WHAT ARGS...
  local what=$1 rc=0
  shift
  "$gen" "$@" >"$work/out" 2>"$work/err" || rc=$?
  ((rc != 0)) || fail "generate $* succeeded"
  [[ $(wc -l <"$work/err") -eq 1 ]] && grep -qF -- "$what" "$work/err" ||
    fail "generate $*: expected one line with '$what', got: $(cat "$work/err")"
}
expect_error "config.json: missing; --model takes a train checkpoint or a Hugging Face GPT-2 directory" --model "$work"
expect_error "--top_p must be in [1e-09, 1], got '0'" --model "$ck" --top_p 0
expect_error "--prompt_ids: token 300 is outside the model's vocabulary of 256" --model "$ck" --prompt_ids "1 300"
expect_error "unknown argument '--beam'" --model "$ck" --beam 4
expect_error "--max_tokens must be in [1, 1e+07], got 'nan'" --model "$ck" --max_tokens nan
sed -i 's/"gelu_new"/"relu"/' "$hf/config.json"
expect_error "activation_function 'relu'; GPT-2 here is gelu_new" --model "$hf"
echo "ok: bad input refused in one line"
