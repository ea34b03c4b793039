# Sourced by tests/cli/test_dist_cli.sh and test_dist_cli_mp.sh: the
# arguments (BUILD_DIR CASE), a scratch directory, the prepared data, the
# tiny model's options, and the helpers both use.
build=$1
case_name=$2
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
train=$build/models/train
prep=$build/models/prepare_text
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export MPIRUN_TIMEOUT=300
mpi() { bash "$root/scripts/mpirun.sh" "$@"; }

fail() { echo "FAIL: $*"; exit 1; }
"$prep" "$work/data" 0.1 /usr/share/games/fortunes >/dev/null

# Tiny model, a fixed global batch of 8 sequences (batch_size x grad_accum x ranks).
common=(--vocab_size 256 --block_size 32 --n_layer 2 --n_head 2 --n_embd 32 --batch_size 2 --seq_len 32
        --warmup_steps 2 --val_every 5 --sample_every 0 --val_batches 2 --sample_tokens 8 --device cpu
        --train_bin "$work/data/train.bin" --val_bin "$work/data/val.bin" --steps 10 --global_batch 8)

# Bad grids and shapes: one line, said once, every rank exits non-zero, nothing written.
refused() {  # NP MESSAGE ARGS...
  local np=$1 msg=$2; shift 2
  if mpi -np "$np" "$train" "$@" --out_dir "$work/x" >"$work/out" 2>"$work/err"; then
    fail "np $np $* was accepted"
  fi
  [[ $(grep -c "train: error" "$work/err") -eq 1 ]] || fail "not one error line: $(cat "$work/err")"
  grep -q "$msg" "$work/err" || fail "bad message: $(cat "$work/err")"
  [[ ! -e $work/x ]] || fail "out_dir created by a refused run"
  echo "ok: $(grep 'train: error' "$work/err")"
}

# The text sample of step 10 in a log, and two logs' samples compared.
sample() { sed -n '/^---- sample at step 10/,/^----$/p' "$1"; }
same_sample() {  # NAME LOG REFERENCE_LOG
  [[ -n $(sample "$2") && $(sample "$2") == "$(sample "$3")" ]] || fail "$1: sample differs: $(sample "$2") vs $(sample "$3")"
}

losses() { grep -o '"\(val_\)\?loss":[^,}]*' "$1/metrics.jsonl"; }
# Same keys in the same order, values within tol.
close() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
a, b, tol = [json.loads(l) for l in open(sys.argv[1])], [json.loads(l) for l in open(sys.argv[2])], float(sys.argv[3])
assert len(a) == len(b), f"{len(a)} vs {len(b)} metrics lines"
worst = 0.0
# The losses, and the ViT's validation metrics (lists: per channel).
keys = ("loss", "val_loss", "val_accuracy", "val_rmse", "val_acc", "val_rmse_persistence", "val_rmse_vs_persistence")
for x, y in zip(a, b):
    for k in keys:
        if k in x:
            assert k in y and x["step"] == y["step"], (x, y)
            xs, ys = (x[k], y[k]) if isinstance(x[k], list) else ([x[k]], [y[k]])
            assert len(xs) == len(ys), (k, xs, ys)
            worst = max([worst] + [abs(u - v) for u, v in zip(xs, ys)])
assert worst <= tol, f"losses differ by {worst} > {tol}"
print(f"max |loss difference| {worst:.2e}")
PY
}
# close_ok TEXT A B TOL: prints "TEXT: max |loss difference| ..." or fails
# the test with close's reason. (Not echo "TEXT: $(close ...)": a failing
# command substitution inside echo's argument does not fail the script.)
close_ok() {
  local out
  out=$(close "$2" "$3" "$4" 2>&1) || fail "$1: ${out##*$'\n'}"
  echo "$1: $out"
}

