#!/usr/bin/env python3
"""make_norm_fixtures.py - golden fixtures of the normalization layers
(BatchNormalization, LayerNormalization) from tf.keras 2.15.

Writes tests/golden/layer_<case>.npz and model_bn_sgd.npz, which
test_golden.c's test_normalization() reads; tests/golden/README.md
("Normalization layers") documents the arrays. Also writes, into
tests/data/keras/, a Sequential model with both layers: normalization.json
(model.to_json(), byte for byte) and normalization.expect.json for
test_config.c, and normalization_weights.h5 (save_weights after two
training steps, so the moving statistics are not their initial values)
with normalization.npz (x, y = predict(x)) for test_saving.c.

Determinism as in make_fixtures.py: oneDNN off (set before the import), one
thread, op determinism, each case's numpy Generator seeded with the CRC-32
of its name, weights drawn uniform and assigned, np.savez_compressed.

Usage (from the repository root):
    .venv/bin/python tools/golden/make_norm_fixtures.py [--out DIR]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402  (sets TF's determinism before importing it)

import argparse  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

L = tf.keras.layers
rng_for, uniform, save = mf.rng_for, mf.uniform, mf.save
F32 = np.float32
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def short(var):
    return var.name.split("/")[-1].split(":")[0]


def draw_weight(rng, var):
    # variances must be positive
    if short(var) == "moving_variance":
        return uniform(rng, 0.5, 1.5, tuple(var.shape))
    return uniform(rng, -0.5, 0.5, tuple(var.shape))


# (case, layer factory, x shape, training checked)
CASES = [
    ("batch_normalization_2d", lambda: L.BatchNormalization(), (8, 5), True),
    ("batch_normalization_4d", lambda: L.BatchNormalization(), (2, 3, 4, 3), True),
    ("batch_normalization_rank3", lambda: L.BatchNormalization(), (2, 4, 3), True),
    ("batch_normalization_4d_axis1", lambda: L.BatchNormalization(axis=1, momentum=0.9), (2, 3, 4, 2), True),
    ("batch_normalization_plain", lambda: L.BatchNormalization(center=False, scale=False, epsilon=0.01), (6, 3), True),
    ("layer_normalization", lambda: L.LayerNormalization(), (4, 6), False),
    ("layer_normalization_axes12", lambda: L.LayerNormalization(axis=[1, 2]), (2, 3, 4), False),
    ("layer_normalization_axis1", lambda: L.LayerNormalization(axis=1), (2, 3, 4), False),
    ("layer_normalization_plain", lambda: L.LayerNormalization(center=False, scale=False, epsilon=1e-6), (3, 5), False),
]


def run(layer, xt, r, training):
    with tf.GradientTape() as tape:
        tape.watch(xt)
        y = layer(xt, training=training)
        s = tf.reduce_sum(y * r)
    grads = tape.gradient(s, [xt] + list(layer.trainable_weights))
    return y.numpy(), grads[0].numpy(), [g.numpy() for g in grads[1:]]


def layer_fixtures(out_dir):
    notes = []
    for case, make, xshape, training in CASES:
        rng = rng_for("layer_" + case)
        x = uniform(rng, -1, 1, xshape) * 2 + 0.5
        layer = make()
        xt = tf.constant(x)
        layer(xt, training=False)
        arrays = {"x": x}
        for var in layer.weights:
            value = draw_weight(rng, var)
            var.assign(value)
            arrays["w_" + short(var)] = value
        r = uniform(rng, -1, 1, xshape)
        y, dx, dw = run(layer, xt, r, False)
        arrays.update({"y": y, "r": r, "dx": dx})
        for var, g in zip(layer.trainable_weights, dw):
            arrays["dw_" + short(var)] = g
        if training:
            y, dx, dw = run(layer, xt, r, True)
            arrays.update({"y_train": y, "dx_train": dx})
            for var, g in zip(layer.trainable_weights, dw):
                arrays["dw_train_" + short(var)] = g
            arrays["moving_mean_after"] = layer.moving_mean.numpy()
            arrays["moving_variance_after"] = layer.moving_variance.numpy()
            # which variance the moving variance moved towards
            axes = tuple(i for i in range(len(xshape)) if i != layer.axis[0])
            n = x.size // xshape[layer.axis[0]]
            biased = x.astype(np.float64).var(axis=axes)
            m = layer.momentum
            mv0 = arrays["w_moving_variance"].astype(np.float64)
            got = arrays["moving_variance_after"]
            if np.allclose(got, mv0 * m + biased * n / (n - 1) * (1 - m), rtol=1e-6, atol=0):
                kind = "Bessel-corrected (n/(n-1))"
            else:
                assert np.allclose(got, mv0 * m + biased * (1 - m), rtol=1e-6, atol=0)
                kind = "biased"
            notes.append(f"{case} {xshape}: the moving variance moves towards the {kind} batch variance")
        save(out_dir, f"layer_{case}.npz", arrays)
    return notes


def model_fixture(out_dir):
    """Conv2D -> BatchNormalization -> Flatten -> Dense, SGD(0.1), mse, 3 steps of 4."""
    case = "model_bn_sgd"
    rng = rng_for(case)
    tf.keras.backend.clear_session()  # Keras's automatic names count per session
    x = uniform(rng, -1, 1, (12, 5, 5, 2))
    y = uniform(rng, -1, 1, (12, 2))
    model = tf.keras.Sequential(
        [L.Conv2D(3, 2, input_shape=(5, 5, 2)), L.BatchNormalization(), L.Flatten(), L.Dense(2)]
    )
    arrays = {"x": x, "y": y}
    for layer in model.layers:
        for var in layer.weights:
            value = draw_weight(rng, var)
            var.assign(value)
            arrays[f"w_{layer.name}_{short(var)}"] = value
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss="mse")
    h = model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    arrays["loss"] = np.asarray(h.history["loss"], F32)
    for layer in model.layers:
        for var in layer.weights:
            arrays[f"f_{layer.name}_{short(var)}"] = var.numpy()
    arrays["pred"] = model.predict(x, batch_size=12, verbose=0)
    save(out_dir, f"{case}.npz", arrays)


def keras_files(out_dir):
    """normalization.json, .expect.json, _weights.h5 and .npz (see the docstring)."""
    import json
    import sys

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from make_model_json import expectations

    tf.keras.backend.clear_session()
    tf.keras.utils.set_random_seed(1515)
    model = tf.keras.Sequential(
        [
            L.Dense(4, input_shape=(3, 4)),
            L.LayerNormalization(),
            L.BatchNormalization(momentum=0.9, epsilon=0.01),
            L.LayerNormalization(axis=[1, 2], center=False),
            L.Flatten(),
            L.BatchNormalization(center=False, scale=False),
            L.Dense(2),
        ]
    )
    with open(os.path.join(out_dir, "normalization.json"), "w") as f:
        f.write(model.to_json())
    with open(os.path.join(out_dir, "normalization.expect.json"), "w") as f:
        json.dump(expectations(model), f, indent=1)
        f.write("\n")
    rng = rng_for("keras_normalization")
    x = uniform(rng, -1, 1, (8, 3, 4))
    y = uniform(rng, -1, 1, (8, 2))
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss="mse")
    model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    model.save_weights(os.path.join(out_dir, "normalization_weights.h5"))
    save(out_dir, "normalization.npz", {"x": x, "y": model.predict(x, verbose=0)})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "golden"))
    ap.add_argument("--keras-out", default=os.path.join(REPO, "tests", "data", "keras"))
    args = ap.parse_args()
    print(f"tensorflow {tf.__version__}, numpy {np.__version__}; writing {args.out}")
    notes = layer_fixtures(args.out)
    model_fixture(args.out)
    keras_files(args.keras_out)
    print("observed:")
    for n in notes:
        print("  - " + n)


if __name__ == "__main__":
    main()
