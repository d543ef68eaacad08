#!/usr/bin/env python3
"""make_nested_json.py - models used as layers of other models, as tf.keras
2.15 writes them.

Writes into tests/data/keras/, for test_config.c, test_saving.c and the
summary tests:

  nested_seq_in_fn.json/.summary.txt  a Sequential feature extractor
                               (Dense, Dropout, Dense) called inside a
                               Functional model
  nested_shared_block.json/.summary.txt  a Functional block called twice
                               (its weights shared) by a Functional model
                               with an Add
  nested_fn_in_seq.json/.summary.txt  a Functional model (Dense,
                               BatchNormalization) added to a Sequential one
  nested_seq_in_fn.h5          model.save() of the first after two SGD
                               steps, with nested.npz (x, y = Keras's
                               predict(x))
  nested_seq_in_fn_weights.h5  its save_weights()
  functional_cnn_weights.h5    save_weights() of functional_cnn.json's model
                               (InputLayers listed in layer_names)

Every case starts from keras.backend.clear_session(), so automatic names
start afresh.

Usage (from the repository root):
    .venv/bin/python tools/golden/make_nested_json.py [--out DIR]
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"

import argparse
import contextlib
import io
import zlib

import numpy as np
import tensorflow as tf

tf.config.threading.set_inter_op_parallelism_threads(1)
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.experimental.enable_op_determinism()

keras = tf.keras
L = keras.layers


def nested_seq_in_fn():
    base = keras.Sequential([L.Dense(8, activation="relu", input_shape=(6,)), L.Dropout(0.25), L.Dense(5)],
                            name="features")
    x = keras.Input(shape=(6,))
    h = base(x)
    y = L.Dense(3, activation="softmax")(h)
    return keras.Model(x, y)


def nested_shared_block():
    i = keras.Input(shape=(4,))
    block = keras.Model(i, L.Dense(4, activation="tanh")(L.Dense(6)(i)), name="block")
    x = keras.Input(shape=(4,), name="x")
    a = block(x)
    b = block(L.Dense(4)(x))
    y = L.Add()([a, b])
    return keras.Model(x, y, name="outer")


def nested_fn_in_seq():
    i = keras.Input(shape=(5,))
    inner = keras.Model(i, L.BatchNormalization()(L.Dense(3)(i)), name="inner")
    return keras.Sequential([keras.Input(shape=(5,)), inner, L.Dense(2)], name="seq")


def write_text(path, text):
    with open(path, "w") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/data/keras")
    args = ap.parse_args()
    for make in (nested_seq_in_fn, nested_shared_block, nested_fn_in_seq):
        keras.backend.clear_session()
        m = make()
        name = make.__name__
        write_text(os.path.join(args.out, name + ".json"), m.to_json())
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            m.summary()
        write_text(os.path.join(args.out, name + ".summary.txt"), buf.getvalue())

    # weights: drawn per weight, two SGD steps so no weight is its initial value
    keras.backend.clear_session()
    m = nested_seq_in_fn()
    rng = np.random.default_rng(zlib.crc32(b"nested_seq_in_fn"))
    for w in m.weights:
        w.assign(rng.uniform(-0.5, 0.5, w.shape).astype(np.float32))
    x = rng.uniform(-1, 1, (8, 6)).astype(np.float32)
    labels = rng.integers(0, 3, 8).astype(np.int32)
    m.compile(optimizer=keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy")
    keras.utils.set_random_seed(1)  # the Dropout inside: determinism wants a seed
    m.fit(x, labels, batch_size=4, epochs=1, shuffle=False, verbose=0)
    m.save(os.path.join(args.out, "nested_seq_in_fn.h5"))
    m.save_weights(os.path.join(args.out, "nested_seq_in_fn_weights.h5"))
    np.savez_compressed(os.path.join(args.out, "nested.npz"), x=x, y=m.predict(x, verbose=0))

    keras.backend.clear_session()
    with open(os.path.join(args.out, "functional_cnn.json")) as f:
        m = keras.models.model_from_json(f.read())
    rng = np.random.default_rng(zlib.crc32(b"functional_cnn"))
    for w in m.weights:
        w.assign(rng.uniform(-0.5, 0.5, w.shape).astype(np.float32))
    m.save_weights(os.path.join(args.out, "functional_cnn_weights.h5"))


if __name__ == "__main__":
    main()
