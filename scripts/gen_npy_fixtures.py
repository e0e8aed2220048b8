#!/usr/bin/env python3
"""Write the small NumPy-made .npy fixtures used by tests/npy/test_npy.c.

Run with an interpreter that has NumPy (e.g. /usr/bin/python3 scripts/gen_npy_fixtures.py).
Output goes to tests/data/npy/ next to this repository's tests. The values are simple and
deterministic so the C test can recompute them instead of reading sidecar files; if you change
a value here, change the matching expectation in tests/npy/test_npy.c.

The point of these files is that they were written by NumPy itself, not by our writer, so
they catch disagreements about the format that round-trip tests cannot.
"""
import os
import sys

import numpy as np

OUT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "npy"))


def save(name, arr, version=None):
    path = os.path.join(OUT, name)
    with open(path, "wb") as f:
        if version is None:
            np.save(f, arr)  # NumPy picks the header version, as users' files would have
        else:
            np.lib.format.write_array(f, arr, version=version)
    print(f"{path}: {arr.dtype.str} {arr.shape} {os.path.getsize(path)} bytes")


def main():
    os.makedirs(OUT, exist_ok=True)
    # Quarter steps around zero: exact in f16/f32/f64, so the test can compare with ==.
    q = lambda n, dt: ((np.arange(n) - n // 2) * 0.25).astype(dt)

    save("f32_2d.npy", q(6, "<f4").reshape(2, 3))
    save("f32_4d.npy", q(24, "<f4").reshape(2, 3, 2, 2))
    # Edge values; the test checks the raw binary16 bit patterns.
    save("f16_1d.npy", np.array([0.0, 1.0, -2.0, 0.5, 65504.0, 2.0**-14, 2.0**-24, np.inf], "<f2"))
    save("f64_2d.npy", np.array([[0.0, 1.5, -2.25], [1e300, 5e-324, -0.0]], "<f8"))
    save("i32_1d.npy", np.array([-2**31, -1, 0, 1, 2**31 - 1, 42], "<i4"))
    save("i64_1d.npy", np.array([-2**63, -1, 0, 1, 2**63 - 1, 2**40], "<i8"))
    save("u16_1d.npy", np.array([0, 1, 65535, 256, 0x1234], "<u2"))
    save("scalar_0d.npy", np.array(3.5, "<f4"))
    save("empty_0x3.npy", np.zeros((0, 3), "<f4"))
    save("empty_2x0x3.npy", np.zeros((2, 0, 3), "<i8"))
    save("v2_f32.npy", q(6, "<f4").reshape(3, 2), version=(2, 0))
    save("v3_f32.npy", q(6, "<f4").reshape(3, 2), version=(3, 0))
    # Valid NumPy files that the reader must reject.
    save("bad_be_f4.npy", np.arange(4, dtype=">f4"))
    save("bad_fortran.npy", np.asfortranarray(q(6, "<f4").reshape(2, 3)))
    save("bad_c8.npy", np.arange(3, dtype="<c8"))
    save("bad_bool.npy", np.array([True, False]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
