#!/usr/bin/env bash
# The docs checker's own test (ctest docs.checker): a small tree whose docs
# are right passes scripts/check_docs.py, and each defect seeded into it, one
# at a time, fails it with one line naming the doc, the line and the rule: a
# stale symbol, a broken anchor, a wrong count, a count without its recount,
# a ctest name no test has, a quoted test case no binary has. The tree lives in a temporary folder; the
# programs are BUILD_DIR's (train --help, ctest -N).
# Usage: tests/cli/test_check_docs.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

tree="$tmp/tree"
mkdir -p "$tree/docs" "$tree/kernels"
cat > "$tree/kernels/scale.cu" <<'EOF'
// bytes = 8 n
void scale_forward(float* x, long n) {}
EOF
cat > "$tree/kernels/shift.cu" <<'EOF'
void shift_forward(float* x, long n) {}
EOF
# A doc the checker must pass: a symbol, a file name, a link with its anchor,
# a marked count, a recorded one, a ctest name the build has, math notation.
cat > "$tree/README.md" <<'EOF'
# A tree

`scale_forward(x, n)` scales; see `shift.cu` and [the page](docs/page.md#two-kernels).
The tree has 2 kernels<!-- count: files kernels/*.cu -->; a past run had 7 kernels<!-- count: recorded -->.
The test `docs.check` reads it, "autograd: gradients accumulate over backward calls" too; `x_i` is math.
EOF
cat > "$tree/docs/page.md" <<'EOF'
# Page

## Two kernels

`kernels/scale.cu` and `kernels/shift.cu`, back to [the top](../README.md#a-tree).
EOF

check() {  # check NAME: run the checker on the tree; output in $tmp/NAME.txt, status in $rc
  rc=0
  python3 "$here/scripts/check_docs.py" --root "$tree" "$build" > "$tmp/$1.txt" 2>&1 || rc=$?
}

check clean
if [[ $rc -ne 0 ]]; then
  echo "FAIL: the clean tree did not pass:"; cat "$tmp/clean.txt"; exit 1
fi
clean=$(cat "$tmp/clean.txt")
for rule in symbols counts "test names" links; do
  [[ $clean == *" $rule"* ]] || { echo "FAIL: the summary does not count $rule: $clean"; exit 1; }
done

# seed NAME LINE WANT: append LINE to README.md, expect one problem at README.md:6 saying WANT.
seed() {
  cp "$tree/README.md" "$tmp/README.md.orig"
  printf '%s\n' "$2" >> "$tree/README.md"
  check "$1"
  cp "$tmp/README.md.orig" "$tree/README.md"
  local out lines
  out=$(cat "$tmp/$1.txt")
  lines=$(grep -c . "$tmp/$1.txt" || true)
  if [[ $rc -ne 1 || $lines -ne 1 || $out != "README.md:6: "*"$3"* ]]; then
    echo "FAIL: $1: expected exit 1 and one line 'README.md:6: ...$3...', got exit $rc:"
    echo "$out"
    exit 1
  fi
  echo "ok: $1: $out"
}

seed stale_symbol 'Call `scale_backward(x, n)` after it.' "no source names 'scale_backward'"
seed stale_file 'Read `gone.cu` first.' "no tracked file is named 'gone.cu'"
seed broken_anchor 'See [the page](docs/page.md#three-kernels).' "has no heading whose anchor is '#three-kernels'"
seed wrong_count 'It has 3 kernels<!-- count: files kernels/*.cu -->.' "states 3 where 'files kernels/*.cu' counts 2 now"
seed unmarked_count 'It has 2 kernels.' "'2 kernels' is a count of the code with no way to recount it"
seed unknown_kind 'It has 2 kernels<!-- count: kernels -->.' "count marker 'kernels': the kinds are"
seed stale_ctest 'Run `docs.nothing_here`.' "ctest has no test 'docs.nothing_here'"
seed stale_case 'See "autograd: gradients vanish over backward calls".' 'no test case is named "autograd: gradients vanish'
echo "PASS: the docs checker passes the clean tree and fails each seeded defect in one line"
