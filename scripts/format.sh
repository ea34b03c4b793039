#!/usr/bin/env bash
# Formats every C++/CUDA source with .clang-format; --check only reports
# files whose layout differs and fails if there are any.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh')
if [[ "${1:-}" == "--check" ]]; then
  bad=()
  for f in "${files[@]}"; do
    clang-format --style=file "$f" | cmp -s - "$f" || bad+=("$f")
  done
  if ((${#bad[@]})); then
    echo "format: these files differ from .clang-format (run scripts/format.sh): ${bad[*]}"
    exit 1
  fi
  echo "format: ${#files[@]} files match .clang-format"
else
  clang-format --style=file -i "${files[@]}"
fi
