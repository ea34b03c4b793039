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
# Versions pinned; numpy, torch and PyYAML are Debian's.
# Idempotent; called by scripts/setup.sh. Without PyPI the tests that need
# these say "skipped" and why.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.deps/py
pins=(tensorboard==2.21.0 protobuf==7.36.2 absl-py==2.5.1 timm==1.0.31 safetensors==0.8.0 tiktoken==0.12.0 regex==2026.11.19)
stamp="${pins[*]}"
if [[ -f $dest/PINS && "$(cat $dest/PINS)" == "$stamp" ]]; then
  echo "setup: Python test packages present ($stamp)"
  exit 0
fi
rm -rf "$dest"
/usr/bin/python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore --no-deps --target "$dest" "${pins[@]}"
echo "$stamp" >"$dest/PINS"
echo "setup: Python test packages in $dest ($stamp)"
