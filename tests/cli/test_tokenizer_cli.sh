#!/usr/bin/env bash
# The GPT-2 tokenizer with GPT-2's real ranks (.deps/gpt2/gpt2.tiktoken)
# against tiktoken itself (tests/cli/tiktoken_check.py, tiktoken from PyPI);
# one ctest entry per case:
#   tiktoken  the same ids on the edge-case fixtures (tests/fixtures/bpe:
#             whitespace runs, contractions, digits, emoji, scripts,
#             <|endoftext|> in text, long runs; and bytes that are not UTF-8)
#             and on the whole fortunes corpus; the same pieces as GPT-2's
#             pattern run by the regex module; the same ids again through
#             Hugging Face's vocab.json and merges.txt; decode(encode(x)) == x
#             byte for byte; bad input refused in one line; the bench runs.
#   shards    prepare_text's llm.c shards as a Python spelling of llm.c's data
#             scripts writes them; training on them, samples continue --prompt.
#   export    a gpt2 run's checkpoint carries the tokenizer: transformers'
#             AutoTokenizer reads it to tiktoken's ids, generate finds it there.
# Usage: test_tokenizer_cli.sh BUILD_DIR CASE   (exit 77: skipped, no ranks file or tiktoken)
set -euo pipefail
build=$1
case_name=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
tok=$build/models/tokenize
ranks=$root/.deps/gpt2/gpt2.tiktoken
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
check() { PYTHONPATH=$root/.deps/py /usr/bin/python3 "$root/tests/cli/tiktoken_check.py" "$@"; }

[[ -f $ranks ]] || { echo "skipped: no $ranks (scripts/fetch_gpt2_vocab.sh fetches it)"; exit 77; }
PYTHONPATH=$root/.deps/py /usr/bin/python3 -c "import tiktoken, regex" 2>/dev/null ||
  { echo "skipped: no tiktoken package (scripts/fetch_pydeps.sh installs it)"; exit 77; }

fortunes=$work/fortunes.txt
find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' | sort | xargs cat >"$fortunes"
texts=("$root/tests/fixtures/bpe/edge_cases.txt" "$root/tests/fixtures/bpe/edge_invalid.bin" "$fortunes")
prep=$build/models/prepare_text
train=$build/models/train
src=/usr/share/games/fortunes
expect_error() {  # expect_error WHAT ARGS...: tokenize fails with one line holding WHAT
  local what=$1 rc=0
  shift
  "$tok" "$@" >"$work/out" 2>"$work/err" || rc=$?
  ((rc != 0)) || fail "$* succeeded"
  [[ $(wc -l <"$work/err") -eq 1 ]] || fail "$* printed more than one line: $(cat "$work/err")"
  grep -qF -- "$what" "$work/err" || fail "$*: expected '$what', got: $(cat "$work/err")"
}
run=(--vocab_size 50257 --block_size 32 --n_layer 2 --n_head 2 --n_embd 32 --batch_size 4 --seq_len 32 --steps 2
     --warmup_steps 1 --val_every 0 --val_batches 1 --sample_every 0 --sample_tokens 12 --device cpu
     --train_bin "$work/data/data_train_*.bin" --val_bin "$work/data/data_val_*.bin")

case $case_name in
tiktoken)
for t in "${texts[@]}"; do
  "$tok" --pieces "$t" >"$work/pieces"
  check pieces "$t" "$work/pieces"
  "$tok" --vocab "$ranks" "$t" >"$work/ids"
  check ids "$ranks" "$t" "$work/ids"
  "$tok" --decode "$work/ids" >"$work/back"
  cmp "$t" "$work/back" || fail "decode(encode($t)) differs from the text"
done
"$tok" --allow_special "$root/tests/fixtures/bpe/edge_cases.txt" >"$work/ids"
check ids "$ranks" "$root/tests/fixtures/bpe/edge_cases.txt" "$work/ids" --allow_special
out=$(tr ' ' '\n' <"$work/ids")
[[ $out == *$'\n'50256$'\n'* ]] || fail "--allow_special gave no token 50256"

# Hugging Face's spelling of the same vocabulary: the same ids.
mkdir "$work/hf"
check hf "$ranks" "$work/hf" >/dev/null
for t in "${texts[@]}"; do
  "$tok" --vocab "$ranks" "$t" >"$work/a"
  "$tok" --vocab "$work/hf" "$t" >"$work/b"
  cmp "$work/a" "$work/b" || fail "vocab.json + merges.txt give other ids than the ranks file on $t"
done
echo "ok: vocab.json + merges.txt give the ranks file's ids"

# Bad input: one line naming the file, a non-zero exit.
head -c 100000 "$ranks" >"$work/cut.tiktoken"
printf 'x\n' >>"$work/cut.tiktoken"
expect_error "cut.tiktoken:" --vocab "$work/cut.tiktoken" "$fortunes"
expect_error "/nope.tiktoken: GPT-2's tokenizer file is missing" --vocab /nope.tiktoken "$fortunes"
sed '3s/.*/Ġt Ġzzzq/' "$work/hf/merges.txt" >"$work/m" && mv "$work/m" "$work/hf/merges.txt"
expect_error "merges.txt:3: \"Ġzzzq\" is not a token" --vocab "$work/hf" "$fortunes"
printf '12 4294967297\n' >"$work/hugeid"
expect_error "hugeid: token id 4294967297 is out of range" --decode "$work/hugeid"
printf '12 99999\n' >"$work/badids"
expect_error "token id 99999 is outside the tokenizer's vocabulary of 50257" --decode "$work/badids"
expect_error "unknown tokenizer 'bpe'" --tokenizer bpe "$fortunes"
echo "ok: bad input refused in one line"
# The bench row runs (its figures are not judged here).
bash "$root/bench/bench_tokenizer.sh" "$root/tests/fixtures/bpe/edge_cases.txt" >"$work/bench"
grep -q "ours / tiktoken: " "$work/bench" || fail "bench_tokenizer.sh printed no ratio: $(cat "$work/bench")"
;;

shards)
# prepare_text --tokenizer gpt2: llm.c's shards, a fortune a document, as a
# Python spelling of llm.c's data scripts with tiktoken makes them.
"$prep" --tokenizer gpt2 --split_on % "$work/data" 0.1 "$src" >/dev/null
check shards "$ranks" "$work/data" data 0.1 % "$src"
"$prep" --tokenizer gpt2 --split_on % --shard_tokens 200000 --name fort "$work/many" 0.1 "$src" >/dev/null
check shards "$ranks" "$work/many" fort 0.1 % "$src"
n=$(find "$work/many" -name 'fort_train_*.bin' | wc -l)
((n == 4)) || fail "--shard_tokens 200000: $n train shards, expected 4"
expect_prep_error() {  # expect_prep_error WHAT ARGS...
  local what=$1 rc=0
  shift
  "$prep" "$@" >"$work/out" 2>"$work/err" || rc=$?
  ((rc != 0)) || fail "prepare_text $* succeeded"
  [[ $(wc -l <"$work/err") -eq 1 ]] && grep -qF -- "$what" "$work/err" ||
    fail "prepare_text $*: expected one line with '$what', got: $(cat "$work/err")"
}
expect_prep_error "fort_train_000000.bin exists: pass --overwrite" --tokenizer gpt2 --name fort "$work/many" 0.1 "$src"
touch "$work/many/fort_val_train_000000.bin"  # another dataset's, named fort_val: not fort's
"$prep" --tokenizer gpt2 --split_on % --overwrite --name fort "$work/many" 0.1 "$src" >/dev/null
[[ -f $work/many/fort_val_train_000000.bin ]] || fail "--overwrite removed dataset fort_val's shard"
rm "$work/many/fort_val_train_000000.bin"
n=$(find "$work/many" -name 'fort_*.bin' | wc -l)
((n == 2)) || fail "--overwrite left $n shards, expected the new 2 (the old ones removed)"
expect_prep_error "--format must be flat or shards" --format csv "$work/x" 0.1 "$src"
expect_prep_error "unknown tokenizer 'bpe'" --tokenizer bpe "$work/x" 0.1 "$src"
# The bytes tokenizer in shards: the text's bytes, as they are.
"$prep" --format shards --shard_tokens 1000000 "$work/bytes" 0.1 "$src" >/dev/null
/usr/bin/python3 - "$work/bytes" "$src" <<'PY'
import glob, os, struct, sys
got = b""
for split in ("train", "val"):
    for f in sorted(glob.glob(os.path.join(sys.argv[1], f"bytes_{split}_*.bin"))):
        d = open(f, "rb").read()
        n = struct.unpack("<3i", d[:12])[2]
        got += bytes(struct.unpack(f"<{n}H", d[1024:]))
want = b"".join(open(e.path, "rb").read() for e in sorted(os.scandir(sys.argv[2]), key=lambda e: e.path)
                if e.is_file(follow_symlinks=False) and not e.name.endswith(".dat"))
sys.exit(0 if got == want else f"FAIL: bytes shards hold {len(got)} bytes, the text {len(want)}")
PY
echo "ok: prepare_text's gpt2 and bytes shards"

# Training on them: samples read as text, continuing --prompt.
"$train" "${run[@]}" --prompt "Once upon a time" --out_dir "$work/run" >"$work/log"
sample=$(sed -n '/^---- sample at step 2 ----$/{n;p;}' "$work/log")
[[ $sample == "Once upon a time"* ]] || fail "the sample does not continue the prompt: $(cat "$work/log")"
"$train" "${run[@]}" --tokenizer ids --out_dir "$work/run2" >"$work/log"
sample=$(sed -n '/^---- sample at step 2 ----$/{n;p;}' "$work/log")
[[ $sample =~ ^50256( [0-9]+){12}$ ]] || fail "tokenizer ids: expected 50256 and 12 ids, got '$sample'"
expect_train_error() {  # expect_train_error WHAT ARGS...
  local what=$1 rc=0
  shift
  "$train" "${run[@]}" --out_dir "$work/bad" "$@" >"$work/out" 2>"$work/err" || rc=$?
  ((rc != 0)) || fail "train $* succeeded"
  grep -qF -- "$what" "$work/err" || fail "train $*: expected '$what', got: $(cat "$work/err")"
  [[ ! -e $work/bad ]] || fail "train $* left an output directory"
}
expect_train_error "tokenizer bytes decodes 256 ids, the model has vocab_size 50257" --tokenizer bytes
expect_train_error "a prompt needs a tokenizer (bytes or gpt2), not ids" --tokenizer ids --prompt hi
expect_train_error "tokenizer 'bpe': auto, bytes, gpt2 or ids" --tokenizer bpe
echo "ok: samples in GPT-2's BPE continue --prompt"
;;

export)
PYTHONPATH=$root/.deps/hf /usr/bin/python3 -c "import transformers" 2>/dev/null ||
  { echo "skipped: no transformers package (scripts/fetch_pydeps.sh installs it in .deps/hf)"; exit 77; }
"$prep" --tokenizer gpt2 --split_on % "$work/data" 0.1 "$src" >/dev/null
"$train" "${run[@]}" --out_dir "$work/run" >/dev/null
ck=$work/run/checkpoint
for f in vocab.json merges.txt tokenizer_config.json; do [[ -s $ck/$f ]] || fail "the checkpoint has no $f"; done
# Hugging Face reads "<|endoftext|>" in text as the token: ours with --allow_special.
for t in "$root/tests/fixtures/bpe/edge_cases.txt" "$fortunes"; do
  "$tok" --allow_special "$t" >"$work/ids"
  PYTHONPATH=$root/.deps/hf /usr/bin/python3 - "$ck" "$t" "$work/ids" <<'PY' 2>"$work/py.err" || fail "$(cat "$work/py.err")"
import sys
from transformers import AutoTokenizer
tok = AutoTokenizer.from_pretrained(sys.argv[1])
text = open(sys.argv[2], encoding="utf-8", newline="").read()
want = [int(t) for t in open(sys.argv[3]).read().split()]
got = tok(text)["input_ids"]
assert type(tok).__name__ == "GPT2TokenizerFast", type(tok).__name__
assert got == want, f"{sys.argv[2]}: AutoTokenizer's {len(got)} ids differ from ours ({len(want)}) at " \
    f"{next(i for i, (a, b) in enumerate(zip(got + [-1], want + [-1])) if a != b)}"
assert tok.decode(got) == text, "AutoTokenizer's decode differs from the text"
assert (tok.eos_token, tok.eos_token_id, tok.model_max_length) == ("<|endoftext|>", 50256, 32), \
    (tok.eos_token, tok.eos_token_id, tok.model_max_length)
PY
done
echo "ok: AutoTokenizer reads the checkpoint's tokenizer: tiktoken's ids, eos 50256, model_max_length 32"
# generate reads the tokenizer beside the weights (the default file hidden).
out=$(ENGINE_GPT2_VOCAB=/nonexistent "$build/models/generate" --model "$ck" --prompt "Hello there" --temperature 0 \
  --max_tokens 5 2>"$work/err")
[[ $out == $'\nHello there'* ]] || fail "generate did not continue the prompt as text: '$out' $(cat "$work/err")"
grep -q "(kv cache, cpu, gpt2)" "$work/err" || fail "generate did not use gpt2: $(cat "$work/err")"
echo "ok: generate finds the checkpoint's tokenizer"
# pipeline("text-generation", model=dir) needs PyTorch 2.1 or later, which
# Debian's is not: checked where scripts/setup.sh --torch2 made .deps/torch2.
# Greedy, its tokens must be generate's.
py2=$root/.deps/torch2/bin/python
if [[ -x $py2 ]] && PYTHONPATH=$root/.deps/hf "$py2" -c "import torch, yaml, transformers" 2>/dev/null; then
  theirs=$(PYTHONPATH=$root/.deps/hf "$py2" - "$ck" <<'PY' 2>"$work/py.err") || fail "pipeline: $(tail -3 "$work/py.err")"
import sys
from transformers import pipeline
p = pipeline("text-generation", model=sys.argv[1], device="cpu")
ids = p.tokenizer("Hello there")["input_ids"]
out = p.model.generate(p.tokenizer("Hello there", return_tensors="pt").input_ids, do_sample=False,
                       max_new_tokens=12, pad_token_id=50256)
text = p("Hello there", do_sample=False, max_new_tokens=12)[0]["generated_text"]
assert text.startswith("Hello there"), text
print(" ".join(map(str, out[0].tolist())))
PY
  ours=$("$build/models/generate" --model "$ck" --tokenizer ids --prompt_ids "$(
    "$tok" <(printf 'Hello there'))" --temperature 0 --max_tokens 12 --ignore_eot 2>/dev/null)
  [[ $(echo $ours) == "$theirs" ]] || fail "pipeline's greedy tokens '$theirs', generate's '$(echo $ours)'"
  echo "ok: pipeline(\"text-generation\", model=checkpoint) runs, its greedy tokens are generate's"
else
  echo "note: pipeline(\"text-generation\") not run: it needs PyTorch >= 2.1 (scripts/setup.sh --torch2)"
fi
;;
*) fail "unknown case $case_name" ;;
esac
