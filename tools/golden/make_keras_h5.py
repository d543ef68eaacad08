#!/usr/bin/env python3
"""make_keras_h5.py - Keras-written .h5 files for test_saving.c.

For each model below, tf.keras 2.15 builds it (the built-in models'
architectures, shrunk so the files stay small, and one model with every
other layer kind), compiles it, trains it two steps on random data (so the
weights are no longer their initial values and the full-model file has
optimizer_weights, as a real one does), then writes into tests/data/keras/:

  <name>_weights.h5  model.save_weights(...)   (the tf.keras 2.x HDF5 layout;
                                                a name ending in .weights.h5 would
                                                make Keras 2.15 write Keras 3's
                                                saving_lib layout instead)
  <name>.h5          model.save(...)           (model_config, training_config,
                                                model_weights, optimizer_weights)
  <name>.npz         x: inputs; y: model.predict(x)

and, from the first model's weights file, forms_weights.h5: the same
weights with layer_names and weight_names rewritten as older writers wrote
them (numpy fixed-length 'S' arrays, the way h5py 2 stored Keras's lists)
and layer_names split into layer_names0 and layer_names1 (Keras's chunked
form for lists past the 64 KB object-header limit), so the reader's other
forms are exercised by a real file. Three damaged copies of it test the
refusals: cnn_no_bias.h5 lacks the dataset dense/dense/bias:0,
cnn_int_kernel.h5 holds dense's kernel as int32, and cnn_keras3.weights.h5
is what Keras 2.15 writes for a name ending in .weights.h5 (Keras 3's
saving_lib layout, not the tf.keras 2 one).

Deterministic: tf.keras.utils.set_random_seed before each model, one
thread, oneDNN off; names start afresh for each model (clear_session).

Usage (from the repository root):
    .gl/bin/python tools/golden/make_keras_h5.py [--out tests/data/keras]
"""

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"

import h5py  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow import keras  # noqa: E402

tf.config.threading.set_inter_op_parallelism_threads(1)
tf.config.threading.set_intra_op_parallelism_threads(1)
L = keras.layers


def cnn():
    """fashion_mnist_cnn's layers on 10x10 images with 4 filters."""
    m = keras.Sequential([
        L.Conv2D(4, (3, 3), input_shape=(10, 10, 1)),
        L.MaxPooling2D((2, 2), strides=2),
        L.Activation("relu"),
        L.Flatten(),
        L.Dense(10),
        L.Activation("softmax"),
    ])
    m.compile(optimizer=keras.optimizers.Adam(0.002), loss="sparse_categorical_crossentropy",
              metrics=["sparse_categorical_accuracy"])
    rng = np.random.default_rng(1)
    x = rng.uniform(0, 1, (6, 10, 10, 1)).astype(np.float32)
    y = rng.integers(0, 10, 6)
    return m, x, y


def lstm():
    """imdb_lstm's layers over a 50-word vocabulary, 12 words, LSTM(6)."""
    m = keras.Sequential([
        L.Embedding(50, 8, input_length=12),
        L.LSTM(6),
        L.Dense(1, activation="sigmoid"),
    ])
    m.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
    rng = np.random.default_rng(2)
    x = rng.integers(0, 50, (5, 12)).astype(np.int32)
    y = rng.integers(0, 2, 5)
    return m, x, y


def mixed():
    """Every other layer kind: Conv2D (same padding, relu, no bias),
    AveragePooling2D, Dropout, Reshape, GRU, Dense with and without bias."""
    m = keras.Sequential([
        L.Conv2D(3, (3, 3), padding="same", activation="relu", use_bias=False, input_shape=(8, 8, 2)),
        L.AveragePooling2D((2, 2)),
        L.Dropout(0.25),
        L.Reshape((16, 3)),
        L.GRU(5, return_sequences=True),
        L.LSTM(4),
        L.Dense(3, activation="tanh"),
        L.Dense(2, use_bias=False),
    ])
    m.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9), loss="mse")
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (4, 8, 8, 2)).astype(np.float32)
    y = rng.uniform(-1, 1, (4, 2)).astype(np.float32)
    return m, x, y


MODELS = {"cnn": cnn, "lstm": lstm, "mixed": mixed}


def rewrite_forms(src, dst):
    """src's weights with fixed-length string attributes, layer_names chunked."""
    with h5py.File(src, "r") as f, h5py.File(dst, "w") as g:
        for name in f:
            f.copy(name, g)
        names = [n.encode() for n in f.attrs["layer_names"]]
        half = (len(names) + 1) // 2
        g.attrs["layer_names0"] = np.array(names[:half], dtype="S")
        g.attrs["layer_names1"] = np.array(names[half:], dtype="S")
        g.attrs["backend"] = np.bytes_(b"tensorflow")
        g.attrs["keras_version"] = np.bytes_(b"2.15.0")
        for name in g:
            wn = g[name].attrs["weight_names"]
            if len(wn):
                g[name].attrs["weight_names"] = np.array([w.encode() for w in wn], dtype="S")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/data/keras")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name, make in MODELS.items():
        keras.backend.clear_session()
        tf.keras.utils.set_random_seed(7)
        m, x, y = make()
        m.fit(x, y, batch_size=len(x), epochs=2, verbose=0)
        m.save_weights(os.path.join(args.out, name + "_weights.h5"))
        m.save(os.path.join(args.out, name + ".h5"), save_format="h5")
        pred = m.predict(x, verbose=0)
        np.savez(os.path.join(args.out, name + ".npz"), x=x, y=pred.astype(np.float32))
        print(name, [layer.name for layer in m.layers], pred.shape)
    src = os.path.join(args.out, "cnn_weights.h5")
    rewrite_forms(src, os.path.join(args.out, "forms_weights.h5"))
    damage(src, os.path.join(args.out, "cnn_no_bias.h5"), lambda g: g["dense"].pop("dense/bias:0"))
    damage(src, os.path.join(args.out, "cnn_int_kernel.h5"), int_kernel)
    keras.backend.clear_session()
    tf.keras.utils.set_random_seed(7)
    cnn()[0].save_weights(os.path.join(args.out, "cnn_keras3.weights.h5"))


def damage(src, dst, edit):
    with h5py.File(src, "r") as f, h5py.File(dst, "w") as g:
        for name in f:
            f.copy(name, g)
        for k, v in f.attrs.items():
            g.attrs[k] = v
        edit(g)


def int_kernel(g):
    k = g["dense/dense/kernel:0"]
    values = (np.asarray(k) * 100).astype(np.int32)
    del g["dense/dense/kernel:0"]
    g["dense/dense"].create_dataset("kernel:0", data=values)


if __name__ == "__main__":
    main()
