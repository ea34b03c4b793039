#!/usr/bin/env bash
# The ViT under tensor and context parallelism, side by side in one run
# (docs/bench.md): img/s on the grids 1x1, tp 2 and cp 2 with the same
# global batch (the mean of images_per_s over steps 6..STEPS of
# metrics.jsonl), and the bytes each training step sends per rank over the
# tp and cp groups (the train program's "communication per step" line,
# counted by the communicators) against the formulas of
# docs/tensor_parallel.md, at O0 (fp32):
#   tp: 8 L B T/cp C (tp-1)/tp x 4 (four all-reduces of the block's rows per block),
#       + the final norm's rows all-gathered for the head under sequence parallelism (not used here);
#   cp: 4 L B T C/tp (cp-1)/cp x 4 (K and V all-gathered, dK and dV reduce-scattered);
#   with accum micro-batches per step, and B the micro-batch.
# On this CPU machine two ranks share two cores, so img/s shows the cost of
# the collectives rather than a speed-up; the same script on a GPU node
# (DEVICE=cuda) shows what each split buys there.
# Usage: bash scripts/bench_cp.sh   (env: STEPS=20, DEVICE=cpu, CONFIG=configs/vit-weather-tiny.json)
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -x build/models/train ]] || { echo "build first: bash scripts/test.sh or cmake --build build" >&2; exit 1; }
steps=${STEPS:-20} dev=${DEVICE:-cpu} cfg=${CONFIG:-configs/vit-weather-tiny.json}
[[ -f data/weather/stats.h5 ]] || ./build/models/prepare_weather >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "ViT ($cfg) images/s, steps 6-$steps, $dev, O0; bytes sent per step per rank, measured vs formula:"
run() {  # NAME NP TP CP
  local name=$1 np=$2 tp=$3 cp=$4
  bash scripts/mpirun.sh -np "$np" ./build/models/train --config "$cfg" --device "$dev" --steps "$steps" \
    --warmup_steps 5 --val_every 0 --val_batches 1 --precision O0 --tp "$tp" --cp "$cp" \
    --out_dir "$out/$name" >"$out/$name.log"
  python3 - "$name" "$out/$name/metrics.jsonl" "$out/$name.log" "$cfg" "$tp" "$cp" <<'PY'
import json, re, sys
name, metrics, log, cfg, tp, cp = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
rows = [json.loads(l) for l in open(metrics)]
ips = [r["images_per_s"] for r in rows if "images_per_s" in r and r["step"] > 5]
c = json.load(open(cfg))
text = open(log).read()
m = re.search(r"\((\d+) tokens\)", text)
T, C, L = int(m.group(1)), c["n_embd"], c["n_layer"]
g = re.search(r"global batch (\d+) = (\d+) x (\d+) micro-batches", text)
B, accum = (int(g.group(2)), int(g.group(3))) if g else (c["batch_size"], 1)
sent = dict(re.findall(r" (tp|cp|dp|dpcp) ([0-9.e+]+) bytes;", text))
formula = {"tp": 8 * L * B * T / cp * C * (tp - 1) / tp * 4 * accum,
           "cp": 4 * L * B * T * C / tp * (cp - 1) / cp * 4 * accum}
line = f"  {name:<10} {sum(ips) / len(ips):8.1f} img/s"
for k in ("tp", "cp"):
    if k in sent:
        got = float(sent[k])
        line += f" | {k}: {got / 1e6:7.2f} MB vs formula {formula[k] / 1e6:7.2f} MB ({got / formula[k]:.3f}x)"
print(line)
PY
}
run "1x1" 1 1 1
run "tp 2" 2 2 1
run "cp 2" 2 1 2
