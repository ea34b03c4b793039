#!/usr/bin/env bash
# Sets up, builds and runs the main job (the README's first command): until
# the GPT-2 model lands, that is train_mlp, a 2-layer MLP trained with AdamW
# on the spirals problem. Extra arguments go to the trainer (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja >/dev/null
cmake --build build -j "${JOBS:-$(nproc)}" --target train_mlp
./build/models/train_mlp --device auto "$@"
