#!/usr/bin/env bash
# expect_fail.sh WANT COMMAND...: runs COMMAND, which must fail (a non-zero
# exit) with WANT in its output: an example run with --break BUG, whose check
# against the serial run must catch the bug. A pass that should not pass, or
# a failure without WANT (a crash, an abort for another reason) fails this
# test; a hang is ended by ctest's TIMEOUT.
set -uo pipefail
want=$1
shift
out=$("$@" 2>&1)
rc=$?
if [[ $rc -eq 0 ]]; then
  echo "FAIL: exit 0, the check did not catch the bug: $*"
  echo "$out"
  exit 1
fi
if [[ $out != *"$want"* ]]; then
  echo "FAIL: exit $rc without '$want': $*"
  echo "$out"
  exit 1
fi
echo "ok: failed as it must (exit $rc):"
echo "$out" | grep -F -- "$want"
