# Sourced by the cli test scripts: expect_error WANT ARGS... runs
# "$train" "${train_args[@]}" --out_dir ... ARGS expecting failure, and checks
# that the message mentions WANT, is one line, and that no out_dir appeared.
# Needs $train, $work and fail() from the sourcing script; train_args may be unset.
expect_error() {
  local want=$1; shift
  local out="$work/bad_out"
  if "$train" ${train_args[@]+"${train_args[@]}"} --out_dir "$out" "$@" >"$work/stdout" 2>"$work/stderr"; then
    fail "train succeeded with bad input: $*"
  fi
  grep -qF -- "$want" "$work/stderr" || fail "error does not mention '$want': $(cat "$work/stderr")"
  [[ $(wc -l <"$work/stderr") -eq 1 ]] || fail "error is not one line: $(cat "$work/stderr")"
  [[ ! -e $out ]] || fail "out_dir was created despite the error"
  echo "ok: $(cat "$work/stderr")"
}
# expect_config_error WANT ARGS...: as expect_error, for a fault in the
# options: the message also carries no source file and line.
expect_config_error() {
  expect_error "$@"
  if grep -qE '[A-Za-z_]+\.(cpp|h|cu):[0-9]+' "$work/stderr"; then
    fail "a configuration error carries a source location: $(cat "$work/stderr")"
  fi
}
