#!/usr/bin/env bash
# Prepares the default corpus: the plain-text fortune files from Debian's
# `fortunes` package (scripts/setup.sh installs it).
#   (no option)       byte-level tokens in data/fortunes/{train,val}.bin
#                     (headerless), the last 10% being the validation split;
#   --tokenizer gpt2  GPT-2's BPE in llm.c's shards, a fortune a document
#                     (<|endoftext|> before each): data/fortunes_gpt2/
#                     fortunes_gpt2_{train,val}_000000.bin (GPT-2's ranks file
#                     from scripts/setup.sh).
# Does nothing if the files exist. Needs build/models/prepare_text.
set -euo pipefail
cd "$(dirname "$0")/.."
src=/usr/share/games/fortunes
tokenizer=bytes
while (($#)); do
  case $1 in
    --tokenizer) tokenizer=${2:?--tokenizer needs bytes or gpt2}; shift 2 ;;
    *) echo "prepare_data: unknown option $1 (--tokenizer bytes|gpt2)" >&2; exit 2 ;;
  esac
done
[[ -d $src ]] || { echo "prepare_data: $src missing: run scripts/setup.sh (package fortunes)" >&2; exit 1; }
case $tokenizer in
  bytes)
    if [[ -f data/fortunes/train.bin && -f data/fortunes/val.bin ]]; then exit 0; fi
    ./build/models/prepare_text data/fortunes 0.1 "$src" ;;
  gpt2)
    out=data/fortunes_gpt2
    if [[ -f $out/fortunes_gpt2_train_000000.bin && -f $out/fortunes_gpt2_val_000000.bin ]]; then exit 0; fi
    ./build/models/prepare_text --tokenizer gpt2 --split_on % --overwrite "$out" 0.1 "$src" ;;
  *) echo "prepare_data: --tokenizer bytes or gpt2, got '$tokenizer'" >&2; exit 2 ;;
esac
