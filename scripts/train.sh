#!/usr/bin/env bash
# Sets up, builds and runs the main job (the README's first command): GPT-2
# trained on the plain-text fortunes corpus (Debian's `fortunes` package) as
# byte-level tokens, with the default config (configs/gpt2-tiny.json). Extra
# arguments go to the trainer (see ./build/models/train --help).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja >/dev/null
cmake --build build -j "${JOBS:-$(nproc)}" --target train prepare_text
bash scripts/prepare_data.sh
source scripts/cpu_env.sh  # OPENBLAS_CORETYPE for CPUs OpenBLAS does not recognise
./build/models/train --config configs/gpt2-tiny.json "$@"
