#!/usr/bin/env bash
# Black-box test of scripts/cudnn_env.sh (finding a pip wheel's cuDNN 9):
# a fake site-packages holding nvidia/cudnn/lib/libcudnn.so.9 and an
# ldconfig stub that knows no cuDNN stand in for a GPU machine set up with
# pip. The script must export the wheel's file, and, in a CUDA build, the
# engine must load that file (its frontend checks need the library). It must
# leave a set ENGINE_CUDNN_LIBRARY or a findable library alone, and say so
# without ending the shell when nothing is found.
# Usage: test_cudnn_env.sh BUILD_DIR
set -euo pipefail
build=$1
script=$(cd "$(dirname "$0")/../.." && pwd)/scripts/cudnn_env.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# The real library, where this machine has one (a CUDA build's CI machine does).
# Captured first, then searched: a reader that leaves early (awk's exit) would
# SIGPIPE ldconfig, and pipefail would fail the assignment.
cache=$(ldconfig -p 2>/dev/null) || cache=""
real=$(awk '$1 == "libcudnn.so.9" && real == "" { real = $NF } END { print real }' <<<"$cache")
site=$work/site/nvidia/cudnn/lib
mkdir -p "$site" "$work/bin"
if [[ -n $real ]]; then ln -s "$real" "$site/libcudnn.so.9"; else : >"$site/libcudnn.so.9"; fi
printf '#!/bin/sh\necho "0 libs found in cache"\n' >"$work/bin/ldconfig"
chmod +x "$work/bin/ldconfig"

# source_env ENV...: sources the script in a fresh bash with ENV set and the
# ldconfig stub first on PATH; prints ENGINE_CUDNN_LIBRARY and LD_LIBRARY_PATH.
source_env() {
  env -u ENGINE_CUDNN_LIBRARY PATH="$work/bin:$PATH" "$@" bash -c \
    'set -u; source "$0" 2>"$1"; echo "lib=${ENGINE_CUDNN_LIBRARY:-}"; echo "path=${LD_LIBRARY_PATH:-}"; echo alive' \
    "$script" "$work/stderr"
}

# A wheel in python3's site-packages: exported, its directory first on the path.
out=$(source_env PYTHONPATH="$work/site" LD_LIBRARY_PATH=/opt/other)
grep -qxF "lib=$site/libcudnn.so.9" <<<"$out" || fail "the wheel was not found: $out; $(cat "$work/stderr")"
grep -qxF "path=$site:/opt/other" <<<"$out" || fail "LD_LIBRARY_PATH not extended: $out"
grep -qF "cudnn_env: ENGINE_CUDNN_LIBRARY=$site/libcudnn.so.9 (the pip wheel's)" "$work/stderr" ||
  fail "unexpected message: $(cat "$work/stderr")"

# The engine loads what was found: the frontend validation needs the library.
# (A build without the cuDNN path lists no such test; grep reads the whole list, pipefail.)
if [[ -n $real ]] && [[ $("$build/tests/engine_tests" --list-tests "[cudnn]") == *"frontend's validation"* ]]; then
  ENGINE_CUDNN_LIBRARY=$site/libcudnn.so.9 LD_LIBRARY_PATH=$site:${LD_LIBRARY_PATH:-} \
    "$build/tests/engine_tests" "cudnn: the attention graphs pass the cuDNN frontend's validation*" >"$work/log" 2>&1 ||
    fail "the engine did not use the wheel's library: $(tail -5 "$work/log")"
  echo "ok: the engine loads the found library ($(readlink -f "$site/libcudnn.so.9"))"
fi

# Left alone: a library already named, or on LD_LIBRARY_PATH.
out=$(source_env PYTHONPATH="$work/site" ENGINE_CUDNN_LIBRARY=/my/libcudnn.so.9)
grep -qxF "lib=/my/libcudnn.so.9" <<<"$out" || fail "a set ENGINE_CUDNN_LIBRARY was changed: $out"
out=$(source_env PYTHONPATH="$work/site" LD_LIBRARY_PATH="/x y:$site")
grep -qxF "lib=" <<<"$out" || fail "exported although LD_LIBRARY_PATH finds it: $out"
grep -qF "is on LD_LIBRARY_PATH; nothing to do" "$work/stderr" || fail "unexpected: $(cat "$work/stderr")"

# A cache that lists cuDNN first and then many more lines, sourced by a shell
# with pipefail: the script must still see that the loader finds it (a
# grep -q reading ldconfig's output through a pipe would SIGPIPE the long writer and miss it).
mkdir -p "$work/bin2"
cat >"$work/bin2/ldconfig" <<'STUB'
#!/bin/sh
echo "	libcudnn.so.9 (libc6,x86-64) => /x/libcudnn.so.9"
yes "	libother.so (libc6,x86-64) => /y/libother.so" | head -n 200000
STUB
chmod +x "$work/bin2/ldconfig"
out=$(env -u ENGINE_CUDNN_LIBRARY PATH="$work/bin2:$PATH" PYTHONPATH="$work/site" LD_LIBRARY_PATH= bash -c \
  'set -o pipefail; source "$0" 2>"$1"; echo "lib=${ENGINE_CUDNN_LIBRARY:-}"' "$script" "$work/stderr")
grep -qxF "lib=" <<<"$out" || fail "under pipefail, a long ldconfig cache hid the found library: $out"
grep -qF "the loader finds libcudnn.so.9; nothing to do" "$work/stderr" || fail "unexpected: $(cat "$work/stderr")"

# Nothing anywhere: one line saying what to do, nothing exported, the shell goes on.
out=$(source_env PYTHONPATH="$work/none" LD_LIBRARY_PATH=)
grep -qxF "lib=" <<<"$out" && grep -qx alive <<<"$out" || fail "unexpected: $out"
grep -qF "cudnn_env: no libcudnn.so.9 on the loader's path nor in a python3's nvidia-cudnn wheel" "$work/stderr" ||
  fail "unexpected message: $(cat "$work/stderr")"
[[ $(wc -l <"$work/stderr") -eq 1 ]] || fail "more than one line: $(cat "$work/stderr")"
echo "ok: cudnn_env.sh finds a wheel's cuDNN and leaves a found one alone"
