#!/usr/bin/env python3
"""The GPT-2 tokenizer's references, read from outside the engine.

  ids RANKS TEXT IDS [--allow_special]
      IDS (the engine's ids, whitespace-separated) must equal tiktoken's for
      TEXT's bytes, tiktoken built from RANKS with GPT-2's pattern and
      <|endoftext|> = 50256: encode_ordinary for UTF-8 text (encode with every
      special allowed under --allow_special). Text that is not UTF-8 cannot
      be a Python str, so there the reference is GPT-2's original pattern run
      by the regex module over the text decoded with surrogateescape (a bad
      byte is a lone surrogate: neither letter, number nor space), each
      piece's bytes then merged by tiktoken's encode_single_piece.
  pieces TEXT LENGTHS
      LENGTHS (byte lengths of the engine's pre-tokenizer pieces) must equal
      the pieces of GPT-2's original pattern and of tiktoken's r50k pattern,
      both run by the regex module.
  hf RANKS DIR
      Writes DIR/vocab.json and DIR/merges.txt, Hugging Face's spelling of the
      same vocabulary: each merge recovered from the ranks as the one pair the
      token's bytes reduce to under the lower ranks.
  shards RANKS DIR NAME VAL_FRACTION SEP FILE_OR_DIR...
      DIR's llm.c shards (NAME_val_*.bin, NAME_train_*.bin) must hold, as
      llm.c's dev/data scripts would write them (header: 20240520, 1, count),
      the files' documents (stretches between lines equal to SEP; "" for a
      file a document) each as <|endoftext|> and tiktoken's encode_ordinary,
      split at VAL_FRACTION moved on to a document's start.
  time RANKS TEXT N
      tiktoken's encode_ordinary on one thread, N passes: prints MB/s.
"""
import glob
import os
import struct
import json
import sys
import time

import regex
import tiktoken
from tiktoken.load import load_tiktoken_bpe

GPT2_PAT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
R50K_PAT = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""


def encoding(ranks_path):
    ranks = load_tiktoken_bpe(ranks_path)
    return tiktoken.Encoding("gpt2_check", pat_str=R50K_PAT, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": len(ranks)}), ranks


def reference_ids(enc, data, allow_special):
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None:
        return enc.encode(text, allowed_special="all") if allow_special else enc.encode_ordinary(text)
    out = []
    for piece in regex.findall(GPT2_PAT, data.decode("utf-8", "surrogateescape")):
        out += enc._encode_single_piece(piece.encode("utf-8", "surrogateescape"))
    return out


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def check_ids(ranks_path, text_path, ids_path, allow_special):
    enc, _ = encoding(ranks_path)
    data = open(text_path, "rb").read()
    want = reference_ids(enc, data, allow_special)
    got = [int(t) for t in open(ids_path).read().split()]
    if got != want:
        i = first_difference(got, want)
        sys.exit(f"FAIL {text_path}: {len(got)} ids, tiktoken {len(want)}; first difference at id {i}: "
                 f"ours {got[i:i + 8]}, tiktoken {want[i:i + 8]}")
    print(f"ok: {text_path}: {len(got)} ids equal tiktoken's")


def check_pieces(text_path, lengths_path):
    data = open(text_path, "rb").read()
    text = data.decode("utf-8", "surrogateescape")
    got = [int(t) for t in open(lengths_path).read().split()]
    for name, pat in (("GPT-2's pattern", GPT2_PAT), ("r50k's pattern", R50K_PAT)):
        want = [len(p.encode("utf-8", "surrogateescape")) for p in regex.findall(pat, text)]
        if got != want:
            i = first_difference(got, want)
            at = sum(want[:i])
            sys.exit(f"FAIL {text_path}: piece {i} (byte {at}, {data[at:at + 16]!r}): ours {got[i:i + 4]}, "
                     f"{name} {want[i:i + 4]}")
    print(f"ok: {text_path}: {len(got)} pieces equal both patterns'")


def byte_char_table():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def write_hf(ranks_path, out_dir):
    _, ranks = encoding(ranks_path)
    spell = byte_char_table()
    word = lambda b: "".join(spell[x] for x in b)
    vocab = {word(tok): r for tok, r in ranks.items()}
    vocab["<|endoftext|>"] = len(ranks)
    merges = []
    for tok, r in sorted(ranks.items(), key=lambda kv: kv[1]):
        if len(tok) < 2:
            continue
        parts = [bytes([b]) for b in tok]
        while len(parts) > 2:  # merge as BPE would with the ranks below r
            best = min((ranks.get(parts[i] + parts[i + 1], 1 << 30), i) for i in range(len(parts) - 1))
            if best[0] >= r:
                sys.exit(f"token {r} does not reduce to one pair")
            i = best[1]
            parts[i:i + 2] = [parts[i] + parts[i + 1]]
        merges.append(f"{word(parts[0])} {word(parts[1])}")
    with open(f"{out_dir}/vocab.json", "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(f"{out_dir}/merges.txt", "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "\n".join(merges) + "\n")
    print(f"wrote {out_dir}/vocab.json ({len(vocab)} tokens), merges.txt ({len(merges)} merges)")


def read_shards(pattern):
    toks, files = [], sorted(glob.glob(pattern))
    for f in files:
        data = open(f, "rb").read()
        magic, version, count = struct.unpack("<3i", data[:12])
        if (magic, version, count * 2 + 1024) != (20240520, 1, len(data)):
            sys.exit(f"FAIL {f}: header {magic}, {version}, {count} for {len(data)} bytes")
        toks += struct.unpack(f"<{count}H", data[1024:])
    return toks, files


def check_shards(ranks_path, out_dir, name, frac, sep, inputs):
    enc, ranks = encoding(ranks_path)
    eot = len(ranks)
    paths = []
    for p in inputs:
        if os.path.isdir(p):
            paths += sorted(e.path for e in os.scandir(p)
                            if e.is_file(follow_symlinks=False) and not e.name.endswith(".dat"))
        else:
            paths.append(p)
    want = []
    for p in paths:
        text = open(p, "rb").read().decode("utf-8")
        docs = [text]
        if sep:
            docs, cur = [], ""
            for line in text.splitlines(keepends=True):
                if line.rstrip("\n") == sep:
                    if cur:
                        docs.append(cur)
                    cur = ""
                else:
                    cur += line
            if cur:
                docs.append(cur)
        for d in docs:
            want += [eot] + enc.encode_ordinary(d)
    n_val = int(len(want) * frac)
    start = len(want) - n_val
    if eot in want[start:]:
        at = want.index(eot, start)
        if len(want) - at > 256:
            start = at
    train, tfiles = read_shards(os.path.join(out_dir, f"{name}_train_*.bin"))
    val, vfiles = read_shards(os.path.join(out_dir, f"{name}_val_*.bin"))
    if train != want[:start] or val != want[start:]:
        sys.exit(f"FAIL {out_dir}: train {len(train)} / val {len(val)} tokens, expected {start} / {len(want) - start}"
                 f" (equal: {train == want[:start]}, {val == want[start:]})")
    print(f"ok: {out_dir}: {len(tfiles)} train + {len(vfiles)} val shards hold tiktoken's {len(want)} tokens")


def time_tiktoken(ranks_path, text_path, n):
    enc, _ = encoding(ranks_path)
    text = open(text_path, "rb").read().decode("utf-8")
    ids = enc.encode_ordinary(text)  # warm
    t0 = time.perf_counter()
    for _ in range(n):
        ids = enc.encode_ordinary(text)
    s = (time.perf_counter() - t0) / n
    print(f"tiktoken {tiktoken.__version__}: {len(text.encode())} bytes -> {len(ids)} tokens, {s:.4f} s a pass, "
          f"{len(text.encode()) / s / 1e6:.2f} MB/s (one thread)")


if __name__ == "__main__":
    a = sys.argv[1:]
    if a[:1] == ["ids"]:
        check_ids(a[1], a[2], a[3], "--allow_special" in a[4:])
    elif a[:1] == ["pieces"]:
        check_pieces(a[1], a[2])
    elif a[:1] == ["hf"]:
        write_hf(a[1], a[2])
    elif a[:1] == ["shards"]:
        check_shards(a[1], a[2], a[3], float(a[4]), a[5], a[6:])
    elif a[:1] == ["time"]:
        time_tiktoken(a[1], a[2], int(a[3]))
    else:
        sys.exit(__doc__)
