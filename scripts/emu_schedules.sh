#!/usr/bin/env bash
# The emulated suite (engine_tests "[emu]") under each of the emulator's
# schedules (ENGINE_EMU_SCHEDULE; docs/emulator.md, "Schedules"): forward,
# reverse and random:SEED order the threads of a block between barriers and
# the blocks of a grid differently, as a GPU may. Every run must pass, and
# every test case must read back the same bytes from the emulator under all
# three, bit for bit (tests/main.cpp hashes each test case's emu -> cpu
# copies): a kernel whose result depends on the order is wrong on a GPU.
# Test cases tagged [order_dependent] (float atomics, by design: the kernel
# ladder's naive layernorm backward) record no hash, only their copy count.
# Usage: scripts/emu_schedules.sh [BUILD_DIR] [SEED]   (ctest runs it as emu.schedules)
set -euo pipefail
build=${1:-build}
seed=${2:-20261126}
tests="$build/tests/engine_tests"
[[ -x $tests ]] || { echo "emu_schedules: no $tests (build first)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

schedules=(forward reverse "random:$seed")
for schedule in "${schedules[@]}"; do
  digest="$tmp/${schedule%%:*}.tsv"
  rc=0
  ENGINE_EMU_SCHEDULE=$schedule ENGINE_EMU_DIGEST=$digest "$tests" "[emu]" > "$tmp/log.txt" 2>&1 || rc=$?
  if [[ $rc != 0 ]]; then
    echo "FAIL: engine_tests \"[emu]\" under ENGINE_EMU_SCHEDULE=$schedule exited with $rc:"
    tail -n 60 "$tmp/log.txt"
    exit 1
  fi
  summary=$(grep -E "^(All tests passed|test cases:)" "$tmp/log.txt" || true)
  echo "ENGINE_EMU_SCHEDULE=$schedule: $summary"
done

cases=$(wc -l < "$tmp/forward.tsv")
copies=$(awk -F'\t' '{ n += $2 } END { print n + 0 }' "$tmp/forward.tsv")
[[ $cases -gt 0 ]] || { echo "FAIL: no digests written (ENGINE_EMU_DIGEST)"; exit 1; }
status=0
for other in reverse random; do
  if ! diff "$tmp/forward.tsv" "$tmp/$other.tsv" > "$tmp/diff.txt"; then
    echo "FAIL: test cases whose results differ between forward and $other (name, copies, hash):"
    cat "$tmp/diff.txt"
    status=1
  fi
done
[[ $status == 0 ]] &&
  echo "ok: $cases test cases, $copies emu -> cpu copies, identical bit for bit under ${schedules[*]}"
exit $status
