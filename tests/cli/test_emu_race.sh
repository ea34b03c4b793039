#!/usr/bin/env bash
# The emulator's race check against seeded bugs (tests/emu/seeded_races.cpp),
# in the ThreadSanitizer build (-DENGINE_SANITIZE=thread), under each
# schedule: the broken kernel must be reported as a data race whose stacks
# name the kernel at every line marked `// race: CASE` in the source, and its
# corrected twin must run clean.
# With CASE = schedules (any build): the schedules alone. Every corrected twin
# computes the same bytes under forward, reverse and random:7; the broken
# neighbour_smem (threads) and next_block (blocks) compute different bytes
# under forward and reverse, which proves both orders really change; the
# broken same_element computes the same everywhere (only the race check sees it).
# Usage: test_emu_race.sh BUILD_DIR CASE
set -euo pipefail
build=$1
case=$2
src="$(cd "$(dirname "$0")/../.." && pwd)/tests/emu/seeded_races.cpp"
bin="$build/tests/emu_seeded_races"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [[ $case == schedules ]]; then
  # The hash of what CASE [fixed] computed under SCHEDULE.
  computed() { ENGINE_EMU_SCHEDULE=$1 "$bin" "${@:2}" > "$tmp/out.txt"; sed 's/.*hash //' "$tmp/out.txt"; }
  for c in neighbour_smem tree_sum same_element next_block half_warp; do
    ref=$(computed forward "$c" fixed)
    for schedule in reverse random:7; do
      [[ $(computed "$schedule" "$c" fixed) == "$ref" ]] ||
        { echo "FAIL: the fixed $c computes other bytes under $schedule than under forward"; exit 1; }
    done
  done
  for c in neighbour_smem next_block; do
    [[ $(computed forward "$c") != $(computed reverse "$c") ]] ||
      { echo "FAIL: the broken $c computes the same bytes under forward and reverse"; exit 1; }
  done
  for schedule in reverse random:7; do
    [[ $(computed "$schedule" same_element) == $(computed forward same_element) ]] ||
      { echo "FAIL: same_element differs under $schedule"; exit 1; }
  done
  echo "ok: fixed twins identical under every schedule; neighbour_smem and next_block change with the order"
  exit 0
fi

fail() {
  echo "FAIL ($case, $schedule): $*"
  echo "--- stderr"
  cat "$tmp/err.txt"
  exit 1
}

mapfile -t lines < <(grep -n "// race: $case\$" "$src" | cut -d: -f1)
[[ ${#lines[@]} -gt 0 ]] || { echo "FAIL: no '// race: $case' line in $src"; exit 1; }

for schedule in forward reverse random:7; do
  rc=0
  ENGINE_EMU_SCHEDULE=$schedule TSAN_OPTIONS="halt_on_error=0 exitcode=66" \
    "$bin" "$case" > "$tmp/out.txt" 2> "$tmp/err.txt" || rc=$?
  [[ $rc == 66 ]] || fail "expected ThreadSanitizer's exit code 66, got $rc"
  report=$(cat "$tmp/err.txt")
  [[ $report == *"WARNING: ThreadSanitizer: data race"* ]] || fail "no data race reported"
  for line in "${lines[@]}"; do
    grep -Eq "#[0-9]+ ${case}_kernel[^ ]* [^ ]*seeded_races\\.cpp:${line}( |$)" "$tmp/err.txt" ||
      fail "no stack frame of ${case}_kernel at seeded_races.cpp:$line"
  done
  [[ $report == *"of block ("* ]] || fail "the report does not name the GPU threads"

  rc=0
  ENGINE_EMU_SCHEDULE=$schedule TSAN_OPTIONS="halt_on_error=0 exitcode=66" \
    "$bin" "$case" fixed > "$tmp/out.txt" 2> "$tmp/err.txt" || rc=$?
  [[ $rc == 0 ]] || fail "the fixed kernel exited with $rc"
  [[ $(cat "$tmp/err.txt") != *ThreadSanitizer* ]] || fail "the fixed kernel was reported"
  echo "ok: $case under $schedule: reported at lines ${lines[*]}; the fixed twin is clean"
done
