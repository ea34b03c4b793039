#!/usr/bin/env bash
# Fetches the Python packages the tests use as outside readers and that
# Debian does not package, into .deps/py (used as PYTHONPATH by those tests
# only, so Debian's Python stays as it is):
#   tensorboard (its own event-file reader, EventAccumulator, checks the
#   event files the engine writes) with protobuf and absl-py, which that
#   reader imports;
#   tiktoken (OpenAI's BPE, the reference the GPT-2 tokenizer's ids are
#   checked against) with regex, which it imports;
#   timm and safetensors (timm's VisionTransformer loads the engine's ViT
#   checkpoints: tests/cli/timm_check.py), over Debian's torch and torchvision.
#   transformers (.deps/hf, apart): AutoTokenizer reads the tokenizer files
#   of GPT-2 checkpoints.
# Versions pinned; numpy, torch and PyYAML are Debian's.
# Idempotent; called by scripts/setup.sh. Without PyPI the tests that need
# these say "skipped" and why.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.deps/py
# install DEST PINS...: into DEST unless its PINS file says these already are.
install() {
  local dest=$1
  shift
  local stamp="$*"
  if [[ -f $dest/PINS && "$(cat "$dest/PINS")" == "$stamp" ]]; then
    echo "setup: Python test packages present in $dest ($stamp)"
    return 0
  fi
  rm -rf "$dest"
  /usr/bin/python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore --no-deps --target "$dest" "$@"
  echo "$stamp" >"$dest/PINS"
  echo "setup: Python test packages in $dest ($stamp)"
}
install .deps/py tensorboard==2.21.0 protobuf==7.36.2 absl-py==2.5.1 timm==1.0.31 safetensors==0.8.0 \
  tiktoken==0.12.0 regex==2026.11.19
# transformers apart (its own dependencies would shadow timm's and torch's):
# AutoTokenizer reads the tokenizer files a GPT-2 checkpoint carries. Its
# models need PyTorch 2.1 or later, which Debian's is not; the tokenizers are
# what is checked with it.
install .deps/hf transformers==4.57.1 huggingface_hub==0.36.2 tokenizers==0.22.2 filelock==4.3.1 packaging==26.4 \
  tqdm==4.70.1 fsspec==2026.9.0 typing_extensions==4.16.0 requests==2.34.2 urllib3==2.8.0 idna==3.20 \
  certifi==2026.10.19.post1 charset_normalizer==3.5.3 regex==2026.11.19 safetensors==0.8.0
