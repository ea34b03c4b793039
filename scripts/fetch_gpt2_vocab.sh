#!/usr/bin/env bash
# Fetches GPT-2's BPE ranks (gpt2.tiktoken: 50,256 lines "BASE64 RANK", the
# merges GPT-2 was trained with) into .deps/gpt2/. They come from PyPI: the
# source distribution of openai-whisper ships them as
# whisper/assets/gpt2.tiktoken. Both the archive and the file are checked
# against their SHA-256. Idempotent; called by scripts/setup.sh. Without
# PyPI, the GPT-2 tokenizer's tests say "skipped" and prepare_text
# --tokenizer gpt2 says where the file is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.deps/gpt2
file_sha=306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930
sdist=openai_whisper-20250625.tar.gz
sdist_sha=37a91a3921809d9f44748ffc73c0a55c9f366c85a3ef5c2ae0cc09540432eb96
if [[ -f $dest/gpt2.tiktoken ]] && echo "$file_sha  $dest/gpt2.tiktoken" | sha256sum -c --status; then
  echo "setup: GPT-2's BPE ranks present ($dest/gpt2.tiktoken)"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
  -d "$tmp" openai-whisper==20250625
echo "$sdist_sha  $tmp/$sdist" | sha256sum -c --status ||
  { echo "setup: $sdist does not have the expected SHA-256" >&2; exit 1; }
tar -xzf "$tmp/$sdist" -C "$tmp" "${sdist%.tar.gz}/whisper/assets/gpt2.tiktoken"
echo "$file_sha  $tmp/${sdist%.tar.gz}/whisper/assets/gpt2.tiktoken" | sha256sum -c --status ||
  { echo "setup: gpt2.tiktoken does not have the expected SHA-256" >&2; exit 1; }
mkdir -p "$dest"
mv "$tmp/${sdist%.tar.gz}/whisper/assets/gpt2.tiktoken" "$dest/gpt2.tiktoken"
echo "setup: GPT-2's BPE ranks in $dest/gpt2.tiktoken"
