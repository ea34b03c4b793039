# Sourced by the cli test scripts that watch a run from outside
# (test_safety_cli.sh, test_signal_cli.sh): how many training steps a run's
# metrics.jsonl holds, the step its checkpoint is at, and a wait for steps.
# Needs fail() from the sourcing script.
steps_in() { grep -c '"loss"' "$1/metrics.jsonl" 2>/dev/null || true; }
state_step() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["step"])' "$1/checkpoint/state.json"; }
wait_steps() {  # DIR N: until DIR/metrics.jsonl has at least N training steps (60 s at most)
  for _ in $(seq 600); do
    [[ $(steps_in "$1") -ge $2 ]] && return 0
    sleep 0.1
  done
  fail "no $2 steps in $1 after 60 s"
}
