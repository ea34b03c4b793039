#!/usr/bin/env bash
# Runs one of N shards of a Catch2 executable's "[emu]" test cases: every
# N-th name from the K-th, so that N shards run side by side cover the
# suite once (ctest racecheck.kernels_K; tests/CMakeLists.txt).
# Usage: scripts/racecheck_shard.sh BINARY K N
set -euo pipefail
bin=$1 k=$2 n=$3
list=$(mktemp)
trap 'rm -f "$list" "$list.all"' EXIT
# Catch2 v2 exits with the number of names listed: the list itself is checked.
"$bin" --list-test-names-only "[emu]" >"$list.all" || true
[[ -s $list.all ]] || { echo "racecheck_shard: $bin listed no [emu] test cases" >&2; exit 1; }
# A comma separates names in a Catch2 test spec: escaped, it is part of the name.
awk -v k="$k" -v n="$n" 'NF && (NR - 1) % n == k' "$list.all" | sed 's/,/\\,/g' >"$list"
# Every name must select its test case (one that did not would silently drop out).
"$bin" --list-test-names-only --input-file "$list" >"$list.all" || true
[[ $(wc -l <"$list.all") -eq $(wc -l <"$list") ]] ||
  { echo "racecheck_shard: the shard's names select $(wc -l <"$list.all") of $(wc -l <"$list") test cases" >&2; exit 1; }
echo "shard $k of $n: $(wc -l <"$list") test cases"
"$bin" --input-file "$list"
