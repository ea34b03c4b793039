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
# OpenBLAS 0.3.21 falls back to its SSE3 kernels on CPUs it does not know
# (generic "Intel Xeon Processor" VMs); name the kernel family the CPU can
# run unless the environment already chose one.
if [[ -z "${OPENBLAS_CORETYPE:-}" ]]; then
  if grep -qw avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=SkylakeX
  elif grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then export OPENBLAS_CORETYPE=Haswell; fi
fi
./build/models/train --config configs/gpt2-tiny.json "$@"
