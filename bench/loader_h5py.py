#!/usr/bin/env python3
"""h5py + NumPy reading the same weather files and batch shape as bench/loader:
each sample is fields[t] (input) and fields[t + 1] (target), normalised per
channel with the stats file, stacked into a float32 batch; with 1 thread and
with N threads (a ThreadPoolExecutor over the samples of a batch, the way a
PyTorch DataLoader worker would use threads). h5py serialises its calls on a
global lock, which is what the N-thread row shows.
Usage: /usr/bin/python3 bench/loader_h5py.py DIR STATS [--batch 8] [--batches 40] [--workers 4]
"""
import argparse
import glob
import time
from concurrent.futures import ThreadPoolExecutor

import h5py
import numpy as np

p = argparse.ArgumentParser()
p.add_argument("dir")
p.add_argument("stats")
p.add_argument("--batch", type=int, default=8)
p.add_argument("--batches", type=int, default=40)
p.add_argument("--workers", type=int, default=4)
a = p.parse_args()

files = [h5py.File(f, "r") for f in sorted(glob.glob(a.dir + "/*.h5"))]
fields = [f["fields"] for f in files]
with h5py.File(a.stats, "r") as s:
    mean = np.asarray(s["mean"], dtype=np.float32).reshape(1, -1, 1, 1)[0]
    std = np.asarray(s["std"], dtype=np.float32).reshape(1, -1, 1, 1)[0]
index = [(i, t) for i, d in enumerate(fields) for t in range(d.shape[0] - 1)]
rng = np.random.default_rng(1)


def sample(k):
    i, t = index[k]
    x = (fields[i][t] - mean) / std
    y = (fields[i][t + 1] - mean) / std
    return x.astype(np.float32), y.astype(np.float32)


def batch(pool):
    ks = rng.integers(0, len(index), a.batch)
    pairs = list(pool.map(sample, ks)) if pool else [sample(k) for k in ks]
    return np.stack([x for x, _ in pairs]), np.stack([y for _, y in pairs])


bytes_per_batch = a.batch * 2 * fields[0][0].nbytes
print(f"{'h5py':<8} {'threads':<8} {'batches/s':>10} {'MB/s':>10}")
for threads in (1, a.workers):
    pool = ThreadPoolExecutor(threads) if threads > 1 else None
    batch(pool)  # warm-up
    t0 = time.perf_counter()
    for _ in range(a.batches):
        batch(pool)
    dt = time.perf_counter() - t0
    print(f"{'h5py':<8} {threads:<8} {a.batches / dt:>10.1f} {a.batches * bytes_per_batch / 1e6 / dt:>10.0f}")
