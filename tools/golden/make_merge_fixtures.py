#!/usr/bin/env python3
"""make_merge_fixtures.py - golden fixtures of the merge layers (Add,
Subtract, Multiply, Average, Maximum, Minimum, Concatenate) from tf.keras
2.15 (issue 15).

Writes tests/golden/layer_merge_<case>.npz, which test_golden.c's
test_merge_layers() reads: a Functional model of n Inputs and the layer,
the inputs x0, x1 (, x2), the output y, a cotangent r and the gradients of
sum(y * r) with respect to every input, dx0, dx1 (, dx2). The layers have
no weights. tests/golden/README.md ("Merge layers") documents the arrays.

Determinism as in make_fixtures.py: oneDNN off (set before the import), one
thread, op determinism, each case's numpy Generator seeded with the CRC-32
of its name, np.savez_compressed. Inputs are drawn uniform, so Maximum and
Minimum meet no ties.

Usage (from the repository root):
    .venv/bin/python tools/golden/make_merge_fixtures.py [--out DIR]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402  (sets TF's determinism before importing it)

import argparse  # noqa: E402
import zlib  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

keras = tf.keras
L = keras.layers
save = mf.save
F32 = np.float32
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# (case, layer factory, input shapes with the batch axis)
CASES = [
    ("add", lambda: L.Add(), [(3, 4), (3, 4)]),
    ("add3_4d", lambda: L.Add(), [(2, 3, 2, 2), (2, 3, 2, 2), (2, 3, 2, 2)]),
    ("subtract", lambda: L.Subtract(), [(3, 5), (3, 5)]),
    ("multiply", lambda: L.Multiply(), [(2, 3, 4), (2, 3, 4)]),
    ("average", lambda: L.Average(), [(3, 4), (3, 4), (3, 4)]),
    ("maximum", lambda: L.Maximum(), [(3, 6), (3, 6)]),
    ("minimum", lambda: L.Minimum(), [(2, 2, 3, 2), (2, 2, 3, 2)]),
    ("concatenate", lambda: L.Concatenate(), [(3, 4), (3, 2)]),
    ("concatenate_axis1", lambda: L.Concatenate(axis=1), [(2, 3, 4), (2, 5, 4), (2, 1, 4)]),
    ("concatenate_4d_axis2", lambda: L.Concatenate(axis=2), [(2, 2, 3, 2), (2, 2, 1, 2)]),
]


def make(case, factory, shapes, out_dir):
    keras.backend.clear_session()
    rng = np.random.default_rng(zlib.crc32(case.encode("ascii")))
    inputs = [keras.Input(shape=s[1:]) for s in shapes]
    model = keras.Model(inputs, factory()(inputs))
    xs = [rng.uniform(-1, 1, s).astype(F32) for s in shapes]
    ts = [tf.constant(x) for x in xs]
    y = model(ts, training=False)
    r = rng.uniform(-1, 1, tuple(y.shape)).astype(F32)
    with tf.GradientTape() as tape:
        for t in ts:
            tape.watch(t)
        loss = tf.reduce_sum(model(ts, training=False) * r)
    grads = tape.gradient(loss, ts)
    arrays = {"y": y.numpy(), "r": r}
    for i, (x, g) in enumerate(zip(xs, grads)):
        arrays[f"x{i}"] = x
        arrays[f"dx{i}"] = g.numpy()
    save(out_dir, f"layer_merge_{case}.npz", arrays)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "golden"))
    args = ap.parse_args()
    for case, factory, shapes in CASES:
        make(case, factory, shapes, args.out)


if __name__ == "__main__":
    main()
