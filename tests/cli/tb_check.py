"""Reads a run's TensorBoard event files with TensorBoard's own reader and
checks them against the run's metrics.jsonl: every number of every line is
a scalar at that line's step under the tag docs/train.md gives it, no tag
has a step twice (what TensorBoard would draw twice), and nothing else is
there.

Usage: tb_check.py OUT_DIR [TB_DIR]   (TB_DIR defaults to OUT_DIR/tb)
Exit 0 and "ok: ..." when they agree; 1 and what differs otherwise; 77 when
the tensorboard package is missing (scripts/fetch_pydeps.sh installs it).
"""
import json
import os
import sys

try:
    import numpy as np
    from tensorboard.backend.event_processing import event_accumulator
except ImportError as e:  # the caller reports the skip
    print(f"skipped: the tensorboard package is not importable ({e}); scripts/fetch_pydeps.sh installs it")
    sys.exit(77)


def tag_of(key):
    """docs/train.md's table, written here from the docs, not the engine."""
    if key.startswith("val_"):
        return "val/" + key[4:]
    if key in ("tokens_per_s", "images_per_s", "flops_per_s", "mfu"):
        return "perf/" + key
    if key.startswith("memory_"):
        return "memory/" + key[7:]
    if key.startswith("mem_"):
        return "memory/" + key[4:]
    if key.startswith("data_"):
        return "data/" + key[5:]
    return "train/" + key


def expected(metrics_path):
    want = {}  # tag -> {step: value}

    def put(tag, step, v, channels=None):
        if isinstance(v, bool) or v is None or isinstance(v, str):
            return
        if isinstance(v, (int, float)):
            assert step not in want.setdefault(tag, {}), f"metrics.jsonl has {tag} twice at step {step}"
            want[tag][step] = v
        elif isinstance(v, dict):
            for k, sub in v.items():
                put(f"{tag}/{k}", step, sub)
        elif isinstance(v, list):
            named = channels is not None and len(channels) == len(v)
            for i, sub in enumerate(v):
                put(f"{tag}/channel_{channels[i]}" if named else f"{tag}/{i}", step, sub)

    with open(metrics_path) as f:
        for line in f:
            j = json.loads(line)
            for k, v in j.items():
                if k not in ("step", "channels"):
                    put(tag_of(k), j["step"], v, j.get("channels"))
    return want


def main():
    out = sys.argv[1]
    tb = sys.argv[2] if len(sys.argv) > 2 else os.path.join(out, "tb")
    want = expected(os.path.join(out, "metrics.jsonl"))
    acc = event_accumulator.EventAccumulator(tb, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    got_tags = set(acc.Tags()["scalars"])
    bad = []
    if got_tags != set(want):
        bad.append(f"tags differ: missing {sorted(set(want) - got_tags)}, extra {sorted(got_tags - set(want))}")
    n = 0
    for tag in sorted(got_tags & set(want)):
        events = acc.Scalars(tag)
        steps = [e.step for e in events]
        if len(steps) != len(set(steps)):
            bad.append(f"{tag}: steps drawn twice: {sorted(s for s in set(steps) if steps.count(s) > 1)}")
        got = {e.step: e.value for e in events}
        if set(got) != set(want[tag]):
            bad.append(f"{tag}: steps {sorted(got)} != metrics.jsonl's {sorted(want[tag])}")
            continue
        for step, v in want[tag].items():
            n += 1
            # simple_value is a float32: the metrics value rounded to float32, exactly.
            if got[step] != float(np.float32(v)):
                bad.append(f"{tag} at step {step}: {got[step]} != metrics.jsonl's {v}")
    if bad:
        print("FAIL: " + "\n  ".join(bad[:20]))
        sys.exit(1)
    print(f"ok: {len(got_tags)} tags, {n} values equal to metrics.jsonl, no step twice "
          f"({len([f for f in os.listdir(tb) if f.startswith('events.out.tfevents.')])} event files)")


if __name__ == "__main__":
    main()
