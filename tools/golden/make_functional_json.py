#!/usr/bin/env python3
"""make_functional_json.py - Functional models as tf.keras 2.15 writes them.

Writes into tests/data/keras/, for test_config.c and the summary tests:

  functional_dag.json          model.to_json() of a Functional model that is
                               not a chain: one input, a layer called twice
                               (shared weights), an Add and a Concatenate
  functional_dag.summary.txt   model.summary() of it, byte for byte
  functional_cnn.json/.summary.txt  a small residual CNN (Conv2D,
                               BatchNormalization, ReLU, Add,
                               GlobalAveragePooling2D, Dense), the shape of
                               a ResNet block

Every case starts from keras.backend.clear_session(), so automatic names
start afresh. Nothing here is random: to_json and summary hold no weights.

Usage (from the repository root):
    .venv/bin/python tools/golden/make_functional_json.py [--out DIR]
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import argparse
import contextlib
import io

import tensorflow as tf

keras = tf.keras
L = keras.layers


def functional_dag():
    x = keras.Input(shape=(8,))
    shared = L.Dense(4, name="shared")
    a = shared(L.Dense(8)(x))
    b = L.Dense(8)(x)
    c = L.Add()([L.Dense(4)(b), a])
    y = L.Concatenate()([c, shared(b)])
    return keras.Model(x, y)


def functional_cnn():
    x = keras.Input(shape=(16, 16, 3), name="image")
    h = L.Conv2D(8, 3, padding="same", use_bias=False)(x)
    h = L.BatchNormalization()(h)
    h = L.ReLU()(h)
    r = L.Conv2D(8, 3, padding="same")(h)
    r = L.BatchNormalization()(r)
    h = L.Add()([h, r])
    h = L.ReLU()(h)
    h = L.GlobalAveragePooling2D()(h)
    y = L.Dense(10, activation="softmax")(h)
    return keras.Model(x, y, name="resnet_block")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/data/keras")
    args = ap.parse_args()
    for make in (functional_dag, functional_cnn):
        keras.backend.clear_session()
        m = make()
        name = make.__name__
        with open(os.path.join(args.out, name + ".json"), "w") as f:
            f.write(m.to_json())
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            m.summary()
        with open(os.path.join(args.out, name + ".summary.txt"), "w") as f:
            f.write(buf.getvalue())


if __name__ == "__main__":
    main()
