#!/usr/bin/env python3
"""make_optimizer_fixtures.py - golden trajectories of every tf.keras 2.15 optimizer.

Issue 17, point 3. A small model -- Dense(4, tanh) on 3 inputs, then Dense(2),
mean squared error -- with fixed weights and one fixed batch (x (8, 3), y (8, 2))
takes five steps under each case below (non-default hyperparameters, and the
clipnorm, clipvalue, global_clipnorm and weight_decay arguments, and issue
17's learning-rate schedules), and the
weights after every step go to tests/golden/optimizers_keras.npz, which
tests/test_optimizers.c replays.

The steps run eagerly (tf.GradientTape, then optimizer.apply_gradients), not
under model.fit: in a traced train_function tf.keras 2.15's Nadam advances its
u_product once per *variable* per step (its cache test compares a Python
counter incremented at trace time), which is a bug that depends on how often
the function was traced; eagerly it advances once per step, as the paper and
Keras 3 do, and as systolic does (docs/design/optimizers.md).

Arrays: x, y; w0_<weight> (dense_kernel (3, 4), dense_bias (4,),
dense_1_kernel (4, 2), dense_1_bias (2,)); <case>_s<k>_<weight> the weight
after step k = 1..5; adafactor_rank3_* and adafactor_rank4_* (w0, grads (5, ...),
s1..s5): one weight of rank 3 and 4 under given gradients (FACTORED_SHAPES).

Usage (from the repository root):
    $SYSTOLIC_PYTHON tools/golden/make_optimizer_fixtures.py [--out DIR]
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures import REPO, rng_for, save, tf, uniform  # noqa: E402  (sets TF's threads and determinism)

import numpy as np  # noqa: E402

O = tf.keras.optimizers
SC = tf.keras.optimizers.schedules
STEPS = 5
WEIGHTS = ["dense_kernel", "dense_bias", "dense_1_kernel", "dense_1_bias"]

# name -> the optimizer; tests/test_optimizers.c builds the same ones
CASES = [
    ("adamw", lambda: O.AdamW(learning_rate=0.01, weight_decay=0.1, beta_1=0.8, amsgrad=True)),
    ("adadelta", lambda: O.Adadelta(learning_rate=1.0, rho=0.9, epsilon=1e-6)),
    ("adagrad", lambda: O.Adagrad(learning_rate=0.1, initial_accumulator_value=0.2, epsilon=1e-6)),
    ("adamax", lambda: O.Adamax(learning_rate=0.02, beta_1=0.8, beta_2=0.99)),
    ("adafactor", lambda: O.Adafactor(learning_rate=0.5, beta_2_decay=-0.6, epsilon_2=1e-2, clip_threshold=0.5)),
    ("adafactor_absolute", lambda: O.Adafactor(learning_rate=0.05, relative_step=False)),
    ("nadam", lambda: O.Nadam(learning_rate=0.01, beta_1=0.85, beta_2=0.99)),
    (
        "ftrl",
        lambda: O.Ftrl(
            learning_rate=0.1,
            learning_rate_power=-0.6,
            initial_accumulator_value=0.2,
            l1_regularization_strength=0.01,
            l2_regularization_strength=0.02,
            l2_shrinkage_regularization_strength=0.03,
            beta=0.1,
        ),
    ),
    ("lion", lambda: O.Lion(learning_rate=0.01, beta_1=0.8, beta_2=0.95)),
    ("sgd_clipnorm", lambda: O.SGD(learning_rate=0.1, momentum=0.5, clipnorm=0.1)),
    ("adam_clipvalue", lambda: O.Adam(learning_rate=0.01, clipvalue=0.05)),
    ("rmsprop_global_clipnorm", lambda: O.RMSprop(learning_rate=0.01, global_clipnorm=0.1)),
    ("sgd_weight_decay", lambda: O.SGD(learning_rate=0.1, weight_decay=0.05)),
    ("adam_weight_decay", lambda: O.Adam(learning_rate=0.01, weight_decay=0.1)),
    ("lion_weight_decay_global_clipnorm", lambda: O.Lion(learning_rate=0.01, weight_decay=0.5, global_clipnorm=0.5)),
    ("nadam_clipnorm", lambda: O.Nadam(learning_rate=0.01, clipnorm=0.05)),
    ("adagrad_clipvalue", lambda: O.Adagrad(learning_rate=0.1, clipvalue=0.02)),
    # issue 17, learning-rate schedules: the rate of each step is schedule(iterations)
    ("sgd_exponential_decay", lambda: O.SGD(learning_rate=SC.ExponentialDecay(0.1, 2, 0.5), momentum=0.5)),
    ("adam_piecewise", lambda: O.Adam(learning_rate=SC.PiecewiseConstantDecay([1, 3], [0.05, 0.02, 0.01]))),
    (
        "adamw_cosine_warmup",
        lambda: O.AdamW(learning_rate=SC.CosineDecay(0.0, 3, warmup_target=0.05, warmup_steps=2), weight_decay=0.1),
    ),
    (
        "rmsprop_cosine_restarts",
        lambda: O.RMSprop(learning_rate=SC.CosineDecayRestarts(0.02, 2, t_mul=2.0, m_mul=0.5, alpha=0.1)),
    ),
    ("adagrad_polynomial_cycle", lambda: O.Adagrad(learning_rate=SC.PolynomialDecay(0.2, 2, 0.01, power=2.0, cycle=True))),
    ("lion_inverse_time", lambda: O.Lion(learning_rate=SC.InverseTimeDecay(0.01, 1, 0.5, staircase=True))),
]


def model_and_data():
    rng = rng_for("optimizer_model")
    x = uniform(rng, -1, 1, (8, 3))
    y = uniform(rng, -1, 1, (8, 2))
    w0 = {
        "dense_kernel": uniform(rng, -0.8, 0.8, (3, 4)),
        "dense_bias": uniform(rng, -0.2, 0.2, (4,)),
        "dense_1_kernel": uniform(rng, -0.8, 0.8, (4, 2)),
        "dense_1_bias": uniform(rng, -0.2, 0.2, (2,)),
    }
    return x, y, w0


def trajectory(make, x, y, w0):
    model = tf.keras.Sequential(
        [tf.keras.layers.Dense(4, activation="tanh", input_shape=(3,)), tf.keras.layers.Dense(2)]
    )
    model.set_weights([w0[k] for k in WEIGHTS])
    opt = make()
    loss_fn = tf.keras.losses.MeanSquaredError()
    steps = []
    for _ in range(STEPS):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        steps.append([v.numpy().copy() for v in model.trainable_variables])
    return steps


# Adafactor factors the second moment of any weight of rank >= 2 over its last two axes
# (a Conv2D kernel's (kh, kw, in, out): r (kh, kw, in), c (kh, kw, out)): one weight of
# each rank 3 and 4 under given gradients, five steps.
FACTORED_SHAPES = [("rank3", (2, 3, 4)), ("rank4", (2, 2, 3, 4))]


def factored_fixtures(arrays):
    for tag, shape in FACTORED_SHAPES:
        rng = rng_for("optimizer_adafactor_" + tag)
        w0 = uniform(rng, -1, 1, shape)
        grads = uniform(rng, -1, 1, (STEPS,) + shape)
        opt = O.Adafactor(learning_rate=0.5, clip_threshold=0.5)
        var = tf.Variable(w0)
        arrays[f"adafactor_{tag}_w0"] = w0
        arrays[f"adafactor_{tag}_grads"] = grads
        for s, g in enumerate(grads, start=1):
            opt.apply_gradients([(tf.constant(g), var)])
            arrays[f"adafactor_{tag}_s{s}"] = var.numpy().copy()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "golden"))
    args = ap.parse_args()
    x, y, w0 = model_and_data()
    arrays = {"x": x, "y": y}
    for k in WEIGHTS:
        arrays[f"w0_{k}"] = w0[k]
    for case, make in CASES:
        for s, ws in enumerate(trajectory(make, x, y, w0), start=1):
            for k, w in zip(WEIGHTS, ws):
                arrays[f"{case}_s{s}_{k}"] = w.astype(np.float32)
    factored_fixtures(arrays)
    save(args.out, "optimizers_keras.npz", arrays)


if __name__ == "__main__":
    main()
