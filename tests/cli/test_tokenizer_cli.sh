#!/usr/bin/env bash
# The GPT-2 tokenizer with GPT-2's real ranks (.deps/gpt2/gpt2.tiktoken)
# against tiktoken itself (tests/cli/tiktoken_check.py, tiktoken from PyPI):
# the same ids on the edge-case fixtures (tests/fixtures/bpe: whitespace runs,
# contractions, digits, emoji, scripts, <|endoftext|> in text, long runs; and
# bytes that are not UTF-8) and on the whole fortunes corpus; the same pieces
# as GPT-2's pattern run by the regex module; the same ids again through
# Hugging Face's vocab.json and merges.txt; decode(encode(x)) == x byte for
# byte; bad input refused in one line.
# Usage: test_tokenizer_cli.sh BUILD_DIR   (exit 77: skipped, no ranks file or tiktoken)
set -euo pipefail
build=$1
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
expect_error() {  # expect_error WHAT ARGS...
  local what=$1 rc=0
  shift
  "$tok" "$@" >"$work/out" 2>"$work/err" || rc=$?
  ((rc != 0)) || fail "$* succeeded"
  [[ $(wc -l <"$work/err") -eq 1 ]] || fail "$* printed more than one line: $(cat "$work/err")"
  grep -qF -- "$what" "$work/err" || fail "$*: expected '$what', got: $(cat "$work/err")"
}
head -c 100000 "$ranks" >"$work/cut.tiktoken"
printf 'x\n' >>"$work/cut.tiktoken"
expect_error "cut.tiktoken:" --vocab "$work/cut.tiktoken" "$fortunes"
expect_error "/nope.tiktoken: GPT-2's tokenizer file is missing" --vocab /nope.tiktoken "$fortunes"
sed '3s/.*/Ġt Ġzzzq/' "$work/hf/merges.txt" >"$work/m" && mv "$work/m" "$work/hf/merges.txt"
expect_error "merges.txt:3: \"Ġzzzq\" is not a token" --vocab "$work/hf" "$fortunes"
printf '12 99999\n' >"$work/badids"
expect_error "token id 99999 is outside the tokenizer's vocabulary of 50257" --decode "$work/badids"
expect_error "unknown tokenizer 'bpe'" --tokenizer bpe "$fortunes"
echo "ok: bad input refused in one line"

# prepare_text --tokenizer gpt2: llm.c's shards, a fortune a document, as a
# Python spelling of llm.c's data scripts with tiktoken makes them.
prep=$build/models/prepare_text
src=/usr/share/games/fortunes
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
"$prep" --tokenizer gpt2 --split_on % --overwrite --name fort "$work/many" 0.1 "$src" >/dev/null
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
train=$build/models/train
run=(--vocab_size 50257 --block_size 32 --n_layer 2 --n_head 2 --n_embd 32 --batch_size 4 --seq_len 32 --steps 2
     --warmup_steps 1 --val_every 0 --val_batches 1 --sample_every 0 --sample_tokens 12 --device cpu
     --train_bin "$work/data/data_train_*.bin" --val_bin "$work/data/data_val_*.bin")
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

# The bench row runs (its figures are not judged here).
bash "$root/bench/bench_tokenizer.sh" "$root/tests/fixtures/bpe/edge_cases.txt" >"$work/bench"
grep -q "ours / tiktoken: " "$work/bench" || fail "bench_tokenizer.sh printed no ratio: $(cat "$work/bench")"
