#!/usr/bin/env python3
"""Writes tests/fixtures/h5py_small.h5 with h5py (Debian's python3-h5py), so the
HDF5 reader is also checked against files written by the tool users actually
use. The values are closed-form, and tests/io/test_datasets.cpp recomputes
them with the same formulas:
  images  (6, 5, 4, 3) uint8, channel-last, chunked + gzip: (i*7 + y*3 + x*2 + c) % 256
  labels  (6,) int64: i % 3, attribute classes = 3
  fields  (4, 2, 3, 5) float16, contiguous: (t*30 + c*15 + y*5 + x) * 0.25 - 10
  images has attributes mean = 0.5, std = 0.25
Usage: /usr/bin/python3 scripts/make_h5_fixture.py   (from the repository root)
"""
import numpy as np
import h5py

i, y, x, c = np.meshgrid(np.arange(6), np.arange(5), np.arange(4), np.arange(3), indexing="ij")
images = ((i * 7 + y * 3 + x * 2 + c) % 256).astype(np.uint8)
t, ch, yy, xx = np.meshgrid(np.arange(4), np.arange(2), np.arange(3), np.arange(5), indexing="ij")
fields = ((t * 30 + ch * 15 + yy * 5 + xx) * 0.25 - 10).astype(np.float16)

with h5py.File("tests/fixtures/h5py_small.h5", "w") as f:
    d = f.create_dataset("images", data=images, chunks=(1, 5, 4, 3), compression="gzip")
    d.attrs["mean"] = 0.5
    d.attrs["std"] = 0.25
    lab = f.create_dataset("labels", data=(np.arange(6) % 3).astype(np.int64))
    lab.attrs["classes"] = 3
    f.create_dataset("fields", data=fields)
print("wrote tests/fixtures/h5py_small.h5")
