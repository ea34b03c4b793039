#!/usr/bin/env bash
# Fetches the header-only cuDNN frontend (NVIDIA's C++ graph API over
# cuDNN's backend, Apache-2.0) into .deps/cudnn-frontend/include, for the
# cuDNN attention path (kernels/cudnn/). Only the headers are used; they come
# from the pinned PyPI wheel, checked against its SHA-256, because Debian
# does not package them. Idempotent; called by scripts/setup.sh when nvcc is
# present. Without the headers the CUDA build still works: cmake says so and
# `--attention cudnn` explains that this build has no cuDNN path.
set -euo pipefail
cd "$(dirname "$0")/.."
version=1.32.0
wheel=nvidia_cudnn_frontend-$version-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl
sha=c6006556017a4d1c914c52a556c71b1267f2d6a0500f742e7b4edef539878df0
dest=.deps/cudnn-frontend
if [[ -f $dest/include/cudnn_frontend.h && "$(cat $dest/VERSION 2>/dev/null)" == "$version" ]]; then
  echo "setup: cuDNN frontend $version present"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Any wheel of the release carries the same headers; this one is pinned by name and hash.
python3 -m pip download -q --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 --python-version 3.11 \
  --implementation cp --abi cp311 -d "$tmp" "nvidia-cudnn-frontend==$version"
echo "$sha  $tmp/$wheel" | sha256sum -c --quiet -
python3 - "$tmp/$wheel" "$tmp/out" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith("include/")])
PY
rm -rf "$dest"
mkdir -p "$dest"
mv "$tmp/out/include" "$dest/include"
echo "$version" >"$dest/VERSION"
echo "setup: cuDNN frontend $version headers in $dest/include"
