#!/usr/bin/env bash
# Prepares the default corpus: the plain-text fortune files from Debian's
# `fortunes` package (scripts/setup.sh installs it) as byte-level tokens in
# data/fortunes/{train,val}.bin, the last 10% being the validation split.
# Does nothing if both files exist. Needs build/models/prepare_text.
set -euo pipefail
cd "$(dirname "$0")/.."
src=/usr/share/games/fortunes
if [[ -f data/fortunes/train.bin && -f data/fortunes/val.bin ]]; then exit 0; fi
[[ -d $src ]] || { echo "prepare_data: $src missing: run scripts/setup.sh (package fortunes)" >&2; exit 1; }
./build/models/prepare_text data/fortunes 0.1 "$src"
