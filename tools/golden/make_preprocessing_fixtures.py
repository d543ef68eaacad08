#!/usr/bin/env python3
"""make_preprocessing_fixtures.py - golden fixtures of Keras's Normalization
preprocessing layer (issue 15, keras.applications: EfficientNet opens with
one) from tf.keras 2.15.

Writes tests/golden/layer_<case>.npz, which test_golden.c's
test_preprocessing_normalization() reads (tests/golden/README.md,
"Normalization (preprocessing)"):
  x, r        the input and the projection of the gradient check
  w_mean, w_variance, w_count
              the layer's weights where it has them (mean and variance drawn,
              the variance positive; count as float32)
  y, dx       the output and d sum(y * r) / dx
and for the adapt case x_adapt (the data adapt() saw, batch_size 4) and the
mean, variance and count adapt() left (adapt_mean, adapt_variance,
adapt_count, float32). Also writes tests/data/keras/preprocessing.json, a
Sequential model of Normalization layers with Keras's arguments (axis as an
int, a list and None, mean and variance as numbers and lists, invert),
model.to_json() byte for byte, for test_config.c.

Determinism as make_fixtures.py: oneDNN off, one thread, op determinism,
each case's numpy Generator seeded with the CRC-32 of its name.

Usage (from the repository root):
    .venv/bin/python tools/golden/make_preprocessing_fixtures.py [--out DIR]
"""

import os

import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402  (sets TF's determinism before importing it)

import argparse  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

L = tf.keras.layers
F32 = np.float32
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


rng_for = mf.rng_for


def save(out_dir, fname, arrays):
    """make_fixtures.py's save, every array as float32 (the count too: test_golden reads them so)."""
    mf.save(out_dir, fname, {k: np.asarray(v, order="C").astype(F32) for k, v in arrays.items()})


# (case, layer factory, x shape)
CASES = [
    ("preprocessing_normalization", lambda: L.Normalization(), (2, 3, 4, 3)),
    ("preprocessing_normalization_axes12", lambda: L.Normalization(axis=(1, 2)), (2, 3, 4, 2)),
    ("preprocessing_normalization_invert", lambda: L.Normalization(axis=-1, invert=True), (3, 5)),
    ("preprocessing_normalization_none", lambda: L.Normalization(axis=None), (3, 2, 2)),
    (
        "preprocessing_normalization_constants",
        lambda: L.Normalization(mean=[0.5, -1.0, 2.0], variance=[4.0, 0.25, 0.0]),
        (4, 2, 3),
    ),
]


def layer_fixtures(out_dir):
    for case, make, xshape in CASES:
        rng = rng_for("layer_" + case)
        x = (rng.uniform(-1, 1, xshape) * 2 + 0.5).astype(F32)
        layer = make()
        xt = tf.constant(x)
        layer(xt)
        arrays = {"x": x}
        for var in layer.weights:
            short = var.name.split("/")[-1].split(":")[0]
            if short == "count":
                value = np.array(7, dtype=np.int64)
            elif short == "variance":
                value = rng.uniform(0.25, 2.0, tuple(var.shape)).astype(F32)
            else:
                value = rng.uniform(-1, 1, tuple(var.shape)).astype(F32)
            var.assign(value)
            arrays["w_" + short] = value
        layer.finalize_state()
        r = rng.uniform(-1, 1, xshape).astype(F32)
        with tf.GradientTape() as tape:
            tape.watch(xt)
            y = layer(xt)
            s = tf.reduce_sum(y * r)
        arrays.update({"r": r, "y": y.numpy(), "dx": tape.gradient(s, xt).numpy()})
        save(out_dir, f"layer_{case}.npz", arrays)
    # adapt: 10 samples in batches of 4, then the layer on x
    case = "preprocessing_normalization_adapt"
    rng = rng_for("layer_" + case)
    data = (rng.uniform(-1, 1, (10, 4, 3)) * 3 + 1).astype(F32)
    x = rng.uniform(-1, 1, (2, 4, 3)).astype(F32)
    layer = L.Normalization()
    layer.adapt(data, batch_size=4)
    save(
        out_dir,
        f"layer_{case}.npz",
        {
            "x_adapt": data,
            "x": x,
            "y": layer(tf.constant(x)).numpy(),
            "adapt_mean": layer.adapt_mean.numpy(),
            "adapt_variance": layer.adapt_variance.numpy(),
            "adapt_count": np.array(layer.count.numpy(), dtype=F32),
        },
    )


def model_json(data_dir):
    tf.keras.backend.clear_session()
    model = tf.keras.Sequential(
        [
            L.Normalization(input_shape=(4, 3)),
            L.Normalization(axis=1, mean=0.5, variance=2),
            L.Normalization(axis=(1, 2), invert=True),
            L.Normalization(axis=None),
            L.Normalization(mean=[1.0, 2.0, 3.0], variance=[1, 4, 9], name="constants"),
        ]
    )
    path = os.path.join(data_dir, "preprocessing.json")
    with open(path, "w") as f:
        f.write(model.to_json())
    print(f"  {path}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "golden"))
    ap.add_argument("--data", default=os.path.join(REPO, "tests", "data", "keras"))
    a = ap.parse_args()
    layer_fixtures(a.out)
    model_json(a.data)


if __name__ == "__main__":
    main()
