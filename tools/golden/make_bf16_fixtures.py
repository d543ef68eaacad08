#!/usr/bin/env python3
"""make_bf16_fixtures.py - tf.keras 2.15 under the mixed_bfloat16 dtype policy
(issue 16, mixed_bfloat16), for tests/test_mixed_precision.c.

Writes:

  tests/data/keras/mixed_bfloat16.json
      model.to_json() of a small CNN built after
      keras.mixed_precision.set_global_policy('mixed_bfloat16'), its last
      layer an Activation('softmax', dtype='float32') as the Keras
      mixed-precision guide recommends: the InputLayer writes "float32", the
      mixed layers Keras's Policy object, the float32 one "float32".

  tests/golden/mixed_bfloat16_cnn.npz
      The CNN the tutorial trains (Conv2D relu, MaxPooling2D, Flatten, Dense
      relu, Dense softmax), small, under mixed_bfloat16, on CPU:
        x (8, 8, 8, 1) float32, y (8,) int labels
        w0_<layer>_<weight>  the initial weights (float32, as Keras keeps them)
        pred                 model.predict(x): bfloat16 values, as float32
        pred_f32             the same weights' predictions under float32 (the
                             test checks systolic's mixed predictions are much
                             nearer pred than pred_f32 is, so it can fail)
        loss                 train_on_batch's loss of one SGD(0.1) step
        w1_<layer>_<weight>  the weights after that step
        xd (64, 5); <act>_kernel, <act>_bias, <act>_pred for act sigmoid and
                             tanh: a Dense(7, activation=act) under the policy

  tests/golden/mixed_bfloat16_bn.npz, tests/data/keras/mixed_bfloat16_bn.json
      BatchNormalization under the policy, which Keras computes in float32
      (its input cast up, its output cast back, the gradient of that cast a
      rounding to bfloat16): Conv2D(4, 3) -> BatchNormalization ->
      Activation(relu) -> Flatten -> Dense(3) ->
      Activation(softmax, dtype=float32), its JSON, then
        xb (16, 6, 6, 2) float32, yb (16,) int labels
        w0_<layer>_<weight>  the initial weights (beta, gamma and the moving
                             statistics set away from their defaults)
        pred                 model.predict(xb) (the moving statistics)
        loss                 train_on_batch's loss of one SGD(0.1) step
                             (the batch's statistics, momentum 0.9)
        w1_<layer>_<weight>  every weight after it, moving mean and variance too

  tests/golden/mixed_bfloat16_gap.npz, tests/data/keras/mixed_bfloat16_gap.json
      GlobalAveragePooling2D under the policy, a bfloat16 mean as TensorFlow
      computes one (the 17x17 = 289 values added one after the other in
      bfloat16, divided by 289 in bfloat16, which is 288): Conv2D(4, 3,
      relu) -> GlobalAveragePooling2D -> Dense(3) -> Activation(softmax,
      dtype=float32) on (16, 19, 19, 2), the same arrays as the
      BatchNormalization case.

Every case starts from keras.backend.clear_session() so automatic names
start afresh. Usage (from the repository root, TensorFlow 2.15 installed):
    python tools/golden/make_bf16_fixtures.py
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow import keras  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def cnn(policy, final_float32=False):
    keras.backend.clear_session()
    keras.mixed_precision.set_global_policy(policy)
    layers = [keras.layers.Conv2D(4, 3, activation="relu", input_shape=(8, 8, 1)),
              keras.layers.MaxPooling2D(),
              keras.layers.Flatten(),
              keras.layers.Dense(8, activation="relu")]
    if final_float32:
        layers += [keras.layers.Dense(3), keras.layers.Activation("softmax", dtype="float32")]
    else:
        layers += [keras.layers.Dense(3, activation="softmax")]
    m = keras.Sequential(layers)
    keras.mixed_precision.set_global_policy("float32")
    return m


def weights_of(m, prefix):
    out = {}
    for layer in m.layers:
        for w in layer.weights:
            leaf = w.name.split("/")[-1].split(":")[0]
            out["%s_%s_%s" % (prefix, layer.name, leaf)] = w.numpy().astype(np.float32)
    return out


def main():
    json_text = cnn("mixed_bfloat16", final_float32=True).to_json()
    with open(os.path.join(ROOT, "tests", "data", "keras", "mixed_bfloat16.json"), "w") as f:
        f.write(json_text)

    rng = np.random.default_rng(16)
    x = rng.uniform(0, 2, size=(8, 8, 8, 1)).astype(np.float32)
    y = rng.integers(0, 3, size=(8,)).astype(np.int32)
    tf.keras.utils.set_random_seed(3)
    m = cnn("mixed_bfloat16")
    w0 = [w.numpy() for w in m.weights]
    arrays = {"x": x, "y": y}
    arrays.update(weights_of(m, "w0"))
    arrays["pred"] = m.predict(x, verbose=0).astype(np.float32)
    f32 = cnn("float32")
    f32.set_weights(w0)
    arrays["pred_f32"] = f32.predict(x, verbose=0).astype(np.float32)
    m.compile(optimizer=keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy")
    arrays["loss"] = np.array([m.train_on_batch(x, y)], dtype=np.float32)
    arrays.update(weights_of(m, "w1"))
    for w in m.weights:
        assert w.dtype == tf.float32, w.name  # variables stay float32 under the policy
    # a product's epilogue: Dense with sigmoid and with tanh, the bias add and the activation each rounded
    xd = rng.normal(0, 2, size=(64, 5)).astype(np.float32)
    arrays["xd"] = xd
    for act in ("sigmoid", "tanh"):
        keras.backend.clear_session()
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
        d = keras.Sequential([keras.layers.Dense(7, activation=act, input_shape=(5,),
                                                 bias_initializer=keras.initializers.RandomUniform(-1, 1))])
        keras.mixed_precision.set_global_policy("float32")
        arrays["%s_kernel" % act] = d.weights[0].numpy()
        arrays["%s_bias" % act] = d.weights[1].numpy()
        arrays["%s_pred" % act] = d.predict(xd, verbose=0).astype(np.float32)
    np.savez(os.path.join(ROOT, "tests", "golden", "mixed_bfloat16_cnn.npz"), **arrays)
    batchnorm(rng)
    global_average(rng)
    print("pred", arrays["pred"][:2], "\npred_f32", arrays["pred_f32"][:2], "\nloss", arrays["loss"])
    print("max |pred - pred_f32|", np.abs(arrays["pred"] - arrays["pred_f32"]).max())


def batchnorm(rng):
    keras.backend.clear_session()
    tf.keras.utils.set_random_seed(5)
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    m = keras.Sequential([keras.layers.Conv2D(4, 3, input_shape=(6, 6, 2)),
                          keras.layers.BatchNormalization(momentum=0.9),
                          keras.layers.Activation("relu"),
                          keras.layers.Flatten(),
                          keras.layers.Dense(3),
                          keras.layers.Activation("softmax", dtype="float32")])
    keras.mixed_precision.set_global_policy("float32")
    bn = m.layers[1]
    bn.set_weights([rng.uniform(0.5, 1.5, 4).astype(np.float32), rng.normal(0, 0.3, 4).astype(np.float32),
                    rng.normal(0, 0.5, 4).astype(np.float32), rng.uniform(0.5, 2, 4).astype(np.float32)])
    one_step(m, "bn", rng.normal(0, 1, size=(16, 6, 6, 2)).astype(np.float32), rng)


def global_average(rng):
    keras.backend.clear_session()
    tf.keras.utils.set_random_seed(6)
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    m = keras.Sequential([keras.layers.Conv2D(4, 3, activation="relu", input_shape=(19, 19, 2)),
                          keras.layers.GlobalAveragePooling2D(),
                          keras.layers.Dense(3),
                          keras.layers.Activation("softmax", dtype="float32")])
    keras.mixed_precision.set_global_policy("float32")
    one_step(m, "gap", rng.normal(0, 1, size=(16, 19, 19, 2)).astype(np.float32), rng)


def one_step(m, name, xb, rng):
    """m's JSON, predictions of xb, one SGD(0.1) step's loss and weights: mixed_bfloat16_<name>."""
    with open(os.path.join(ROOT, "tests", "data", "keras", "mixed_bfloat16_%s.json" % name), "w") as f:
        f.write(m.to_json())
    yb = rng.integers(0, 3, size=(16,)).astype(np.int32)
    arrays = {"xb": xb, "yb": yb}
    arrays.update(weights_of(m, "w0"))
    arrays["pred"] = m.predict(xb, verbose=0).astype(np.float32)
    m.compile(optimizer=keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy")
    arrays["loss"] = np.array([m.train_on_batch(xb, yb)], dtype=np.float32)
    arrays.update(weights_of(m, "w1"))
    np.savez(os.path.join(ROOT, "tests", "golden", "mixed_bfloat16_%s.npz" % name), **arrays)
    print(name, "pred", arrays["pred"][:2], "loss", arrays["loss"])


if __name__ == "__main__":
    main()
