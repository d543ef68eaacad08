#!/usr/bin/env python3
"""Write the NPZ fixtures that tests/test_data.c reads, with real NumPy, and
the seed corpora of the fuzz targets (tests/fuzz/corpus/).

    /usr/bin/python3 tools/make_npy_fixtures.py [OUT_DIR]   # default tests/data

The test writes its own .npy files (every dtype, both byte orders, format
versions 1 and 2); these fixtures prove that archives written by NumPy
itself read back: np.savez (stored members), np.savez_compressed (deflated
members) and an archive with zip64 records everywhere (zipfile's zip64
limits lowered, as an archive past 4 GiB or 65,535 members would have
them). Every value is a simple formula of its index, so the C test can
check each element without a copy of the data. The files are committed;
rerun this only to change them (the output is deterministic but for the
zip timestamps).

The seeds are small (libFuzzer sizes its inputs from the largest seed):
valid files of every IDX element type, plain and gzip, .npy files of
several dtypes and versions, small .npz archives of each kind, and a few
damaged ones.
"""
import gzip
import io
import os
import struct
import sys
import zipfile

import numpy as np


def arrays():
    return {
        # float32 (2, 3, 4): i / 4 - 1
        "x_f32": (np.arange(24, dtype=np.float32) / 4 - 1).reshape(2, 3, 4),
        # float64 (5,): -1, -0.5, 0, 0.5, 1
        "x_f64": np.linspace(-1.0, 1.0, 5),
        "y_i32": np.array([3, -7, 2**31 - 1, -(2**31)], dtype=np.int32),
        # uint8 (16, 16): i
        "y_u8": np.arange(256, dtype=np.uint8).reshape(16, 16),
        "mask": np.array([True, False, True]),
        "i64": np.array([-5, 0, 2**31 - 1, -(2**31)], dtype=np.int64),
        "i64_big": np.array([1, 2**40], dtype=np.int64),
        "i16_be": np.arange(-3, 3, dtype=">i2"),
        "u16": np.array([0, 1, 65535], dtype=np.uint16),
        "i8": np.array([-128, -1, 0, 127], dtype=np.int8),
        "f32_be": np.array([1.5, -2.25], dtype=">f4"),
        "scalar": np.float32(2.5),
        "empty": np.zeros((0, 3), dtype=np.float32),
        "fortran": np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)),
        # 10,000 bytes that deflate well: i % 10
        "big": np.tile(np.arange(10, dtype=np.uint8), 1000),
    }


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "data")
    os.makedirs(out, exist_ok=True)
    a = arrays()
    np.savez(os.path.join(out, "arrays.npz"), **a)
    np.savez_compressed(os.path.join(out, "arrays_compressed.npz"), **a)
    # zip64 end records and zip64 extra fields in the central directory.
    limits = zipfile.ZIP64_LIMIT, zipfile.ZIP_FILECOUNT_LIMIT
    zipfile.ZIP64_LIMIT, zipfile.ZIP_FILECOUNT_LIMIT = 16, 1
    try:
        np.savez_compressed(os.path.join(out, "zip64.npz"), x_f32=a["x_f32"], big=a["big"])
    finally:
        zipfile.ZIP64_LIMIT, zipfile.ZIP_FILECOUNT_LIMIT = limits
    write_corpus(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fuzz", "corpus"))
    # Read everything back with NumPy: the fixtures are what NumPy means.
    for name in ("arrays.npz", "arrays_compressed.npz", "zip64.npz"):
        with np.load(os.path.join(out, name)) as z:
            for k in z.files:
                assert np.array_equal(z[k], a[k]), (name, k)


def idx_bytes(code, fmt, dims, values):
    head = bytes([0, 0, code, len(dims)]) + struct.pack(">%dI" % len(dims), *dims)
    return head + struct.pack(">%d%s" % (len(values), fmt), *values)


def npy_bytes(array, version=None):
    f = io.BytesIO()
    if version is None:
        np.save(f, array)
    else:
        np.lib.format.write_array(f, array, version=version)
    return f.getvalue()


def npz_bytes(compressed, **arrays):
    f = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(f, **arrays)
    return f.getvalue()


def write_corpus(root):
    def put(target, name, data):
        os.makedirs(os.path.join(root, target), exist_ok=True)
        with open(os.path.join(root, target, name), "wb") as f:
            f.write(data)

    gz = lambda b: gzip.compress(b, mtime=0)
    idx = {
        "u8": idx_bytes(0x08, "B", [2, 3], [0, 1, 2, 127, 200, 255]),
        "i8": idx_bytes(0x09, "b", [3], [-128, 0, 127]),
        "i16": idx_bytes(0x0B, "h", [2, 2], [-32768, -1, 0, 32767]),
        "i32": idx_bytes(0x0C, "i", [1, 2], [-(2**31), 2**31 - 1]),
        "f32": idx_bytes(0x0D, "f", [2], [1.5, -2.25]),
        "f64": idx_bytes(0x0E, "d", [2, 1], [1e300, -0.0]),
        "scalar": idx_bytes(0x08, "B", [], [7]),
        "empty": idx_bytes(0x0D, "f", [0, 5], []),
        "images": idx_bytes(0x08, "B", [3, 28, 28], [i % 256 for i in range(3 * 28 * 28)]),
    }
    for name, data in idx.items():
        put("fuzz_idx", name + ".idx", data)
        put("fuzz_idx", name + ".idx.gz", gz(data))
    put("fuzz_idx", "two-members.idx.gz", gz(idx["images"][:1000]) + gz(idx["images"][1000:]))
    put("fuzz_idx", "truncated.idx", idx["images"][:500])
    put("fuzz_idx", "truncated.idx.gz", gz(idx["images"])[:300])
    put("fuzz_idx", "trailing.idx.gz", gz(idx["u8"]) + b"garbage")
    put("fuzz_idx", "huge-dims.idx", idx_bytes(0x0E, "d", [2**31 - 1] * 3, [1.0]))

    npy = {
        "f4": np.arange(6, dtype="<f4").reshape(2, 3),
        "f8-be": np.linspace(-1, 1, 5).astype(">f8"),
        "i4": np.array([3, -7, 2**31 - 1], dtype="<i4"),
        "u1": np.arange(16, dtype=np.uint8).reshape(4, 4),
        "b1": np.array([True, False]),
        "i8": np.array([-5, 2**40], dtype="<i8"),
        "i2-be": np.arange(-3, 3, dtype=">i2"),
        "u2": np.array([0, 65535], dtype="<u2"),
        "scalar": np.float32(2.5),
        "fortran": np.asfortranarray(np.arange(6, dtype="<f4").reshape(2, 3)),
        "object": np.array([1, "a"], dtype=object),
    }
    for name, a in npy.items():
        put("fuzz_npy", name + ".npy", npy_bytes(a))
    put("fuzz_npy", "v2.npy", npy_bytes(npy["f4"], (2, 0)))
    put("fuzz_npy", "v3.npy", npy_bytes(npy["i4"], (3, 0)))
    put("fuzz_npy", "truncated.npy", npy_bytes(npy["u1"])[:-3])
    small = {"x": npy["f4"], "y": npy["u1"], "flags": npy["b1"]}
    put("fuzz_npy", "stored.npz", npz_bytes(False, **small))
    put("fuzz_npy", "deflated.npz", npz_bytes(True, **small))
    put("fuzz_npy", "truncated.npz", npz_bytes(True, **small)[:-40])
    limits = zipfile.ZIP64_LIMIT, zipfile.ZIP_FILECOUNT_LIMIT
    zipfile.ZIP64_LIMIT, zipfile.ZIP_FILECOUNT_LIMIT = 16, 1
    try:
        put("fuzz_npy", "zip64.npz", npz_bytes(True, x=npy["f4"], y=npy["i2-be"]))
    finally:
        zipfile.ZIP64_LIMIT, zipfile.ZIP_FILECOUNT_LIMIT = limits


if __name__ == "__main__":
    main()
