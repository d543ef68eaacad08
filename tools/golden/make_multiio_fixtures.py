#!/usr/bin/env python3
"""make_multiio_fixtures.py - tf.keras 2.15 on a Functional model with two
inputs and two outputs (issue 15: several inputs; several outputs, each
with its own loss, loss weight and metrics), for tests/test_multiio.c.

The model (every layer named, so the C test builds the same one):

    in_a (4,) -> Dense(5) "proj_a" --+--> Dense(6, tanh) "shared" --+
    in_b (3,) -> Dense(5) "proj_b" --+      (called twice)           |
                                     Concatenate "concat" <----------+
                                         |-> Dense(3, softmax) "cls"   sparse CE, accuracy
                                         '-> Dense(2) "reg"            mse (loss weight 0.5), mae

compiled as model.compile(opt, loss=["sparse_categorical_crossentropy",
"mse"], loss_weights=[1.0, 0.5], metrics=[["accuracy"], ["mae"]]).

Writes:
  tests/golden/multiio.npz
    x_a (8, 4), x_b (8, 3), y_cls (8,) int32, y_reg (8, 2): one batch
    init.<layer>.<weight>   the weights set before each run (uniform
                            [-0.5, 0.5] from the case's rng)
    pred_cls, pred_reg      model.predict
    eval                    model.evaluate(return_dict) in Keras's order:
                            loss, cls_loss, reg_loss, cls_accuracy, reg_mae
                            (the script asserts that order)
    sgd.<layer>.<weight>    the weights after one SGD(0.1) step on the batch
    adam.<layer>.<weight>   the weights after one Adam(0.01) step on it
    eval_dict               multiio_dict.h5's model.evaluate: loss, cls_loss,
                            reg_loss, cls_accuracy, reg_mse, reg_mae
  tests/data/keras/multiio.h5       model.save() of the SGD-compiled model
                                    with the initial weights (list form)
  tests/data/keras/multiio_dict.h5  the same model compiled with a dict of
                                    losses (a SparseCategoricalCrossentropy
                                    object for "cls" taking logits, "mse"
                                    for "reg", given reg first), dict
                                    loss_weights and per-output metrics

Determinism as make_fixtures.py: TF_ENABLE_ONEDNN_OPTS=0, one thread, op
determinism, the case's rng seeded by the CRC-32 of its name,
np.savez_compressed in a fixed order. It also prints Keras's history names
of a fit with validation data, which test_multiio.c checks.

Usage (from the repository root):
    .venv/bin/python tools/golden/make_multiio_fixtures.py
"""

import os

# Must precede the TensorFlow import.
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402  (sets TF's determinism before importing it)

import warnings  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

warnings.filterwarnings("ignore")

L = tf.keras.layers
rng_for = mf.rng_for


def save(path, arrays):
    mf.save(os.path.dirname(path), os.path.basename(path), arrays)
F32 = np.float32
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = os.path.join(ROOT, "tests", "golden")
KERAS = os.path.join(ROOT, "tests", "data", "keras")
EVAL_NAMES = ["loss", "cls_loss", "reg_loss", "cls_accuracy", "reg_mae"]
DICT_NAMES = ["loss", "cls_loss", "reg_loss", "cls_accuracy", "reg_mse", "reg_mae"]
HISTORY_NAMES = EVAL_NAMES + ["val_" + n for n in EVAL_NAMES]


def build():
    a = tf.keras.Input((4,), name="in_a")
    b = tf.keras.Input((3,), name="in_b")
    shared = L.Dense(6, activation="tanh", name="shared")
    ha = shared(L.Dense(5, name="proj_a")(a))
    hb = shared(L.Dense(5, name="proj_b")(b))
    h = L.Concatenate(name="concat")([ha, hb])
    cls = L.Dense(3, activation="softmax", name="cls")(h)
    reg = L.Dense(2, name="reg")(h)
    return tf.keras.Model([a, b], [cls, reg], name="multiio")


def key(prefix, var):
    return prefix + "." + var.name[:-2].replace("/", ".")  # "proj_a/kernel:0" -> "init.proj_a.kernel"


def compiled(opt, weights):
    m = build()
    m.compile(opt, loss=["sparse_categorical_crossentropy", "mse"], loss_weights=[1.0, 0.5],
              metrics=[["accuracy"], ["mae"]])
    m.set_weights(weights)
    return m


def main():
    rng = rng_for("multiio")
    model = build()
    weights = [rng.uniform(-0.5, 0.5, w.shape).astype(F32) for w in model.get_weights()]
    x_a = rng.uniform(-1, 1, (8, 4)).astype(F32)
    x_b = rng.uniform(-1, 1, (8, 3)).astype(F32)
    y_cls = rng.integers(0, 3, (8,)).astype(np.int32)
    y_reg = rng.uniform(-1, 1, (8, 2)).astype(F32)
    arrays = {"x_a": x_a, "x_b": x_b, "y_cls": y_cls, "y_reg": y_reg}

    m = compiled(tf.keras.optimizers.SGD(0.1), weights)
    for v in m.weights:
        arrays[key("init", v)] = v.numpy()
    pred = m.predict([x_a, x_b], verbose=0)
    arrays["pred_cls"], arrays["pred_reg"] = pred[0], pred[1]
    logs = m.evaluate([x_a, x_b], [y_cls, y_reg], batch_size=8, verbose=0, return_dict=True)
    assert list(logs) == EVAL_NAMES, list(logs)
    arrays["eval"] = np.array([logs[n] for n in EVAL_NAMES], F32)
    m.save(os.path.join(KERAS, "multiio.h5"))
    print("  tests/data/keras/multiio.h5")
    m.fit([x_a, x_b], [y_cls, y_reg], batch_size=8, epochs=1, shuffle=False, verbose=0)
    for v in m.weights:
        arrays[key("sgd", v)] = v.numpy()

    m = compiled(tf.keras.optimizers.Adam(0.01), weights)
    m.fit([x_a, x_b], [y_cls, y_reg], batch_size=8, epochs=1, shuffle=False, verbose=0)
    for v in m.weights:
        arrays[key("adam", v)] = v.numpy()

    d = build()
    d.compile(tf.keras.optimizers.Adam(0.01),
              loss={"reg": "mse", "cls": tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)},
              loss_weights={"reg": 0.25, "cls": 2.0}, metrics={"cls": ["accuracy"], "reg": ["mse", "mae"]})
    d.set_weights(weights)
    # evaluate first: a model saved before its metrics are built has "accuracy" saved as categorical_accuracy
    logs = d.evaluate([x_a, x_b], [y_cls, y_reg], batch_size=8, verbose=0, return_dict=True)
    d.save(os.path.join(KERAS, "multiio_dict.h5"))
    print("  tests/data/keras/multiio_dict.h5")
    assert list(logs) == DICT_NAMES, list(logs)
    arrays["eval_dict"] = np.array([logs[n] for n in DICT_NAMES], F32)
    save(os.path.join(GOLDEN, "multiio.npz"), arrays)

    h = compiled(tf.keras.optimizers.SGD(0.1), weights).fit(
        [x_a, x_b], [y_cls, y_reg], batch_size=4, epochs=1, shuffle=False, verbose=0, validation_data=([x_a, x_b], [y_cls, y_reg]))
    assert list(h.history) == HISTORY_NAMES, list(h.history)
    print("  history names:", list(h.history))


if __name__ == "__main__":
    main()
