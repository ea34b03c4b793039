#!/usr/bin/env bash
# Installs PyTorch 2.15.0 from PyPI into a virtual environment, .deps/torch2,
# the reference bench/bench_gpt2_cpu.sh compares the engine's CPU step with
# (Debian packages only PyTorch 1.13, much slower on a CPU than 2.x). About
# 5.3 GiB with the CUDA libraries PyPI's wheel depends on (unused on the CPU),
# a minute on a fast link; not part of the default setup for that reason.
# Version pinned; its dependencies as pip resolves them for that version.
# Idempotent: an environment that already imports that version is kept.
# Usage: scripts/fetch_torch2.sh   (or scripts/setup.sh --torch2)
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.deps/torch2
version=2.15.0
if [[ -x $dest/bin/python ]] &&
  [[ $("$dest/bin/python" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null) == "$version" ]]; then
  echo "setup: PyTorch $version present in $dest"
  exit 0
fi
py=$(command -v python3 || true)
"${py:-/usr/bin/python3}" -m venv --clear "$dest" ||
  { echo "setup: could not make a virtual environment in $dest (Debian: apt-get install python3-venv)" >&2; exit 1; }
# numpy: torch warns at import without it (unused by the bench); pyyaml:
# transformers (.deps/hf) imports it, for tokenizer_cli.export's pipeline check.
"$dest/bin/python" -m pip install -q --disable-pip-version-check "torch==$version" numpy pyyaml
echo "setup: PyTorch $("$dest/bin/python" -c 'import torch; print(torch.__version__)') in $dest"
