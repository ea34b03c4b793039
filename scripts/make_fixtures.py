#!/usr/bin/python3
"""Writes the PyTorch reference fixtures for the parity tests into tests/fixtures/.

What it generates (all small, deterministic, committed so CI never needs torch):
  parity_<op>.safetensors  one file per op family (matmul, linear, elementwise,
      activation, layernorm, softmax, attention, loss, embedding, layout,
      reduce, concat_split). Case i stores, under the prefix "c<i>.":
        <input>        every input as given to the engine op (f32; ids/targets i32)
        gout / gout<j> upstream gradient(s) of the output(s)
        out  / out<j>  forward output(s)
        grad_<input>   gradient of each differentiable input from out.backward(gout)
        cfg, dims, ... op arguments as i32 (s for scale is f64)
      and metadata "cases" (count) and "c<i>.desc" (human-readable case name).
  optim_parity.safetensors  5 steps of torch.optim.AdamW / SGD variants with
      two parameter groups and clip_grad_norm_(max_norm=1.0) before each step.
Used by tests/ops/test_torch_parity*.cpp and tests/engine/test_optim_parity.cpp.

Inputs are drawn in float32; the reference is then computed in float64 from
those exact values and rounded to float32 once, so the fixture carries no
float32 accumulation error of its own and the test tolerances budget only the
engine's error.

Rerun (needs Debian's python3 with torch; the pyenv python3 on PATH has none):
  /usr/bin/python3 scripts/make_fixtures.py      (bash scripts/setup.sh --torch installs torch)
Each file reseeds torch.manual_seed, so reruns are byte-identical.
The safetensors writer is hand-written because the package is not installed.
"""
import json
import math
import os
import struct

import torch
import torch.nn.functional as F

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures")
ST_DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.int32: "I32"}


def write_safetensors(path, tensors, metadata):
    """tensors: list of (name, tensor); layout as io/safetensors.h (8-byte LE header length, JSON, raw LE bytes)."""
    header, blobs, off = {"__metadata__": metadata}, [], 0
    for name, t in tensors:
        t = t.detach().contiguous().cpu()
        data = t.numpy().astype(t.numpy().dtype.newbyteorder("<")).tobytes()  # explicit little-endian
        header[name] = {"dtype": ST_DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)  # keep the data 8-byte aligned, as the engine's writer does
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    os.replace(path + ".tmp", path)
    return os.path.getsize(path)


def rn(*shape, scale=1.0, shift=0.0):
    return torch.randn(tuple(shape), dtype=torch.float32) * scale + shift


def i32(values):
    return torch.tensor(values, dtype=torch.int32)


class Fixture:
    """Collects cases for one file. Each file gets its own seed so files are independent."""

    def __init__(self, name, seed):
        self.name, self.tensors, self.meta, self.n = name, [], {}, 0
        torch.manual_seed(seed)

    def case(self, desc, inputs, fn, extra=None):
        """inputs: dict name -> f32 or i32 tensor; float ones become f64 leaves that require grad, i32 ones int64.
        fn(**inputs) returns a tensor or a tuple of tensors; extra: op arguments, saved as-is."""
        p = f"c{self.n}."
        self.meta[p + "desc"] = desc
        self.n += 1
        leaves = {}
        for name, t in inputs.items():
            self.tensors.append((p + name, t))
            if t.is_floating_point():
                leaves[name] = t.double().requires_grad_(True)
            else:
                leaves[name] = t.long()
        for name, t in (extra or {}).items():
            self.tensors.append((p + name, t))
        out = fn(**leaves)
        multi = isinstance(out, (tuple, list))
        outs = list(out) if multi else [out]
        gouts = [rn(*o.shape) for o in outs]
        torch.autograd.backward(outs, [g.double() for g in gouts])
        for j, (o, g) in enumerate(zip(outs, gouts)):
            sfx = str(j) if multi else ""
            self.tensors.append((p + "gout" + sfx, g))
            self.tensors.append((p + "out" + sfx, o.detach().float()))
        for name, leaf in leaves.items():
            if leaf.is_floating_point() and leaf.requires_grad:
                self.tensors.append((p + "grad_" + name, leaf.grad.float()))

    def save(self):
        self.meta["cases"] = str(self.n)
        return write_safetensors(os.path.join(OUT_DIR, self.name + ".safetensors"), self.tensors, self.meta)


def tr(x, t):
    return x.transpose(-1, -2) if t else x


def matmul_fixture():
    f = Fixture("parity_matmul", 1)
    # (layout, lead dims of A, lead dims of B or None for shared 2-D B, M, K, N)
    layouts = [("2-D", (), (), 5, 7, 3), ("2-D 1-row", (), (), 1, 13, 5),
               ("batched", (3,), (3,), 7, 13, 5), ("batched T=1", (2,), (2,), 1, 5, 7),
               ("4-D batched", (2, 1), (2, 1), 3, 5, 13),
               ("3-D A shared 2-D B", (2,), None, 3, 37, 5), ("3-D A T=1 shared B", (3,), None, 1, 7, 5)]
    for name, la, lb, M, K, N in layouts:
        for ta in (0, 1):
            for tb in (0, 1):
                for bias in (False, True):
                    if name in ("2-D 1-row", "batched T=1", "4-D batched", "3-D A T=1 shared B") and bias == (ta == tb):
                        continue  # extra layouts: one variant per transpose pair (bias iff ta != tb)
                    a = rn(*la, *((K, M) if ta else (M, K)))
                    b = rn(*(lb if lb is not None else ()), *((N, K) if tb else (K, N)))
                    ins = {"a": a, "b": b}
                    if bias:
                        ins["bias"] = rn(N)
                    fn = (lambda a, b, bias=None, ta=ta, tb=tb:
                          tr(a, ta) @ tr(b, tb) + (bias if bias is not None else 0))
                    f.case(f"{name} ta={'NT'[ta]} tb={'NT'[tb]}{' bias' if bias else ''}", ins, fn,
                           extra={"cfg": i32([ta, tb])})
    return f.save()


def linear_fixture():
    f = Fixture("parity_linear", 2)
    for desc, xs, out, bias in [("2-D", (5, 7), 3, True), ("3-D", (2, 3, 13), 5, True),
                                ("3-D no bias", (2, 3, 13), 5, False), ("1-row", (1, 37), 7, True),
                                ("T=1", (3, 1, 13), 5, True), ("1-D input", (13,), 5, True)]:
        ins = {"x": rn(*xs), "w": rn(out, xs[-1], scale=0.3)}
        if bias:
            ins["b"] = rn(out)
        f.case(desc, ins, lambda x, w, b=None: F.linear(x, w, b))
    return f.save()


def elementwise_fixture():
    f = Fixture("parity_elementwise", 3)
    shapes = [(1, 7), (3, 5, 13), (37,)]
    for op, fn in [("add", lambda a, b: a + b), ("sub", lambda a, b: a - b), ("mul", lambda a, b: a * b)]:
        for s in shapes:
            f.case(f"{op} {s}", {"a": rn(*s), "b": rn(*s)}, fn, extra={"op": i32([["add", "sub", "mul"].index(op)])})
    for s, sc in zip(shapes, [0.5, -1.7, 3.0]):
        f.case(f"scale {s} by {sc}", {"x": rn(*s)}, lambda x, sc=sc: x * sc,
               extra={"op": i32([3]), "s": torch.tensor(sc, dtype=torch.float64)})
    return f.save()


def activation_fixture():
    f = Fixture("parity_activation", 4)
    for act in ("gelu", "relu"):
        for s in [(1, 5), (3, 7, 13), (37,)]:
            fn = (lambda x: F.gelu(x, approximate="tanh")) if act == "gelu" else (lambda x: F.relu(x))
            f.case(f"{act} {s}", {"x": rn(*s, scale=3.0)}, fn, extra={"op": i32([0 if act == "gelu" else 1])})
    return f.save()


def layernorm_fixture():
    f = Fixture("parity_layernorm", 5)
    for desc, s, scale, shift in [("1-row", (1, 5), 1.0, 0.0), ("3-D C=13", (3, 7, 13), 1.0, 0.0),
                                  ("T=1 C=37", (2, 1, 37), 1.0, 0.0), ("offset mean 30", (5, 13), 2.0, 30.0)]:
        C = s[-1]
        f.case(desc, {"x": rn(*s, scale=scale, shift=shift), "w": rn(C, scale=0.5, shift=1.0), "b": rn(C, scale=0.5)},
               lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5))
    return f.save()


def causal_softmax(x):
    T = x.shape[-1]
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    return x.masked_fill(mask, float("-inf")).softmax(-1)


def softmax_fixture():
    f = Fixture("parity_softmax", 6)
    for s, sc in [((1, 7), 3.0), ((3, 13), 3.0), ((2, 3, 37), 3.0), ((3, 13), 50.0)]:  # 50: needs max-subtraction
        f.case(f"softmax {s} scale {sc}", {"x": rn(*s, scale=sc)}, lambda x: x.softmax(-1), extra={"cfg": i32([0])})
    for s in [(1, 1), (5, 5), (2, 3, 7, 7), (3, 13, 13)]:
        f.case(f"causal softmax {s}", {"x": rn(*s, scale=3.0)}, causal_softmax, extra={"cfg": i32([1])})
    return f.save()


def attention_ref(q, k, v):
    hs = q.shape[-1]
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (B, NH, T, HS)
    att = causal_softmax(q @ k.transpose(-1, -2) / math.sqrt(hs))
    return (att @ v).transpose(1, 2)


def attention_fixture():
    f = Fixture("parity_attention", 7)
    for s in [(1, 1, 1, 5), (2, 1, 3, 7), (2, 5, 3, 7), (1, 13, 2, 13), (3, 7, 1, 5)]:
        f.case(f"attention (B, T, NH, HS) = {s}", {"q": rn(*s), "k": rn(*s), "v": rn(*s)}, attention_ref)
    return f.save()


def loss_fixture():
    f = Fixture("parity_loss", 8)
    for desc, (N, V), ignored, ii, scale in [("1-row", (1, 7), [], -100, 1.0), ("N=5 V=13", (5, 13), [], -100, 1.0),
                                             ("some ignored", (13, 37), [0, 4, 5, 12], -100, 1.0),
                                             ("ignore_index=3", (7, 5), [1, 2], 3, 1.0),
                                             ("large logits", (5, 13), [], -100, 20.0)]:
        t = torch.randint(0, V, (N,), dtype=torch.int32)
        t[t == ii] = (ii + 1) % V  # only the chosen rows are ignored
        t[ignored] = ii
        f.case(f"cross_entropy {desc}", {"logits": rn(N, V, scale=scale), "targets": t},
               lambda logits, targets, ii=ii: F.cross_entropy(logits, targets, ignore_index=ii),
               extra={"op": i32([0]), "cfg": i32([ii])})
    for s in [(1, 5), (3, 7, 13), (37,)]:
        f.case(f"mse_loss {s}", {"pred": rn(*s), "target": rn(*s)},
               lambda pred, target: F.mse_loss(pred, target), extra={"op": i32([1])})
    return f.save()


def embedding_fixture():
    f = Fixture("parity_embedding", 9)
    for desc, (V, C), ids in [("repeated ids", (7, 5), [3, 1, 3, 3, 0, 6, 1, 2, 6, 5, 3, 4, 0]),
                              ("2-D ids", (13, 7), [[12, 0, 5], [5, 5, 1]]), ("single id", (5, 3), [4]),
                              ("V=37 C=13", (37, 13), torch.randint(0, 37, (3, 7)).tolist())]:
        f.case(f"embedding {desc}", {"weight": rn(V, C), "ids": i32(ids)}, lambda weight, ids: F.embedding(ids, weight))
    return f.save()


def layout_fixture():
    f = Fixture("parity_layout", 10)
    for s, dims in [((2, 3, 5), [2, 0, 1]), ((1, 7, 3, 5), [0, 2, 3, 1]), ((3, 13), [1, 0]), ((2, 3, 5), [-1, 0, 1])]:
        f.case(f"permute {s} {dims}", {"x": rn(*s)}, lambda x, dims=dims: x.permute(*dims),
               extra={"op": i32([0]), "dims": i32(dims)})
    for s, dims in [((2, 3, 5), [0, 2]), ((1, 7, 13), [-1, -2]), ((3, 1, 5, 7), [1, 3])]:
        f.case(f"transpose {s} {dims}", {"x": rn(*s)}, lambda x, dims=dims: x.transpose(*dims),
               extra={"op": i32([1]), "dims": i32(dims)})
    return f.save()


def reduce_fixture():
    f = Fixture("parity_reduce", 11)
    for op in ("sum", "mean"):
        for s in [(3, 7, 13), (1,), (1, 5)]:
            f.case(f"{op} all {s}", {"x": rn(*s)}, lambda x, op=op: getattr(x, op)(),
                   extra={"op": i32([0 if op == "sum" else 1]), "cfg": i32([-99, 0])})  # dim -99: reduce all
        for s, dim, keep in [((3, 7, 13), 1, 0), ((3, 7, 13), -1, 1), ((1, 5), 0, 0), ((5,), 0, 0), ((2, 1, 37), 0, 1)]:
            f.case(f"{op} {s} dim={dim} keepdim={keep}", {"x": rn(*s)},
                   lambda x, op=op, dim=dim, keep=keep: getattr(x, op)(dim, keepdim=bool(keep)),
                   extra={"op": i32([0 if op == "sum" else 1]), "cfg": i32([dim, keep])})
    return f.save()


def concat_split_fixture():
    f = Fixture("parity_concat_split", 12)
    for shapes, dim in [([(2, 3), (2, 5), (2, 1)], 1), ([(1, 4), (3, 4)], 0),
                        ([(2, 3, 5), (2, 1, 5), (2, 7, 5)], 1), ([(3, 2, 1), (3, 2, 7)], -1), ([(5,)], 0)]:
        ins = {f"x{i}": rn(*s) for i, s in enumerate(shapes)}
        f.case(f"concat {shapes} dim={dim}", ins, lambda dim=dim, **xs: torch.cat(list(xs.values()), dim),
               extra={"op": i32([0]), "cfg": i32([dim])})
    # [2, 0, 7]: an empty piece in the middle.
    for s, sizes, dim in [((2, 13), [3, 5, 5], 1), ((7, 3), [1, 6], 0), ((2, 9, 5), [2, 0, 7], -2),
                          ((1, 37), [37], -1)]:
        f.case(f"split {s} {sizes} dim={dim}", {"x": rn(*s)},
               lambda x, sizes=sizes, dim=dim: torch.split(x, sizes, dim),
               extra={"op": i32([1]), "cfg": i32([dim]), "sizes": i32(sizes)})
    return f.save()


def optim_fixture():
    """Parameters of different shapes in two groups (weight decay 0.1 / 0.0), fixed gradients per step,
    clip_grad_norm_(1.0) before each step. Step grad scales make the norm cross max_norm both ways."""
    torch.manual_seed(13)
    shapes, decay = [(7, 13), (13,), (5, 3), (1,)], [True, False, True, False]
    scales = [3.0, 0.05, 1.0, 0.02, 10.0]  # norms ~ 36, 0.57, 11, 0.22, 107: steps 1 and 3 are not clipped
    init = [rn(*s) for s in shapes]
    grads = [[rn(*s, scale=sc) for s in shapes] for sc in scales]
    tensors = [(f"init.p{i}", p) for i, p in enumerate(init)]
    tensors += [(f"grad.s{k}.p{i}", g) for k, gs in enumerate(grads) for i, g in enumerate(gs)]
    variants = {
        "adamw": lambda groups: torch.optim.AdamW(groups, lr=1e-2, betas=(0.9, 0.95), eps=1e-8),
        "sgd_momentum": lambda groups: torch.optim.SGD(groups, lr=1e-2, momentum=0.9),
        "sgd_nesterov": lambda groups: torch.optim.SGD(groups, lr=1e-2, momentum=0.9, nesterov=True),
        "sgd_dampening": lambda groups: torch.optim.SGD(groups, lr=1e-2, momentum=0.9, dampening=0.3),
        "sgd_plain": lambda groups: torch.optim.SGD(groups, lr=1e-2),
        # Parameter 3 has no gradient at steps 0 and 2: torch then skips it,
        # so its AdamW step count and its SGD momentum buffer start late.
        "adamw_skip": lambda groups: torch.optim.AdamW(groups, lr=1e-2, betas=(0.9, 0.95), eps=1e-8),
        "sgd_dampening_skip": lambda groups: torch.optim.SGD(groups, lr=1e-2, momentum=0.9, dampening=0.3),
    }
    skipped = {(0, 3), (2, 3)}
    for name, make in variants.items():
        params = [p.double().requires_grad_(True) for p in init]
        groups = [{"params": [p for p, d in zip(params, decay) if d], "weight_decay": 0.1},
                  {"params": [p for p, d in zip(params, decay) if not d], "weight_decay": 0.0}]
        opt, norms = make(groups), []
        for k, gs in enumerate(grads):
            for i, (p, g) in enumerate(zip(params, gs)):
                p.grad = None if name.endswith("_skip") and (k, i) in skipped else g.double().clone()
            norms.append(float(torch.nn.utils.clip_grad_norm_(params, max_norm=1.0)))
            opt.step()
            tensors += [(f"{name}.s{k}.p{i}", p.detach().float()) for i, p in enumerate(params)]
        tensors.append((f"{name}.norms", torch.tensor(norms, dtype=torch.float64)))
    meta = {"steps": str(len(scales)), "params": str(len(shapes)), "decay": ",".join(str(int(d)) for d in decay),
            "variants": ",".join(variants), "skipped": ",".join(f"{k}:{i}" for k, i in sorted(skipped))}
    return write_safetensors(os.path.join(OUT_DIR, "optim_parity.safetensors"), tensors, meta)


def main():
    os.makedirs(OUT_DIR, exist_ok=True)
    gens = [matmul_fixture, linear_fixture, elementwise_fixture, activation_fixture, layernorm_fixture,
            softmax_fixture, attention_fixture, loss_fixture, embedding_fixture, layout_fixture, reduce_fixture,
            concat_split_fixture, optim_fixture]
    total = 0
    for g in gens:
        size = g()
        total += size
        print(f"{g.__name__:24s} {size:8d} bytes")
    print(f"{'total':24s} {total:8d} bytes")


if __name__ == "__main__":
    main()
