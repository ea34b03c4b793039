#!/usr/bin/env bash
# The emulator's race check (docs/emulator.md, "Race check"): builds the
# ThreadSanitizer variant (-DENGINE_SANITIZE=thread; CPU only, without MPI)
# of the emulated tests in BUILD_DIR and runs ctest -L racecheck there:
#   racecheck.seeded.*   each deliberately broken kernel of
#                        tests/emu/seeded_races.cpp is reported with its
#                        kernel and both lines, its fixed twin runs clean;
#   racecheck.kernels_*  the emulated kernel suite under the race check, in
#                        a random schedule, in two halves side by side; any
#                        report fails.
# Built at -O1 -g1 (line tables: reports keep their source lines), which
# compiles in about half the time of RelWithDebInfo's -O2 -g.
# Usage: scripts/racecheck.sh [BUILD_DIR]   (default build-tsan; JOBS as scripts/test.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-tsan}
JOBS=${JOBS:-$(nproc)}
cmake -S . -B "$build" -G Ninja -DENGINE_WERROR=ON -DENGINE_SANITIZE=thread -DENGINE_CUDA=OFF -DENGINE_MPI=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
cmake --build "$build" -j "$JOBS" --target racecheck_tests emu_seeded_races
ctest --test-dir "$build" -L racecheck --output-on-failure -j "$JOBS"
