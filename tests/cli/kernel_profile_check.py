"""Checks a step profile (OUT_DIR/kernel_profile.json, train --kernel_profile)
against figures computed here from the model's shape, not from the engine:

  totals      every row's launches >= calls, the totals the sums of the rows;
  gemm        each GEMM row's FLOPs = 2 M N K (x batch) x calls, M N K read
              from its name, and the step's GEMM FLOPs = 6 x tokens x the
              weights of every Linear (GPT-2: 12 L C^2 + C V, V the head's
              width, padded at O2/O3 on emu/cuda; each product once
              forward, twice backward);
  attention   forward FLOPs = L x 4 B NH T^2 HS / 2 (causal, the
              FlashAttention papers' count), backward 2.5 x forward (the
              CUDA-core kernels' rows and the tensor-core ones', *_mma);
  gelu        no gelu_backward pass: GELU's backward is the epilogue of the
              MLP's input-gradient GEMM (+dgelu, L x ACCUM calls of
              (B T) x 4C x C), which also reads the pre-activation: bytes =
              the element size x L x (tokens C + ACCUM 4C C + 2 tokens 4C)
              (the forward is the c_fc GEMM's epilogue).

Usage: kernel_profile_check.py FILE totals
       kernel_profile_check.py FILE gpt2 L C V B T NH ELEM_BYTES ACCUM
"""
import json
import re
import sys


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def close(a, b, what, rel=1e-9):
    if abs(a - b) > rel * max(abs(a), abs(b), 1.0):
        fail(f"{what}: {a!r} != {b!r}")


prof = json.load(open(sys.argv[1]))
rows = prof["rows"]
if not rows:
    fail("no rows")
for r in rows:
    if r["launches"] < r["calls"] and r["kind"] != "host":
        fail(f"{r['name']}: {r['launches']} launches for {r['calls']} calls")
    # An eager upload's host task is absent from a captured step (engine/graph.h): 0 ms, no launch there.
    gone = r["kind"] == "host" and "none captured" in r["name"] and r["launches"] == 0
    if r["model_ms"] <= 0 and not gone:
        fail(f"{r['name']}: modelled time {r['model_ms']}")
    if gone and r["model_ms"] != 0:
        fail(f"{r['name']}: modelled at {r['model_ms']} ms, absent from the captured step")
close(sum(r["model_ms"] for r in rows), prof["model_ms"], "modelled step = sum of rows", 1e-6)

gemm_flops = 0.0
for r in rows:
    if r["kind"] != "gemm":
        continue
    m = re.match(r"gemm (\d+)x(\d+)x(\d+)(?: x(\d+))?", r["name"])
    if not m:
        fail(f"GEMM row without a shape in its name: {r['name']}")
    M, N, K = (int(m.group(i)) for i in (1, 2, 3))
    batch = int(m.group(4) or 1)
    close(r["flops"], 2.0 * M * N * K * batch * r["calls"], r["name"])
    gemm_flops += r["flops"]

if sys.argv[2] == "gpt2":
    L, C, V, B, T, NH, elem, accum = (int(x) for x in sys.argv[3:11])
    tokens = B * T * accum
    close(gemm_flops, 6.0 * tokens * (12 * L * C * C + C * V), "GEMM FLOPs = 6 tokens (12 L C^2 + C V)")
    by_name = {r["name"]: r for r in rows}
    HS = C // NH
    fwd = L * accum * 4.0 * B * NH * T * T * HS / 2
    def attention_flops(kind):
        return sum(by_name[n]["flops"] for n in (kind, kind + "_mma") if n in by_name)
    close(attention_flops("attention_forward"), fwd, "attention forward FLOPs")
    close(attention_flops("attention_backward"), 2.5 * fwd, "attention backward FLOPs")
    if "gelu_backward" in by_name:
        fail("a gelu_backward pass: GELU's backward should be the +dgelu GEMM's epilogue")
    dgelu = [r for r in rows if r["name"].endswith("+dgelu")]
    if len(dgelu) != 1 or dgelu[0]["calls"] != L * accum:
        fail(f"expected one +dgelu GEMM row of {L * accum} calls, got {[(r['name'], r['calls']) for r in dgelu]}")
    close(dgelu[0]["bytes"], elem * L * (tokens * C + accum * 4.0 * C * C + 2.0 * tokens * 4 * C), "+dgelu GEMM bytes")
print("ok:", len(rows), "rows,", sum(r["launches"] for r in rows), "launches")
