#!/usr/bin/env bash
# Installs the Debian packages the engine builds and tests with, and, where
# the CUDA toolkit is, the cuDNN frontend's headers (fetch_cudnn_frontend.sh).
# Idempotent: what is present is skipped, so re-running costs one dpkg query.
# Usage: scripts/setup.sh   (PyTorch, torchvision and PyYAML from Debian are
# in the list: the timm test and the fixture scripts use them; --torch, once
# needed for those, is still accepted; --torch2 also installs PyTorch 2.15
# from PyPI into .deps/torch2 for bench/bench_gpt2_cpu.sh, scripts/fetch_torch2.sh)
set -euo pipefail
torch2=0
for a in "$@"; do
  case $a in
    --torch) ;;
    --torch2) torch2=1 ;;
    *) echo "setup: unknown option $a (--torch2 or none)" >&2; exit 2 ;;
  esac
done

pkgs=(build-essential cmake ninja-build ccache pkg-config
      libopenblas-dev libopenblas0-openmp libopenmpi-dev openmpi-bin libhdf5-dev zlib1g-dev
      nlohmann-json3-dev catch2 clang-format python3 python3-pip python3-h5py python3-matplotlib
      fortunes dataset-fashion-mnist slurmctld slurmd slurm-client
      python3-numpy python3-torch python3-torchvision python3-yaml)

missing=()
for p in "${pkgs[@]}"; do
  [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) == "install ok installed" ]] || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "setup: all packages present"
# The cuDNN frontend's headers (PyPI, pinned and hash-checked) for the CUDA
# build's cuDNN path; nothing to fetch without a CUDA toolkit.
# Without them (no PyPI) the build goes on without the cuDNN path, and says so.
if command -v nvcc >/dev/null 2>&1 || [[ -x /usr/local/cuda/bin/nvcc ]]; then
  bash "$(dirname "$0")/fetch_cudnn_frontend.sh" ||
    echo "setup: WARNING: could not fetch the cuDNN frontend headers; the CUDA build will have no cuDNN path" >&2
fi
# GPT-2's BPE ranks (PyPI, checksummed) for the gpt2 tokenizer.
bash "$(dirname "$0")/fetch_gpt2_vocab.sh" ||
  echo "setup: WARNING: could not fetch GPT-2's BPE ranks; --tokenizer gpt2 and its tests need them" >&2
# The Python packages some tests read the engine's files with (PyPI, pinned).
bash "$(dirname "$0")/fetch_pydeps.sh" ||
  echo "setup: WARNING: could not fetch the Python test packages; the tests that need them will skip" >&2
if ((torch2)); then
  bash "$(dirname "$0")/fetch_torch2.sh"
fi
