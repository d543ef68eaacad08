#!/usr/bin/env python3
"""keras_optimizer_h5.py - tf.keras 2.15's side of tests/keras_optimizer_h5.sh.

Issue 17, point 3: a run moves between Keras and systolic with its optimizer
state, both ways, for each case below.

  keras-write DIR   data.npz (x (8, 3), y (8, 2)); per case, a compiled
                    Dense(4, tanh) -> Dense(2) model with fixed weights saved
                    untrained (NAME_init.h5), the same after three steps
                    (NAME_keras.h5, with optimizer_weights), and the weights
                    after a fourth step of the uninterrupted run
                    (NAME_keras_next.npz).
  check DIR         (after test_optimizer_h5 resume and train)
                    - systolic resumed NAME_keras.h5 for one step: its weights
                      are Keras's fourth-step weights;
                    - systolic's NAME_sys.h5 (three steps) holds the
                      training_config and optimizer_weights names Keras's own
                      file holds, byte for byte, with iteration 3; Keras loads
                      it and one step takes it to systolic's fourth-step
                      weights.

Steps run eagerly (GradientTape, apply_gradients): tf.keras 2.15's Nadam
advances u_product once per variable per step inside a traced function, and
restarts it at 1 when a file is loaded (it is not among the optimizer's
variables), so for Nadam Keras's resume of systolic's file is not compared
step for step, only its state (docs/design/optimizers.md).
"""

import os
import sys

os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import h5py  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.get_logger().setLevel("ERROR")
O = tf.keras.optimizers
SC = tf.keras.optimizers.schedules
CASES = {
    "adam": lambda: O.Adam(0.01, amsgrad=True),
    "adamw": lambda: O.AdamW(0.01, weight_decay=0.1),
    "nadam": lambda: O.Nadam(0.01),
    "adagrad": lambda: O.Adagrad(0.1),
    "ftrl": lambda: O.Ftrl(0.1, l1_regularization_strength=0.01),
    "lion": lambda: O.Lion(0.01),
    "sgd": lambda: O.SGD(0.1, momentum=0.5, clipnorm=0.5),
    "rmsprop": lambda: O.RMSprop(0.01, momentum=0.5, centered=True),
    "adadelta": lambda: O.Adadelta(1.0),
    "adamax": lambda: O.Adamax(0.02, global_clipnorm=0.5),
    "adafactor": lambda: O.Adafactor(0.1),
    # issue 17, learning-rate schedules: the schedule in training_config byte for byte, and a
    # resumed run's rate taken from the saved iteration count
    "sgd_exponential": lambda: O.SGD(SC.ExponentialDecay(0.1, 2, 0.5), momentum=0.5),
    "adam_cosine_warmup": lambda: O.Adam(SC.CosineDecay(0.0, 4, warmup_target=0.05, warmup_steps=2)),
    "rmsprop_piecewise": lambda: O.RMSprop(SC.PiecewiseConstantDecay([2, 3], [0.02, 0.01, 0.005])),
    "adagrad_restarts": lambda: O.Adagrad(SC.CosineDecayRestarts(0.1, 2)),
    "adamax_polynomial": lambda: O.Adamax(SC.PolynomialDecay(0.02, 3, 0.001, power=0.5)),
    "lion_inverse_time": lambda: O.Lion(SC.InverseTimeDecay(0.01, 2, 0.5)),
}
FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what)


def data():
    rng = np.random.default_rng(1717)
    x = rng.uniform(-1, 1, (8, 3)).astype(np.float32)
    y = rng.uniform(-1, 1, (8, 2)).astype(np.float32)
    w = [
        rng.uniform(-0.8, 0.8, (3, 4)).astype(np.float32),
        rng.uniform(-0.2, 0.2, (4,)).astype(np.float32),
        rng.uniform(-0.8, 0.8, (4, 2)).astype(np.float32),
        rng.uniform(-0.2, 0.2, (2,)).astype(np.float32),
    ]
    return x, y, w


def model(name, w):
    tf.keras.backend.clear_session()
    m = tf.keras.Sequential([tf.keras.layers.Dense(4, activation="tanh", input_shape=(3,)), tf.keras.layers.Dense(2)])
    m.set_weights(w)
    m.compile(optimizer=CASES[name](), loss="mse")
    return m


def step(m, x, y):
    with tf.GradientTape() as tape:
        loss = tf.keras.losses.MeanSquaredError()(y, m(x, training=True))
    grads = tape.gradient(loss, m.trainable_variables)
    m.optimizer.apply_gradients(zip(grads, m.trainable_variables))


def keras_write(d):
    x, y, w = data()
    np.savez(os.path.join(d, "data.npz"), x=x, y=y)
    for name in CASES:
        m = model(name, w)
        m.save(os.path.join(d, name + "_init.h5"))
        for _ in range(3):
            step(m, x, y)
        m.save(os.path.join(d, name + "_keras.h5"))
        step(m, x, y)
        np.savez(os.path.join(d, name + "_keras_next.npz"), *m.get_weights())


def weights_of(path):
    with h5py.File(path, "r") as f:
        out = []
        for layer in ("dense", "dense_1"):
            g = f[layer]
            out += [np.array(g[n]) for n in g.attrs["weight_names"]]
        return out


def close(got, want, what):
    for i, (a, b) in enumerate(zip(got, want)):
        err = np.max(np.abs(a - b) / (1e-5 * np.abs(b) + 1e-6 * np.max(np.abs(b))))
        check(a.shape == b.shape and err <= 1, f"{what}: weight {i} differs by {np.max(np.abs(a - b)):.3g}")


def keras_check(d):
    x, y, _ = data()
    for name in CASES:
        # Keras's file resumed by systolic
        want = np.load(os.path.join(d, name + "_keras_next.npz"))
        close(weights_of(os.path.join(d, name + "_sys_next.h5")), [want[k] for k in want.files],
              f"{name}: systolic resuming Keras's file, step 4")
        # systolic's file: Keras's layout and config, then resumed by Keras
        with h5py.File(os.path.join(d, name + "_sys.h5"), "r") as mine, h5py.File(
            os.path.join(d, name + "_keras.h5"), "r"
        ) as theirs:
            check(mine.attrs["training_config"] == theirs.attrs["training_config"],
                  f"{name}: training_config\n  systolic: {mine.attrs['training_config']}\n"
                  f"  keras:    {theirs.attrs['training_config']}")
            if "optimizer_weights" not in mine:
                check(False, f"{name}: systolic's file has no optimizer_weights")
                continue
            a = [n.decode() if isinstance(n, bytes) else n for n in mine["optimizer_weights"].attrs["weight_names"]]
            b = [n.decode() if isinstance(n, bytes) else n for n in theirs["optimizer_weights"].attrs["weight_names"]]
            check(a == b, f"{name}: optimizer weight_names {a} vs Keras's {b}")
            it = mine["optimizer_weights"]["iteration:0"]
            check(it.dtype == np.int64 and int(it[()]) == 3, f"{name}: iteration {it[()]} ({it.dtype})")
        tf.keras.backend.clear_session()
        m = tf.keras.models.load_model(os.path.join(d, name + "_sys.h5"))
        check(int(m.optimizer.iterations.numpy()) == 3, f"{name}: Keras loaded iterations {m.optimizer.iterations}")
        if name == "nadam":
            continue  # Keras restarts u_product at 1 (see above)
        step(m, x, y)
        close(m.get_weights(), weights_of(os.path.join(d, name + "_sys_next.h5")), f"{name}: Keras resuming systolic's file")
    print("keras_optimizer_h5: %d optimizers both ways" % len(CASES))


def main():
    what, d = sys.argv[1:3]
    {"keras-write": keras_write, "check": keras_check}[what](d)
    if FAILURES:
        print("keras_optimizer_h5: %d checks failed" % len(FAILURES))
        sys.exit(1)


if __name__ == "__main__":
    main()
