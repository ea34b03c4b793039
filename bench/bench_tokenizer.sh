#!/usr/bin/env bash
# GPT-2 tokenizer speed: our encoder (build/models/tokenize --time) and
# tiktoken's encode_ordinary (tests/cli/tiktoken_check.py time), each on one
# thread, on the same text: the fortunes corpus (about 2.6 MB of English) or
# the files given. Each encodes the text PASSES times after a warm-up pass
# (tables built, pages touched); the figures are the mean pass, loading the
# vocabulary not counted. Needs scripts/setup.sh's .deps (ranks, tiktoken).
# Usage: bash bench/bench_tokenizer.sh [FILE...]   (PASSES=5 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
passes=${PASSES:-5}
ranks=.deps/gpt2/gpt2.tiktoken
[[ -x build/models/tokenize ]] || { echo "build first: cmake --build build" >&2; exit 1; }
[[ -f $ranks ]] || { echo "no $ranks: run scripts/setup.sh" >&2; exit 1; }
text=$(mktemp)
trap 'rm -f "$text"' EXIT
if (($#)); then cat "$@" >"$text"; else
  find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' | sort | xargs cat >"$text"
fi
ours=$(./build/models/tokenize --vocab "$ranks" --time "$passes" "$text")
theirs=$(PYTHONPATH=.deps/py /usr/bin/python3 tests/cli/tiktoken_check.py time "$ranks" "$text" "$passes")
echo "$ours"
echo "$theirs"
a=$(sed -E 's/.* ([0-9.]+) MB\/s.*/\1/' <<<"$ours")
b=$(sed -E 's/.* ([0-9.]+) MB\/s.*/\1/' <<<"$theirs")
awk -v a="$a" -v b="$b" 'BEGIN { printf "ours / tiktoken: %.2fx (one thread each)\n", a / b }'
