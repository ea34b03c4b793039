#!/usr/bin/python3
"""Writes tests/fixtures/npy/ with NumPy's own np.save and np.lib.format
(Debian's python3-numpy), so tests/io/test_npy.cpp reads files NumPy wrote,
not files our writer wrote:
  means.npy        float32 (1, 3, 1, 1): 100, 200, 300  (the NERSC tutorial's global_means.npy shape)
  stds.npy         float64 (1, 3, 1, 1): 2, 4, 8
  time_means.npy   float32 (1, 3, 6, 8): 90 + 100 c + 3 y + 0.5 x  (its time_means.npy shape)
  flat_v2.npy      float32 (3,), format version 2.0: 1.5, -2, 1e-3
  fortran.npy      float32 (2, 3) in Fortran order     (refused)
  big_endian.npy   >f4 (3,)                            (refused)
  int32.npy        int32 (3,)                          (refused)
Rerun: /usr/bin/python3 scripts/make_npy_fixture.py  (byte-identical each time)
"""
import os

import numpy as np

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "npy")
os.makedirs(out, exist_ok=True)
np.save(os.path.join(out, "means.npy"), np.array([100, 200, 300], np.float32).reshape(1, 3, 1, 1))
np.save(os.path.join(out, "stds.npy"), np.array([2, 4, 8], np.float64).reshape(1, 3, 1, 1))
c, y, x = np.meshgrid(np.arange(3), np.arange(6), np.arange(8), indexing="ij")
np.save(os.path.join(out, "time_means.npy"), (90 + 100 * c + 3 * y + 0.5 * x).astype(np.float32)[None])
with open(os.path.join(out, "flat_v2.npy"), "wb") as f:
    np.lib.format.write_array(f, np.array([1.5, -2, 1e-3], np.float32), version=(2, 0))
np.save(os.path.join(out, "fortran.npy"), np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)))
np.save(os.path.join(out, "big_endian.npy"), np.array([1, 2, 3], dtype=">f4"))
np.save(os.path.join(out, "int32.npy"), np.array([1, 2, 3], np.int32))
print("wrote", sorted(os.listdir(out)))
