#!/usr/bin/env python3
"""Makes a recorded step (tests/fixtures/kernel_profile_*.json: the rows the
step model's tests and bench/gpu_forecast.py read, the replayed step's time
and any other figure of the run) from a cuda run of `train --kernel_profile`:
its kernel_profile.json (train writes it in its out_dir) or, where that was
not kept, the profile table its log prints.

The table prints MB and GFLOP to one and two decimals, so bytes and FLOPs come
back within 0.05 MB and 0.005 GFLOP of the run's own file; the measured ms to
the microsecond. A row's kind follows its name: "gemm ..." a GEMM,
cudnn_sdpa_*/attention_* forward or backward, "host node" a host task, the
rest memory-bound. The rows must add up to the table's total row.

Usage: python3 scripts/profile_log_to_json.py LOG_OR_JSON --what TEXT --replay_ms MS
           [--set KEY=NUMBER ...] > FIXTURE.json
The fourth run's config step (tests/fixtures/kernel_profile_gpt2_124m_h200_config.json):
  python3 scripts/profile_log_to_json.py profile-config.log --replay_ms 866.846 \
      --set tokens_per_s=609256.5 --set torch_tokens_per_s=514248 --what "..."
"""
import argparse
import json
import re
import sys

ROW = re.compile(r"^(?P<name>.+?)\s+(?P<calls>\d+)\s+(?P<launches>\d+)\s+(?P<mb>[\d.]+)\s+(?P<gflop>[\d.]+)\s+"
                 r"(?P<ms>[\d.]+)\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+%")


def kind(name):
    if name.startswith("gemm "):
        return "gemm"
    if name.startswith("host node"):
        return "host"
    if name.startswith(("cudnn_sdpa", "attention")):
        return "attention_backward" if "backward" in name else "attention_forward"
    return "memory"


def rows(lines):
    inside, out = False, []
    for line in lines:
        if line.startswith("kernel profile of step"):
            inside = True
            continue
        if not inside or line.startswith("kernel "):
            continue
        if line.startswith("total"):
            m = ROW.match(line)
            sums = (sum(r["launches"] for r in out), sum(r["bytes"] for r in out) / 1e6, sum(r["ms"] for r in out))
            if not m or sums[0] != int(m["launches"]) or abs(sums[1] - float(m["mb"])) > 0.05 * len(out) + 0.05 or \
                    abs(sums[2] - float(m["ms"])) > 0.0005 * len(out) + 0.0005:
                sys.exit(f"profile_log_to_json: the rows' launches, MB and ms {sums} do not add up to the total row "
                         f"{line.strip()!r}: a row was misread or missed")
            return out
        m = ROW.match(line)
        if not m:
            sys.exit(f"profile_log_to_json: cannot read the table row {line.strip()!r}")
        out.append({
            "name": m["name"], "kind": kind(m["name"]), "calls": int(m["calls"]), "launches": int(m["launches"]),
            "bytes": round(float(m["mb"]) * 1e6), "flops": round(float(m["gflop"]) * 1e9), "ms": float(m["ms"])
        })
    sys.exit("profile_log_to_json: no kernel-profile table ending in a total row in the log")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log", help="the run's kernel_profile.json, or its log")
    ap.add_argument("--what", required=True, help="what the run was: card, commit, shape, command")
    ap.add_argument("--replay_ms", type=float, required=True, help="the same step's CUDA graph replay (the log says it)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=NUMBER", help="another figure to record")
    a = ap.parse_args()
    with open(a.log) as f:
        text = f.read()
    if a.log.endswith(".json"):  # train's own file: its rows as they are, less the model's columns
        keep = ("name", "kind", "calls", "launches", "bytes", "flops", "ms")
        table = [{k: r[k] for k in keep} for r in json.loads(text)["rows"]]
        if any(r["ms"] is None or r["ms"] < 0 for r in table):
            sys.exit(f"profile_log_to_json: {a.log} has no measured ms (a run on emu or cpu): take a cuda run's")
    else:
        table = rows(text.splitlines())
    j = {"what": a.what, "measured_ms": {"cudnn": a.replay_ms}}
    for kv in a.set:
        key, _, value = kv.partition("=")
        j[key] = float(value)
    j["rows_cudnn"] = table
    json.dump(j, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
