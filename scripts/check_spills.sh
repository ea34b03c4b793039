#!/usr/bin/env bash
# Fails if ptxas spills registers in any hand-written CUDA kernel (issue 3:
# "a check parses ptxas -v and fails on any register spill"). A spill turns
# register traffic into local-memory (L1/L2/DRAM) traffic: in a GEMM it is
# the difference between a register-blocked kernel and a slow one, and it
# appears silently when a kernel or a compiler changes.
#
# Compiles every kernels/cuda/*.cu (none excluded) with the main build's
# flags (cmake/Cuda.cmake, kernels/cuda/CMakeLists.txt) for each architecture,
# device code only (-fatbin: the host side is the main build's job), with
# -Xptxas -v, two files at a time; parses the "N bytes spill stores, M bytes
# spill loads" line that ptxas prints for every function, and names each
# function, file and architecture with a non-zero N or M.
# Without nvcc it says so and succeeds (CPU-only machines run the emulator).
# Environment: NVCC (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc),
# SPILL_ARCHS (default "80 90"), SPILL_JOBS (default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if [[ ! -x "$NVCC" ]]; then
  echo "check_spills: skipped (no nvcc; set NVCC to check ptxas register spills)"
  exit 0
fi
archs=${SPILL_ARCHS:-"80 90"}
gencode=""
for a in $archs; do gencode+=" -gencode arch=compute_$a,code=sm_$a"; done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)

compile_one() {
  local src=$1 name
  name=$(basename "$src" .cu)
  # shellcheck disable=SC2086  # $gencode is a list of flags
  if ! "$NVCC" -std=c++20 --expt-relaxed-constexpr -I"$repo" $gencode -Xptxas -v -fatbin "$src" \
    -o "$tmp/$name.fatbin" >"$tmp/$name.log" 2>&1; then
    echo "$src" >>"$tmp/failed"
  fi
}
export -f compile_one
export NVCC repo gencode tmp
sources=(kernels/cuda/*.cu)
printf '%s\n' "${sources[@]}" | xargs -P "${SPILL_JOBS:-2}" -I{} bash -c 'compile_one "$1"' _ {}

if [[ -s "$tmp/failed" ]]; then
  while read -r src; do
    echo "check_spills: nvcc failed on $src:"
    cat "$tmp/$(basename "$src" .cu).log"
  done <"$tmp/failed"
  exit 1
fi

# ptxas -v prints, per function and architecture:
#   ptxas info : Compiling entry function '_Z...' for 'sm_80'
#   ptxas info : Function properties for _Z...
#       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
report=$tmp/report
: >"$report"
functions=0
for src in "${sources[@]}"; do
  log="$tmp/$(basename "$src" .cu).log"
  n=$(grep -c "bytes spill stores" "$log" || true)
  functions=$((functions + n))
  awk -v file="$src" '
    /Compiling entry function/ { if (match($0, /for .sm_[0-9a-z]+./)) arch = substr($0, RSTART + 5, RLENGTH - 6) }
    /Function properties for/ { name = $NF }
    /bytes spill stores/ {
      for (i = 1; i < NF; ++i) {
        if ($(i + 1) == "bytes" && $(i + 2) == "spill" && $(i + 3) ~ /^stores/) stores = $i
        if ($(i + 1) == "bytes" && $(i + 2) == "spill" && $(i + 3) ~ /^loads/) loads = $i
      }
      if (stores + 0 > 0 || loads + 0 > 0)
        printf "%s: %s (%s): %s bytes spill stores, %s bytes spill loads\n", file, name, arch, stores, loads
    }' "$log" >>"$report"
done
demangle() { if command -v c++filt >/dev/null; then c++filt; else cat; fi; }

took=$(($(date +%s) - start))
if [[ -s "$report" ]]; then
  demangle <"$report"
  echo "check_spills: FAILED: $(wc -l <"$report") of $functions functions spill registers (${#sources[@]} files, sm_${archs// /, sm_}, ${took} s)"
  exit 1
fi
echo "check_spills: no register spills in $functions functions (${#sources[@]} files, sm_${archs// /, sm_}, ${took} s)"
