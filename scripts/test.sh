#!/usr/bin/env bash
# Sets up, builds and passes all tests (the README's test command; CI runs it).
#  1. scripts/setup.sh installs the Debian packages (idempotent).
#  2. The main build: warnings are errors, CUDA on when nvcc is found
#     (architectures 80;90 unless CMAKE_CUDA_ARCHITECTURES is set); ctest.
#     The CUDA kernels are compiled with ptxas -warn-spills as errors
#     (kernels/cuda/CMakeLists.txt), so a register spill fails this build;
#     scripts/check_spills.sh prints the per-kernel ptxas report on demand.
#  3. The sanitizer build: ASan + UBSan, CPU-only and without MPI (so it
#     also proves the engine builds without the CUDA toolkit and without
#     MPI, a world of one), at -O1 -g1 (the sanitizers' usual level; line
#     tables for the reports; half the compile time of -O2 -g); ctest again
#     but for the labels "quality" (the runs long enough to show a model
#     learns, whose code paths the shorter tests run) and "heavy" (GPT-2
#     124M's step in the emulator's count-only mode: its untouched tens of
#     GB would be shadowed by AddressSanitizer's allocator). Its emulated kernels
#     contract a * b + c into FMAs as nvcc does (ENGINE_EMU_FMA, where the
#     CPU has FMA), so the kernel tests there see a GPU's rounding.
#  4. The race check (scripts/racecheck.sh): a ThreadSanitizer build of the
#     emulated tests in build-tsan, where every emulated GPU thread is a TSan
#     fiber; ctest -L racecheck (seeded racy kernels, the kernel suite).
#  5. The layout check: every C++ file matches .clang-format.
# Environment: JOBS (default: nproc), SKIP_SANITIZE=1 to skip steps 3 and 4 locally.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
start=$(date +%s)

bash scripts/setup.sh

stamp() { echo "== $1 (at $(( $(date +%s) - start )) s)"; }
stamp "main build"
cmake -S . -B build -G Ninja -DENGINE_WERROR=ON
cmake --build build -j "$JOBS"
stamp "main tests"
ctest --test-dir build --output-on-failure -j "$JOBS"

if [[ "${SKIP_SANITIZE:-0}" != "1" ]]; then
  # Its emulated kernels contract into FMAs as nvcc does (ENGINE_EMU_FMA), so
  # the kernel tests also see a GPU's rounding; the main build's emulator
  # rounds like the cpu loops. Only where the CPU has FMA.
  fma=OFF
  grep -qw fma /proc/cpuinfo 2>/dev/null && fma=ON
  stamp "sanitizer build (ASan + UBSan, CPU only, no MPI; emulated kernels with FMA: $fma)"
  cmake -S . -B build-asan -G Ninja -DENGINE_WERROR=ON -DENGINE_SANITIZE=ON -DENGINE_CUDA=OFF \
    -DENGINE_MPI=OFF -DENGINE_EMU_FMA=$fma -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
  cmake --build build-asan -j "$JOBS"
  stamp "sanitizer tests"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-asan --output-on-failure -j "$JOBS" -LE "quality|heavy"

  stamp "race check (ThreadSanitizer build of the emulated tests)"
  bash scripts/racecheck.sh build-tsan
fi

stamp "layout (clang-format)"
bash scripts/format.sh --check

echo "== test.sh took $(( $(date +%s) - start )) s"
